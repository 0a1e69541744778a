#!/usr/bin/env bash
# Makes sure the PyTorch CPU peer of `deno task bench` can run: installs Debian's python3-torch (for
# /usr/bin/python3) when neither FALCON_PYTHON / python3 on PATH nor /usr/bin/python3 imports torch and
# apt-get is usable (root). Never fails the benchmark: without torch the report says the peer was not
# measured and why.
for PY in "${FALCON_PYTHON:-python3}" /usr/bin/python3; do
  if "$PY" -c "import torch" 2>/dev/null; then exit 0; fi
done
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "bench: installing python3-torch for the PyTorch CPU peer (Debian)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null) ||
    echo "bench: could not install python3-torch; the report will say the peer was not measured" >&2
else
  echo "bench: no PyTorch found and no root apt-get; the report will say the peer was not measured" >&2
fi
exit 0

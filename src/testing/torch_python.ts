/**
 * Finding a Python with PyTorch for the tests that spawn one, with the skip rule of
 * every test that spawns python (`src/convert/torch_parity_test.ts`, `interop/torch/bridge_test.ts`):
 * without run permission, python3 or torch a test is ignored with a name that says why, unless FALCON_REQUIRE_TORCH=1 (CI sets it): then it fails.
 *
 * @module
 */

function envGranted(): boolean {
  return Deno.permissions.querySync({ name: "env" }).state === "granted";
}

function runGranted(command: string): boolean {
  return Deno.permissions.querySync({ name: "run", command }).state === "granted";
}

/** The first of FALCON_PYTHON, python3, /usr/bin/python3 that may be run and can import torch, or why none can. */
export function findTorchPython(): { python: string } | { reason: string } {
  const env = envGranted() ? Deno.env.get("FALCON_PYTHON") : undefined;
  const candidates = [...(env ? [env] : []), "python3", "/usr/bin/python3"];
  const allowed = candidates.filter(runGranted);
  if (allowed.length === 0) return { reason: `no --allow-run permission for ${candidates.join(", ")}` };
  for (const python of allowed) {
    try {
      const out = new Deno.Command(python, { args: ["-c", "import torch"], stdout: "null", stderr: "null" })
        .outputSync();
      if (out.success) return { python };
    } catch {
      // not installed: try the next
    }
  }
  return { reason: `no python with torch among ${allowed.join(", ")}` };
}

/** Whether FALCON_REQUIRE_TORCH=1 turns a missing torch into a failure. */
export const TORCH_REQUIRED = envGranted() && Deno.env.get("FALCON_REQUIRE_TORCH") === "1";

/** A test that needs torch: `fn(python)` runs when one is found; else ignored or failed as the module doc says. */
export function torchTest(name: string, fn: (python: string) => Promise<void>): void {
  const found = findTorchPython();
  const missing = "reason" in found ? found.reason : null;
  Deno.test({
    name: missing === null
      ? name
      : TORCH_REQUIRED
      ? `${name} (fails: FALCON_REQUIRE_TORCH=1 but ${missing})`
      : `${name} (ignored: ${missing}; FALCON_REQUIRE_TORCH=1 makes this a failure)`,
    ignore: missing !== null && !TORCH_REQUIRED,
    async fn() {
      if (missing !== null) throw new Error(`FALCON_REQUIRE_TORCH=1 but ${missing}`);
      await fn((found as { python: string }).python);
    },
  });
}

/** Run `python args...`; returns stdout, throws with stdout and stderr when it fails. */
export async function runPython(python: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(python, { args, env: { OMP_NUM_THREADS: "1" } }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(
      `${python} ${args.join(" ")} exited ${out.code}:\n${stdout}\n${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return stdout;
}

/**
 * Decoding on the WASM backend: one position per `fastWeightForward` call for all `B * H` heads at
 * once, each call continuing from the previous call's carry, must give what the float64 reference
 * gives for the whole sequence in one call (SPEC section 4 forward tolerance). Covers every rule, both
 * alignments, a sequence start in the middle of decoding, per-head `mambaA` / `retnetHeads`, carried
 * window pairs, and a NaN-poisoned heap (so a per-call block the kernel reads but nobody wrote shows).
 */

import type { Backend, Carry, Tensor } from "../rules/backend.ts";
import { ALIGNMENTS, isPerColumnRule, type RuleConfig, ruleConfig, RULES } from "../rules/config.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import { assertRelL2, Rng } from "../testing/compare.ts";
import { createWasmBackend, type WasmBackend } from "./backend.ts";

const FWD = 1e-5;

interface Sizes {
  B: number;
  T: number;
  H: number;
  dk: number;
  dv: number;
}

/** Host data of a whole sequence (`[B, T, H, D]` row-major) and its starts. */
function sequence(config: RuleConfig, s: Sizes, seed: number) {
  const rng = new Rng(seed);
  const n = s.B * s.T * s.H;
  const bw = isPerColumnRule(config.rule) ? s.dv : 1;
  const starts = new Uint8Array(s.B * s.T);
  starts[1 * s.T + 4] = 1; // row 1 starts a new sequence at position 4 (mid-decoding)
  return {
    q: rng.normals(n * s.dk),
    k: rng.normals(n * s.dk),
    v: rng.normals(n * s.dv),
    beta: rng.uniforms(n * bw, 0.2, 0.9),
    lambdabar: rng.uniforms(n, 0, 0.5),
    starts,
  };
}

/** Position t of a `[B, T, H, D]` array as `[B, 1, H, D]`. */
function position(a: Float64Array, s: Sizes, D: number, t: number): Float64Array {
  const out = new Float64Array(s.B * s.H * D);
  const row = s.H * D;
  for (let b = 0; b < s.B; b++) out.set(a.subarray((b * s.T + t) * row, (b * s.T + t + 1) * row), b * row);
  return out;
}

/** Decode the sequence one position per call on `wasm`; returns o `[B, T, H, Dv]` and the last carry. */
async function decode(wasm: WasmBackend, config: RuleConfig, s: Sizes, seq: ReturnType<typeof sequence>) {
  const { B, T, H, dk, dv } = s;
  const bw = isPerColumnRule(config.rule) ? dv : 1;
  const o = new Float64Array(B * T * H * dv);
  let carry: Carry | undefined;
  for (let t = 0; t < T; t++) {
    const starts = new Uint8Array(B);
    for (let b = 0; b < B; b++) starts[b] = seq.starts[b * T + t];
    const inputs = {
      q: wasm.fromArray(position(seq.q, s, dk, t), [B, 1, H, dk]),
      k: wasm.fromArray(position(seq.k, s, dk, t), [B, 1, H, dk]),
      v: wasm.fromArray(position(seq.v, s, dv, t), [B, 1, H, dv]),
      beta: wasm.fromArray(position(seq.beta, s, bw, t), bw === 1 ? [B, 1, H] : [B, 1, H, dv]),
      lambdabar: wasm.fromArray(position(seq.lambdabar, s, 1, t), [B, 1, H]),
      starts,
      ...(carry ? { carry } : {}),
    };
    const out = wasm.fastWeightForward(config, inputs);
    const ot = await wasm.read(out.o);
    for (let b = 0; b < B; b++) o.set(ot.subarray(b * H * dv, (b + 1) * H * dv), (b * T + t) * H * dv);
    const old: Tensor[] = [inputs.q, inputs.k, inputs.v, inputs.beta, inputs.lambdabar, out.o];
    if (carry) old.push(carry.state, carry.lastKey, carry.windowX, carry.windowY);
    for (const x of old) wasm.dispose(x);
    carry = out.carry;
  }
  return { o, carry: carry! };
}

/** The whole sequence in one reference call. */
function reference(ref: Backend, config: RuleConfig, s: Sizes, seq: ReturnType<typeof sequence>) {
  const { B, T, H, dk, dv } = s;
  return ref.fastWeightForward(config, {
    q: ref.fromArray(seq.q, [B, T, H, dk]),
    k: ref.fromArray(seq.k, [B, T, H, dk]),
    v: ref.fromArray(seq.v, [B, T, H, dv]),
    beta: ref.fromArray(seq.beta, isPerColumnRule(config.rule) ? [B, T, H, dv] : [B, T, H]),
    lambdabar: ref.fromArray(seq.lambdabar, [B, T, H]),
    starts: seq.starts,
  });
}

async function check(
  wasm: WasmBackend,
  ref: Backend,
  config: RuleConfig,
  s: Sizes,
  seed: number,
  tag: string,
) {
  const seq = sequence(config, s, seed);
  const got = await decode(wasm, config, s, seq);
  const want = reference(ref, config, s, seq);
  assertRelL2(`${tag} o`, got.o, await ref.read(want.o), FWD);
  assertRelL2(`${tag} carry.state`, await wasm.read(got.carry.state), await ref.read(want.carry.state), FWD);
  if (String(got.carry.windowCount) !== String(want.carry.windowCount)) {
    throw new Error(`${tag}: windowCount ${got.carry.windowCount}, reference ${want.carry.windowCount}`);
  }
}

Deno.test("decoding one position per call for B*H heads matches one reference call over the sequence (every rule, per-head mamba/retnet, NaN-poisoned heap)", async () => {
  const wasm = await createWasmBackend({ threads: 1, poison: true });
  const ref = createRefBackend();
  try {
    let seed = 1;
    for (const rule of RULES) {
      for (const alignment of ALIGNMENTS) {
        const config = ruleConfig(rule, { alignment, window: 3, mambaA: [0.5, 1.7], retnetHeads: [3, 0] });
        await check(wasm, ref, config, { B: 3, T: 7, H: 2, dk: 5, dv: 6 }, seed++, `${rule}/${alignment}`);
      }
    }
  } finally {
    wasm.close();
  }
});

Deno.test("decoding at d = 64 with 16 x 4 heads on 2 threads matches the reference (falcon1, falcon2)", async () => {
  const wasm = await createWasmBackend({ threads: 2 });
  const ref = createRefBackend();
  try {
    for (const rule of ["falcon1", "falcon2"] as const) {
      const config = ruleConfig(rule);
      await check(wasm, ref, config, { B: 16, T: 6, H: 4, dk: 64, dv: 64 }, 50, `${rule} d=64`);
    }
  } finally {
    wasm.close();
  }
});

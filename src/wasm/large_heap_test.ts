/**
 * Regression: tensors placed beyond 2 GiB of the WASM heap. Byte addresses there do not fit a signed
 * 32-bit shift (`ptr >> 2` went negative and `fromArray` threw "offset is out of bounds" while
 * evaluating 42 checkpoints on one backend).
 */

import { createWasmBackend } from "./mod.ts";
import { assertClose } from "../testing/compare.ts";

Deno.test("wasm backend reads, writes and computes on tensors placed beyond 2 GiB of its heap", async () => {
  const be = await createWasmBackend({ threads: 1 });
  try {
    const filler = be.zeros([560 * 1024 * 1024]); // 2.19 GiB: everything allocated next lies past 2^31
    const a = be.fromArray([1, 2, 3, 4, 5, 6], [2, 3]);
    const b = be.fromArray([1, 0, 0, 1, 1, 1], [3, 2]);
    const sum = be.zeros([2, 3]);
    be.add(sum, a, a);
    assertClose("add", await be.read(sum), [2, 4, 6, 8, 10, 12], { rtol: 0, atol: 0 });
    const prod = be.zeros([2, 2]);
    be.matmul(prod, a, b);
    assertClose("matmul", await be.read(prod), [4, 5, 10, 11], { rtol: 0, atol: 0 });
    const copy = be.zeros([2, 3]);
    be.copy(copy, a);
    assertClose("copy", await be.read(copy), [1, 2, 3, 4, 5, 6], { rtol: 0, atol: 0 });
    assertClose("sumSquares", [await be.sumSquares(a)], [91], { rtol: 0, atol: 0 });
    be.dispose(filler);
  } finally {
    be.close();
  }
});

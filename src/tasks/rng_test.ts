import assert from "node:assert/strict";
import { DataRng, deriveSeed } from "./rng.ts";

Deno.test("DataRng continues the same stream from its saved state", () => {
  const a = new DataRng(42);
  for (let i = 0; i < 10; i++) a.uniform();
  const b = new DataRng(a.state);
  for (let i = 0; i < 10; i++) assert.equal(a.uniform(), b.uniform());
});

Deno.test("DataRng.int covers its inclusive range", () => {
  const rng = new DataRng(1);
  const seen = new Set<number>();
  for (let i = 0; i < 1000; i++) seen.add(rng.int(3, 7));
  assert.deepEqual([...seen].sort(), [3, 4, 5, 6, 7]);
});

Deno.test("deriveSeed separates purposes and seeds", () => {
  const seeds = new Set([
    deriveSeed(0, "train"),
    deriveSeed(0, "eval"),
    deriveSeed(1, "train"),
    deriveSeed(0, "eval:addition:len=1"),
    deriveSeed(0, "eval:addition:len=2"),
    deriveSeed(0, "init"),
  ]);
  assert.equal(seeds.size, 6);
  assert.equal(deriveSeed(5, "train"), deriveSeed(5, "train"));
});

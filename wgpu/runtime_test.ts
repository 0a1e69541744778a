import assert from "node:assert/strict";
import { gpuTest } from "./_test_util.ts";
import {
  CONSTANT_CACHE_BYTES,
  FLUSH_AFTER_MS,
  FLUSH_DISPATCHES,
  IDLE_FLUSH_DISPATCHES,
  PROMOTE_AFTER_FLUSHES,
} from "./runtime.ts";
import { createWebGpuBackend, type WebGpuBackend } from "./backend.ts";

gpuTest(
  "temp() hands out one cached buffer per small content, and one upload per large content until the flush",
  (gpu) => {
    const rt = gpu.runtime;
    const a = rt.uniform([{ u: 3 }, { f: 0.5 }]);
    assert.equal(rt.uniform([{ u: 3 }, { f: 0.5 }]), a);
    assert.notEqual(rt.uniform([{ u: 4 }, { f: 0.5 }]), a);
    // same bytes, other usage: another buffer
    assert.notEqual(rt.temp(new Uint32Array([3, 0x3f000000]), "storage"), a);
    const big = new Int32Array(CONSTANT_CACHE_BYTES / 4 + 1);
    const other = big.slice();
    other[7] = 1;
    const first = rt.temp(big, "storage");
    assert.equal(rt.temp(big.slice(), "storage"), first); // equal content: the same upload
    assert.notEqual(rt.temp(other, "storage"), first);
    rt.flush();
    return Promise.resolve();
  },
);

gpuTest(
  "uploads recorded between two flushes each reach the dispatch that uses them (no flush per upload)",
  async (gpu) => {
    // two large id lists, each read by an embedding lookup recorded before the other list is uploaded
    const V = 5;
    const table = gpu.fromArray(Array.from({ length: V * 2 }, (_, i) => i), [V, 2]);
    const n = CONSTANT_CACHE_BYTES / 4 + 3;
    const ids1 = Int32Array.from({ length: n }, (_, i) => i % V);
    const ids2 = Int32Array.from({ length: n }, (_, i) => (3 * i + 1) % V);
    const out1 = gpu.zeros([n, 2]);
    const out2 = gpu.zeros([n, 2]);
    gpu.embeddingForward(out1, table, ids1);
    gpu.embeddingForward(out2, table, ids2);
    const [r1, r2] = await Promise.all([gpu.read(out1), gpu.read(out2)]);
    for (let i = 0; i < n; i++) {
      assert.equal(r1[2 * i + 1], 2 * ids1[i] + 1, `out1 row ${i}`);
      assert.equal(r2[2 * i + 1], 2 * ids2[i] + 1, `out2 row ${i}`);
    }
  },
);

gpuTest("dispatches recorded into one compute pass see each other's writes, around copies", async (gpu) => {
  // x -> 2x -> 2x + x -> copy -> (2x + x) * x, all recorded before one read
  const x = gpu.fromArray([1, 2, 3, 4, 5], [5]);
  const y = gpu.zeros([5]);
  const z = gpu.zeros([5]);
  gpu.add(y, x, x);
  gpu.add(y, y, x);
  gpu.copy(z, y);
  gpu.mul(z, z, x);
  assert.deepEqual(Array.from(await gpu.read(z)), [3, 12, 27, 48, 75]);
});

gpuTest("startProfile/stopProfile time each dispatch by pipeline and span them all", async () => {
  const gpu = await createWebGpuBackend({ timestamps: true });
  if (!gpu.runtime.device.features.has("timestamp-query")) {
    assert.throws(() => gpu.runtime.startProfile(), /timestamp-query/);
    return;
  }
  const x = gpu.fromArray([1, 2, 3], [3]);
  const y = gpu.zeros([3]);
  gpu.runtime.startProfile();
  gpu.add(y, x, x);
  gpu.add(y, y, x);
  gpu.mul(y, y, x);
  const profile = await gpu.runtime.stopProfile();
  assert.equal(profile.reduce((a, p) => a + p.dispatches, 0), 3);
  assert.equal(profile.length, 2, `two pipelines (add, mul): ${profile.map((p) => p.label)}`);
  assert.equal(profile.find((p) => p.dispatches === 2)?.label.startsWith("add") ?? false, true);
  const kernels = profile.reduce((a, p) => a + p.ns, 0);
  assert.ok(
    kernels > 0 && profile.spanNs >= Math.max(...profile.map((p) => p.ns)),
    `span ${profile.spanNs} ns`,
  );
  // profiling changes timing, not results
  assert.deepEqual(Array.from(await gpu.read(y)), [3, 12, 27]);
});

gpuTest(
  "large host data go through pooled uploads: contents arrive, buffers return to the pool",
  async (gpu) => {
    const rt = gpu.runtime;
    // a size no other test uploads (their buffers of that size in the pool would be handed out first)
    const n = CONSTANT_CACHE_BYTES / 4 + 7;
    // asked for again in the next flush interval: the same upload (written once)
    const first = rt.temp(new Int32Array(n).fill(1), "storage");
    rt.flush();
    assert.equal(rt.temp(new Int32Array(n).fill(1), "storage"), first);
    // an interval without it: the buffer went back to the pool, so an upload of the same size reuses it
    rt.flush();
    rt.flush();
    const a = rt.temp(Int32Array.from({ length: n }, (_, i) => i * 7 - 5), "storage");
    assert.equal(a, first);
    const out = rt.tensor([n], true);
    // copy the upload's bytes into a tensor and read them back (as int32 bit patterns)
    rt.encoder().copyBufferToBuffer(a, 0, out.buffer, 0, n * 4);
    const got = new Int32Array((await gpu.read(out)).buffer);
    assert.deepEqual(Array.from(got.slice(0, 4)), [-5, 2, 9, 16]);
    assert.equal(got[n - 1], (n - 1) * 7 - 5);
    // an odd byte count is padded to whole words
    rt.temp(new Uint8Array(CONSTANT_CACHE_BYTES + 3).fill(9), "storage");
    rt.flush();
  },
);

gpuTest(
  "an upload bound in a later flush interval than it was asked for stays its own until no recorded command binds it",
  async (gpu) => {
    const rt = gpu.runtime;
    // a size no other test uploads
    const n = CONSTANT_CACHE_BYTES / 4 + 9;
    const pipe = rt.pipeline(
      "test_copy_words",
      () =>
        `@group(0) @binding(0) var<storage, read_write> dst: array<i32>;
@group(0) @binding(1) var<storage, read> src: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < min(arrayLength(&dst), arrayLength(&src))) { dst[g.x] = src[g.x]; }
}`,
    );
    const copyWords = (src: GPUBuffer) => {
      const out = rt.tensor([n], true);
      rt.dispatch(pipe, [out.buffer, src], [Math.ceil(n / 64)]);
      return out;
    };
    // a caller holds an upload across flushes (as a chunk call its step table over its passes)
    const held = rt.temp(Int32Array.from({ length: n }, (_, i) => i + 1), "storage");
    copyWords(held);
    rt.flush();
    copyWords(held);
    // an interval that only bound it: still in use
    rt.flush();
    const last = copyWords(held);
    // another upload of its size, while a recorded command still binds it: its own buffer
    const other = rt.temp(Int32Array.from({ length: n }, (_, i) => -i), "storage");
    assert.notEqual(other, held);
    const got = new Int32Array((await gpu.read(last)).buffer);
    assert.deepEqual([got[0], got[1], got[n - 1]], [1, 2, n]);
    gpu.dispose(last);
  },
);

gpuTest("small reads issued together share one map and each returns its state at the call", async (gpu) => {
  const x = gpu.fromArray([1, 2, 3], [3]);
  const y = gpu.fromArray([4, 5], [2]);
  const first = gpu.read(x);
  gpu.add(x, x, x); // recorded after the first read: it must not change what that read returns
  const [a, b, c] = await Promise.all([first, gpu.read(y), gpu.read(x)]);
  assert.deepEqual(Array.from(a), [1, 2, 3]);
  assert.deepEqual(Array.from(b), [4, 5]);
  assert.deepEqual(Array.from(c), [2, 4, 6]);
  // sums of squares queued together (the trainer's gradient norm)
  const sums = await Promise.all([gpu.sumSquares(x), gpu.sumSquares(y)]);
  assert.deepEqual(sums, [56, 41]);
});

gpuTest(
  "dispatch reuses bind groups for the same pipeline and buffers, and results stay right",
  async (gpu) => {
    const x = gpu.fromArray([1, 2], [2]);
    const y = gpu.zeros([2]);
    const z = gpu.zeros([2]);
    gpu.add(y, x, x);
    gpu.add(z, x, y); // other buffers: its own bind group
    gpu.add(y, x, x); // same pipeline and buffers as the first: cached group
    assert.deepEqual(Array.from(await gpu.read(y)), [2, 4]);
    assert.deepEqual(Array.from(await gpu.read(z)), [3, 6]);
  },
);

gpuTest("the buffer pool hands out the free buffer made first, whatever order they came back in", (gpu) => {
  const pool = gpu.runtime.pool;
  const bytes = 4096 + 48; // a size no other test uses
  const [a, b, c] = [pool.acquire(bytes), pool.acquire(bytes), pool.acquire(bytes)];
  assert.ok(a !== b && b !== c && a !== c);
  pool.release(b);
  pool.release(c);
  pool.release(a);
  assert.deepEqual([pool.acquire(bytes), pool.acquire(bytes), pool.acquire(bytes)], [a, b, c]);
  for (const x of [c, a, b]) pool.release(x);
  return Promise.resolve();
});

gpuTest(
  "small storage data is uploaded (into the same buffer each flush interval) until it recurs, then cached",
  async (gpu) => {
    const rt = gpu.runtime;
    rt.flush();
    const data = Int32Array.from({ length: 37 }, (_, i) => 1000 + i);
    const uploads = new Set<GPUBuffer>();
    for (let k = 1; k < PROMOTE_AFTER_FLUSHES; k++) {
      const buffer = rt.temp(data, "storage");
      assert.equal(
        rt.temp(data.slice(), "storage"),
        buffer,
        "the same data twice in one interval: one upload",
      );
      uploads.add(buffer);
      rt.flush();
    }
    assert.equal(uploads.size, 1, "each interval's first small upload gets the same pooled buffer");
    const cached = rt.temp(data, "storage");
    assert.ok(!uploads.has(cached), "recurring data moves to the cache");
    rt.flush();
    assert.equal(rt.temp(data, "storage"), cached);
    // data of one batch each interval (e.g. token ids) reaches its dispatch through the reused upload
    const V = 6;
    const table = gpu.fromArray(Array.from({ length: V }, (_, i) => i * 10), [V, 1]);
    for (let k = 0; k < 3; k++) {
      const ids = Int32Array.from({ length: 9 }, (_, i) => (i * (k + 1) + k) % V);
      const out = gpu.zeros([9, 1]);
      gpu.embeddingForward(out, table, ids);
      assert.deepEqual(Array.from(await gpu.read(out)), Array.from(ids, (id) => id * 10), `batch ${k}`);
      gpu.dispose(out);
    }
  },
);

/**
 * A runtime just synced, whose `add(y, y, x)` dispatches `step()` counts and whose submits `at` records (the
 * dispatch count at each); `restore()` puts `queue.submit`, the clock and the flush delay back.
 */
async function submitRecorder(gpu: WebGpuBackend) {
  const rt = gpu.runtime;
  const x = gpu.fromArray([1, 2, 3], [3]);
  const y = gpu.zeros([3]);
  await gpu.sync();
  const queue = rt.device.queue;
  const submit = queue.submit.bind(queue);
  const at: number[] = [];
  let dispatches = 0;
  queue.submit = (buffers) => {
    at.push(dispatches);
    submit(buffers);
  };
  return {
    at,
    step(): number {
      // counted first: a submit inside the dispatch records it
      dispatches++;
      gpu.add(y, y, x);
      return dispatches;
    },
    /** `y` now: `x` times the dispatches. */
    async check(): Promise<void> {
      assert.deepEqual(Array.from(await gpu.read(y)), [1, 2, 3].map((v) => v * dispatches));
    },
    restore(): void {
      queue.submit = submit;
      rt.flushAfterMs = FLUSH_AFTER_MS;
      rt.clock = () => performance.now();
    },
  };
}

gpuTest(
  "after a sync the first submit comes at IDLE_FLUSH_DISPATCHES dispatches, the next ones at FLUSH_DISPATCHES",
  async (gpu) => {
    const r = await submitRecorder(gpu);
    // by count alone (this slow adapter's host may record for longer than FLUSH_AFTER_MS)
    gpu.runtime.flushAfterMs = Infinity;
    try {
      for (let i = 0; i < IDLE_FLUSH_DISPATCHES + FLUSH_DISPATCHES + 2; i++) r.step();
      // the device waited for nothing: the first 8 went at once, then the usual interval
      assert.deepEqual(r.at, [IDLE_FLUSH_DISPATCHES, IDLE_FLUSH_DISPATCHES + FLUSH_DISPATCHES]);
      await r.check();
    } finally {
      r.restore();
    }
  },
);

gpuTest(
  "a dispatch FLUSH_AFTER_MS of host time after the first one since a flush submits, short of the count",
  async (gpu) => {
    const r = await submitRecorder(gpu);
    let now = 1000;
    gpu.runtime.clock = () => now;
    try {
      // the first IDLE_FLUSH_DISPATCHES go at once; then 3 dispatches inside the interval, and the 4th at its end
      for (let i = 0; i < IDLE_FLUSH_DISPATCHES + 3; i++) r.step();
      now += FLUSH_AFTER_MS / 2;
      r.step();
      assert.deepEqual(
        r.at,
        [IDLE_FLUSH_DISPATCHES],
        "not yet: the interval runs from the first dispatch after a flush",
      );
      now += FLUSH_AFTER_MS / 2;
      const fourth = r.step();
      assert.deepEqual(r.at, [IDLE_FLUSH_DISPATCHES, fourth]);
      // a host pause before a dispatch starts no interval early: the clock starts at that dispatch
      now += 50;
      r.step();
      assert.deepEqual(r.at, [IDLE_FLUSH_DISPATCHES, fourth]);
      await r.check();
    } finally {
      r.restore();
    }
  },
);

/**
 * The command side of the `webgpu` backend: a pipeline cache keyed by shader variant, one command
 * encoder per batch of ops (flushed on read, sync and host writes), temporary buffers for
 * uniforms and host-side integer data, and the 1-D dispatch helper every element-wise kernel uses.
 *
 * @module
 */

import { type Binding, GpuBufferPool, GpuTensor, pooledBytes } from "./tensor.ts";

export type { Binding } from "./tensor.ts";

/** Host-data buffers up to this many bytes are cached by content ({@linkcode GpuRuntime.temp}). */
export const CONSTANT_CACHE_BYTES = 4096;

/** Reads up to this many bytes are batched into one map per task ({@linkcode GpuRuntime.readBytes}). */
export const READ_BATCH_BYTES = 65536;

/** Most cached bind groups before the cache starts over. */
export const BIND_GROUP_CACHE_ENTRIES = 4096;

/**
 * Flush intervals in which small storage data must have been asked for before it is cached by content
 * ({@linkcode GpuRuntime.temp}): more than a training step has (~4), so data of one batch is uploaded.
 */
export const PROMOTE_AFTER_FLUSHES = 12;

/** Most small storage contents whose recurrence is counted before the count starts over. */
export const SIGHTING_ENTRIES = 4096;

/** Most cached host-data buffers before the cache starts over. */
export const CONSTANT_CACHE_ENTRIES = 1024;

/**
 * Dispatches recorded before the open encoder is submitted: the device starts on a long op sequence
 * (a training step is ~750 dispatches) while the host still records the rest of it.
 */
export const FLUSH_DISPATCHES = 96;

/**
 * Dispatches recorded before the first submit after a {@linkcode GpuRuntime.sync} (or on a new runtime),
 * when the device has nothing to do: it starts on them while the host records the rest. On the H200 a
 * batch of 16 forward calls waited ~7 ms for its first submit at {@linkcode FLUSH_DISPATCHES}.
 */
export const IDLE_FLUSH_DISPATCHES = 8;

/**
 * Host time in ms, from the first dispatch recorded after a flush, after which the next dispatch submits
 * the open encoder even short of {@linkcode FLUSH_DISPATCHES}: while the host records a long batch of
 * large calls (a forward of 8 x 4096 x 8 x 64 is ~7 dispatches and ~0.8 ms of host time, 1.9 ms on the
 * H200), the device runs what came before instead of waiting for the 96th dispatch.
 */
export const FLUSH_AFTER_MS = 1;

/** Largest workgroup count per dispatch dimension that WebGPU guarantees. */
export const MAX_GROUPS_PER_DIM = 65535;

/** Pipelines, the open command encoder, temporaries and the buffer pool of one device. */
export class GpuRuntime {
  /** The device. */
  readonly device: GPUDevice;
  /** Storage buffer pool. */
  readonly pool: GpuBufferPool;
  readonly #pipelines = new Map<string, GPUComputePipeline>();
  #encoder: GPUCommandEncoder | null = null;
  /**
   * Clears not recorded yet, by buffer: each waits until a command may touch its buffer
   * ({@linkcode GpuRuntime.clear}); a clear of the bytes right after one extends it.
   */
  readonly #pendingClears = new Map<GPUBuffer, { offset: number; end: number }[]>();
  #pass: GPUComputePassEncoder | null = null;
  /** The pipeline and bind group last set on the open pass. */
  #passPipeline: GPUComputePipeline | null = null;
  #passBindGroup: GPUBindGroup | null = null;
  #temporaries: GPUBuffer[] = [];
  /** Bind groups by pipeline and buffer identities ({@linkcode GpuRuntime.dispatch}). */
  readonly #bindGroups = new Map<string, GPUBindGroup>();
  /** Identity numbers of pipelines and buffers, for the bind group keys. */
  readonly #ids = new WeakMap<object, number>();
  #nextId = 0;
  /** Small reads waiting for the batch map of {@linkcode GpuRuntime.readBytes}. */
  #reads: {
    snapshot: GPUBuffer;
    bytes: number;
    size: number;
    resolve: (data: ArrayBuffer) => void;
    reject: (e: unknown) => void;
  }[] = [];
  /** Deferred reads ({@linkcode GpuRuntime.readBytesLater}) waiting for one transfer. */
  #deferred: { snapshot: GPUBuffer; bytes: number; size: number; settle: Promise<ArrayBuffer> | null }[] = [];
  /** Dispatches recorded since the last flush (submitted every {@linkcode FLUSH_DISPATCHES}, or sooner by {@linkcode GpuRuntime.flushAfterMs}). */
  #dispatchesSinceFlush = 0;
  /** Nothing submitted since the last sync (or ever): the next flush comes at {@linkcode IDLE_FLUSH_DISPATCHES}. */
  #deviceIdle = true;
  /** {@linkcode GpuRuntime.clock} at the first dispatch since the last flush. */
  #recordingSince = 0;
  /** Host ms of recording after which a dispatch flushes ({@linkcode FLUSH_AFTER_MS}; `Infinity`: by count only). */
  flushAfterMs: number = FLUSH_AFTER_MS;
  /** The host clock of {@linkcode GpuRuntime.flushAfterMs}, in ms (tests replace it). */
  clock: () => number = () => performance.now();
  /** Small immutable host-data buffers by usage and content hash: a training step repeats the same ones. */
  readonly #constants = new Map<string, { bytes: Uint8Array; buffer: GPUBuffer }[]>();
  #constantCount = 0;
  /**
   * Snapshot buffers of reads, apart from {@linkcode GpuRuntime.pool}: reads are transferred at times
   * that vary from step to step, and taking their buffers from the tensor pool would hand a step's
   * tensors different buffers each step (so its bind groups would miss the cache).
   */
  readonly #snapshotPool: GpuBufferPool;
  /** Work held back until a command may touch `buffer` ({@linkcode GpuRuntime.hold}). */
  #held: { buffer: GPUBuffer; run: () => void } | null = null;
  /** Scratch words of {@linkcode GpuRuntime.uniform} (three views of one buffer). */
  #scratch = scratchWords(64);
  /** Flushes so far (for {@linkcode GpuRuntime.temp}'s count of the intervals a content recurs in). */
  #flushes = 0;
  /** Small storage contents not cached yet: the last flush interval each was asked for in, and how many. */
  readonly #sightings = new Map<string, { flush: number; count: number }>();
  /** Buffers for uploads that no recorded command uses (refilled at each flush). */
  readonly #uploadPool: GpuBufferPool;
  /**
   * Uploads by content hash, with the flush interval each was last asked for in: kept (and reused by
   * identical data) while every interval asks for it, given back to the upload pool at the end of the
   * first interval that does not.
   */
  readonly #uploadsByContent = new Map<
    string,
    { bytes: Uint8Array; buffer: GPUBuffer; interval: number }[]
  >();
  /**
   * The entries of {@linkcode GpuRuntime.#uploadsByContent} by buffer: a dispatch or copy that binds an upload
   * uses it in the interval it is recorded in, like asking for its data again. A caller may hold an upload
   * across flushes (a chunk call binds its step table in every pass, and the host clock may flush between
   * them): given back at the end of an interval that only bound it, the next upload of its size would take it
   * and its `writeBuffer` would run before the commands still recorded with the old data.
   */
  readonly #uploadsByBuffer = new Map<GPUBuffer, { interval: number }>();
  #retired: GPUBuffer[] = [];
  #profile: { querySet: GPUQuerySet; resolve: GPUBuffer; labels: string[]; capacity: number } | null = null;
  #zero: GPUBuffer | null = null;
  #errors: string[] = [];
  /**
   * Host waits on the device so far: buffer maps (reads) and queue syncs. Each costs a round trip
   * (about 11 ms in Deno 2.9); tests count them.
   */
  readonly waits = { maps: 0, syncs: 0 };

  /** The device's `maxStorageBufferBindingSize` (read once: a WebIDL getter per tensor adds up). */
  readonly #maxBinding: number;

  /** A runtime on `device`; validation errors are collected and thrown by the next read or sync. */
  constructor(device: GPUDevice) {
    this.device = device;
    this.#maxBinding = device.limits.maxStorageBufferBindingSize;
    // a buffer given back to the pool needs none of its pending clears: no command read the zeros,
    // and whoever gets the buffer next zeroes it again if it needs zeros
    this.pool = new GpuBufferPool(device, (buffer) => this.#pendingClears.delete(buffer));
    this.#uploadPool = new GpuBufferPool(device);
    this.#snapshotPool = new GpuBufferPool(device);
    device.addEventListener("uncapturederror", (e) => {
      const err = (e as GPUUncapturedErrorEvent).error;
      this.#errors.push(err?.message ?? String(err));
    });
  }

  /** Throw the validation errors collected since the last check (shader compile errors included). */
  throwErrors(): void {
    if (this.#errors.length === 0) return;
    const msg = this.#errors.join("\n");
    this.#errors = [];
    throw new Error(`webgpu: ${msg}`);
  }

  /** The compute pipeline for `key`, compiling `code()` (entry point `main`) the first time. */
  pipeline(key: string, code: () => string): GPUComputePipeline {
    let p = this.#pipelines.get(key);
    if (!p) {
      const module = this.device.createShaderModule({ label: key, code: code() });
      p = this.device.createComputePipeline({
        label: key,
        layout: "auto",
        compute: { module, entryPoint: "main" },
      });
      this.#pipelines.set(key, p);
    }
    return p;
  }

  /** Number of cached pipelines (for tests of the cache). */
  get pipelineCount(): number {
    return this.#pipelines.size;
  }

  /**
   * The open command encoder (created on demand), with no compute pass open (for copies and clears),
   * after every held command and pending clear.
   */
  encoder(): GPUCommandEncoder {
    if (this.#held) this.releaseHeld();
    this.#recordAllClears();
    return this.#openEncoder();
  }

  /**
   * The encoder for a copy from or to `buffers`: held work runs first only when it writes one of them,
   * and only their pending clears are recorded first.
   */
  #copyEncoder(...buffers: GPUBuffer[]): GPUCommandEncoder {
    if (this.#held && buffers.includes(this.#held.buffer)) this.releaseHeld();
    for (const b of buffers) {
      this.#recordClears(b);
      this.#markUpload(b);
    }
    return this.#openEncoder();
  }

  /** Copy `bytes` bytes from `src` at `srcOffset` to `dst` at `dstOffset`, in order with the other commands. */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, bytes: number): void {
    this.#copyEncoder(src, dst).copyBufferToBuffer(src, srcOffset, dst, dstOffset, bytes);
  }

  /** The encoder, no compute pass open, for a command that touches no buffer with held work or pending clears. */
  #openEncoder(): GPUCommandEncoder {
    this.#endPass();
    if (!this.#encoder) this.#encoder = this.device.createCommandEncoder();
    return this.#encoder;
  }

  /** If `buffer` is an upload, count it used in the current interval ({@linkcode GpuRuntime.#uploadsByBuffer}). */
  #markUpload(buffer: GPUBuffer): void {
    const upload = this.#uploadsByBuffer.get(buffer);
    if (upload) upload.interval = this.#flushes;
  }

  /** Record the pending clears of `buffer` (before a command that may touch it). */
  #recordClears(buffer: GPUBuffer): void {
    const ranges = this.#pendingClears.get(buffer);
    if (!ranges) return;
    this.#pendingClears.delete(buffer);
    const encoder = this.#openEncoder();
    for (const r of ranges) encoder.clearBuffer(buffer, r.offset, r.end - r.offset);
  }

  #recordAllClears(): void {
    for (const buffer of [...this.#pendingClears.keys()]) this.#recordClears(buffer);
  }

  /**
   * Zero `bytes` bytes of `buffer` from byte `offset` (multiples of 4), in order with the commands
   * that touch `buffer`. The clear waits until a command may touch the buffer (a dispatch binding it, a
   * copy from or to it, any command through {@linkcode GpuRuntime.encoder}, a flush), so commands on
   * other buffers keep their compute pass; clears of consecutive ranges of one buffer (the gradients of
   * a block, zeroed parameter by parameter) become one clear; a kernel that writes every zeroed byte
   * may take the clear instead ({@linkcode GpuRuntime.takeClear}); a buffer given back to the pool
   * drops its pending clears.
   */
  clear(buffer: GPUBuffer, offset: number, bytes: number): void {
    if (bytes === 0) return;
    if (this.#held?.buffer === buffer) this.releaseHeld();
    const ranges = this.#pendingClears.get(buffer);
    if (!ranges) {
      this.#pendingClears.set(buffer, [{ offset, end: offset + bytes }]);
      return;
    }
    const last = ranges[ranges.length - 1];
    if (last.end === offset) last.end = offset + bytes;
    else if (!ranges.some((r) => r.offset <= offset && offset + bytes <= r.end)) {
      ranges.push({ offset, end: offset + bytes });
    }
  }

  /**
   * Whether a clear of exactly `bytes` bytes of `buffer` from `offset` is pending (issued by
   * {@linkcode GpuRuntime.clear}, and no command has touched the buffer since); if so it is dropped and
   * the caller takes its place: the next command that touches those bytes must be the caller's
   * dispatch, which writes every one of them as it would have over zeros (an accumulating kernel adds
   * to 0 instead of reading the buffer). Saves the clear and the compute pass it would end.
   */
  takeClear(buffer: GPUBuffer, offset: number, bytes: number): boolean {
    const ranges = this.#pendingClears.get(buffer);
    const i = ranges?.findIndex((r) => r.offset === offset && r.end === offset + bytes) ?? -1;
    if (!ranges || i < 0) return false;
    ranges.splice(i, 1);
    if (ranges.length === 0) this.#pendingClears.delete(buffer);
    return true;
  }

  /** Clears issued and not recorded yet (for tests). */
  get pendingClears(): number {
    let n = 0;
    for (const ranges of this.#pendingClears.values()) n += ranges.length;
    return n;
  }

  /**
   * The open compute pass: consecutive dispatches share one pass (each dispatch is its own usage
   * scope, so a dispatch still sees the writes of the one before it); a copy or clear ends it.
   */
  #computePass(): GPUComputePassEncoder {
    if (!this.#pass) this.#pass = this.#openEncoder().beginComputePass();
    return this.#pass;
  }

  /** While profiling (and below capacity): a pass of its own for one dispatch, with timestamps at its ends. */
  #timedPass(pipeline: GPUComputePipeline): GPUComputePassEncoder | null {
    const profile = this.#profile;
    if (!profile || profile.labels.length >= profile.capacity) return null;
    const n = profile.labels.length;
    profile.labels.push(pipeline.label);
    return this.#openEncoder().beginComputePass({
      timestampWrites: {
        querySet: profile.querySet,
        beginningOfPassWriteIndex: 2 * n,
        endOfPassWriteIndex: 2 * n + 1,
      },
    });
  }

  #endPass(): void {
    if (this.#pass) {
      this.#pass.end();
      this.#pass = null;
      this.#passPipeline = null;
      this.#passBindGroup = null;
    }
  }

  /**
   * Record one dispatch of `pipeline` with `bindings` at `@binding(0..)` of group 0. A buffer bound
   * twice (an op whose output is also an input, e.g. `add(y, y, x)`) is bound once as itself and
   * otherwise as a snapshot copy, since WebGPU forbids a writable binding aliasing another. Kernels
   * bind their outputs first, so the snapshot is always an input. Bindings listed in `readOnly` (read
   * by the kernel, never written) may share a buffer with each other without a snapshot (two tensors
   * of the parameter block).
   */
  dispatch(
    pipeline: GPUComputePipeline,
    bindings: readonly Binding[],
    groups: readonly [number, number?, number?],
    readOnly?: readonly number[],
  ) {
    if (this.#held) {
      for (const b of bindings) {
        if (bufferOf(b) === this.#held.buffer) {
          this.releaseHeld();
          break;
        }
      }
    }
    if (this.#pendingClears.size > 0) { for (const b of bindings) this.#recordClears(bufferOf(b)); }
    if (this.#uploadsByBuffer.size > 0) { for (const b of bindings) this.#markUpload(bufferOf(b)); }
    let snapshots: GPUBuffer[] | null = null;
    let resolved = bindings;
    for (let i = 1; i < bindings.length; i++) {
      const buffer = bufferOf(bindings[i]);
      let earlier = false;
      const shared = readOnly?.includes(i);
      for (let j = 0; j < i && !earlier; j++) {
        earlier = bufferOf(resolved[j]) === buffer && !(shared && readOnly!.includes(j));
      }
      if (!earlier || !(buffer.usage & GPUBufferUsage.COPY_SRC)) continue;
      // the same buffer (or another view into it) is bound before: bind a copy of this range instead
      const binding = bindings[i];
      const offset = binding instanceof GPUBuffer ? 0 : binding.offset;
      const size = binding instanceof GPUBuffer ? buffer.size : binding.size;
      const copy = this.pool.acquire(size);
      this.#openEncoder().copyBufferToBuffer(buffer, offset, copy, 0, size);
      (snapshots ??= []).push(copy);
      if (resolved === bindings) resolved = [...bindings];
      (resolved as Binding[])[i] = copy;
    }
    const bindGroup = this.#bindGroup(pipeline, resolved);
    const pass = this.#timedPass(pipeline) ?? this.#computePass();
    // the open pass keeps its pipeline and bind group between dispatches: set only what changed
    if (pass !== this.#pass || this.#passPipeline !== pipeline) pass.setPipeline(pipeline);
    if (pass !== this.#pass || this.#passBindGroup !== bindGroup) pass.setBindGroup(0, bindGroup);
    if (pass === this.#pass) {
      this.#passPipeline = pipeline;
      this.#passBindGroup = bindGroup;
    }
    pass.dispatchWorkgroups(groups[0], groups[1] ?? 1, groups[2] ?? 1);
    if (pass !== this.#pass) pass.end();
    if (snapshots) { for (const b of snapshots) this.pool.release(b); }
    const interval = this.#deviceIdle ? IDLE_FLUSH_DISPATCHES : FLUSH_DISPATCHES;
    const now = this.flushAfterMs === Infinity ? 0 : this.clock();
    if (this.#dispatchesSinceFlush++ === 0) this.#recordingSince = now;
    if (this.#dispatchesSinceFlush >= interval || now - this.#recordingSince >= this.flushAfterMs) {
      this.flush();
    }
  }

  /**
   * The bind group of `buffers` at `@binding(0..)` for `pipeline`, cached by identity: a training step
   * binds the same pooled buffers to the same pipelines every step, and creating a bind group took
   * ~28 us on the H200 host (~10 ms of a 351-dispatch step). Entries naming a destroyed buffer are
   * never asked for again; the cache starts over past {@linkcode BIND_GROUP_CACHE_ENTRIES}.
   */
  #bindGroup(pipeline: GPUComputePipeline, bindings: readonly Binding[]): GPUBindGroup {
    let key = `${this.#idOf(pipeline)}`;
    for (const b of bindings) key += `,${this.#idOf(b)}`;
    let group = this.#bindGroups.get(key);
    if (!group) {
      if (this.#bindGroups.size >= BIND_GROUP_CACHE_ENTRIES) this.#bindGroups.clear();
      group = this.device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: bindings.map((b, binding) => ({
          binding,
          resource: b instanceof GPUBuffer ? { buffer: b } : b,
        })),
      });
      this.#bindGroups.set(key, group);
    }
    return group;
  }

  #idOf(object: object): number {
    let id = this.#ids.get(object);
    if (id === undefined) {
      id = ++this.#nextId;
      this.#ids.set(object, id);
    }
    return id;
  }

  /**
   * A read-only buffer holding `data`, for the commands recorded before the next flush. Up to
   * {@linkcode CONSTANT_CACHE_BYTES} bytes it comes from a cache by content (uniforms and small
   * host-side integer arrays recur every step; creating a buffer per dispatch dominated small steps),
   * except small storage data that has not recurred yet (the data of one batch), which is uploaded like
   * larger storage data ({@linkcode GpuRuntime.upload}).
   */
  temp(data: ArrayBufferView, usage: "uniform" | "storage"): GPUBuffer {
    if (data.byteLength > CONSTANT_CACHE_BYTES) {
      return usage === "storage" ? this.upload(data) : this.#createTemp(data, usage);
    }
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const key = contentKey(usage, bytes);
    const hits = this.#constants.get(key);
    let buffer = hits?.find((c) => sameBytes(c.bytes, bytes))?.buffer;
    if (!buffer && usage === "storage" && !this.#recurs(key)) return this.upload(data, key);
    if (!buffer) {
      if (this.#constantCount >= CONSTANT_CACHE_ENTRIES) {
        // start over; the old buffers may still be bound by recorded commands: destroy after the flush
        for (const list of this.#constants.values()) for (const c of list) this.#retired.push(c.buffer);
        this.#constants.clear();
        this.#constantCount = 0;
      }
      buffer = this.#createBuffer(data, usage);
      const entry = { bytes: bytes.slice(), buffer };
      if (hits && this.#constants.has(key)) hits.push(entry);
      else this.#constants.set(key, [entry]);
      this.#constantCount++;
    }
    return buffer;
  }

  /**
   * Large host data (per-call step tables, token ids, targets) in a storage buffer, with no flush: an
   * upload buffer is written by `queue.writeBuffer` (which runs before the commands recorded so far
   * are submitted), so it is taken only from buffers that no recorded command uses: the upload pool.
   * The same data uploaded again (the sequence starts of every short convolution of a step, the targets
   * of the loss forward and backward) reuses the first upload for as long as every flush interval asks
   * for it (or binds it: a dispatch or copy of an upload counts); an upload goes back to the pool at the end of
   * the first interval that does neither (its last commands were submitted before). A mapped-at-creation buffer of 256 KiB took ~9 ms to fill on the
   * H200 (Deno 2.9.6), a flush per upload was a submit each, and a `writeBuffer` costs ~40 us of host
   * time for 2 KiB on the software adapter (so data of one batch is written once, not once per flush).
   */
  upload(data: ArrayBufferView, key?: string): GPUBuffer {
    const src = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    key ??= contentKey("storage", src);
    const earlier = this.#uploadsByContent.get(key)?.find((u) => sameBytes(u.bytes, src));
    if (earlier) {
      earlier.interval = this.#flushes;
      return earlier.buffer;
    }
    const bytes = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
    const buffer = this.#uploadPool.acquire(bytes);
    let words: Uint8Array<ArrayBuffer>;
    if (data.byteLength % 4 === 0 && data.buffer instanceof ArrayBuffer) {
      words = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    } else {
      words = new Uint8Array(Math.ceil(data.byteLength / 4) * 4);
      words.set(src);
    }
    this.device.queue.writeBuffer(buffer, 0, words);
    const list = this.#uploadsByContent.get(key);
    const entry = { bytes: src.slice(), buffer, interval: this.#flushes };
    this.#uploadsByBuffer.set(buffer, entry);
    if (list) list.push(entry);
    else this.#uploadsByContent.set(key, [entry]);
    return buffer;
  }

  /**
   * Whether small storage data of content `key` has now been asked for in {@linkcode PROMOTE_AFTER_FLUSHES}
   * flush intervals (counting this one): data that recurs step after step (a step table of batches
   * without sequence starts) is then cached by {@linkcode GpuRuntime.temp}; data of one batch (token
   * ids, targets, sequence starts) never gets there and is uploaded, into buffers that the same call of
   * every step gets again ({@linkcode GpuBufferPool}), so the bind groups that use it stay cached.
   */
  #recurs(key: string): boolean {
    const seen = this.#sightings.get(key);
    if (!seen) {
      if (this.#sightings.size >= SIGHTING_ENTRIES) this.#sightings.clear();
      this.#sightings.set(key, { flush: this.#flushes, count: 1 });
      return false;
    }
    if (seen.flush !== this.#flushes) {
      seen.flush = this.#flushes;
      seen.count++;
    }
    return seen.count >= PROMOTE_AFTER_FLUSHES;
  }

  /**
   * Hold `run` (which records commands writing `buffer`) back until a dispatch binds `buffer`, a clear of
   * it, any other command through {@linkcode GpuRuntime.encoder} (copies, reads) or a flush: then it runs
   * first, so every later command sees its writes. Work held for another buffer runs now.
   */
  hold(buffer: GPUBuffer, run: () => void): void {
    if (this.#held && this.#held.buffer !== buffer) this.releaseHeld();
    this.#held = { buffer, run };
  }

  /** The buffer of the work held back, if any. */
  get heldBuffer(): GPUBuffer | null {
    return this.#held?.buffer ?? null;
  }

  /** Record the held work now. */
  releaseHeld(): void {
    const held = this.#held;
    this.#held = null;
    held?.run();
  }

  /** Destroy `buffer` after the next flush (recorded commands may still use it). */
  retire(buffer: GPUBuffer): void {
    this.#retired.push(buffer);
  }

  /** A new read-only storage buffer holding `data`, owned by the caller (tables that live as long as it). */
  storageBuffer(data: ArrayBufferView): GPUBuffer {
    return this.#createBuffer(data, "storage");
  }

  #createTemp(data: ArrayBufferView, usage: "uniform" | "storage"): GPUBuffer {
    const buffer = this.#createBuffer(data, usage);
    this.#temporaries.push(buffer);
    return buffer;
  }

  #createBuffer(data: ArrayBufferView, usage: "uniform" | "storage"): GPUBuffer {
    const bytes = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
    const buffer = this.device.createBuffer({
      size: bytes,
      usage: usage === "uniform" ? GPUBufferUsage.UNIFORM : GPUBufferUsage.STORAGE,
      mappedAtCreation: true,
    });
    new Uint8Array(buffer.getMappedRange()).set(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    );
    buffer.unmap();
    return buffer;
  }

  /** A uniform buffer of 32-bit words: integers as u32/i32 bit patterns, other numbers as f32. */
  uniform(words: readonly { u?: number; i?: number; f?: number }[]): GPUBuffer {
    // built in a scratch buffer (temp() copies what it keeps): no allocation per dispatch
    const n = Math.max(4, words.length);
    if (this.#scratch.u.length < n) this.#scratch = scratchWords(2 * n);
    const { u, i, f } = this.#scratch;
    u.fill(0, 0, n);
    for (let k = 0; k < words.length; k++) {
      const w = words[k];
      if (w.u !== undefined) u[k] = w.u;
      else if (w.i !== undefined) i[k] = w.i;
      else f[k] = w.f ?? 0;
    }
    return this.temp(new Uint8Array(u.buffer, 0, n * 4), "uniform");
  }

  /** A small zero storage buffer for optional bindings that are absent. */
  zeroBuffer(): GPUBuffer {
    if (!this.#zero) {
      this.#zero = this.device.createBuffer({
        size: 256,
        usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
    }
    return this.#zero;
  }

  /** A pooled tensor of `shape`; zero-filled when `zero` (the clear is recorded in order). */
  tensor(shape: readonly number[], zero: boolean): GpuTensor {
    const size = shape.reduce((a, b) => a * b, 1);
    const bytes = pooledBytes(size);
    const limit = this.#maxBinding;
    if (bytes > limit) {
      throw new RangeError(
        `a tensor of shape [${shape}] needs ${bytes} bytes, above this device's maxStorageBufferBindingSize (${limit})`,
      );
    }
    const buffer = this.pool.acquire(bytes);
    if (zero) this.clear(buffer, 0, bytes);
    return new GpuTensor(shape, buffer);
  }

  /** Submit the recorded commands and free the temporaries. */
  flush(): void {
    if (this.#held) this.releaseHeld();
    this.#dispatchesSinceFlush = 0;
    this.#deviceIdle = false;
    this.#flushes++;
    this.#recordAllClears();
    this.#endPass();
    if (this.#encoder) {
      this.device.queue.submit([this.#encoder.finish()]);
      this.#encoder = null;
    }
    for (const b of this.#temporaries) b.destroy();
    // uploads the interval just submitted did not use: no recorded command needs them any more
    for (const [key, list] of this.#uploadsByContent) {
      const kept = list.filter((u) => u.interval === this.#flushes - 1);
      for (const u of list) {
        if (u.interval === this.#flushes - 1) continue;
        this.#uploadsByBuffer.delete(u.buffer);
        this.#uploadPool.release(u.buffer);
      }
      if (kept.length === 0) this.#uploadsByContent.delete(key);
      else if (kept.length !== list.length) this.#uploadsByContent.set(key, kept);
    }
    for (const b of this.#retired) b.destroy();
    this.#temporaries = [];
    this.#retired = [];
  }

  /** Write host data into a buffer (from byte `offset`) after everything recorded so far. */
  write(buffer: GPUBuffer, data: Float32Array<ArrayBuffer>, offset = 0): void {
    this.flush();
    this.device.queue.writeBuffer(buffer, offset, data);
  }

  /**
   * Copy `bytes` bytes of `src` to the host, after everything recorded so far. Small reads (up to
   * {@linkcode READ_BATCH_BYTES}) issued in the same task share one staging buffer and one map: each is
   * snapshotted on the GPU where it is issued (so later commands do not change what it returns) and the
   * batch is mapped once in a microtask. A training step reads its loss and one partial sum per
   * parameter: mapped one by one, those reads cost ~60 ms per step on the H200.
   */
  readBytes(src: GPUBuffer, bytes: number, offset = 0): Promise<ArrayBuffer> {
    const size = Math.max(16, Math.ceil(bytes / 16) * 16);
    if (size > READ_BATCH_BYTES) return this.#readAlone(src, bytes, size, offset);
    const snapshot = this.#snapshotPool.acquire(size);
    this.#copyEncoder(src).copyBufferToBuffer(src, offset, snapshot, 0, Math.min(size, src.size - offset));
    return new Promise((resolve, reject) => {
      if (this.#reads.length === 0) queueMicrotask(() => this.#readBatch());
      this.#reads.push({ snapshot, bytes, size, resolve, reject });
    });
  }

  /**
   * A read of `bytes` bytes of `src` whose value is snapshotted on the GPU now and whose transfer
   * waits until the returned function is first called; then every deferred read not yet transferred
   * moves in one map. A map waits for the device in Deno 2.9 (its call blocks the thread until the
   * queue has run the commands submitted so far), so a training step defers its reads and collects
   * them a few steps later, in one round trip for several steps.
   */
  readBytesLater(src: GPUBuffer, bytes: number, offset = 0): () => Promise<ArrayBuffer> {
    const size = Math.max(16, Math.ceil(bytes / 16) * 16);
    const snapshot = this.#snapshotPool.acquire(size);
    this.#copyEncoder(src).copyBufferToBuffer(src, offset, snapshot, 0, Math.min(size, src.size - offset));
    const entry = { snapshot, bytes, size, settle: null as Promise<ArrayBuffer> | null };
    this.#deferred.push(entry);
    return () => {
      if (!entry.settle) this.#transferDeferred();
      return entry.settle!;
    };
  }

  /** Map every deferred read not yet transferred together (one staging buffer, one map). */
  #transferDeferred(): void {
    const entries = this.#deferred;
    this.#deferred = [];
    let total = 0;
    const offsets = entries.map((e) => (total += e.size) - e.size);
    const staging = this.device.createBuffer({
      size: total,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const enc = this.encoder();
    entries.forEach((e, i) => enc.copyBufferToBuffer(e.snapshot, 0, staging, offsets[i], e.size));
    this.flush();
    for (const e of entries) this.#snapshotPool.release(e.snapshot);
    this.waits.maps++;
    const mapped = staging.mapAsync(GPUMapMode.READ).then(() => {
      const all = staging.getMappedRange(0, total);
      const outs = entries.map((e, i) => all.slice(offsets[i], offsets[i] + e.bytes));
      staging.unmap();
      this.throwErrors();
      return outs;
    }).finally(() => staging.destroy());
    entries.forEach((e, i) => e.settle = mapped.then((outs) => outs[i]));
  }

  async #readAlone(src: GPUBuffer, bytes: number, size: number, offset: number): Promise<ArrayBuffer> {
    const staging = this.device.createBuffer({
      size,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    this.#copyEncoder(src).copyBufferToBuffer(src, offset, staging, 0, Math.min(size, src.size - offset));
    this.flush();
    this.waits.maps++;
    await staging.mapAsync(GPUMapMode.READ);
    const out = staging.getMappedRange(0, size).slice(0, bytes);
    staging.unmap();
    staging.destroy();
    this.throwErrors();
    return out;
  }

  /** Map the pending small reads together and settle each. */
  async #readBatch(): Promise<void> {
    const reads = this.#reads;
    this.#reads = [];
    let total = 0;
    const offsets = reads.map((r) => (total += r.size) - r.size);
    const staging = this.device.createBuffer({
      size: total,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const enc = this.encoder();
    reads.forEach((r, i) => enc.copyBufferToBuffer(r.snapshot, 0, staging, offsets[i], r.size));
    this.flush();
    for (const r of reads) this.#snapshotPool.release(r.snapshot);
    try {
      this.waits.maps++;
      await staging.mapAsync(GPUMapMode.READ);
      const all = staging.getMappedRange(0, total);
      const outs = reads.map((r, i) => all.slice(offsets[i], offsets[i] + r.bytes));
      staging.unmap();
      this.throwErrors();
      reads.forEach((r, i) => r.resolve(outs[i]));
    } catch (e) {
      for (const r of reads) r.reject(e);
    } finally {
      staging.destroy();
    }
  }

  /**
   * Start timing every dispatch (up to `capacity`) with GPU timestamps; needs a device created with
   * `timestamps: true` on an adapter with `timestamp-query`. For benchmarks: each dispatch gets its own
   * pass while profiling.
   */
  startProfile(capacity = 2048): void {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 2048) {
      throw new RangeError(
        `startProfile: capacity must be an integer in 1..2048 (4096 queries per set), got ${capacity}`,
      );
    }
    if (!this.device.features.has("timestamp-query")) {
      throw new Error("webgpu: this device has no timestamp-query (create it with timestamps: true)");
    }
    this.flush();
    this.#profile = {
      querySet: this.device.createQuerySet({ type: "timestamp", count: 2 * capacity }),
      resolve: this.device.createBuffer({
        size: 16 * capacity,
        usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
      }),
      labels: [],
      capacity,
    };
  }

  /**
   * Stop profiling; GPU nanoseconds per pipeline label (summed) and dispatch counts, busiest first.
   * `spanNs` on the result: from the first timed dispatch's start to the last one's end, so
   * `spanNs - sum(ns)` is GPU time between the kernels (clears, copies, barriers, idle waits).
   */
  async stopProfile(): Promise<ProfileEntry[] & { spanNs: number }> {
    const profile = this.#profile;
    if (!profile) throw new Error("webgpu: stopProfile() without startProfile()");
    this.#profile = null;
    const n = profile.labels.length;
    const out = new Map<string, { ns: number; dispatches: number }>();
    let spanNs = 0;
    if (n > 0) {
      this.encoder().resolveQuerySet(profile.querySet, 0, 2 * n, profile.resolve, 0);
      const stamps = new BigUint64Array(await this.readBytes(profile.resolve, 16 * n));
      profile.labels.forEach((label, i) => {
        const e = out.get(label) ?? { ns: 0, dispatches: 0 };
        e.ns += Number(stamps[2 * i + 1] - stamps[2 * i]);
        e.dispatches++;
        out.set(label, e);
      });
      spanNs = Number(stamps[2 * n - 1] - stamps[0]);
    }
    profile.querySet.destroy();
    profile.resolve.destroy();
    const entries = [...out.entries()].map(([label, e]) => ({ label, ...e })).sort((a, b) => b.ns - a.ns);
    return Object.assign(entries, { spanNs });
  }

  /** Wait until the device finished everything submitted. */
  async sync(): Promise<void> {
    this.flush();
    this.waits.syncs++;
    await this.device.queue.onSubmittedWorkDone();
    this.#deviceIdle = true;
    this.throwErrors();
  }
}

/** `count` 32-bit words seen as u32, i32 and f32 (platform byte order: little-endian, as WebGPU's). */
function scratchWords(count: number): { u: Uint32Array; i: Int32Array; f: Float32Array } {
  const buffer = new ArrayBuffer(count * 4);
  return { u: new Uint32Array(buffer), i: new Int32Array(buffer), f: new Float32Array(buffer) };
}

/** The buffer a binding binds (all of it or a range). */
export function bufferOf(binding: Binding): GPUBuffer {
  return binding instanceof GPUBuffer ? binding : binding.buffer;
}

/** A cache key of `bytes` for `usage`: the length and an FNV-1a hash of the 32-bit words (equal data, equal key). */
export function contentKey(usage: string, bytes: Uint8Array): string {
  let h = 0x811c9dc5;
  const words = bytes.byteLength >>> 2;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < words; i++) h = Math.imul(h ^ view.getUint32(i * 4, true), 0x01000193);
  for (let i = words * 4; i < bytes.byteLength; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return `${usage}:${bytes.byteLength}:${h >>> 0}`;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  const words = a.byteLength >>> 2;
  if (a.byteOffset % 4 === 0 && b.byteOffset % 4 === 0) {
    const wa = new Int32Array(a.buffer, a.byteOffset, words);
    const wb = new Int32Array(b.buffer, b.byteOffset, words);
    for (let i = 0; i < words; i++) if (wa[i] !== wb[i]) return false;
  } else {
    for (let i = 0; i < words * 4; i++) if (a[i] !== b[i]) return false;
  }
  for (let i = words * 4; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** One pipeline's share of a profile: its label, summed GPU nanoseconds and dispatch count. */
export interface ProfileEntry {
  /** Pipeline label (the cache key). */
  label: string;
  /** GPU nanoseconds over all its dispatches. */
  ns: number;
  /** Dispatches timed. */
  dispatches: number;
}

/** Workgroup counts `[x, y]` covering `groups` workgroups within the per-dimension limit. */
export function grid(groups: number): [number, number] {
  const g = Math.max(1, groups);
  if (g <= MAX_GROUPS_PER_DIM) return [g, 1];
  const y = Math.ceil(g / MAX_GROUPS_PER_DIM);
  return [Math.ceil(g / y), y];
}

/** WGSL lines computing the flat invocation index `idx` of a {@linkcode grid} dispatch of `wg`-wide groups. */
export function flatIndex(wg: number): string {
  return `let idx = (gid.y * nwg.x + gid.x) * ${wg}u + lid.x;`;
}

/** WGSL entry-point parameters matching {@linkcode flatIndex}. */
export const FLAT_PARAMS =
  "@builtin(workgroup_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>";

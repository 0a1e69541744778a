/**
 * WGSL generator of register-tile products fed from workgroup memory, for the chunk kernels that run
 * `STAGED_WG` (16 x 16) invocations, or fewer (a grid's `invocations`: a kernel with few blocks, whose idle
 * invocations would repeat a block's products): `out[row, col] += sum_k A[k, row] B[k, col]`, `k` walked in
 * slices `STAGE_DEPTH` deep.
 *
 * Per slice, every operand is staged into one workgroup array `stage` (vec4 entries) as a
 * `STAGE_DEPTH x width` block, depth row `kk` at `kk * stagedRowFloats` floats: the loads follow the operand's
 * global layout, so consecutive invocations read consecutive floats, and an entry outside the operand is
 * staged as 0 (its products vanish; the kernel skips those rows and columns at its stores); a `quad` operand is loaded 4 consecutive floats at a time (one 16-byte load instead of 4). Then each
 * invocation adds a 4 x 4 block of every product per depth row: one vec4 of `A` (4 rows) and one of `B`
 * (4 columns) read from workgroup memory feed 16 FMAs. `A` may also be a workgroup array the kernel
 * filled itself (`WorkgroupOperand`, or a `FunctionOperand` for a layout of its own). A product may scale each
 * term by a factor of its output entry and depth index (`TermWeight`: a function of a third staged operand, such as
 * a decay `exp(P_t - P_s)` per value column). An invocation holds
 * `tilesPerInvocation(grid)` blocks of a grid, as many blocks apart as the kernel has invocations, so one
 * slice staged serves all of them.
 *
 * Preconditions: widths and grid sizes are multiples of 4; the loop bound is uniform over the
 * workgroup (a compile-time size or one read from the uniform block), as the barriers in it need.
 *
 * @module
 */

/** Invocations per workgroup of the staged-tile kernels (16 x 16). */
export const STAGED_WG = 256;

/** Depth of a staged slice: depth rows of every operand staged per step of a loop. */
export const STAGE_DEPTH = 8;

/** `n` rounded up to a multiple of 4 (vec4 rows of workgroup memory). */
export function roundUp4(n: number): number {
  return Math.ceil(n / 4) * 4;
}

/** An operand staged per slice: entry `(k, i)`, `k` the global depth index, `i < width`. */
export interface StagedOperand {
  /** Floats per depth row in workgroup memory, a multiple of 4 (4 consecutive entries are one vec4). */
  readonly width: number;
  /** The index that runs along consecutive global addresses, `k` (`depth`) or `i` (`width`): the loads follow it. */
  readonly along: "depth" | "width";
  /** WGSL value of entry `(k, i)` (or of 4 entries: `quad`), read only where `valid` holds. */
  readonly value: string;
  /** WGSL condition on `k` and `i`; where it fails the entry is 0. */
  readonly valid: string;
  /**
   * Whether `value` is the WGSL vec4 of the 4 entries from `(k, i)` along the operand's global rows (`(k..k+3, i)`
   * where the loads run along the depth, `(k, i..i+3)` along the width; that index a multiple of 4), one 16-byte
   * load: the slice is then staged 4 entries per load instead of one, from the same addresses. Read where `valid`
   * holds at the first entry: the entries past it where `valid` fails must be 0 in the vec4 (as the masked `qn4`,
   * `xp4`, ... of `chunk_wgsl.ts` give past a row's end).
   */
  readonly quad?: boolean;
}

/** An `A` operand the kernel holds in a workgroup array of vec4: depth row `k` at `k * width4` vec4 entries. */
export interface WorkgroupOperand {
  /** The array's name. */
  readonly array: string;
  /** vec4 entries per depth row. */
  readonly width4: number;
}

/**
 * An `A` operand the kernel holds in a workgroup array of a layout of its own, read through a WGSL function
 * `fn(k: u32, rowBlock: u32) -> vec4<f32>`: entries `(k, 4 rowBlock .. 4 rowBlock + 3)`.
 */
export interface FunctionOperand {
  /** The function's name. */
  readonly function: string;
}

/** The output of a product, `rows x cols` (multiples of 4), as 4 x 4 blocks spread over the invocations. */
export interface TileGrid {
  /** WGSL name prefix of the invocation's block indices (`<name>Row<p>`, `<name>Col<p>`, `<name>On<p>`). */
  readonly name: string;
  /** Output rows (entries of `A`'s depth rows). */
  readonly rows: number;
  /** Output columns (entries of `B`'s depth rows). */
  readonly cols: number;
  /**
   * Only the blocks on and below the diagonal of a square grid (`rows = cols`), row by row: for a product whose
   * upper blocks nobody reads. Invocations past the blocks skip the products (whole idle warps issue nothing).
   */
  readonly lower?: boolean;
  /** Invocations of the kernel that computes it ({@linkcode STAGED_WG} when absent); a loop's grids agree. */
  readonly invocations?: number;
}

/** One product of a staged loop: accumulators `<acc><p>_<r>` (vec4: row `r` of block `p`, its 4 columns). */
export interface TileProduct {
  /** WGSL name prefix of the accumulators. */
  readonly acc: string;
  /** The output grid. */
  readonly grid: TileGrid;
  /** `A`: the index of a staged operand of the loop, or a workgroup array (plain or read through a function). */
  readonly a: number | WorkgroupOperand | FunctionOperand;
  /** `B`: the index of a staged operand of the loop. */
  readonly b: number;
  /**
   * `A[k, row] = 0` for every `k > row` (a lower triangular factor `A^T`): a block skips the slices past its last
   * row (the invocations of one row block then skip together).
   */
  readonly lowerA?: boolean;
  /**
   * A factor of each term that depends on the output entry and the depth index: the product is then
   * `out[row, col] += sum_k A[k, row] f(k, row, col) B[k, col]`, with `f` a WGSL vec4 (the block row's 4 columns) of
   * the vec4 `v` of staged operand `operand` at depth row `k` and the block's columns (laid out as `B`).
   */
  readonly weight?: TermWeight;
}

/**
 * The per-term factor of a {@linkcode TileProduct}: `factor(p, r, v)` is the WGSL vec4 that multiplies the terms of
 * row `r` of block `p`, `v` the WGSL vec4 of operand `operand` at the slice's depth row and the block's columns.
 */
export interface TermWeight {
  /** The index of a staged operand of the loop, read at the block's columns as `B` is. */
  readonly operand: number;
  /** WGSL vec4 factor of the terms of row `r` of block `p`, from the staged vec4 `v`. */
  readonly factor: (p: number, r: number, v: string) => string;
}

/** 4 x 4 blocks of a grid each invocation holds. */
export function tilesPerInvocation(grid: TileGrid): number {
  return Math.ceil(blocksOf(grid) / invocationsOf(grid));
}

/** Invocations of the kernel that computes `grid`. */
export function invocationsOf(grid: TileGrid): number {
  return grid.invocations ?? STAGED_WG;
}

function blocksOf(grid: TileGrid): number {
  if (grid.rows % 4 || grid.cols % 4) {
    throw new RangeError(
      `tile grid ${grid.name} is ${grid.rows} x ${grid.cols}: both must be multiples of 4`,
    );
  }
  if (grid.lower) {
    if (grid.rows !== grid.cols) {
      throw new RangeError(`lower tile grid ${grid.name} is ${grid.rows} x ${grid.cols}: it must be square`);
    }
    const n = grid.rows / 4;
    return (n * (n + 1)) / 2;
  }
  return (grid.rows / 4) * (grid.cols / 4);
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const XYZW = ["x", "y", "z", "w"];

/**
 * WGSL `let`s of the invocation's blocks of `grid`: block `p` is `lid + p * N` (`N` its kernel's invocations), its row block
 * `<name>Row<p>` and column block `<name>Col<p>` (column blocks run fastest over the invocations, so
 * neighbours read neighbouring vec4 of `B` and share the vec4 of `A`), and `<name>On<p>` whether it
 * exists (a block past the grid repeats the last one for its reads and stores nothing).
 */
export function gridBlocks(grid: TileGrid): string {
  const nb = blocksOf(grid);
  const nc = grid.cols / 4;
  const n = invocationsOf(grid);
  if (grid.lower) return lowerGridBlocks(grid, nb);
  return range(tilesPerInvocation(grid)).map((p) => {
    const g = `${grid.name}`;
    return `let ${g}Block${p} = min(lid + ${p * n}u, ${nb - 1}u);
  let ${g}Row${p} = ${g}Block${p} / ${nc}u;
  let ${g}Col${p} = ${g}Block${p} % ${nc}u;
  let ${g}On${p} = ${(p + 1) * n <= nb ? "true" : `lid + ${p * n}u < ${nb}u`};`;
  }).join("\n  ");
}

/**
 * `gridBlocks` of a `lower` grid: block `b` is row block `R` with `R (R + 1) / 2 <= b < (R + 1) (R + 2) / 2`
 * (from a float square root, then corrected by one either way), column block `b - R (R + 1) / 2 <= R`.
 */
function lowerGridBlocks(grid: TileGrid, nb: number): string {
  const g = grid.name;
  const n = invocationsOf(grid);
  return range(tilesPerInvocation(grid)).map((p) =>
    `let ${g}Block${p} = min(lid + ${p * n}u, ${nb - 1}u);
  var ${g}Row${p} = u32((sqrt(8.0 * f32(${g}Block${p}) + 1.0) - 1.0) * 0.5);
  if (${g}Row${p} * (${g}Row${p} + 1u) / 2u > ${g}Block${p}) { ${g}Row${p} -= 1u; }
  if ((${g}Row${p} + 1u) * (${g}Row${p} + 2u) / 2u <= ${g}Block${p}) { ${g}Row${p} += 1u; }
  let ${g}Col${p} = ${g}Block${p} - ${g}Row${p} * (${g}Row${p} + 1u) / 2u;
  let ${g}On${p} = ${(p + 1) * n <= nb ? "true" : `lid + ${p * n}u < ${nb}u`};`
  ).join("\n  ");
}

/** WGSL declarations of a product's accumulators, zero. */
export function declareAccumulators(product: TileProduct): string {
  return range(tilesPerInvocation(product.grid)).flatMap((p) =>
    range(4).map((r) => `var ${product.acc}${p}_${r} = vec4<f32>(0.0);`)
  ).join(" ");
}

/** `f(p, r)` for every row `r` of every block `p` of the invocation's tiles of `grid`, joined as WGSL lines. */
export function eachTileRow(grid: TileGrid, f: (p: number, r: number) => string): string {
  return range(tilesPerInvocation(grid)).flatMap((p) => range(4).map((r) => f(p, r))).join("\n  ");
}

/** WGSL component `c` (0..3) of a vec4 expression. */
export function component(c: number): string {
  return XYZW[c];
}

/**
 * Floats per depth row of a staged operand in workgroup memory: its width, plus 4 where the loads run along
 * the depth (consecutive invocations then store `STAGE_DEPTH` depth rows apart: the padding puts those rows in
 * different banks).
 */
export function stagedRowFloats(o: Pick<StagedOperand, "width" | "along">): number {
  if (o.width % 4) throw new RangeError(`staged operand width ${o.width}: must be a multiple of 4`);
  return o.along === "depth" ? o.width + 4 : o.width;
}

/** Floats of `stage` a loop over `operands` needs. */
export function stagedFloats(operands: readonly Pick<StagedOperand, "width" | "along">[]): number {
  return STAGE_DEPTH * operands.reduce((sum, o) => sum + stagedRowFloats(o), 0);
}

/**
 * The loads that stage one operand's slice from vec4 entry `offset` of `stage`: `count` of them; for load `e`,
 * `lets` (its WGSL indices `kk`, `i`), `type`, `valid` and `value` (what it reads, at depth `k` from its depth row `kk`)
 * and `store` (the WGSL that puts its value `v` into `stage`: 4 entries of a `quad` operand, 4 scalar stores into
 * consecutive depth rows where its loads run along the depth, one vec4 store where they run along the width; else
 * one entry).
 */
function stagedLoad(
  o: StagedOperand,
  offset: number,
): { count: number; lets: string; type: string; valid: string; value: string; store: string } {
  const rowVec4 = stagedRowFloats(o) / 4;
  const read = { valid: o.valid, value: o.value };
  if (o.quad && o.along === "depth") {
    const quads = STAGE_DEPTH / 4;
    return {
      count: quads * o.width,
      lets: `let kk = 4u * (e % ${quads}u);
      let i = e / ${quads}u;`,
      type: "vec4<f32>",
      ...read,
      store: range(4).map((m) =>
        `stage[${offset}u + (kk + ${m}u) * ${rowVec4}u + i / 4u][i % 4u] = v.${XYZW[m]};`
      )
        .join("\n      "),
    };
  }
  if (o.quad) {
    return {
      count: (STAGE_DEPTH * o.width) / 4,
      lets: `let kk = e / ${o.width / 4}u;
      let i = 4u * (e % ${o.width / 4}u);`,
      type: "vec4<f32>",
      ...read,
      store: `stage[${offset}u + kk * ${rowVec4}u + i / 4u] = v;`,
    };
  }
  const [kk, i] = o.along === "depth"
    ? [`e % ${STAGE_DEPTH}u`, `e / ${STAGE_DEPTH}u`]
    : [`e / ${o.width}u`, `e % ${o.width}u`];
  return {
    count: STAGE_DEPTH * o.width,
    lets: `let kk = ${kk};
      let i = ${i};`,
    type: "f32",
    ...read,
    store: `stage[${offset}u + kk * ${rowVec4}u + i / 4u][i % 4u] = v;`,
  };
}

/** WGSL zero of a load's type. */
function zeroOf(type: string): string {
  return type === "f32" ? "0.0" : `${type}(0.0)`;
}

/**
 * WGSL of the loads `first .. first + count - 1` of a slice's sequence (`body` stages load `e = g - first` of its
 * operand), load `g` taken by invocation `g % wg`: per round of `wg` loads that holds some, one guarded block.
 */
function pooledLoads(first: number, count: number, wg: number, body: (round: number) => string): string {
  return loadRounds(first, count, wg).map((r) => {
    const [lo, hi] = [Math.max(first, r * wg), Math.min(first + count, (r + 1) * wg)];
    const guard = [lo > r * wg ? `g >= ${lo}u` : "", hi < (r + 1) * wg ? `g < ${hi}u` : ""].filter(Boolean);
    const inner = `let e = g - ${first}u;
      ${body(r)}`;
    return `{
      let g = lid + ${r * wg}u;
      ${
      guard.length
        ? `if (${guard.join(" && ")}) {
      ${inner}
      }`
        : inner
    }
    }`;
  }).join("\n    ");
}

/** The rounds of `wg` loads that hold some of the loads `first .. first + count - 1` of a slice's sequence. */
function loadRounds(first: number, count: number, wg: number): number[] {
  return range(Math.ceil((first + count) / wg)).filter((r) => (r + 1) * wg > first);
}

/**
 * WGSL of one staged loop: `for d0 in from, from + STAGE_DEPTH, .. < bound` (`from` a WGSL multiple of
 * `STAGE_DEPTH`, 0 unless given), stage `operands` (depth `k = d0 + kk`),
 * barrier, accumulate every product over the slice, barrier. The accumulators and the grid blocks
 * must be declared before (`declareAccumulators`, `gridBlocks`). The loads spread over the invocations of
 * the products' grids (which must agree), the operands' loads in one sequence over the invocations (an operand with
 * fewer loads than invocations leaves the others to the next one's: no invocation takes more than
 * `ceil(loads / invocations)` of the slice's; on the H200, 8x4096x8x64, 17:25 UTC, against each operand's loads from
 * the first invocation on: falcon3a fwd+bwd 6.89 -> 6.71 ms, falcon1 9.89 -> 9.86, falcon1a 4.97 -> 4.98; the delta
 * rules' solve_input_grads 1.37 -> 1.26 ms at 17:07).
 *
 * Each invocation reads its loads of the next slice into registers (`pf<operand>_<round>`) right after the barrier
 * that publishes the current one, and stores them into `stage` at the top of the next step: the global reads of
 * slice `s + 1` are in flight while slice `s` is accumulated (the same barriers, a register per load of a slice
 * more). On the H200 (8x4096x8x64, 2026-12-02 18:55 UTC, against loading each slice after the barrier that ends
 * the one before): falcon1 fwd+bwd 8.66 -> 7.53 ms and forward 2.24 -> 2.03 ms of device span, falcon1a 4.76 ->
 * 4.18 and 1.13 -> 0.96, falcon3a 6.45 -> 6.20; `readout` 0.53 -> 0.33 ms, `pair_column_grads` 1.35 -> 0.90,
 * `solve_input_grads` 1.16 -> 1.00.
 */
export function stagedLoop(
  bound: string,
  operands: readonly StagedOperand[],
  products: readonly TileProduct[],
  from = "0u",
): string {
  const invocations = new Set(products.map((pr) => invocationsOf(pr.grid)));
  if (invocations.size !== 1) {
    throw new RangeError(
      `staged loop over grids of ${[...invocations].join(" and ")} invocations: they must agree`,
    );
  }
  const [wg] = invocations;
  const offsets: number[] = [];
  let floats = 0;
  for (const o of operands) {
    offsets.push(floats / 4);
    floats += STAGE_DEPTH * stagedRowFloats(o);
  }
  let pool = 0;
  const pieces = operands.map((o, n) => {
    const load = stagedLoad(o, offsets[n]);
    const first = pool;
    pool += load.count;
    return { ...load, first, register: (r: number) => `pf${n}_${r}` };
  });
  type Piece = (typeof pieces)[number];
  // load e of a piece from depth `base` (a WGSL name) on: its value, 0 where invalid, into `target` (declared by
  // `declare`)
  const read = (piece: Piece, base: string, target: string, declare: string) =>
    `${piece.lets}
      let k = ${base} + kk;
      ${declare}${target} = ${zeroOf(piece.type)};
      if (${piece.valid}) { ${target} = ${piece.value}; }`;
  const each = (body: (piece: Piece, r: number) => string) =>
    pieces.map((piece) => pooledLoads(piece.first, piece.count, wg, (r) => body(piece, r))).join("\n    ");
  const prefetched = each((piece, r) => read(piece, "dn", piece.register(r), ""));
  const stores = each((piece, r) =>
    `${piece.lets}
      let v = ${piece.register(r)};
      ${piece.store}`
  );
  const registers = pieces.flatMap((piece) =>
    loadRounds(piece.first, piece.count, wg).map((r) => `var ${piece.register(r)} = ${zeroOf(piece.type)};`)
  ).join(" ");
  const ref = (src: number | WorkgroupOperand | FunctionOperand, kk: number, block: string) =>
    typeof src === "number"
      ? `stage[${offsets[src] + (kk * stagedRowFloats(operands[src])) / 4}u + ${block}]`
      : "array" in src
      ? `${src.array}[(d0 + ${kk}u) * ${src.width4}u + ${block}]`
      : `${src.function}(d0 + ${kk}u, ${block})`;
  const accumulate = (pr: TileProduct, p: number, kk: number) => {
    const g = pr.grid.name;
    const a = `${pr.acc}a${p}`;
    const b = `${pr.acc}b${p}`;
    if (pr.weight) return weightedAccumulate(pr, pr.weight, p, kk, a, b);
    return `{
      let ${a} = ${ref(pr.a, kk, `${g}Row${p}`)};
      let ${b} = ${ref(pr.b, kk, `${g}Col${p}`)};
      ${range(4).map((r) => `${pr.acc}${p}_${r} += ${a}.${XYZW[r]} * ${b};`).join(" ")}
    }`;
  };
  // a product with a per-term factor: the factor's operand read at the block's columns, each row's terms scaled by it
  const weightedAccumulate = (
    pr: TileProduct,
    weight: TermWeight,
    p: number,
    kk: number,
    a: string,
    b: string,
  ) => {
    const g = pr.grid.name;
    const v = `${pr.acc}v${p}`;
    return `{
      let ${a} = ${ref(pr.a, kk, `${g}Row${p}`)};
      let ${b} = ${ref(pr.b, kk, `${g}Col${p}`)};
      let ${v} = ${ref(weight.operand, kk, `${g}Col${p}`)};
      ${
      range(4).map((r) => `${pr.acc}${p}_${r} += ${a}.${XYZW[r]} * (${weight.factor(p, r, v)} * ${b});`)
        .join("\n      ")
    }
    }`;
  };
  // the conditions under which a block of a product takes the slice: a lower grid's invocations past its blocks
  // skip the products, and so do the blocks of a lowerA product above the slice
  const conditions = (pr: TileProduct, p: number) => {
    const g = pr.grid.name;
    return [
      ...(pr.grid.lower && (p + 1) * wg > blocksOf(pr.grid) ? [`${g}On${p}`] : []),
      ...(pr.lowerA ? [`${g}Row${p} * 4u + 3u >= d0`] : []),
    ];
  };
  // a lowerA block walks the whole slice under one condition
  const walksSlice = (pr: TileProduct) => pr.lowerA === true;
  const guarded = (pr: TileProduct, p: number, body: string) => {
    const c = conditions(pr, p);
    return c.length ? `if (${c.join(" && ")}) ${body}` : body;
  };
  const plain = products.filter((pr) => !walksSlice(pr));
  const steps = range(STAGE_DEPTH).map((kk) =>
    plain.map((pr) =>
      range(tilesPerInvocation(pr.grid)).map((p) => guarded(pr, p, accumulate(pr, p, kk))).join("\n    ")
    ).join("\n    ")
  ).concat(
    products.filter(walksSlice).flatMap((pr) =>
      range(tilesPerInvocation(pr.grid)).map((p) =>
        guarded(
          pr,
          p,
          `{
      ${range(STAGE_DEPTH).map((kk) => accumulate(pr, p, kk)).join("\n      ")}
    }`,
        )
      )
    ),
  ).join("\n    ");
  return `{
  ${registers}
  // the first slice into the registers
  {
    let dn = ${from};
    ${prefetched}
  }
  for (var d0 = ${from}; d0 < ${bound}; d0 += ${STAGE_DEPTH}u) {
    ${stores}
    workgroupBarrier();
    // the next slice's reads, in flight while this one is accumulated
    if (d0 + ${STAGE_DEPTH}u < ${bound}) {
      let dn = d0 + ${STAGE_DEPTH}u;
    ${prefetched}
    }
    ${steps}
    workgroupBarrier();
  }
  }`;
}

/**
 * Scalar workgroup arrays rewritten as arrays of 4-vectors, for the software adapter's shader compiler.
 *
 * Mesa's llvmpipe (the CI adapter) takes time superlinear in the ELEMENT count of a workgroup array to compile a
 * shader that declares it: a trivial kernel with `array<f32, 3000>` took 24.7 s there, with `array<f32, 750>`
 * 1.3 s, with `array<vec4<f32>, 750>` (the 3000 floats) 2.6 s (docs/performance.md, ninth round). So kernels with a few thousand floats of scalar arrays declare them packed: element `i` of `name` at
 * `name[i >> 2][i & 3]`. The floats, their addresses and the arithmetic are the same; only the element count the
 * compiler sees is a quarter.
 *
 * @module
 */

/** The declaration of a scalar workgroup array (element type, count) in WGSL. */
const declaration = (name: string) => new RegExp(`var<workgroup> ${name}: array<(f32|u32|i32), (\\w+)>;`);

/**
 * `wgsl` with the scalar workgroup arrays `names` declared as arrays of 4-vectors (the count rounded up to a
 * multiple of 4) and every access `name[i]` rewritten as `name[(i) >> 2u][(i) & 3u]`; an access written
 * `name.v4[i]` reads elements `4 i .. 4 i + 3` as one 4-vector (`name[i]`). An array's count must be a number, and
 * its index expressions must not hold brackets: a RangeError names the array otherwise.
 */
export function packWorkgroupArrays(wgsl: string, names: readonly string[]): string {
  let out = wgsl;
  for (const name of names) {
    const decl = out.match(declaration(name));
    if (!decl) throw new RangeError(`workgroup array ${name}: no scalar declaration to pack`);
    const count = Number(decl[2]);
    if (!Number.isInteger(count)) {
      throw new RangeError(`workgroup array ${name}: its count ${decl[2]} is not a number`);
    }
    out = out.replace(decl[0], `var<workgroup> ${name}: array<vec4<${decl[1]}>, ${Math.ceil(count / 4)}>;`);
    const access = new RegExp(`\\b${name}\\[([^\\[\\]]+)\\]`, "g");
    const accesses = out.match(new RegExp(`\\b${name}\\[`, "g"))?.length ?? 0;
    let rewritten = 0;
    out = out.replace(access, (_, index: string) => {
      rewritten++;
      return `${name}[(${index}) >> 2u][(${index}) & 3u]`;
    });
    if (rewritten !== accesses) {
      throw new RangeError(
        `workgroup array ${name}: ${accesses - rewritten} of ${accesses} accesses hold brackets`,
      );
    }
    out = out.replaceAll(`${name}.v4[`, `${name}[`);
  }
  return out;
}

import { strictEqual as assertEquals } from "node:assert/strict";
import {
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
  narrowF32,
  roundToOddF32,
  widenToF32,
} from "./dtype.ts";

/** The f32 value of raw f32 bits. */
function f32(bits: number): number {
  return new Float32Array(new Uint32Array([bits]).buffer)[0];
}

Deno.test("f32ToF16Bits() rounds to nearest even at the halfway points", () => {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1)
  assertEquals(f32ToF16Bits(1 + 2 ** -11), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): rounds up
  assertEquals(f32ToF16Bits(1 + 3 * 2 ** -11), 0x3c02);
  // just above halfway rounds up
  assertEquals(f32ToF16Bits(f32(0x3f801001)), 0x3c01);
  assertEquals(f32ToF16Bits(-2), 0xc000);
  assertEquals(f32ToF16Bits(65504), 0x7bff);
  // 65520 is halfway between 65504 and 65536 (out of range): ties to even = infinity
  assertEquals(f32ToF16Bits(65520), 0x7c00);
  assertEquals(f32ToF16Bits(Infinity), 0x7c00);
  assertEquals(f32ToF16Bits(-0), 0x8000);
  assertEquals(f32ToF16Bits(NaN) & 0x7c00, 0x7c00);
  assertEquals((f32ToF16Bits(NaN) & 0x3ff) !== 0, true);
});

Deno.test("f32ToF16Bits() rounds into and out of the subnormal range", () => {
  assertEquals(f32ToF16Bits(2 ** -24), 0x0001); // smallest subnormal
  assertEquals(f32ToF16Bits(2 ** -25), 0x0000); // halfway to 0: ties to even (0)
  assertEquals(f32ToF16Bits(3 * 2 ** -25), 0x0002); // halfway between 1 and 2 ulps: even (2)
  assertEquals(f32ToF16Bits(2 ** -14 - 2 ** -25), 0x0400); // rounds up into the smallest normal
  assertEquals(f32ToF16Bits(1e-10), 0x0000);
});

Deno.test("f16BitsToF32() inverts f32ToF16Bits() on every finite f16 value", () => {
  for (let bits = 0; bits < 0x10000; bits++) {
    if ((bits & 0x7c00) === 0x7c00) continue; // inf and NaN
    assertEquals(f32ToF16Bits(f16BitsToF32(bits)), bits, `f16 bits 0x${bits.toString(16)}`);
  }
});

Deno.test("f32ToBf16Bits() rounds to nearest even and keeps NaN a NaN", () => {
  assertEquals(f32ToBf16Bits(f32(0x3f808000)), 0x3f80); // halfway, even stays
  assertEquals(f32ToBf16Bits(f32(0x3f818000)), 0x3f82); // halfway, odd rounds up
  assertEquals(f32ToBf16Bits(f32(0x3f808001)), 0x3f81);
  assertEquals(f32ToBf16Bits(f32(0x7f7fffff)), 0x7f80); // max f32 rounds to infinity
  assertEquals(f32ToBf16Bits(-1.5), 0xbfc0);
  const nan = f32ToBf16Bits(NaN);
  assertEquals(Number.isNaN(bf16BitsToF32(nan)), true);
});

Deno.test("bf16BitsToF32() inverts f32ToBf16Bits() on every finite bf16 value", () => {
  for (let bits = 0; bits < 0x10000; bits++) {
    if ((bits & 0x7f80) === 0x7f80) continue;
    assertEquals(f32ToBf16Bits(bf16BitsToF32(bits)), bits, `bf16 bits 0x${bits.toString(16)}`);
  }
});

Deno.test("narrowF32() reports the largest relative change and counts overflows", () => {
  const values = new Float32Array([1, 1 + 2 ** -11, 0, -3, 1e-3]);
  const f16 = narrowF32(values, "f16");
  const back = widenToF32(f16.bits, "f16");
  let expected = 0;
  for (let i = 0; i < values.length; i++) {
    if (values[i] !== 0) expected = Math.max(expected, Math.abs(back[i] - values[i]) / Math.abs(values[i]));
  }
  assertEquals(f16.maxRelativeChange, expected);
  assertEquals(f16.maxRelativeChange > 0 && f16.maxRelativeChange <= 2 ** -11, true);
  assertEquals(f16.overflowed, 0);
  const big = narrowF32(new Float32Array([1e5, 2]), "f16");
  assertEquals(big.overflowed, 1);
  assertEquals(big.maxRelativeChange, Infinity);
  const bf = narrowF32(new Float32Array([1e5, 2]), "bf16");
  assertEquals(bf.overflowed, 0);
  assertEquals(bf.maxRelativeChange <= 2 ** -8, true);
});

Deno.test("narrowF32() rounds f64 values once (round to odd through f32 avoids double rounding)", () => {
  // just above the f16 halfway point between 1 and 1 + 2^-10: the f32 rounding alone would land
  // exactly on the halfway point and then tie to even (down); rounding once goes up
  const v = 1 + 2 ** -11 + 2 ** -40;
  assertEquals(f32ToF16Bits(Math.fround(v)), 0x3c00, "naive double rounding goes down");
  assertEquals(narrowF32(new Float64Array([v]), "f16").bits[0], 0x3c01);
  assertEquals(narrowF32(new Float64Array([-v]), "f16").bits[0], 0xbc01);
  // the same for bf16 (8 significand bits)
  const w = 1 + 2 ** -8 + 2 ** -40;
  assertEquals(narrowF32(new Float64Array([w]), "bf16").bits[0], 0x3f81);
  // exact halfway in f64 still ties to even
  assertEquals(narrowF32(new Float64Array([1 + 2 ** -11]), "f16").bits[0], 0x3c00);
  assertEquals(roundToOddF32(1 + 2 ** -40), 1 + 2 ** -23);
  assertEquals(roundToOddF32(1.5), 1.5);
});

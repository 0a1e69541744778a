/**
 * `exp` on two float64 lanes that returns, lane by lane, exactly the bits of the standard library's
 * scalar `Math.exp` (AssemblyScript 0.28 `NativeMath.exp`, which at `-O3` is `exp_lut` of
 * std/assembly/util/math.ts, from ARM's optimized-routines): the same table (copied below), the same
 * operations in the same order, no fused multiply-add. A pair with a lane outside the table path
 * (`|x| < 2^-54`, `|x| >= 512`, infinities, NaN) goes to the scalar function lane by lane.
 *
 * This lets the element-wise kernels evaluate sigmoid and SiLU two lanes at a time, branch-free,
 * without changing a single result (`dense_vector_test.ts` checks the lanes against the scalar path).
 */

import { sigmoid } from "./elementwise";

/** `2^(i/128)` as `[tail_i, bits_i - (i << 45)]` pairs (EXP_DATA_TAB of std/assembly/util/math.ts). */
// deno-fmt-ignore
const EXP_TABLE = memory.data<u64>([
  0x0000000000000000, 0x3FF0000000000000,
  0x3C9B3B4F1A88BF6E, 0x3FEFF63DA9FB3335,
  0xBC7160139CD8DC5D, 0x3FEFEC9A3E778061,
  0xBC905E7A108766D1, 0x3FEFE315E86E7F85,
  0x3C8CD2523567F613, 0x3FEFD9B0D3158574,
  0xBC8BCE8023F98EFA, 0x3FEFD06B29DDF6DE,
  0x3C60F74E61E6C861, 0x3FEFC74518759BC8,
  0x3C90A3E45B33D399, 0x3FEFBE3ECAC6F383,
  0x3C979AA65D837B6D, 0x3FEFB5586CF9890F,
  0x3C8EB51A92FDEFFC, 0x3FEFAC922B7247F7,
  0x3C3EBE3D702F9CD1, 0x3FEFA3EC32D3D1A2,
  0xBC6A033489906E0B, 0x3FEF9B66AFFED31B,
  0xBC9556522A2FBD0E, 0x3FEF9301D0125B51,
  0xBC5080EF8C4EEA55, 0x3FEF8ABDC06C31CC,
  0xBC91C923B9D5F416, 0x3FEF829AAEA92DE0,
  0x3C80D3E3E95C55AF, 0x3FEF7A98C8A58E51,
  0xBC801B15EAA59348, 0x3FEF72B83C7D517B,
  0xBC8F1FF055DE323D, 0x3FEF6AF9388C8DEA,
  0x3C8B898C3F1353BF, 0x3FEF635BEB6FCB75,
  0xBC96D99C7611EB26, 0x3FEF5BE084045CD4,
  0x3C9AECF73E3A2F60, 0x3FEF54873168B9AA,
  0xBC8FE782CB86389D, 0x3FEF4D5022FCD91D,
  0x3C8A6F4144A6C38D, 0x3FEF463B88628CD6,
  0x3C807A05B0E4047D, 0x3FEF3F49917DDC96,
  0x3C968EFDE3A8A894, 0x3FEF387A6E756238,
  0x3C875E18F274487D, 0x3FEF31CE4FB2A63F,
  0x3C80472B981FE7F2, 0x3FEF2B4565E27CDD,
  0xBC96B87B3F71085E, 0x3FEF24DFE1F56381,
  0x3C82F7E16D09AB31, 0x3FEF1E9DF51FDEE1,
  0xBC3D219B1A6FBFFA, 0x3FEF187FD0DAD990,
  0x3C8B3782720C0AB4, 0x3FEF1285A6E4030B,
  0x3C6E149289CECB8F, 0x3FEF0CAFA93E2F56,
  0x3C834D754DB0ABB6, 0x3FEF06FE0A31B715,
  0x3C864201E2AC744C, 0x3FEF0170FC4CD831,
  0x3C8FDD395DD3F84A, 0x3FEEFC08B26416FF,
  0xBC86A3803B8E5B04, 0x3FEEF6C55F929FF1,
  0xBC924AEDCC4B5068, 0x3FEEF1A7373AA9CB,
  0xBC9907F81B512D8E, 0x3FEEECAE6D05D866,
  0xBC71D1E83E9436D2, 0x3FEEE7DB34E59FF7,
  0xBC991919B3CE1B15, 0x3FEEE32DC313A8E5,
  0x3C859F48A72A4C6D, 0x3FEEDEA64C123422,
  0xBC9312607A28698A, 0x3FEEDA4504AC801C,
  0xBC58A78F4817895B, 0x3FEED60A21F72E2A,
  0xBC7C2C9B67499A1B, 0x3FEED1F5D950A897,
  0x3C4363ED60C2AC11, 0x3FEECE086061892D,
  0x3C9666093B0664EF, 0x3FEECA41ED1D0057,
  0x3C6ECCE1DAA10379, 0x3FEEC6A2B5C13CD0,
  0x3C93FF8E3F0F1230, 0x3FEEC32AF0D7D3DE,
  0x3C7690CEBB7AAFB0, 0x3FEEBFDAD5362A27,
  0x3C931DBDEB54E077, 0x3FEEBCB299FDDD0D,
  0xBC8F94340071A38E, 0x3FEEB9B2769D2CA7,
  0xBC87DECCDC93A349, 0x3FEEB6DAA2CF6642,
  0xBC78DEC6BD0F385F, 0x3FEEB42B569D4F82,
  0xBC861246EC7B5CF6, 0x3FEEB1A4CA5D920F,
  0x3C93350518FDD78E, 0x3FEEAF4736B527DA,
  0x3C7B98B72F8A9B05, 0x3FEEAD12D497C7FD,
  0x3C9063E1E21C5409, 0x3FEEAB07DD485429,
  0x3C34C7855019C6EA, 0x3FEEA9268A5946B7,
  0x3C9432E62B64C035, 0x3FEEA76F15AD2148,
  0xBC8CE44A6199769F, 0x3FEEA5E1B976DC09,
  0xBC8C33C53BEF4DA8, 0x3FEEA47EB03A5585,
  0xBC845378892BE9AE, 0x3FEEA34634CCC320,
  0xBC93CEDD78565858, 0x3FEEA23882552225,
  0x3C5710AA807E1964, 0x3FEEA155D44CA973,
  0xBC93B3EFBF5E2228, 0x3FEEA09E667F3BCD,
  0xBC6A12AD8734B982, 0x3FEEA012750BDABF,
  0xBC6367EFB86DA9EE, 0x3FEE9FB23C651A2F,
  0xBC80DC3D54E08851, 0x3FEE9F7DF9519484,
  0xBC781F647E5A3ECF, 0x3FEE9F75E8EC5F74,
  0xBC86EE4AC08B7DB0, 0x3FEE9F9A48A58174,
  0xBC8619321E55E68A, 0x3FEE9FEB564267C9,
  0x3C909CCB5E09D4D3, 0x3FEEA0694FDE5D3F,
  0xBC7B32DCB94DA51D, 0x3FEEA11473EB0187,
  0x3C94ECFD5467C06B, 0x3FEEA1ED0130C132,
  0x3C65EBE1ABD66C55, 0x3FEEA2F336CF4E62,
  0xBC88A1C52FB3CF42, 0x3FEEA427543E1A12,
  0xBC9369B6F13B3734, 0x3FEEA589994CCE13,
  0xBC805E843A19FF1E, 0x3FEEA71A4623C7AD,
  0xBC94D450D872576E, 0x3FEEA8D99B4492ED,
  0x3C90AD675B0E8A00, 0x3FEEAAC7D98A6699,
  0x3C8DB72FC1F0EAB4, 0x3FEEACE5422AA0DB,
  0xBC65B6609CC5E7FF, 0x3FEEAF3216B5448C,
  0x3C7BF68359F35F44, 0x3FEEB1AE99157736,
  0xBC93091FA71E3D83, 0x3FEEB45B0B91FFC6,
  0xBC5DA9B88B6C1E29, 0x3FEEB737B0CDC5E5,
  0xBC6C23F97C90B959, 0x3FEEBA44CBC8520F,
  0xBC92434322F4F9AA, 0x3FEEBD829FDE4E50,
  0xBC85CA6CD7668E4B, 0x3FEEC0F170CA07BA,
  0x3C71AFFC2B91CE27, 0x3FEEC49182A3F090,
  0x3C6DD235E10A73BB, 0x3FEEC86319E32323,
  0xBC87C50422622263, 0x3FEECC667B5DE565,
  0x3C8B1C86E3E231D5, 0x3FEED09BEC4A2D33,
  0xBC91BBD1D3BCBB15, 0x3FEED503B23E255D,
  0x3C90CC319CEE31D2, 0x3FEED99E1330B358,
  0x3C8469846E735AB3, 0x3FEEDE6B5579FDBF,
  0xBC82DFCD978E9DB4, 0x3FEEE36BBFD3F37A,
  0x3C8C1A7792CB3387, 0x3FEEE89F995AD3AD,
  0xBC907B8F4AD1D9FA, 0x3FEEEE07298DB666,
  0xBC55C3D956DCAEBA, 0x3FEEF3A2B84F15FB,
  0xBC90A40E3DA6F640, 0x3FEEF9728DE5593A,
  0xBC68D6F438AD9334, 0x3FEEFF76F2FB5E47,
  0xBC91EEE26B588A35, 0x3FEF05B030A1064A,
  0x3C74FFD70A5FDDCD, 0x3FEF0C1E904BC1D2,
  0xBC91BDFBFA9298AC, 0x3FEF12C25BD71E09,
  0x3C736EAE30AF0CB3, 0x3FEF199BDD85529C,
  0x3C8EE3325C9FFD94, 0x3FEF20AB5FFFD07A,
  0x3C84E08FD10959AC, 0x3FEF27F12E57D14B,
  0x3C63CDAF384E1A67, 0x3FEF2F6D9406E7B5,
  0x3C676B2C6C921968, 0x3FEF3720DCEF9069,
  0xBC808A1883CCB5D2, 0x3FEF3F0B555DC3FA,
  0xBC8FAD5D3FFFFA6F, 0x3FEF472D4A07897C,
  0xBC900DAE3875A949, 0x3FEF4F87080D89F2,
  0x3C74A385A63D07A7, 0x3FEF5818DCFBA487,
  0xBC82919E2040220F, 0x3FEF60E316C98398,
  0x3C8E5A50D5C192AC, 0x3FEF69E603DB3285,
  0x3C843A59AC016B4B, 0x3FEF7321F301B460,
  0xBC82D52107B43E1F, 0x3FEF7C97337B9B5F,
  0xBC892AB93B470DC9, 0x3FEF864614F5A129,
  0x3C74B604603A88D3, 0x3FEF902EE78B3FF6,
  0x3C83C5EC519D7271, 0x3FEF9A51FBC74C83,
  0xBC8FF7128FD391F0, 0x3FEFA4AFA2A490DA,
  0xBC8DAE98E223747D, 0x3FEFAF482D8E67F1,
  0x3C8EC3BC41AA2008, 0x3FEFBA1BEE615A27,
  0x3C842B94C3A9EB32, 0x3FEFC52B376BBA97,
  0x3C8A64A931D185EE, 0x3FEFD0765B6E4540,
  0xBC8E37BAE43BE3ED, 0x3FEFDBFDAD9CBE14,
  0x3C77893B4D91CD9D, 0x3FEFE7C1819E90D8,
  0x3C5305C14160CC89, 0x3FEFF3C22B8F71F1,
]);

const INV_LN2_N: f64 = reinterpret<f64>(0x3FF71547652B82FE) * 128; // 0x1.71547652b82fep0 * N
const NEG_LN2_HI_N: f64 = reinterpret<f64>(0xBF762E42FEFA0000); // -0x1.62e42fefa0000p-8
const NEG_LN2_LO_N: f64 = reinterpret<f64>(0xBD0CF79ABC9E3B3A); // -0x1.cf79abc9e3b3ap-47
const SHIFT: f64 = reinterpret<f64>(0x4338000000000000); // 0x1.8p52
const C2: f64 = reinterpret<f64>(0x3FDFFFFFFFFFFDBD);
const C3: f64 = reinterpret<f64>(0x3FC555555555543C);
const C4: f64 = reinterpret<f64>(0x3FA55555CF172B91);
const C5: f64 = reinterpret<f64>(0x3F81111167A4D017);

/** The bounds of the table path of `exp_lut`: `2^-54 <= |x| < 512` (biased exponents 0x3c9 .. 0x407). */
const TABLE_MIN: f64 = reinterpret<f64>(0x3C90000000000000); // 2^-54
const TABLE_END: f64 = 512;

/** `exp` of both lanes, bit for bit the scalar `Math.exp` of each. */
export function expF64x2(x: v128): v128 {
  const size = f64x2.abs(x);
  // NaN fails both comparisons, so it goes to the scalar function too
  const inTable = v128.and(f64x2.ge(size, f64x2.splat(TABLE_MIN)), f64x2.lt(size, f64x2.splat(TABLE_END)));
  if (!i64x2.all_true(inTable)) {
    const e0 = Math.exp(f64x2.extract_lane(x, 0));
    return f64x2.replace_lane(f64x2.splat(e0), 1, Math.exp(f64x2.extract_lane(x, 1)));
  }
  // exp(x) = 2^(k/N) exp(r), x = k ln2/N + r, |r| <= ln2/2N
  const shift = f64x2.splat(SHIFT);
  let kd = f64x2.add(f64x2.mul(f64x2.splat(INV_LN2_N), x), shift);
  const ki = kd; // the bits of kd before the shift comes off: k in the low bits
  kd = f64x2.sub(kd, shift);
  const r = f64x2.add(
    f64x2.add(x, f64x2.mul(kd, f64x2.splat(NEG_LN2_HI_N))),
    f64x2.mul(kd, f64x2.splat(NEG_LN2_LO_N)),
  );
  // 2^(k/N) ~= scale (1 + tail): table pair k mod N (16 bytes each), scale bits + (k << 45)
  const offsets = i64x2.shl(v128.and(ki, i64x2.splat(127)), 4);
  const at0 = EXP_TABLE + <usize> i64x2.extract_lane(offsets, 0);
  const at1 = EXP_TABLE + <usize> i64x2.extract_lane(offsets, 1);
  const tail = v128.load64_lane(at1, v128.load64_zero(at0), 1);
  const scale = i64x2.add(v128.load64_lane(at1 + 8, v128.load64_zero(at0 + 8), 1), i64x2.shl(ki, 45));
  const r2 = f64x2.mul(r, r);
  // tail + r + r2 (C2 + r C3) + r2 r2 (C4 + r C5), left to right
  const p23 = f64x2.add(f64x2.splat(C2), f64x2.mul(r, f64x2.splat(C3)));
  const p45 = f64x2.add(f64x2.splat(C4), f64x2.mul(r, f64x2.splat(C5)));
  const tmp = f64x2.add(f64x2.add(f64x2.add(tail, r), f64x2.mul(r2, p23)), f64x2.mul(f64x2.mul(r2, r2), p45));
  return f64x2.add(scale, f64x2.mul(scale, tmp));
}

/** The logistic function of both lanes, bit for bit the scalar `sigmoid` of elementwise.ts. */
export function sigmoidF64x2(x: v128): v128 {
  const nonNegative = f64x2.ge(x, f64x2.splat(0));
  const e = expF64x2(v128.bitselect(f64x2.neg(x), x, nonNegative));
  const one = f64x2.splat(1);
  // 1 / (1 + e) where x >= 0, e / (1 + e) elsewhere: one division
  return f64x2.div(v128.bitselect(one, e, nonNegative), f64x2.add(one, e));
}

/** Scalar and two-lane results agree: the same bits, or both NaN. */
function sameBits(a: f64, b: f64): bool {
  return reinterpret<u64>(a) == reinterpret<u64>(b) || (isNaN(a) && isNaN(b));
}

/**
 * How many of the `n` float64 values at `src` (`n` even) get a two-lane `exp` or sigmoid whose bits
 * differ from the scalar `Math.exp` / `sigmoid` of the same value; 0 when they all agree. A test hook
 * (dense_jobs_test.ts): the kernels' float32 outputs hide most float64 differences.
 */
export function exp_f64x2_mismatches(src: usize, n: i32): i32 {
  let bad = 0;
  for (let i = 0; i + 2 <= n; i += 2) {
    const p = src + (<usize> i << 3);
    const x = v128.load(p);
    const e = expF64x2(x);
    const s = sigmoidF64x2(x);
    for (let lane = 0; lane < 2; lane++) {
      const v = load<f64>(p + (<usize> lane << 3));
      const eLane = lane == 0 ? f64x2.extract_lane(e, 0) : f64x2.extract_lane(e, 1);
      const sLane = lane == 0 ? f64x2.extract_lane(s, 0) : f64x2.extract_lane(s, 1);
      if (!sameBits(eLane, Math.exp(v))) bad++;
      if (!sameBits(sLane, sigmoid(v))) bad++;
    }
  }
  return bad;
}

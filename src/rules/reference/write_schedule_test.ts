/** The write schedule: alignment, the sentinel, starts, the window and the carry. */

import { ruleConfig } from "../config.ts";
import type { HeadInputs } from "./head.ts";
import { writeSchedule } from "./write_schedule.ts";

const T = 8;

function head(starts: number[], carry = false): HeadInputs {
  const flags = new Uint8Array(T);
  for (const s of starts) flags[s] = 1;
  return {
    T,
    dk: 1,
    dv: 1,
    q: new Float64Array(T),
    k: new Float64Array(T),
    v: Float64Array.from({ length: T }, (_, t) => 100 + t),
    beta: new Float64Array(T),
    lambdabar: new Float64Array(T),
    starts: flags,
    s0: new Float64Array(1),
    carry: carry
      ? {
        state: new Float64Array(1),
        lastKey: Float64Array.of(-1),
        windowX: Float64Array.of(-3, -2),
        windowY: Float64Array.of(-30, -20),
        count: 2,
      }
      : undefined,
    mambaA: 1,
    retnetG: 0.9,
  };
}

/** Keys are `kn[t] = t`, so an x value names the position of its key. */
const KN = Float64Array.from({ length: T }, (_, t) => t);

function describe(schedule: ReturnType<typeof writeSchedule>): string {
  return schedule.steps
    .map((s) =>
      (s.reset ? "|" : "") + (s.sentinel ? "S" : s.pairs.map((p) => `${p.x[0]}:${p.y[0] - 100}`).join(","))
    )
    .join(" ");
}

function expectSchedule(what: string, actual: string, expected: string): void {
  if (actual !== expected) throw new Error(`${what}:\n  got      ${actual}\n  expected ${expected}`);
}

Deno.test("prefix pairs (phi(k_{t-1}), v_t), with the sentinel at every start", () => {
  const s = writeSchedule(ruleConfig("falcon1", { alignment: "prefix" }), head([5]), KN);
  expectSchedule("falcon1 prefix", describe(s), "|S 0:1 1:2 2:3 3:4 |S 5:6 6:7");
});

Deno.test("same-step pairs (phi(k_t), v_t); a start only resets", () => {
  const s = writeSchedule(ruleConfig("falcon1", { alignment: "same-step" }), head([5]), KN);
  expectSchedule("falcon1 same-step", describe(s), "|0:0 1:1 2:2 3:3 4:4 |5:5 6:6 7:7");
});

Deno.test("window rules write the last W pairs of the current sequence only", () => {
  const config = ruleConfig("falcon3", { alignment: "prefix", window: 3 });
  const s = writeSchedule(config, head([5]), KN);
  expectSchedule("falcon3 W=3", describe(s), "|S 0:1 0:1,1:2 0:1,1:2,2:3 1:2,2:3,3:4 |S 5:6 5:6,6:7");
  if (s.window.length !== 2 || s.window[0].x[0] !== 5) {
    throw new Error("carried window is not the last W-1 pairs");
  }
});

Deno.test("a carried run continues from the carried key and window, unless position 0 is flagged", () => {
  const config = ruleConfig("falcon3", { alignment: "prefix", window: 3 });
  const carried = writeSchedule(config, head([], true), KN);
  expectSchedule(
    "from carry",
    describe(carried).split(" ").slice(0, 3).join(" "),
    "-3:-130,-2:-120,-1:0 -2:-120,-1:0,0:1 -1:0,0:1,1:2",
  );
  if (carried.steps[0].pairs[2].xPos !== -1 || carried.steps[1].pairs[2].xPos !== 0) {
    throw new Error("carried key must be marked as a constant (xPos -1)");
  }
  const flagged = writeSchedule(config, head([0], true), KN);
  expectSchedule("flagged", describe(flagged).split(" ")[0], "|S");
});

Deno.test("non-window rules keep no window pairs in the carry", () => {
  const s = writeSchedule(ruleConfig("falcon1a", { alignment: "same-step" }), head([]), KN);
  if (s.window.length !== 0) throw new Error(`window of ${s.window.length} pairs`);
  if (s.lastKey[0] !== 7) throw new Error(`lastKey ${s.lastKey[0]}, expected 7`);
});

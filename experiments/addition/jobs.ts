/**
 * How many runs the addition experiment trains at once (`--jobs auto`), from what was measured:
 *
 * - on a GPU (the H200, docs/performance.md "Concurrency" and docs/results/addition.md "Cost"), the
 *   training processes share the device by time slices: 1 / 2 / 4 / 8 processes of the `addition`
 *   preset gave 153k / 307k / 464k / 539k tokens/s together, and the `gpu` plan's runs took the same
 *   GPU time per run with 8 at once as with 14 (utilisation 98%, host load 1.5 of 16 cores). Past 8 the
 *   aggregate no longer grows, so `GPU_JOBS` = 8. With the trainer's round trip once per 9 steps
 *   (2026-12-02) the `addition` preset gave 202k / 402k / 619k / 511k: its aggregate peaks at 4; the plan's
 *   own (smaller) runs have not been re-timed since, so this stays 8 until they are;
 * - on the CPU (WASM, the reference), the models are small enough that one thread per run and one run
 *   per core beats one run on every core (the `full` plan ran 16 runs at once on 16 cores).
 *
 * @module
 */

/** Runs at once on a hardware GPU: where the H200's aggregate training throughput stops growing. */
export const GPU_JOBS = 8;

/** Where the runs of an experiment train. */
export type JobsDevice = "gpu" | "cpu";

/** The number of runs to train at once on `device` with `cores` CPU cores, for `runs` runs still to train. */
export function autoJobs(device: JobsDevice, cores: number, runs: number): number {
  const wanted = device === "gpu" ? GPU_JOBS : Math.max(1, Math.floor(cores));
  return Math.max(1, Math.min(wanted, runs));
}

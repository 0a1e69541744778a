/**
 * Training progress on the terminal: a one-line bar redrawn in place (step, loss, tokens/s, ETA)
 * when the output is a terminal, plain log lines otherwise.
 *
 * @module
 */

import type { TrainProgress } from "../src/train/trainer.ts";

/** `1h02m`, `3m05s`, `42s`, or `?` when unknown. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) return `${h}h${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m${String(r).padStart(2, "0")}s`;
  return `${r}s`;
}

/** One status line without the bar: `step 120/400 loss 1.2345 lr 9.1e-3 1502 tok/s ETA 1m12s`. */
export function formatStatus(p: TrainProgress): string {
  return `step ${p.step}/${p.totalSteps} loss ${p.loss.toFixed(4)} lr ${p.lr.toExponential(1)} ` +
    `${Math.round(p.tokensPerSecond)} tok/s ETA ${formatDuration(p.etaSeconds)}`;
}

/**
 * One line for a periodic evaluation: the validation loss and the task's headline numbers (the
 * per-place values stay in metrics.jsonl): `eval at step 40: loss 0.1234, digitAccuracy 95.1%, ...`.
 */
export function formatEvaluation(step: number, evaluation: Readonly<Record<string, number>>): string {
  const parts = Object.entries(evaluation)
    .filter(([k]) => !/^place\d+$/.test(k))
    .map(([k, v]) =>
      k === "loss" || k === "bitsPerByte" ? `${k} ${v.toFixed(4)}` : `${k} ${(100 * v).toFixed(1)}%`
    );
  return `eval at step ${step}: ${parts.join(", ")}`;
}

/** Options of {@linkcode trainProgress}. */
export interface ProgressOptions {
  /** Draw a bar redrawn in place (a terminal) instead of log lines. */
  readonly terminal: boolean;
  /** Where text goes (default: stderr; plain lines through `console.error`). */
  readonly write?: (text: string) => void;
  /** Plain mode: log every this many steps (default: about 20 lines per run). */
  readonly every?: number;
}

/** A progress reporter for `train`'s `onProgress`, and `done()` to end the bar's line. */
export function trainProgress(options: ProgressOptions): { update(p: TrainProgress): void; done(): void } {
  const encoder = new TextEncoder();
  const write = options.write ??
    (options.terminal
      ? (t: string) => Deno.stderr.writeSync(encoder.encode(t))
      : (t: string) => console.error(t.replace(/\n$/, "")));
  let drawn = 0;
  let lastDraw = -Infinity;
  const clear = () => {
    if (drawn > 0) write(`\r${" ".repeat(drawn)}\r`);
    drawn = 0;
  };
  return {
    update(p) {
      if (p.event === "checkpoint") {
        if (options.terminal) clear();
        write(`checkpoint at step ${p.step}: ${p.checkpointPath}\n`);
        return;
      }
      if (p.event === "eval") {
        if (options.terminal) clear();
        write(formatEvaluation(p.step, p.evaluation ?? {}) + "\n");
        return;
      }
      if (!options.terminal) {
        const every = options.every ?? Math.max(1, Math.round(p.totalSteps / 20));
        if (p.step % every === 0 || p.step === p.totalSteps) write(formatStatus(p) + "\n");
        return;
      }
      const now = performance.now();
      if (now - lastDraw < 100 && p.step !== p.totalSteps) return;
      lastDraw = now;
      const width = 24;
      const filled = Math.round((width * p.step) / Math.max(1, p.totalSteps));
      const line = `[${"#".repeat(filled)}${".".repeat(width - filled)}] ${formatStatus(p)}`;
      write(`\r${line}${" ".repeat(Math.max(0, drawn - line.length))}`);
      drawn = line.length;
    },
    done() {
      if (options.terminal) clear();
    },
  };
}

/**
 * The JSONL metrics log of a run directory: one JSON object per line.
 *
 * @module
 */

import { atomicWriteFile } from "../checkpoint/atomic_write.ts";

/** One logged training step. */
export interface StepMetrics {
  /** 1-based optimizer step. */
  readonly step: number;
  /** Mean loss per supervised token (nats). */
  readonly loss: number;
  /** Learning rate used. */
  readonly lr: number;
  /** Gradient norm of the mean loss, before clipping. */
  readonly gradNorm: number;
  /** Supervised tokens (sum of loss weights) in the batch. */
  readonly tokens: number;
  /** Seconds of training since the run's first step, summed over every resume. */
  readonly elapsed: number;
}

/** One periodic evaluation (`TrainSetup.evaluate`), logged right after the line of its step. */
export interface EvalRecord {
  /** The step after which the model was evaluated. */
  readonly step: number;
  /** What the evaluation measured (names and meanings are the evaluation's own). */
  readonly eval: Readonly<Record<string, number>>;
}

/** Appends JSON lines to a file, creating it when missing. */
export class MetricsLog {
  readonly #path: string;
  readonly #encoder = new TextEncoder();

  /** Log into `path`. */
  constructor(path: string) {
    this.#path = path;
  }

  /**
   * Drop the records of steps after `step` (a resume from a checkpoint at `step` redoes them):
   * every line whose `step` is larger, step lines and eval lines alike. A missing file is left
   * missing. The file is replaced atomically (a full disk leaves it as it was).
   */
  async truncateAfter(step: number): Promise<void> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.#path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw err;
    }
    const kept = text.split("\n").filter((line) => {
      if (line.trim() === "") return false;
      try {
        const s = JSON.parse(line).step;
        return !(typeof s === "number" && s > step);
      } catch {
        return true; // not ours to judge: keep it
      }
    });
    await atomicWriteFile(this.#path, this.#encoder.encode(kept.map((l) => l + "\n").join("")));
  }

  /**
   * The step lines (those with a numeric `loss`) in file order; a missing file has none. Used on
   * resume for what the run did before its checkpoint.
   */
  async stepLines(): Promise<{ step: number; loss: number; elapsed?: number }[]> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.#path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return [];
      throw err;
    }
    const lines: { step: number; loss: number; elapsed?: number }[] = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        const r = JSON.parse(line);
        if (typeof r.step === "number" && typeof r.loss === "number") {
          lines.push({
            step: r.step,
            loss: r.loss,
            elapsed: typeof r.elapsed === "number" ? r.elapsed : undefined,
          });
        }
      } catch {
        // not a step line
      }
    }
    return lines;
  }

  /** Append one record as a line. */
  async append(record: object): Promise<void> {
    await Deno.writeFile(this.#path, this.#encoder.encode(JSON.stringify(record) + "\n"), {
      append: true,
      create: true,
    });
  }
}

/** Parse a JSONL log (for tests and tools); throws naming the line that is not JSON. */
export function parseJsonl(text: string, fileName: string): Record<string, unknown>[] {
  return text.split("\n").filter((l) => l.trim() !== "").map((line, i) => {
    try {
      return JSON.parse(line);
    } catch {
      throw new SyntaxError(`${fileName}: line ${i + 1} is not JSON`);
    }
  });
}

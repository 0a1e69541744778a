/**
 * The JSONL metrics log of a run directory: one JSON object per line.
 *
 * @module
 */

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
  /** Seconds since this process started training. */
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
   * missing.
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
    await Deno.writeTextFile(this.#path, kept.map((l) => l + "\n").join(""));
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

/**
 * Preset overrides: single fields of a preset's model and training configuration set by a flag
 * (`--lr 3e-3`) or by a JSON file (`--config run.json` holding `{"lr": 0.003, "d-model": 64}`,
 * keys named like the flags without the dashes in front). Each value is checked on its own, so
 * that an error names the flag (or the file and key) and the value; a flag wins over the file.
 *
 * | flag | field | value |
 * |---|---|---|
 * | `--lr` | `train.lr` | number > 0 |
 * | `--batch-size` | `train.batchSize` | integer >= 1 |
 * | `--seq-len` | `train.seqLen` | integer >= 1 |
 * | `--warmup` | `train.warmupSteps` | integer >= 0 |
 * | `--weight-decay` | `train.weightDecay` | number >= 0 |
 * | `--clip` | `train.clipNorm` | number >= 0 (0: no clipping) |
 * | `--checkpoint-every` | `train.checkpointEvery` | integer >= 0 (0: only at the end and on interrupt) |
 * | `--d-model` | `model.dModel` | integer >= 1 (the MLP width scales with it as in the preset) |
 * | `--layers` | `model.layers` | integer >= 1 |
 * | `--heads` | `model.heads` | integer >= 1 (must divide the model width) |
 * | `--chunk-size` | `model.chunkSize` | integer >= 1 |
 *
 * A config file may also hold `steps` (like `--steps`).
 *
 * @module
 */

import { InputError } from "../errors.ts";
import type { ModelConfig } from "../model/types.ts";
import type { TrainConfig } from "./config.ts";
import type { Preset } from "./presets.ts";

/** What kind of number an override takes. */
type ValueKind = "positive" | "nonNegative" | "positiveInteger" | "nonNegativeInteger";

interface OverrideSpec {
  readonly part: "model" | "train";
  readonly field: keyof ModelConfig | keyof TrainConfig;
  readonly kind: ValueKind;
}

/** Every override, by its flag name without the dashes. */
export const OVERRIDES = {
  "lr": { part: "train", field: "lr", kind: "positive" },
  "batch-size": { part: "train", field: "batchSize", kind: "positiveInteger" },
  "seq-len": { part: "train", field: "seqLen", kind: "positiveInteger" },
  "warmup": { part: "train", field: "warmupSteps", kind: "nonNegativeInteger" },
  "weight-decay": { part: "train", field: "weightDecay", kind: "nonNegative" },
  "clip": { part: "train", field: "clipNorm", kind: "nonNegative" },
  "checkpoint-every": { part: "train", field: "checkpointEvery", kind: "nonNegativeInteger" },
  "d-model": { part: "model", field: "dModel", kind: "positiveInteger" },
  "layers": { part: "model", field: "layers", kind: "positiveInteger" },
  "heads": { part: "model", field: "heads", kind: "positiveInteger" },
  "chunk-size": { part: "model", field: "chunkSize", kind: "positiveInteger" },
} as const satisfies Record<string, OverrideSpec>;

/** An override's name: its flag without the dashes (`batch-size`). */
export type OverrideName = keyof typeof OVERRIDES;

/** The override names in table order. */
export const OVERRIDE_NAMES = Object.keys(OVERRIDES) as OverrideName[];

/** One override: its value and where it came from (`--lr`, or `--config run.json`). */
export interface OverrideValue {
  /** The value. */
  readonly value: number;
  /** The flag or the file that set it. */
  readonly source: string;
}

/** The overrides of a run, by name. */
export type RunOverrides = Partial<Record<OverrideName, OverrideValue>>;

const KIND_TEXT: Record<ValueKind, string> = {
  positive: "a number > 0",
  nonNegative: "a number >= 0",
  positiveInteger: "an integer >= 1",
  nonNegativeInteger: "an integer >= 0",
};

function fits(kind: ValueKind, v: number): boolean {
  switch (kind) {
    case "positive":
      return Number.isFinite(v) && v > 0;
    case "nonNegative":
      return Number.isFinite(v) && v >= 0;
    case "positiveInteger":
      return Number.isSafeInteger(v) && v >= 1;
    case "nonNegativeInteger":
      return Number.isSafeInteger(v) && v >= 0;
  }
}

/** The text of an override for messages: `--lr 0.003`, or `--lr 0.003 (from --config run.json)`. */
export function overrideText(name: OverrideName, o: OverrideValue): string {
  const flag = `--${name}`;
  return o.source === flag ? `${flag} ${o.value}` : `${flag} ${o.value} (from ${o.source})`;
}

/**
 * Parse one override: a flag's text (`"3e-3"`) or a config file's JSON value. Throws an
 * InputError naming `source` and the value when it is not the kind of number the field takes.
 */
export function parseOverride(name: OverrideName, raw: unknown, source: string): OverrideValue {
  const kind = OVERRIDES[name].kind;
  const integer = kind === "positiveInteger" || kind === "nonNegativeInteger";
  let value = NaN;
  if (typeof raw === "number") value = raw;
  else if (typeof raw === "string" && raw.trim() !== "") {
    const ok = integer
      ? /^\d+$/.test(raw.trim())
      : /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw.trim());
    if (ok) value = Number(raw);
  }
  if (!fits(kind, value)) {
    const where = source === `--${name}` ? source : `${source}: "${name}"`;
    throw new InputError(`${where} must be ${KIND_TEXT[kind]}, got ${JSON.stringify(raw)}`);
  }
  return { value, source };
}

/** What a `--config` file holds: overrides, and optionally `steps`. */
export interface ConfigFile {
  /** The overrides it sets. */
  readonly overrides: RunOverrides;
  /** `steps`, when it sets it. */
  readonly steps?: number;
}

/**
 * Parse the text of a `--config` file (a JSON object; keys are override names or `steps`). Throws
 * an InputError naming the file and the key for anything else.
 */
export function parseConfigFile(text: string, fileName: string): ConfigFile {
  const source = `--config ${fileName}`;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new InputError(`${source}: not JSON (${(err as Error).message})`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new InputError(`${source}: must be a JSON object like {"lr": 0.003, "d-model": 64}`);
  }
  const overrides: RunOverrides = {};
  let steps: number | undefined;
  for (const [key, raw] of Object.entries(json)) {
    if (key === "steps") {
      if (!(typeof raw === "number" && Number.isSafeInteger(raw) && raw >= 1)) {
        throw new InputError(`${source}: "steps" must be an integer >= 1, got ${JSON.stringify(raw)}`);
      }
      steps = raw;
    } else if (Object.hasOwn(OVERRIDES, key)) {
      overrides[key as OverrideName] = parseOverride(key as OverrideName, raw, source);
    } else {
      throw new InputError(
        `${source}: unknown key ${JSON.stringify(key)}; expected steps or one of ${
          OVERRIDE_NAMES.join(", ")
        }`,
      );
    }
  }
  return { overrides, ...(steps === undefined ? {} : { steps }) };
}

/**
 * The preset's model and training fields with the overrides applied. Overriding the width keeps
 * the preset's ratio of MLP width to model width (`tiny`: 2x); a preset without an MLP width
 * leaves it to the model default.
 */
export function applyOverrides(
  p: Preset,
  overrides: RunOverrides,
): { model: Partial<ModelConfig>; train: Partial<TrainConfig> } {
  const model: Record<string, unknown> = { ...p.model };
  const train: Record<string, unknown> = { ...p.train };
  for (const name of OVERRIDE_NAMES) {
    const o = overrides[name];
    if (!o) continue;
    const spec = OVERRIDES[name];
    (spec.part === "model" ? model : train)[spec.field] = o.value;
  }
  const width = overrides["d-model"]?.value;
  if (width !== undefined && p.model.dModel && p.model.ffnHidden) {
    model.ffnHidden = Math.max(1, Math.round((p.model.ffnHidden / p.model.dModel) * width));
  }
  return { model: model as Partial<ModelConfig>, train: train as Partial<TrainConfig> };
}

/** The value a configuration holds for an override (to compare with a checkpoint's on resume). */
export function overriddenField(
  name: OverrideName,
  configs: { model: Readonly<Record<string, unknown>>; train: Readonly<Record<string, unknown>> },
): unknown {
  const spec = OVERRIDES[name];
  return configs[spec.part][spec.field];
}

/** The overrides as a plain `{name: value}` object (what the checkpoint's `run_config` stores). */
export function overrideValues(overrides: RunOverrides): Record<string, number> {
  const out: Record<string, number> = {};
  for (const name of OVERRIDE_NAMES) {
    const o = overrides[name];
    if (o) out[name] = o.value;
  }
  return out;
}

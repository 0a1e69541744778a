/**
 * What the native checkpoint format versions mean for the model they hold, and how the model
 * configuration of an older file is read so that it describes the model that file's falcon ran:
 *
 * | version | model |
 * |---|---|
 * | 0, 1 | the Transformer mixer ignored `shortConv` and `qkNorm` (it ran plain: no convolution, no QK norm) |
 * | 2 | every mixer honours `shortConv` and `qkNorm` |
 *
 * So a version-1 Transformer checkpoint whose config says `shortConv: true, qkNorm: "rms"` (the
 * defaults it was written with) loads with `shortConv: false, qkNorm: "none"`: the stored config
 * is what the model does, and the weights (which have no convolutions) match it. Configs of the
 * fast-weight mixers are the same in every version and pass through untouched.
 *
 * @module
 */

/** The first format version in which the Transformer honours `shortConv` and `qkNorm`. */
export const TRANSFORMER_FIELDS_HONOURED_SINCE = 2;

/** The fields that make a Transformer plain: what every Transformer of an older version ran. */
export const PLAIN_TRANSFORMER = { shortConv: false, qkNorm: "none" } as const;

/**
 * The model configuration (a parsed `model_config` object, not yet validated) of a file written
 * in format `version`, as the model of that version ran: a Transformer of a version before
 * {@linkcode TRANSFORMER_FIELDS_HONOURED_SINCE} gets {@linkcode PLAIN_TRANSFORMER}; anything else is
 * returned as it is (the same object). Key order is kept.
 */
export function modelConfigAsTrained<T extends Record<string, unknown>>(config: T, version: number): T {
  if (version >= TRANSFORMER_FIELDS_HONOURED_SINCE || config.mixer !== "transformer") return config;
  return { ...config, ...PLAIN_TRANSFORMER };
}

/**
 * {@linkcode modelConfigAsTrained} on `model_config` JSON text: the new text when the config
 * changes, null when it stays as it is (also for text that is not a JSON object: the caller's
 * validation reports that).
 */
export function modelConfigTextAsTrained(text: string | undefined, version: number): string | null {
  if (text === undefined) return null;
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    return null;
  }
  if (!config || typeof config !== "object" || Array.isArray(config)) return null;
  const record = config as Record<string, unknown>;
  const trained = modelConfigAsTrained(record, version);
  return trained === record ? null : JSON.stringify(trained);
}

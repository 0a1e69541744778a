/**
 * Test helper: write a tiny, untrained falcon checkpoint (reference backend) to a file.
 *
 * @module
 */

import { encodeCheckpoint } from "../checkpoint/mod.ts";
import { createModel, type FalconLM, modelConfig } from "../model/mod.ts";
import type { ModelConfig } from "../model/types.ts";
import { createRefBackend } from "../rules/reference/backend.ts";
import type { TaskConfig } from "../tasks/mod.ts";
import { readTensors } from "../train/model_state.ts";

/** Save a 1-layer, width-8 model of `mixer` for `task` (vocabulary `vocabSize`) to `path`; returns it. */
export async function writeTinyCheckpoint(
  path: string,
  task: TaskConfig,
  vocabSize: number,
  overrides: Partial<ModelConfig> = {},
  seed = 7,
): Promise<FalconLM> {
  const backend = createRefBackend();
  const config = modelConfig({ vocabSize, dModel: 8, heads: 2, layers: 1, chunkSize: 4, ...overrides });
  const model = createModel(backend, config, 42);
  const params = await readTensors(backend, new Map(model.parameters().map((p) => [p.name, p.value])));
  const bytes = encodeCheckpoint({
    step: 3,
    rngState: 0,
    model: config,
    task,
    train: { seed },
    params,
    adamM: {},
    adamV: {},
  });
  await Deno.writeFile(path, bytes);
  return model;
}

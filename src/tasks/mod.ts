/**
 * Tasks (SPEC section 8): configuration union, factory and re-exports.
 *
 * @module
 */

import { type AdditionConfig, additionConfig, createAdditionTask } from "./addition.ts";
import { createMqarTask, type MqarConfig, mqarConfig } from "./mqar.ts";
import { createTextTask, type TextConfig } from "./text.ts";
import { type Task, type TaskName, TASKS } from "./types.ts";

export * from "./types.ts";
export * from "./addition.ts";
export * from "./mqar.ts";
export * from "./text.ts";
export * from "./packing.ts";
export * from "./rng.ts";

/** The configuration of any task. */
export type TaskConfig = AdditionConfig | MqarConfig | TextConfig;

/** Create the task a configuration describes (`corpus` is needed to sample the text task). */
export function createTask(config: TaskConfig, corpus?: Uint8Array): Task {
  switch (config.task) {
    case "addition":
      return createAdditionTask(additionConfig(config));
    case "mqar":
      return createMqarTask(mqarConfig(config));
    case "text":
      return createTextTask(config, corpus);
    default:
      throw new RangeError(
        `unknown task "${(config as { task: unknown }).task}"; expected one of ${TASKS.join(", ")}`,
      );
  }
}

/**
 * A stored task configuration in its current form: an addition configuration is normalised
 * through {@linkcode additionConfig} (fields a configuration saved before they existed take the
 * defaults that mean the old format); the other tasks are returned as they are.
 */
export function normalizeTaskConfig(config: TaskConfig): TaskConfig {
  return config.task === "addition" ? additionConfig(config) : config;
}

/** Whether a string names a task. */
export function isTaskName(name: string): name is TaskName {
  return (TASKS as readonly string[]).includes(name);
}

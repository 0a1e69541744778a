import { modelConfig } from "../src/model/config.ts";
import { ADDITION_VOCAB_SIZE, additionConfig } from "../src/tasks/mod.ts";
import { trainConfig } from "../src/train/config.ts";
import { preset } from "../src/train/presets.ts";
import { train } from "../src/train/trainer.ts";
import { createWebGpuBackend } from "../wgpu/backend.ts";
const backend = await createWebGpuBackend({ timestamps: true });
// deno-lint-ignore no-explicit-any
const rt = (backend as any).runtime;
const acc = new Map<string, number>();
const counts = new Map<string, number>();
let on = false;
// deno-lint-ignore no-explicit-any
function wrap(obj: any, name: string, label: string) {
  const f = obj[name].bind(obj);
  obj[name] = (...a: unknown[]) => {
    const t = performance.now();
    const r = f(...a);
    if (on) {
      acc.set(label, (acc.get(label) ?? 0) + performance.now() - t);
      counts.set(label, (counts.get(label) ?? 0) + 1);
    }
    return r;
  };
}
for (const m of ["dispatch", "temp", "tensor", "uniform", "pipeline", "flush", "readBytes"]) {
  wrap(rt, m, "rt." + m);
}
for (const m of ["createBindGroup", "createBuffer", "createCommandEncoder"]) wrap(rt.device, m, "dev." + m);
wrap(rt.device.queue, "writeBuffer", "queue.writeBuffer");
wrap(rt.device.queue, "submit", "queue.submit");
const p = preset("lab");
const steps = 25, warm = 5;
let t0 = 0;
const full = await train({
  backend,
  model: modelConfig({ ...p.model, vocabSize: ADDITION_VOCAB_SIZE, mixer: "falcon1" }),
  task: additionConfig(p.addition),
  train: trainConfig({ ...p.train, steps, warmupSteps: 1, checkpointEvery: 0 }),
  runDir: await Deno.makeTempDir(),
  onProgress: (pr) => {
    if (pr.event === "step") console.log(`step ${pr.step} at ${(performance.now()).toFixed(1)} ms`);
    if (pr.event === "checkpoint") console.log(`checkpoint at ${(performance.now()).toFixed(1)} ms`);
    if (pr.event === "step" && pr.step === warm) {
      on = true;
      t0 = performance.now();
      rt.startProfile(2048);
    }
    if (pr.event === "step" && pr.step === warm + 1) {
      rt.stopProfile().then(
        (prof: { label: string; ns: number; dispatches: number }[] & { spanNs: number }) => {
          const sum = prof.reduce((a, p) => a + p.ns, 0);
          console.log(
            `profiled step: kernels ${(sum / 1e6).toFixed(2)} ms, span ${(prof.spanNs / 1e6).toFixed(2)} ms`,
          );
          for (const p of prof.slice(0, 12)) {
            console.log(" ", p.label.slice(0, 60), p.dispatches, (p.ns / 1e6).toFixed(3));
          }
        },
      );
    }
  },
});
const per = steps - warm;
console.log(`ms/step ${((performance.now() - t0) / per).toFixed(2)}`, full.tokensPerSecond);
for (const [k, v] of acc) {
  console.log(k, (v / per).toFixed(2), "ms/step", (counts.get(k)! / per).toFixed(0), "calls/step");
}
Deno.exit(0);

import { assertEquals } from "../../src/eval/_assert.ts";
import { autoJobs, GPU_JOBS } from "./jobs.ts";

Deno.test("autoJobs() runs 8 at once on a GPU, one per core on the CPU, never more than the runs left", () => {
  assertEquals(GPU_JOBS, 8);
  assertEquals(autoJobs("gpu", 16, 42), 8);
  assertEquals(autoJobs("gpu", 2, 42), 8); // the GPU, not the host, is what saturates
  assertEquals(autoJobs("gpu", 16, 3), 3);
  assertEquals(autoJobs("cpu", 16, 42), 16);
  assertEquals(autoJobs("cpu", 2, 42), 2);
  assertEquals(autoJobs("cpu", 16, 5), 5);
  assertEquals(autoJobs("cpu", 0, 5), 1);
  assertEquals(autoJobs("gpu", 16, 0), 1);
});

// The compute side of a roofline: our relaxed GEMM (gemm_packed, 1024³, from build/wasm/
// bench-kernels-relaxed) run by `threads` threads at once, each its own products back to back,
// released together; the rate is the sum of their mean rates (so the products overlap, unlike a
// best-of). Used by bench/decode.mjs beside the read rate of bandwidth.mjs.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

import { loadKernels } from './peers/kernels.mjs';

const SIZE = 1024;

if (!isMainThread && workerData?.gemmRateWorker) {
  const kernels = await loadKernels('bench-kernels-relaxed');
  kernels.gemmGflops(SIZE, SIZE, SIZE, 1);  // warm-up (tier-up), before the common start
  const flag = new Int32Array(workerData.start);
  Atomics.add(flag, 1, 1);
  Atomics.wait(flag, 0, 0);
  let sum = 0;
  for (let r = 0; r < workerData.repeats; ++r) sum += kernels.gemmGflops(SIZE, SIZE, SIZE, 1);
  parentPort.postMessage(sum / workerData.repeats);
}

/** GFLOP/s of `threads` threads each running `repeats` 1024³ products at once, summed. */
export async function gemmRate(threads, repeats = 5) {
  const start = new SharedArrayBuffer(8);
  const flag = new Int32Array(start);
  const workers = Array.from({ length: threads }, () =>
    new Worker(new URL(import.meta.url), { workerData: { gemmRateWorker: true, start, repeats } }));
  const rates = workers.map((worker) => new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  }));
  while (Atomics.load(flag, 1) < threads) await new Promise((resolve) => setTimeout(resolve, 5));
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  try {
    return (await Promise.all(rates)).reduce((a, b) => a + b, 0);
  } finally {
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}

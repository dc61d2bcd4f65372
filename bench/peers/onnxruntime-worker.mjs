// Runs inside a worker thread: one onnxruntime-web instance per thread count. ORT reads
// env.wasm.numThreads once, when its wasm initializes (the first session), and its backend
// registry is global to a module graph, so 1 and 2 threads need separate workers.
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-web';
import { E, input } from '../problem.mjs';
import { measure, timeOnce } from '../timing.mjs';
import { FORMULATIONS, gemmModel } from './onnxruntime-graphs.mjs';

ort.env.wasm.numThreads = workerData.threads;
const sessionOptions = { executionProviders: ['wasm'], graphOptimizationLevel: 'all', logSeverityLevel: 3 };

let current = null;  // { session, feeds }

async function release() {
  await current?.session.release();
  current = null;
}

const commands = {
  versions: () => ({ ort: ort.env.versions.web, numThreads: ort.env.wasm.numThreads }),

  // Builds and loads a formulation at L, runs it once: the output for the correctness check.
  async prepare({ L, formulation }) {
    await release();
    const session = await ort.InferenceSession.create(FORMULATIONS[formulation](L), sessionOptions);
    current = { session, feeds: { x: new ort.Tensor('float32', input(L), [1, L, E]) } };
    const [results, ms] = await timeOnce(() => session.run(current.feeds));
    return { output: results.out.data, ms, numThreads: ort.env.wasm.numThreads };
  },

  // Loads given model bytes with named feeds ({ name: { data, dims, type = 'float32' } }), runs it
  // once: the output named `output`, for the correctness check.
  async prepareModel({ model, feeds, output }) {
    await release();
    const session = await ort.InferenceSession.create(model, sessionOptions);
    const tensors = Object.fromEntries(Object.entries(feeds).map(([name, { data, dims, type = 'float32' }]) => [name, new ort.Tensor(type, data, dims)]));
    current = { session, feeds: tensors };
    const [results, ms] = await timeOnce(() => session.run(tensors));
    return { output: results[output].data, ms };
  },

  async measure({ plan, firstRunMs }) {
    const { session, feeds } = current;
    return measure(() => session.run(feeds), plan, { firstRunMs });
  },

  release,

  // GFLOP/s of one MatMul, best of `repeats` after a warm-up.
  async gemm({ M, N, K, repeats }) {
    await release();
    const session = await ort.InferenceSession.create(gemmModel(M, N, K), sessionOptions);
    const a = new Float32Array(M * K);
    for (let i = 0; i < a.length; ++i) a[i] = Math.sin(i);
    const feeds = { a: new ort.Tensor('float32', a, [M, K]) };
    await session.run(feeds);
    const { min_ms } = await measure(() => session.run(feeds), { warmup: 1, warmupMs: 1000, minRuns: repeats, maxRuns: repeats, budgetMs: 0 });
    await session.release();
    return { gflops: (2 * M * N * K) / (min_ms * 1e6), ms: min_ms };
  },
};

parentPort.on('message', async ({ id, command, args }) => {
  try {
    parentPort.postMessage({ id, result: await commands[command](args) });
  } catch (error) {
    await release().catch(() => {});
    parentPort.postMessage({ id, error: String(error?.message ?? error) });
  }
});

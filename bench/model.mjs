// A whole model's forward: a SmolLM2-135M-shaped decoder (30 layers, hidden 576, 9 query and 3
// key/value heads, intermediate 1536, vocabulary 49152; random binary16 weights, written by
// bench/open.mjs's checkpoint writer as config.json and an F16 model.safetensors in a folder under
// os.tmpdir(), removed at the end) opened with openModel (attention-wasm/models: fromConfig
// attention, the MLP through attn.feedForward, a Linear head, JS norms; resident, f16 as stored)
// at 512 tokens on 1 and 2 threads. Each row states the Linear layers' rate, timed inside the
// forward (every attn.Linear forward and attn.feedForward: the MLP's and the head's), against our
// GEMM's rate on as many threads (gemm-rate.mjs), measured in the same run. Two rows a thread
// count: the forward with every position's logits (`logits: 'all'`, a 100 MB result at 512
// tokens, of which the copy out of wasm memory alone takes about 0.3 s here) and with the last
// one's (`'last'`, what the viewer and generation read). Goals: Linear at 85 % of the GEMM rate;
// the forward on 2 threads within 2 s.
// --quick: 2 layers and two timed runs.
//
//   node --experimental-wasm-relaxed-simd bench/model.mjs [--json FILE] [--tokens 512] [--quick]
//   (npm run bench -- --model [...] also builds first)
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

import { init } from '../dist/index.mjs';
import { openModel } from '../dist/models.mjs';
import { gemmRate } from './gemm-rate.mjs';
import { CONFIGS, writeCheckpoint } from './open.mjs';
import { report } from './report.mjs';
import { measure } from './timing.mjs';

const { values: args } = parseArgs({
  options: { json: { type: 'string' }, tokens: { type: 'string', default: '512' }, quick: { type: 'boolean', default: false } },
});
const tokens = Number(args.tokens);
const layers = args.quick ? 2 : 30;
const config = { ...CONFIGS['SmolLM2-135M'], num_hidden_layers: layers };

// Times every Linear forward of `attn` (its class's prototype: the attention's projections run
// inside its own calls, the head here) and every feedForward (the MLP's three Linear layers) into
// `clock` (ms) and counts their multiply-adds; → undoes it.
function instrument(attn, clock) {
  const timed = (proto, name, flopsOf) => {
    const original = proto[name];
    proto[name] = function timedCall(...args) {
      const start = performance.now();
      const result = original.apply(this, args);
      clock.ms += performance.now() - start;
      clock.flops += flopsOf.apply(this, args);
      return result;
    };
    return () => { proto[name] = original; };
  };
  const linearFlops = (linear, rows) => 2 * rows * linear.inFeatures * linear.outFeatures;
  const undo = [
    timed(attn.Linear.prototype, 'forward', function linearCall(x) { return linearFlops(this, x.data.length / this.inFeatures); }),
    timed(Object.getPrototypeOf(attn), 'feedForward', (x, parts) => {
      const rows = x.data.length / x.shape.at(-1);
      return Object.values(parts).reduce((sum, linear) => sum + linearFlops(linear, rows), 0);
    }),
  ];
  return () => undo.forEach((restore) => restore());
}

const rows = [];
const goals = [];
const ids = Int32Array.from({ length: tokens }, (_, i) => (i * 7919) % config.vocab_size);
const folder = await mkdtemp(path.join(os.tmpdir(), 'attention-wasm-model-'));
try {
  await writeCheckpoint(folder, config, { dtype: 'f16' });
  console.log(`attention-wasm bench: model forward, SmolLM2-135M-shaped (${layers} layers, f16 weights), ${tokens} tokens, through openModel`);
  console.log(`${'impl'.padEnd(19)}  thr  ${'median ms'.padStart(9)}  ${'Linear GF/s'.padStart(11)}  ${'GEMM GF/s'.padStart(9)}  ${'share'.padStart(6)}`);
  for (const threads of [1, 2]) {
    const gemm = await gemmRate(threads);
    const attn = await init({ threads });
    const model = await openModel(attn, folder);
    const clock = { ms: 0, flops: 0 };
    const restore = instrument(attn, clock);
    for (const logits of ['all', 'last']) {
      clock.ms = clock.flops = 0;
      const timing = await measure(() => model.forward(ids, { logits }), { warmup: 1, warmupMs: 0, minRuns: args.quick ? 2 : 3, maxRuns: args.quick ? 2 : 5, budgetMs: 0 });
      // The clock ran through the warm-up too: a rate over every run.
      const linearGflops = clock.flops / clock.ms / 1e6;
      const row = { impl: `model-forward${logits === 'last' ? '-last' : ''}`, threads, tokens, median_ms: timing.median_ms, linear_gflops: linearGflops, gemm_gflops: gemm };
      rows.push(row);
      console.log(`${row.impl.padEnd(19)}  ${String(threads).padStart(3)}  ${row.median_ms.toFixed(0).padStart(9)}  ${linearGflops.toFixed(1).padStart(11)}  ${gemm.toFixed(1).padStart(9)}  ${`${((100 * linearGflops) / gemm).toFixed(0)} %`.padStart(6)}`);
      goals.push(`${row.impl} on ${threads} thread(s): Linear at ${((100 * linearGflops) / gemm).toFixed(0)} % of the GEMM rate (goal >= 85 %): ${linearGflops >= 0.85 * gemm ? 'met' : 'missed'}`);
      if (threads === 2 && layers === 30)
        goals.push(`${row.impl} on 2 threads: ${row.median_ms.toFixed(0)} ms (goal <= 2000 ms): ${row.median_ms <= 2000 ? 'met' : 'missed'}`);
    }
    restore();
    await model.dispose();
    attn.dispose();
  }
} finally {
  await rm(folder, { recursive: true, force: true });
}
await report(goals, rows, args.json);

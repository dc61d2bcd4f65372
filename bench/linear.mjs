// attn.Linear on the layers of a SmolLM2-135M-shaped model (hidden 576, 9 query and 3 key/value
// heads of 64, intermediate 1536, vocabulary 49152) at 512 tokens, f32, f16 and bf16 weights timed
// in alternation, on 1 and 2 threads, against our GEMM's rate on as many threads (gemm-rate.mjs:
// the relaxed 1024³ product, measured in the same run), after the widening kernels' rates in V8.
// Each layer writes into an array of its own reused call after call (`out`, as the models do); the
// head is also timed returning a fresh array (`linear-f32-fresh`), what fresh memory costs.
// The goals: Linear layers at 85 % of the GEMM's rate, bf16 within 5 % of f32. Then whole MLP
// blocks (SmolLM2-135M's and Llama-3.2-1B's, bf16) through attn.feedForward beside what the models
// ran before it: the three Linear calls with the activation and product in JS between them.
//
//   node --experimental-wasm-relaxed-simd bench/linear.mjs [--json FILE] [--tokens 512] [--quick]
//   (npm run bench -- --linear [...] also builds first)
import { parseArgs } from 'node:util';

import { activate } from '../bindings/models/ops.js';
import { init } from '../dist/index.mjs';
import { rng } from '../tests/js/random.js';
import { gemmRate } from './gemm-rate.mjs';
import { loadKernels } from './peers/kernels.mjs';
import { report } from './report.mjs';
import { measureAlternating } from './timing.mjs';

const { values: args } = parseArgs({
  options: { json: { type: 'string' }, tokens: { type: 'string', default: '512' }, quick: { type: 'boolean', default: false } },
});
const tokens = Number(args.tokens);
const plan = { warmup: 2, warmupMs: args.quick ? 200 : 1000, minRuns: 5, maxRuns: args.quick ? 5 : 15, budgetMs: args.quick ? 300 : 1500 };
// [name, in, out, how many a forward runs (30 layers; the head once)]
const LAYERS = [
  ['q_proj', 576, 576, 30], ['k_proj', 576, 192, 30], ['v_proj', 576, 192, 30], ['o_proj', 576, 576, 30],
  ['gate_proj', 576, 1536, 30], ['up_proj', 576, 1536, 30], ['down_proj', 1536, 576, 30], ['lm_head', 576, 49152, 1],
];

function tensor(shape, random) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = random() - 0.5;
  return { data, shape };
}

const DTYPES = ['f32', 'f16', 'bf16'];
// [model, hidden, intermediate] of the MLP blocks timed whole.
const MLPS = [['SmolLM2-135M', 576, 1536], ['Llama-3.2-1B', 2048, 8192]];
const rows = [];
const goals = [];
console.log(`attention-wasm bench: Linear layers of a SmolLM2-135M-shaped model, ${tokens} tokens`);
// What a 16-bit Linear adds to the GEMM: widening a chunk of 64 outputs of 576 inputs, once a call.
const kernels = await loadKernels('bench-kernels-relaxed');
for (const kernel of ['widen_f16', 'widen_bf16']) {
  const rate = kernels.widenRate(kernel);
  rows.push({ impl: kernel, elements: 36864, gelements_per_s: rate });
  console.log(`${kernel.padEnd(12)}  36864 elements: ${rate.toFixed(2)} G elements/s`);
}
for (const activation of ['silu', 'gelu', 'gelu_tanh']) {
  const rate = kernels.activateRate(activation, { gated: activation !== 'gelu' });
  rows.push({ impl: `activate-${activation}`, elements: 8192, gelements_per_s: rate });
  console.log(`${`activate-${activation}`.padEnd(12)}  8192 elements${activation === 'gelu' ? '' : ', gated'}: ${rate.toFixed(2)} G elements/s`);
}
console.log(`${'impl'.padEnd(12)}  ${'layer'.padEnd(10)}  ${'in'.padStart(5)}  ${'out'.padStart(6)}  thr  ${'median ms'.padStart(9)}  ${'GF/s'.padStart(6)}  ${'of GEMM'.padStart(7)}`);
for (const threads of [1, 2]) {
  const gemm = await gemmRate(threads);
  rows.push({ impl: 'gemm-rate', threads, gflops: gemm });
  console.log(`${'gemm-rate'.padEnd(12)}  ${''.padEnd(10)}  ${''.padStart(5)}  ${''.padStart(6)}  ${String(threads).padStart(3)}  ${''.padStart(9)}  ${gemm.toFixed(1).padStart(6)}`);
  const attn = await init({ threads });
  const random = rng(threads);
  const totals = Object.fromEntries(DTYPES.map((dtype) => [dtype, { ms: 0, flops: 0 }]));
  for (const [name, inFeatures, outFeatures, count] of LAYERS) {
    const weight = tensor([outFeatures, inFeatures], random);
    const x = tensor([tokens, inFeatures], random);
    const layers = DTYPES.map((dtype) => new attn.Linear(inFeatures, outFeatures, { bias: false, dtype }).loadStateDict({ weight }));
    // Each result into an array reused call after call, as a model's forward does: fresh memory is
    // the page faults of its first touch, which the head's row without `out` shows.
    const out = new Float32Array(tokens * outFeatures);
    const runs = layers.map((layer) => () => layer.forward(x, { out }));
    if (name === 'lm_head') runs.push(() => layers[0].forward(x));
    const timings = await measureAlternating(runs, plan);
    const flops = 2 * tokens * inFeatures * outFeatures;
    const layerRow = (impl, ms, note = '') => {
      const gflops = flops / ms / 1e6;
      rows.push({ impl, layer: name, in: inFeatures, out: outFeatures, threads, tokens, median_ms: ms, gflops, gemm_gflops: gemm });
      console.log(`${impl.padEnd(12)}  ${name.padEnd(10)}  ${String(inFeatures).padStart(5)}  ${String(outFeatures).padStart(6)}  ${String(threads).padStart(3)}  ${ms.toFixed(2).padStart(9)}  ${gflops.toFixed(1).padStart(6)}  ${`${((100 * gflops) / gemm).toFixed(0)} %`.padStart(7)}${note}`);
    };
    DTYPES.forEach((dtype, i) => {
      totals[dtype].ms += count * timings[i].median_ms;
      totals[dtype].flops += count * flops;
      layerRow(`linear-${dtype}`, timings[i].median_ms);
    });
    if (name === 'lm_head') layerRow('linear-f32-fresh', timings[DTYPES.length].median_ms, '  (a fresh result array)');
    for (const layer of layers) layer.dispose();
  }
  for (const dtype of DTYPES) {
    const { ms, flops } = totals[dtype];
    const share = flops / ms / 1e6 / gemm;
    goals.push(`linear-${dtype}, a forward's Linear layers on ${threads} thread(s): ${(flops / 1e9).toFixed(1)} GFLOP in ${ms.toFixed(0)} ms, ${(100 * share).toFixed(0)} % of the GEMM rate (goal >= 85 %): ${share >= 0.85 ? 'met' : 'missed'}`);
  }
  for (const [model, hidden, inner] of MLPS) {
    const x = tensor([tokens, hidden], random);
    const linear = (out, inFeatures) => new attn.Linear(inFeatures, out, { bias: false, dtype: 'bf16' }).loadStateDict({ weight: tensor([out, inFeatures], random) });
    const parts = { gate: linear(inner, hidden), up: linear(inner, hidden), down: linear(hidden, inner) };
    const gate = new Float32Array(tokens * inner), up = new Float32Array(tokens * inner), down = new Float32Array(tokens * hidden);
    const separate = () => {
      parts.gate.forward(x, { out: gate });
      parts.up.forward(x, { out: up });
      activate(gate, 'silu');
      for (let i = 0; i < gate.length; i++) gate[i] *= up[i];
      return parts.down.forward({ data: gate, shape: [tokens, inner] }, { out: down });
    };
    const [ours, peer] = await measureAlternating([() => attn.feedForward(x, parts, { activation: 'silu', out: down }), separate], plan);
    const flops = 2 * tokens * 3 * hidden * inner;
    for (const [impl, { median_ms: ms }] of [['feed-forward', ours], ['linear-x3-js-act', peer]]) {
      rows.push({ impl, model, in: hidden, inner, threads, tokens, median_ms: ms, gflops: flops / ms / 1e6, gemm_gflops: gemm });
      console.log(`${impl.padEnd(16)}  ${model.padEnd(12)}  ${String(threads).padStart(3)}  ${ms.toFixed(2).padStart(9)}  ${(flops / ms / 1e6).toFixed(1).padStart(6)}  ${`${((100 * flops) / ms / 1e6 / gemm).toFixed(0)} %`.padStart(7)}`);
    }
    goals.push(`feed-forward, ${model}'s MLP (bf16, ${tokens} rows) on ${threads} thread(s): ${(peer.median_ms / ours.median_ms).toFixed(2)} × the separate calls' speed`);
    Object.values(parts).forEach((part) => part.dispose());
  }
  const bf16Share = totals.f32.ms / totals.bf16.ms;
  goals.push(`linear-bf16 on ${threads} thread(s): ${(100 * bf16Share).toFixed(1)} % of linear-f32's rate (goal >= 95 %): ${bf16Share >= 0.95 ? 'met' : 'missed'}`);
  attn.dispose();
}
await report(goals, rows, args.json);

// The viewer's forward of a whole model: a SmolLM2-135M-shaped decoder (30 layers, hidden 576,
// 9 query and 3 key/value heads, intermediate 1536, vocabulary 49152; random binary16 weights, as
// a checkpoint's F16 or BF16 file loads them) at 512 tokens on 1 and 2 threads, through
// web/models/ (GroupedQueryAttention, Linear, JS norms and activations). Each row states the
// Linear layers' rate, timed inside the forward, against our GEMM's rate on as many threads
// (gemm-rate.mjs), measured in the same run. Two rows a thread count: the forward with every
// position's logits (`logits: 'all'`, a 100 MB result at 512 tokens, of which the copy out of wasm
// memory alone takes about 0.3 s here) and with the last one's (`'last'`, what the viewer and
// generation read). Goals: Linear at 85 % of the GEMM rate; the forward on 2 threads within 2 s.
//
//   node --experimental-wasm-relaxed-simd bench/model.mjs [--json FILE] [--tokens 512] [--quick]
//   (npm run bench -- --model [...] also builds first)
import { parseArgs } from 'node:util';

import { init } from '../dist/index.mjs';
import { rng } from '../tests/js/random.js';
import { createModel } from '../web/models/index.js';
import { gemmRate } from './gemm-rate.mjs';
import { report } from './report.mjs';
import { measure } from './timing.mjs';

const { values: args } = parseArgs({
  options: { json: { type: 'string' }, tokens: { type: 'string', default: '512' }, quick: { type: 'boolean', default: false } },
});
const tokens = Number(args.tokens);
const layers = args.quick ? 2 : 30;
const config = {
  model_type: 'llama', hidden_size: 576, num_attention_heads: 9, num_key_value_heads: 3, intermediate_size: 1536,
  num_hidden_layers: layers, vocab_size: 49152, rms_norm_eps: 1e-5, rope_theta: 100000, max_position_embeddings: 8192,
  hidden_act: 'silu', tie_word_embeddings: true,
};

// Random binary16 weights in Hugging Face's names, scaled like a trained model's (about 1/sqrt(in)).
function checkpoint(random) {
  const tensors = new Map();
  const half = (shape, scale) => {
    const data = new Uint16Array(shape[0] * (shape[1] ?? 1));
    // Halves with exponents around `scale` and random signs and mantissas.
    const exponent = 15 + Math.round(Math.log2(scale));
    for (let i = 0; i < data.length; i++) data[i] = ((random() < 0.5) << 15) | ((exponent - (random() < 0.5)) << 10) | Math.floor(random() * 1024);
    return { data, shape, dtype: 'f16' };
  };
  const { hidden_size: h, intermediate_size: inner, num_attention_heads: heads, num_key_value_heads: kv } = config;
  const d = h / heads;
  tensors.set('model.embed_tokens.weight', half([config.vocab_size, h], 0.05));
  tensors.set('model.norm.weight', half([h], 1));
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}.`;
    for (const [name, shape] of [['self_attn.q_proj', [heads * d, h]], ['self_attn.k_proj', [kv * d, h]], ['self_attn.v_proj', [kv * d, h]],
      ['self_attn.o_proj', [h, heads * d]], ['mlp.gate_proj', [inner, h]], ['mlp.up_proj', [inner, h]], ['mlp.down_proj', [h, inner]]])
      tensors.set(`${p}${name}.weight`, half(shape, 1 / Math.sqrt(shape[1])));
    tensors.set(`${p}input_layernorm.weight`, half([h], 1));
    tensors.set(`${p}post_attention_layernorm.weight`, half([h], 1));
  }
  return tensors;
}

// Times every Linear forward of `model` into `clock` (ms) and counts its multiply-adds.
function instrument(model, clock) {
  const linears = [model.head, ...model.blocks.flatMap((b) => [b.gate, b.up, b.down])];
  for (const linear of linears) {
    const forward = linear.forward.bind(linear);
    linear.forward = (x) => {
      const start = performance.now();
      const y = forward(x);
      clock.ms += performance.now() - start;
      clock.flops += 2 * (x.data.length / linear.inFeatures) * linear.inFeatures * linear.outFeatures;
      return y;
    };
  }
}

const rows = [];
const goals = [];
const tensors = checkpoint(rng(1));
const ids = Int32Array.from({ length: tokens }, (_, i) => (i * 7919) % config.vocab_size);
console.log(`attention-wasm bench: model forward, SmolLM2-135M-shaped (${layers} layers, f16 weights), ${tokens} tokens`);
console.log(`${'impl'.padEnd(19)}  thr  ${'median ms'.padStart(9)}  ${'Linear GF/s'.padStart(11)}  ${'GEMM GF/s'.padStart(9)}  ${'share'.padStart(6)}`);
for (const threads of [1, 2]) {
  const gemm = await gemmRate(threads);
  const attn = await init({ threads });
  const model = createModel(attn, config, tensors);
  const clock = { ms: 0, flops: 0 };
  instrument(model, clock);
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
  model.dispose();
  attn.dispose();
}
await report(goals, rows, args.json);

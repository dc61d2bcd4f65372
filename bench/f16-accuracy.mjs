// What binary16 costs in accuracy on a trained model: the demo's two-layer character model
// (web/model/: config.json and model.safetensors, F16 weights) opened with openModel
// (attention-wasm/models) as 'f32' and as 'f16', each run over its fixture continuation (the
// prompt and the 32 characters greedy decoding adds) in one forward: every position's logits from
// the prompt's last on are compared with PyTorch's float64 forward (tests/fixtures/demo_model.json),
// and the attention weights of the 'f16' model with the 'f32' one's. Then the greedy continuation
// through generate() with an f32 and an f16 KV cache (cacheDtype) against the fixture's: how many
// of its 32 characters each reproduces. Random data says little here: trained keys are larger
// and their scores sharper, and rounding moves the weights.
//
//   node bench/f16-accuracy.mjs
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { init } from '../dist/index.mjs';
import { openModel } from '../dist/models.mjs';

const fixture = JSON.parse(readFileSync(new URL('../tests/fixtures/demo_model.json', import.meta.url)));
const folder = fileURLToPath(new URL('../web/model/', import.meta.url));

const attn = await init();
const ids = fixture.continuation.ids;
const prompt = fixture.ids.length;
const want = Float64Array.from(fixture.continuation.logits);

const maxAbs = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

console.log(`demo model, ${prompt}-token prompt then ${ids.length - prompt} greedy characters, one forward over all ${ids.length}`);
console.log('| weights | logits: max abs error vs PyTorch | largest logit | attention weights: max abs error vs f32 |');
console.log('|---|---|---|---|');
const weightsOf = {};
let model;
for (const dtype of ['f32', 'f16']) {
  model = await openModel(attn, folder, { dtype });
  const { logits, attentions } = await model.forward(ids, { logits: 'all', outputAttentions: true });
  const vocab = logits.shape[2];
  const got = logits.data.subarray((prompt - 1) * vocab);
  const err = maxAbs(got, want.subarray((prompt - 1) * vocab));
  const largest = got.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  weightsOf[dtype] = attentions.map((layer) => layer.data);
  const weightErr = dtype === 'f32' ? '(reference)' : Math.max(...weightsOf.f16.map((w, l) => maxAbs(w, weightsOf.f32[l]))).toExponential(1);
  console.log(`| ${dtype} | ${err.toExponential(1)} | ${largest.toFixed(1)} | ${weightErr} |`);
  if (dtype === 'f32') await model.dispose();
}

// The f16 model's greedy continuation through each cache dtype.
const continuation = ids.slice(prompt);
console.log('\n| KV cache | greedy characters equal to the fixture\'s |');
console.log('|---|---|');
for (const cacheDtype of ['f32', 'f16']) {
  const out = await model.generate(ids.slice(0, prompt), { maxNewTokens: continuation.length, cacheDtype });
  const same = out.slice(prompt).filter((id, i) => id === continuation[i]).length;
  console.log(`| ${cacheDtype} | ${same} of ${continuation.length} |`);
}
await model.dispose();
attn.dispose();

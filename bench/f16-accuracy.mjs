// What an f16 KV cache costs in accuracy on a trained model: the demo's two-layer character model
// (web/model/) generates its fixture continuation through f32 and then f16 caches, and every step's
// logits and attention weights are compared with PyTorch's float64 forward
// (tests/fixtures/demo_model.json). Random data says little here: trained keys are larger and
// their scores sharper, and the keys' rounding is what moves the weights.
//
//   node bench/f16-accuracy.mjs
import { readFileSync } from 'node:fs';

import { init } from '../dist/index.mjs';
import { CharModel } from '../web/model.js';

const read = (path) => readFileSync(new URL(path, import.meta.url));
const fixture = JSON.parse(read('../tests/fixtures/demo_model.json'));
const config = JSON.parse(read('../web/model/config.json'));

const attn = await init();
const model = new CharModel(attn, config, attn.loadSafetensors(read('../web/model/model.safetensors')));
const vocab = config.vocab.length;
const ids = fixture.continuation.ids;
const prompt = fixture.ids.length;
const want = Float64Array.from(fixture.continuation.logits);

const maxAbs = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

console.log(`demo model, ${prompt}-token prompt then ${ids.length - prompt} decode steps`);
console.log('| cache | logits: max abs error vs PyTorch | largest logit | attention weights: max abs error vs f32 cache |');
console.log('|---|---|---|---|');
const weightsOf = {};
for (const dtype of ['f32', 'f16']) {
  const caches = model.createCaches(ids.length, dtype);
  let err = 0, largest = 0;
  const weights = [];
  const first = model.forward(ids.slice(0, prompt), { caches, needWeights: true });
  err = maxAbs(first.logits.subarray(-vocab), want.subarray((prompt - 1) * vocab, prompt * vocab));
  for (let t = prompt; t < ids.length; t++) {
    const step = model.forward(ids.slice(t, t + 1), { caches, needWeights: true });
    err = Math.max(err, maxAbs(step.logits, want.subarray(t * vocab, (t + 1) * vocab)));
    largest = Math.max(largest, ...step.logits.map(Math.abs));
    weights.push(...step.weights.flatMap((layer) => Array.from(layer)));
  }
  weightsOf[dtype] = weights;
  const weightErr = dtype === 'f32' ? '(reference)' : maxAbs(weights, weightsOf.f32).toExponential(1);
  console.log(`| ${dtype} | ${err.toExponential(1)} | ${largest.toFixed(1)} | ${weightErr} |`);
  for (const cache of caches) cache.dispose();
}
attn.dispose();

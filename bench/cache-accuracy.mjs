// What 16-bit weights and f16 and q8 KV caches cost in accuracy, on trained and checkpoint weights
// rather than random data (trained keys are larger and their scores sharper).
//
// 1. The demo's two-layer character model (web/model/: config.json and model.safetensors, F16
//    weights) opened with openModel (attention-wasm/models) as 'f32' and as 'f16', each run over its
//    fixture continuation (the prompt and the 32 characters greedy decoding adds) in one forward:
//    every position's logits from the prompt's last on against PyTorch's float64 forward
//    (tests/fixtures/demo_model.json), and the 'f16' model's attention weights against the 'f32'
//    one's.
// 2. Each KV cache dtype (f32, f16, q8): the demo model decodes the same ids one position a step
//    through a cache per layer (the decode path), every step's logits against the same reference;
//    then generate() with that cache: how many of the fixture's 32 greedy characters it reproduces.
// 3. The same step-by-step decode on every decoder checkpoint of tests/fixtures/models (tiny
//    models in Hugging Face's layout, head dims 8 to 16: one short q8 block a row), against their
//    float64 logits.
//
//   node bench/cache-accuracy.mjs
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { init } from '../dist/index.mjs';
import { openModel } from '../dist/models.mjs';

const CACHE_DTYPES = ['f32', 'f16', 'q8'];
const fixture = JSON.parse(readFileSync(new URL('../tests/fixtures/demo_model.json', import.meta.url)));
const folder = fileURLToPath(new URL('../web/model/', import.meta.url));

const attn = await init();
const ids = fixture.continuation.ids;
const prompt = fixture.ids.length;
const want = Float64Array.from(fixture.continuation.logits);

const maxAbs = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

// Logits of every position from `first` on, [positions, vocab], each from a decode step: the ids
// fed one a step through one cache of `cacheDtype` per layer.
async function decodedLogits(model, tokens, first, cacheDtype) {
  const caches = Array.from({ length: model.layers }, (_, layer) => new attn.KVCache({
    heads: model.kvHeads, headDim: model.headDim, maxLength: tokens.length, dtype: cacheDtype, window: model.family.windowOf?.(layer) ?? null,
  }));
  try {
    const rows = [];
    for (let i = 0; i < tokens.length; i++) {
      const { logits } = await model.run([Int32Array.of(tokens[i])], { caches, past: i });
      if (i >= first) rows.push(...logits.data);
    }
    return Float32Array.from(rows);
  } finally {
    caches.forEach((cache) => cache.dispose());
  }
}

console.log(`demo model, ${prompt}-token prompt then ${ids.length - prompt} greedy characters, one forward over all ${ids.length}`);
console.log('| weights | logits: max abs error vs PyTorch | largest logit | attention weights: max abs error vs f32 |');
console.log('|---|---|---|---|');
const weightsOf = {};
let model;  // the f32 one, kept for the caches below
for (const dtype of ['f32', 'f16']) {
  const opened = await openModel(attn, folder, { dtype });
  if (dtype === 'f32') model = opened;
  const { logits, attentions } = await opened.forward(ids, { logits: 'all', outputAttentions: true });
  const vocab = logits.shape[2];
  const got = logits.data.subarray((prompt - 1) * vocab);
  const err = maxAbs(got, want.subarray((prompt - 1) * vocab));
  const largest = got.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  weightsOf[dtype] = attentions.map((layer) => layer.data);
  const weightErr = dtype === 'f32' ? '(reference)' : Math.max(...weightsOf.f16.map((w, l) => maxAbs(w, weightsOf.f32[l]))).toExponential(1);
  console.log(`| ${dtype} | ${err.toExponential(1)} | ${largest.toFixed(1)} | ${weightErr} |`);
  if (dtype === 'f16') await opened.dispose();
}

// The f32 model through each cache dtype.
const continuation = ids.slice(prompt);
const vocab = want.length / ids.length;
console.log(`\ndemo model (f32 weights), the same ${ids.length} ids decoded one a step through a KV cache`);
console.log('| KV cache | logits: max abs error vs PyTorch | greedy characters equal to the fixture\'s |');
console.log('|---|---|---|');
for (const cacheDtype of CACHE_DTYPES) {
  const err = maxAbs(await decodedLogits(model, ids, prompt - 1, cacheDtype), want.subarray((prompt - 1) * vocab));
  const out = await model.generate(ids.slice(0, prompt), { maxNewTokens: continuation.length, cacheDtype });
  const same = out.slice(prompt).filter((id, i) => id === continuation[i]).length;
  console.log(`| ${cacheDtype} | ${err.toExponential(1)} | ${same} of ${continuation.length} |`);
}
await model.dispose();

// The checkpoints' reference ids decoded one a step, every position's logits against float64.
const modelsFolder = new URL('../tests/fixtures/models/', import.meta.url);
console.log('\ntests/fixtures/models, the reference ids decoded one a step through a KV cache: logits, max abs error vs float64');
console.log(`| model | head dim | largest logit | ${CACHE_DTYPES.join(' | ')} |`);
console.log(`|---|---|---|${CACHE_DTYPES.map(() => '---|').join('')}`);
for (const name of readdirSync(modelsFolder).sort()) {
  const checkpoint = await openModel(attn, fileURLToPath(new URL(`${name}/`, modelsFolder)));
  if (!checkpoint.family.causal) {
    await checkpoint.dispose();
    continue;
  }
  const ref = JSON.parse(readFileSync(new URL(`${name}/reference.json`, modelsFolder)));
  const logits = Float64Array.from(ref.logits.data);
  const largest = logits.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
  const errors = [];
  for (const cacheDtype of CACHE_DTYPES) errors.push(maxAbs(await decodedLogits(checkpoint, ref.ids, 0, cacheDtype), logits).toExponential(1));
  console.log(`| ${name} | ${checkpoint.headDim} | ${largest.toFixed(1)} | ${errors.join(' | ')} |`);
  await checkpoint.dispose();
}
attn.dispose();

// Real checkpoints' attention, from their config.json: for each family's case in
// tests/fixtures/checkpoints/ (written by checkpoints_fixtures.py from Hugging Face's code, in
// float64), GroupedQueryAttention.fromConfig + loadSafetensors + loadStateDict({ prefix }) give
// the layer's forward (output and weights; project()'s q, k and v as attention reads them), a cached decode of 40 steps (past the length where
// dynamic and longrope change frequencies, and past sliding windows), and a left-padded batch of
// three rows whose every real token equals the row run alone, step after step.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { init } from 'attention-wasm';

import { BUILDS, TOLERANCE, maxRelativeError, toTensor } from './helpers.js';

const ROOT = new URL('../fixtures/checkpoints/', import.meta.url);
const CASES = readdirSync(ROOT).sort().map((name) => {
  const read = (file) => readFileSync(new URL(`${name}/${file}`, ROOT));
  return { name, config: JSON.parse(read('config.json')), weights: read('model.safetensors'), reference: JSON.parse(read('reference.json')) };
});

function assertClose(got, want, what) {
  assert.deepEqual(got.shape, want.shape, `${what} shape`);
  const err = maxRelativeError(got.data, want.data);
  assert.ok(err <= TOLERANCE, `${what}: max relative error ${err} > ${TOLERANCE}`);
}

// The rows of `tensor` [N, t, H] at the tokens `mask` [N, t] marks 1, as one flat array.
function tokenRows(tensor, mask) {
  const width = tensor.shape[2];
  const rows = [];
  mask.data.forEach((token, i) => {
    if (token) rows.push(...tensor.data.subarray(i * width, (i + 1) * width));
  });
  return Float32Array.from(rows);
}

function runLayer(attn, c, stateDict, layer) {
  const block = attn.GroupedQueryAttention.fromConfig(c.config, { layer: layer.layer });
  try {
    block.loadStateDict(stateDict, { prefix: `model.layers.${layer.layer}.self_attn.` });
    const forward = block.forward(toTensor(layer.forward.x), { needWeights: true });
    assertClose(forward.output, toTensor(layer.forward.output), 'forward output');
    assertClose(forward.weights, toTensor(layer.forward.weights), 'forward weights');
    const projected = block.project(toTensor(layer.forward.x));
    for (const name of ['query', 'key', 'value']) assertClose(projected[name], toTensor(layer.forward[name]), `project()'s ${name}`);

    const { decode } = layer;
    const cache = block.createCache(decode.maxLength);
    assertClose(block.forward(toTensor(decode.prefill.x), { cache }).output, toTensor(decode.prefill.output), 'prefill');
    decode.steps.forEach((step, i) => assertClose(block.forward(toTensor(step.x), { cache }).output, toTensor(step.output), `decode step ${i}`));
    // With a cache, project() rotates at the cache's next position and appends nothing; a full
    // cache (this one now is) is no error.
    const next = toTensor(decode.steps[0].x);
    const held = cache.length;
    assert.deepEqual(block.project(next, { cache }), block.project(next, { positions: [cache.position] }), 'project() at the cache\'s position');
    assert.equal(cache.length, held, 'project() appends nothing');
    cache.dispose();

    const { padded } = layer;
    const batch = padded.x.shape[0];
    const attentionMask = { data: Uint8Array.from(padded.attentionMask.data), shape: padded.attentionMask.shape };
    const rows = block.createCache(padded.maxLength, { batch });
    // project() with the attention mask rotates at generate()'s positions: each row's tokens
    // counted (cumsum − 1), padding at 0.
    const t = padded.x.shape[1];
    const counted = Int32Array.from(attentionMask.data, (_, i) => {
      const row = Math.floor(i / t);
      let tokens = 0;
      for (let j = row * t; j <= i; j++) tokens += attentionMask.data[j];
      return attentionMask.data[i] ? tokens - 1 : 0;
    });
    assert.deepEqual(block.project(toTensor(padded.x), { attentionMask }), block.project(toTensor(padded.x), { positions: { data: counted, shape: [batch, t] } }),
      'project() at generate()\'s positions');
    const prefill = block.forward(toTensor(padded.x), { cache: rows, attentionMask });
    const err = maxRelativeError(tokenRows(prefill.output, attentionMask), tokenRows(toTensor(padded.output), attentionMask));
    assert.ok(err <= TOLERANCE, `padded prefill (tokens only): ${err}`);
    assert.deepEqual(rows.mask(), attentionMask, 'the cache keeps the mask');
    padded.steps.forEach((step, i) => assertClose(block.forward(toTensor(step.x), { cache: rows }).output, toTensor(step.output), `padded step ${i}`));
    rows.dispose();
  } finally {
    block.dispose();
  }
}

for (const build of BUILDS) {
  describe(`${build.name} build: checkpoints from config.json`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    // The same model written in the forms transformers also reads: v5's rope_parameters (nested by
    // layer type for Gemma 3) and a multimodal config's text_config, and Phi-3's legacy 'su' type.
    test('fromConfig reads rope_parameters, text_config and legacy rope types as the older forms', () => {
      const byName = Object.fromEntries(CASES.map((c) => [c.name, c]));
      const gemma = byName['gemma-3-1b'].config;
      const { rope_scaling: scaling, rope_theta: theta, rope_local_base_freq: local, ...rest } = gemma;
      const nested = { ...rest, rope_parameters: { full_attention: { ...scaling, rope_theta: theta }, sliding_attention: { rope_type: 'default', rope_theta: local } } };
      const multimodal = { model_type: 'gemma3', text_config: gemma, vision_config: { model_type: 'siglip_vision_model' } };
      const llama = byName['llama-3.2-1b'].config;
      const { rope_scaling: llamaScaling, rope_theta: llamaTheta, ...llamaRest } = llama;
      const phi = byName['phi-3-mini-128k'].config;
      const pairs = [
        ['gemma-3-1b', gemma, nested, [0, 5]], ['gemma-3-1b', gemma, multimodal, [0, 5]],
        ['llama-3.2-1b', llama, { ...llamaRest, rope_parameters: { ...llamaScaling, rope_theta: llamaTheta } }, [0]],
        ['phi-3-mini-128k', phi, { ...phi, rope_scaling: { ...phi.rope_scaling, type: 'su' } }, [0]],
      ];
      for (const [name, config, other, layers] of pairs) {
        const stateDict = attn.loadSafetensors(byName[name].weights);
        for (const layer of layers) {
          const [a, b] = [config, other].map((cfg) => {
            const block = attn.GroupedQueryAttention.fromConfig(cfg, { layer });
            block.loadStateDict(stateDict, { prefix: `model.layers.${layer}.self_attn.` });
            return block;
          });
          assert.deepEqual({ ...b }, { ...a }, `${name} layer ${layer}: the same options`);
          const x = toTensor(byName[name].reference.layers[0].forward.x);
          assert.deepEqual(b.forward(x).output, a.forward(x).output, `${name} layer ${layer}`);
          a.dispose();
          b.dispose();
        }
      }
    });

    for (const c of CASES) {
      test(`${c.name} (${c.config.model_type ?? c.config.text_config?.model_type})`, () => {
        const stateDict = attn.loadSafetensors(c.weights);
        for (const layer of c.reference.layers) runLayer(attn, c, stateDict, layer);
      });
    }
  });
}

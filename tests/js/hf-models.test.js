// The viewer's Hugging Face models (web/models/) on tiny random-weight checkpoints in Hugging
// Face's layout (tests/fixtures/models/, written by hf_models_fixture.py with a float64 reference
// transcribed from transformers): the npm tokenizer gives the reference's tokens, and every
// layer's every head's attention weights and the logits match, on every build.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { Tokenizer } from '@huggingface/tokenizers';
import { init } from 'attention-wasm';

import { createModel, MODEL_TYPES } from '../../web/models/index.js';
import { modelNeuron } from '../../web/neuron.js';
import { BUILDS, TOLERANCE, maxRelativeError, toTensor } from './helpers.js';

const ROOT = new URL('../fixtures/models/', import.meta.url);
const MODELS = readdirSync(ROOT).sort().map((name) => {
  const read = (file) => readFileSync(new URL(`${name}/${file}`, ROOT));
  const json = (file) => JSON.parse(read(file).toString('utf8'));
  return {
    name, config: json('config.json'), tokenizer: json('tokenizer.json'), tokenizerConfig: json('tokenizer_config.json'),
    weights: read('model.safetensors'), reference: json('reference.json'),
  };
});

for (const m of MODELS) {
  test(`${m.name}: the npm tokenizer gives the reference's ids and tokens`, () => {
    const encoded = new Tokenizer(m.tokenizer, m.tokenizerConfig).encode(m.reference.text);
    assert.deepEqual(encoded.ids, m.reference.ids);
    assert.deepEqual(encoded.tokens, m.reference.tokens);
  });
}

for (const build of BUILDS) {
  describe(`${build.name} build: Hugging Face models`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });

    for (const m of MODELS) {
      test(`${m.name} (${m.config.model_type}): every head's weights and the logits`, () => {
        const model = createModel(attn, m.config, attn.loadSafetensors(m.weights));
        try {
          const { logits, attentions } = model.forward(Int32Array.from(m.reference.ids), { needWeights: true });
          const want = toTensor(m.reference.attentions);
          const [layers, heads, t] = want.shape;
          assert.equal(attentions.length, layers);
          for (let layer = 0; layer < layers; layer++)
            for (let head = 0; head < heads; head++) {
              const plane = (data, at) => data.subarray(at * t * t, (at + 1) * t * t);
              const err = maxRelativeError(plane(attentions[layer], head), plane(want.data, layer * heads + head));
              assert.ok(err <= TOLERANCE, `layer ${layer + 1} head ${head + 1}: max relative error ${err}`);
            }
          const err = maxRelativeError(logits, toTensor(m.reference.logits).data);
          assert.ok(err <= TOLERANCE, `logits: max relative error ${err}`);
        } finally {
          model.dispose();
        }
      });
    }

    // The neuron view recomputes a head's softmax from what the layer's attention reads (its
    // attentionParts: GroupedQueryAttention.project for the decoders): q and k after the QK-norm
    // and the checkpoint's RoPE, its scale, soft cap and sliding window (gemma2's is shorter than
    // the text). Every query of every head gives the reference's row.
    test('the neuron view of every layer, head and query gives the reference weights', () => {
      for (const m of MODELS) {
        const model = createModel(attn, m.config, attn.loadSafetensors(m.weights));
        try {
          const { attentionInputs } = model.forward(Int32Array.from(m.reference.ids), { logits: 'none', needInputs: true });
          const want = toTensor(m.reference.attentions);
          const [layers, heads, t] = want.shape;
          for (let layer = 0; layer < layers; layer++) {
            const parts = model.attentionParts(attentionInputs[layer], layer);
            for (let head = 0; head < heads; head++) {
              const rows = Float32Array.from(Array.from({ length: t }, (_, query) => Array.from(modelNeuron(parts, layer, head, query).weights)).flat());
              const err = maxRelativeError(rows, want.data.subarray((layer * heads + head) * t * t, (layer * heads + head + 1) * t * t));
              assert.ok(err <= TOLERANCE, `${m.name} layer ${layer + 1} head ${head + 1}: max relative error ${err}`);
            }
          }
        } finally {
          model.dispose();
        }
      }
    });

    test('weightsInto: every layer writes its weights into the one array given, as it returns them without', () => {
      for (const m of MODELS) {
        const model = createModel(attn, m.config, attn.loadSafetensors(m.weights));
        const ids = Int32Array.from(m.reference.ids);
        const t = ids.length;
        const { attentions } = model.forward(ids, { needWeights: true, logits: 'none' });
        const into = new Float32Array(model.layers * model.heads * t * t);
        const written = model.forward(ids, { needWeights: true, logits: 'none', weightsInto: into });
        written.attentions.forEach((layer, l) => {
          assert.equal(layer.buffer, into.buffer, `${m.name} layer ${l + 1}: a view of the array`);
          assert.deepEqual(into.subarray(l * model.heads * t * t, (l + 1) * model.heads * t * t), attentions[l], `${m.name} layer ${l + 1}`);
        });
        model.dispose();
      }
    });

    test("logits: 'last' is the last row of 'all', 'none' gives none, and the weights do not change", () => {
      for (const m of MODELS) {
        const model = createModel(attn, m.config, attn.loadSafetensors(m.weights));
        const ids = Int32Array.from(m.reference.ids);
        const all = model.forward(ids, { needWeights: true });
        const last = model.forward(ids, { logits: 'last', needWeights: true });
        const vocab = all.logits.length / ids.length;
        assert.deepEqual(last.logits, all.logits.subarray(-vocab), m.name);
        assert.deepEqual(last.attentions, all.attentions, m.name);
        assert.equal(model.forward(ids, { logits: 'none' }).logits, null);
        model.dispose();
      }
    });

    test("GPT-2's and BERT's base-model names (no 'transformer.' or 'bert.' prefix) load too", () => {
      for (const [name, prefix] of [['gpt2', 'transformer.'], ['bert', 'bert.']]) {
        const m = MODELS.find((k) => k.name === name);
        const tensors = attn.loadSafetensors(m.weights);
        // The base model's file: the prefix gone, and no heads (GPT-2's is tied to wte anyway).
        const base = new Map([...tensors].filter(([key]) => key.startsWith(prefix)).map(([key, t]) => [key.slice(prefix.length), t]));
        const model = createModel(attn, m.config, base);
        const got = model.forward(Int32Array.from(m.reference.ids), { needWeights: true });
        const want = toTensor(m.reference.attentions);
        assert.ok(maxRelativeError(Float32Array.from(got.attentions.flatMap((layer) => Array.from(layer))), want.data) <= TOLERANCE, name);
        if (name === 'bert') assert.equal(got.logits, null, 'a BertModel file has no masked-LM head');
        model.dispose();
      }
    });

    test('a model_type the viewer does not run is named', () => {
      assert.throws(() => createModel(attn, { model_type: 't5' }, new Map()), (err) => err.message.includes('"t5"') && MODEL_TYPES.every((t) => err.message.includes(t)));
    });
  });
}

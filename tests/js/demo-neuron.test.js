// The demo's neuron view for the attention kinds (web/neuron.js, written out in JS from the page's
// seeded weights) against the package: its softmax must be the weights the package returned to
// the page (web/runner.js) for that head and query, under every mask, and its output the weighted
// sum of the values it lists. (The trained model's neuron view: demo-model.test.js.)
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { init } from 'attention-wasm';

import { MAX_TOKENS, sentencesOf } from '../../web/embeddings.js';
import { kindNeuron } from '../../web/neuron.js';
import { AttentionRunner } from '../../web/runner.js';

const CONFIGS = {
  sdpa: { d: 16 },
  mha: { embedDim: 32, numHeads: 4 },
  additive: { d: 16, hiddenSize: 16 },
  relative: { heads: 4, dModel: 32 },
};
// A cap of 1.5 bends the toy embeddings' scaled scores (up to about 4) well into tanh's curve.
const CASES = [...Object.entries(CONFIGS), ['sdpa', { d: 16, softcap: 1.5 }]];

let attn;
let runner;
before(async () => {
  attn = await init();
  runner = new AttentionRunner(attn);
});
after(() => attn.dispose());

const custom = (L) => Uint8Array.from({ length: L * L }, (_, k) => (k % 7 === 3 ? 1 : 0));

for (const [kind, config] of CASES) {
  const name = config.softcap ? `${kind} with a soft cap` : kind;
  test(`${name}: the neuron view's softmax is the package's weights, under every mask`, async () => {
    const sentences = sentencesOf('The cat sat on the mat.\nA dog barked!');
    const L = Math.max(...sentences.map((s) => s.length));
    for (const [causal, padding, withCustom] of [[false, false, false], [true, true, false], [false, true, true]]) {
      const request = {
        kind, sentences, config, seed: 7, fileId: null, causal, padding, custom: withCustom ? custom(L) : null,
      };
      const result = await runner.run(request);
      const { N, H, n, m } = result;
      for (let sentence = 0; sentence < N; sentence++) {
        for (const head of [0, H - 1]) {
          for (const query of [0, 3, n - 1]) {
            const what = `${name} causal ${causal} padding ${padding} custom ${withCustom}, sentence ${sentence}, head ${head}, query ${query}`;
            const got = kindNeuron(attn, { request, sentence, head, query }, MAX_TOKENS);
            const row = ((sentence * H + head) * n + query) * m;
            for (let j = 0; j < m; j++) {
              const want = result.weights[row + j];
              assert.ok(Math.abs(got.weights[j] - want) <= 1e-5, `${what}, key ${j}: ${got.weights[j]} vs ${want}`);
              assert.equal(got.masked[j], result.masked[(sentence * n + query) * m + j], `${what}, key ${j} masked`);
            }
            if (config.softcap) {
              for (let j = 0; j < m; j++) {
                const want = config.softcap * Math.tanh(got.scaled[j] / config.softcap);
                assert.ok(Math.abs(got.capped[j] - want) <= 1e-6, `${what}, key ${j}: soft-capped ${got.capped[j]} vs ${want}`);
              }
            } else {
              assert.equal(got.capped, null, `${what}: no soft cap`);
            }
            const dv = got.values.length / m;
            for (let c = 0; c < dv; c++) {
              let sum = 0;
              for (let j = 0; j < m; j++) sum += got.weights[j] * got.values[j * dv + c];
              assert.ok(Math.abs(got.output[c] - sum) <= 1e-5 * (1 + Math.abs(sum)), `${what}: output ${c}`);
            }
          }
        }
      }
    }
  });
}

test('relative: the score splits into the content and the position term', () => {
  const request = {
    kind: 'relative', sentences: sentencesOf('one two three four'), config: CONFIGS.relative, seed: 3, fileId: null, causal: false, padding: false, custom: null,
  };
  const got = kindNeuron(attn, { request, sentence: 0, head: 1, query: 2 }, MAX_TOKENS);
  assert.deepEqual(got.terms.map((term) => term.name), ['content (q+u)·k', 'position q·R + b']);
  const scale = 1 / Math.sqrt(8);
  for (let j = 0; j < 4; j++) {
    const sum = got.terms[0].values[j] + got.terms[1].values[j];
    assert.ok(Math.abs(got.scaled[j] - scale * sum) <= 1e-6 * (1 + Math.abs(got.scaled[j])));
  }
});

test('weights loaded from a file: the neuron view says it cannot read them', () => {
  const request = { kind: 'mha', sentences: sentencesOf('a b'), config: CONFIGS.mha, seed: null, fileId: 1, causal: false, padding: false, custom: null };
  assert.throws(() => kindNeuron(attn, { request, sentence: 0, head: 0, query: 0 }, MAX_TOKENS), /seeded weights/);
});

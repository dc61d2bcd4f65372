// The demo page's trained model (web/model.js over web/model/) against PyTorch
// (tests/fixtures/demo_model_fixture.py, float64): next-token logits on a fixed prompt, a cached
// f16 generation step by step, and the heads the page labels — at least one induction head and one
// previous-token head, as Olsson et al. (2022) describe for two-layer models.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { init } from 'attention-wasm';

import { gridOf } from '../../web/grid.js';
import { CharModel, Generation } from '../../web/model.js';
import { headScores, repeatTargets } from '../../web/models/scores.js';
import { modelNeuron } from '../../web/neuron.js';
import { AttentionRunner, modelPictures } from '../../web/runner.js';
import { TOLERANCE, maxRelativeError } from './helpers.js';

const read = (path) => readFileSync(new URL(path, import.meta.url));
const fixture = JSON.parse(read('../fixtures/demo_model.json'));
const config = JSON.parse(read('../../web/model/config.json'));

let attn;
let model;
before(async () => {
  attn = await init();
  model = new CharModel(attn, config, attn.loadSafetensors(read('../../web/model/model.safetensors')));
});
after(() => attn.dispose());

const vocabSize = () => config.vocab.length;
const row = (logits, i) => logits.subarray(i * vocabSize(), (i + 1) * vocabSize());

test('the prompt tokenises to the ids PyTorch used', () => {
  assert.deepEqual(Array.from(model.encode(fixture.prompt)), fixture.ids);
  assert.equal(model.decode(fixture.continuation.ids), fixture.continuation.text);
});

test('next-token logits at every position of the prompt match PyTorch', () => {
  const { logits } = model.forward(model.encode(fixture.prompt));
  const err = maxRelativeError(logits, fixture.logits);
  assert.ok(err <= TOLERANCE, `logits: max relative error ${err}`);
});

// f16 keys and values round each element by up to 2^-11 of itself; through two layers and the
// output head that moves logits of about ±10 by a few thousandths.
const F16_TOLERANCE = 5e-3;

for (const dtype of ['f32', 'f16']) {
  test(`generation through ${dtype} KV caches: prefill, then one token a step, matches the full forward`, () => {
    const ids = fixture.continuation.ids;
    const promptLength = fixture.ids.length;
    const caches = model.createCaches(ids.length, dtype);
    const steps = [model.forward(ids.slice(0, promptLength), { caches }).logits.subarray(-vocabSize())];
    for (let t = promptLength; t < ids.length; t++) steps.push(model.forward(ids.slice(t, t + 1), { caches }).logits);
    const tolerance = dtype === 'f16' ? F16_TOLERANCE : TOLERANCE;
    steps.forEach((logits, step) => {
      const want = row(Float64Array.from(fixture.continuation.logits), promptLength - 1 + step);
      const err = maxRelativeError(logits, want);
      assert.ok(err <= tolerance, `step ${step}: max relative error ${err} > ${tolerance}`);
    });
    assert.equal(caches[0].length, ids.length);
    for (const cache of caches) cache.dispose();
  });
}

test('the page\'s Generation writes what PyTorch wrote, its weights growing a row a step', () => {
  const want = fixture.continuation.ids;
  const generation = new Generation(model, fixture.ids, want.length);
  while (!generation.full) generation.step();
  assert.equal(model.decode(generation.ids), fixture.continuation.text);
  assert.throws(() => generation.step(), /full/);
  // The rows gathered step by step are the full forward's weights (within the f16 cache's rounding).
  const t = want.length;
  const { weights } = model.forward(Int32Array.from(want), { needWeights: true });
  const whole = new Float32Array(model.layers * model.heads * t * t);
  weights.forEach((layer, l) => whole.set(layer, l * model.heads * t * t));
  const err = maxRelativeError(generation.weights(), whole);
  assert.ok(err <= F16_TOLERANCE, `weights: max relative error ${err}`);
  generation.dispose();
});

test('the neuron view\'s steps end in the block\'s own weights for that query', () => {
  const ids = model.encode(fixture.prompt);
  const t = ids.length;
  const { weights, attentionInputs } = model.forward(ids, { needWeights: true });
  for (const [layer, head, query] of [[0, 0, 0], [0, 3, t - 1], [1, 1, 7], [1, 2, t - 1]]) {
    const n = modelNeuron(model.attentionParts(attentionInputs[layer], layer), layer, head, query);
    assert.equal(n.kvHead, Math.floor(head / 2), 'heads 0-1 share key/value head 0, heads 2-3 key/value head 1');
    const want = weights[layer].subarray((head * t + query) * t, (head * t + query + 1) * t);
    const err = maxRelativeError(n.weights, want);
    assert.ok(err <= TOLERANCE, `layer ${layer} head ${head} query ${query}: max relative error ${err}`);
    assert.deepEqual(Array.from(n.masked), Array.from({ length: t }, (_, j) => (j > query ? 1 : 0)));
    const d = config.head_dim;
    assert.ok(Math.abs(n.scaled[0] - n.terms[0].values[0] / Math.sqrt(d)) <= 1e-6 * (1 + Math.abs(n.scaled[0])));
    // The output is the weighted sum of the values it lists.
    for (let c = 0; c < d; c++) {
      let sum = 0;
      for (let j = 0; j <= query; j++) sum += n.weights[j] * n.values[j * d + c];
      assert.ok(Math.abs(n.output[c] - sum) <= 1e-5 * (1 + Math.abs(sum)));
    }
  }
});

test('head scores on random characters repeated twice: PyTorch\'s, with an induction head and a previous-token head', () => {
  const { ids, scores: want } = fixture.repeated;
  const { weights } = model.forward(Int32Array.from(ids), { needWeights: true });
  const scores = headScores(weights, model.heads, repeatTargets(ids.length, ids.length / 2));
  scores.forEach((layer, l) => layer.forEach((got, h) => {
    for (const key of ['induction', 'previousToken']) {
      assert.ok(Math.abs(got[key] - want[l][h][key]) <= 1e-5, `layer ${l} head ${h} ${key}: ${got[key]} vs ${want[l][h][key]}`);
    }
  }));
  const best = (key) => Math.max(...scores.flat().map((s) => s[key]));
  assert.ok(best('induction') >= 0.4, `best induction score ${best('induction')} < 0.4`);
  assert.ok(best('previousToken') >= 0.6, `best previous-token score ${best('previousToken')} < 0.6`);
});

/** The largest weight of each cell of `grid` in a head's [t, t] weights: the pooling written plainly. */
function pooled(plane, t, grid) {
  const out = new Float32Array(grid.rows * grid.cols);
  for (let r = 0; r < grid.rows; r++) {
    for (let c = 0; c < grid.cols; c++) {
      let max = 0;
      for (let i = grid.row + r * grid.step; i < Math.min(grid.rowEnd, grid.row + (r + 1) * grid.step); i++) {
        for (let j = grid.col + c * grid.step; j < Math.min(grid.colEnd, grid.col + (c + 1) * grid.step); j++) max = Math.max(max, plane[i * t + j]);
      }
      out[r * grid.cols + c] = max;
    }
  }
  return out;
}

test('the page\'s pictures of a long text, extended from a shorter one: each cell the largest weight of its tokens, for the whole map and a zoomed window', () => {
  // 1100 characters: 3 × 3 tokens a cell over the whole map, and query rows in two chunks.
  const text = `${fixture.prompt}${fixture.continuation.text}\n`.repeat(40).slice(0, 1100);
  const ids = model.encode(text);
  const t = ids.length;
  const { weights: want } = model.forward(ids, { needWeights: true });
  const runner = new AttentionRunner(attn);
  runner.setModel(model);
  // The text typed onto the end of a shorter one: only the new characters run, after its caches.
  runner.modelForward(text.slice(0, 700));
  const extended = runner.modelForward(text);
  const { logits } = model.forward(ids);
  const err = maxRelativeError(extended.next, logits.subarray(-config.vocab.length));
  assert.ok(err <= TOLERANCE, `next-token logits after the extension: max relative error ${err}`);
  for (const window of [null, { row: 600, col: 450, size: 200 }, { row: 1000, col: 1050, size: 300 }]) {
    const grid = gridOf(t, t, window);
    const got = modelPictures(model, runner.modelForward(text), grid);
    assert.equal(got.grid.step, window ? 1 : 3);
    assert.equal(got.checks.maxMaskedWeight, 0, 'masked weights are 0');
    assert.ok(got.checks.maxRowSumError <= 1e-5, `rows sum to 1 (error ${got.checks.maxRowSumError})`);
    assert.equal(got.checks.nonFinite, 0);
    const cells = grid.rows * grid.cols;
    for (let layer = 0; layer < model.layers; layer++) {
      for (let head = 0; head < model.heads; head++) {
        const picture = got.weights.subarray((layer * model.heads + head) * cells, (layer * model.heads + head + 1) * cells);
        const err = maxRelativeError(picture, pooled(want[layer].subarray(head * t * t, (head + 1) * t * t), t, grid));
        assert.ok(err <= TOLERANCE, `${JSON.stringify(window)} layer ${layer} head ${head}: max relative error ${err}`);
      }
    }
  }
  // The window is moved inside the map: { row: 1000, col: 1050, size: 300 } shows the last 300 tokens.
  assert.deepEqual(gridOf(t, t, { row: 1000, col: 1050, size: 300 }), { row: 800, col: 800, rowEnd: 1100, colEnd: 1100, step: 1, rows: 300, cols: 300 });
});

// The page hands the last pictures back (worker.js's 'recycle'): the next ones of that size are
// pooled into that array, which must then hold exactly what a fresh one would.
test('pictures pooled into the array the page gave back equal fresh ones', () => {
  const request = (text) => ({ kind: 'model', sentences: [Array.from(text)], window: null, generate: false });
  const texts = [`${fixture.prompt} `.repeat(40).slice(0, 700), `${fixture.continuation.text} `.repeat(40).slice(0, 700)];
  const fresh = new AttentionRunner(attn);
  fresh.setModel(model);
  const want = fresh.run(request(texts[1])).weights;
  const recycling = new AttentionRunner(attn);
  recycling.setModel(model);
  const first = recycling.run(request(texts[0])).weights;
  recycling.spare = first;
  const got = recycling.run(request(texts[1])).weights;
  assert.equal(got, first, 'the array given back is used');
  assert.deepEqual(got, want);
});


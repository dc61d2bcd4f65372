// The demo page's trained model (web/model.js over web/model/, opened with the package's openModel)
// against PyTorch (tests/fixtures/demo_model_fixture.py, float64): next-token logits on a fixed
// prompt, greedy generation through f32 and f16 KV caches, and the heads the page labels — at least
// one induction head and one previous-token head, as Olsson et al. (2022) describe for two-layer
// models.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { init } from 'attention-wasm';

import { MAX_GRID, gridOf } from '../../web/grid.js';
import { TrainedModel } from '../../web/model.js';
import { headScores, inductionTargets, repeatTargets, repeatedRandomIds } from '../../web/scores.js';
import { aboutParts, modelNeuron } from '../../web/neuron.js';
import { AttentionRunner, modelPictures, pictureCells } from '../../web/runner.js';
import { TOLERANCE, maxRelativeError } from './helpers.js';

const read = (path) => readFileSync(new URL(path, import.meta.url));
const fixture = JSON.parse(read('../fixtures/demo_model.json'));
const config = JSON.parse(read('../../web/model/config.json'));

let attn;
let trained;
let model;
before(async () => {
  attn = await init();
  trained = await TrainedModel.open(attn, new URL('../../web/model/', import.meta.url));
  model = trained.model;
});
after(async () => {
  await trained.dispose();
  attn.dispose();
});

test('the prompt tokenises to the ids PyTorch used', () => {
  assert.deepEqual(Array.from(trained.encode(fixture.prompt)), fixture.ids);
  assert.equal(trained.decode(fixture.continuation.ids), fixture.continuation.text);
});

test('next-token logits at every position of the prompt match PyTorch', async () => {
  const { logits } = await model.forward(trained.encode(fixture.prompt), { logits: 'all' });
  const err = maxRelativeError(logits.data, fixture.logits);
  assert.ok(err <= TOLERANCE, `logits: max relative error ${err}`);
});

for (const cacheDtype of ['f32', 'f16']) {
  test(`greedy generation through ${cacheDtype} KV caches writes what PyTorch wrote`, async () => {
    const want = fixture.continuation.ids;
    const got = await model.generate(fixture.ids, { maxNewTokens: want.length - fixture.ids.length, cacheDtype, eosTokenId: [] });
    assert.equal(trained.decode(got), fixture.continuation.text);
  });
}

test('the neuron view\'s steps end in the block\'s own weights for that query', async () => {
  const ids = trained.encode(fixture.prompt);
  const t = ids.length;
  const { attentions, hiddenStates } = await model.forward(ids, { outputAttentions: true, outputHiddenStates: true });
  for (const [layer, head, query] of [[0, 0, 0], [0, 3, t - 1], [1, 1, 7], [1, 2, t - 1]]) {
    const n = modelNeuron(await model.project(hiddenStates[layer], { layer }), layer, head, query, aboutParts(model));
    assert.equal(n.kvHead, Math.floor(head / 2), 'heads 0-1 share key/value head 0, heads 2-3 key/value head 1');
    const want = attentions[layer].data.subarray((head * t + query) * t, (head * t + query + 1) * t);
    const err = maxRelativeError(n.weights, want);
    assert.ok(err <= TOLERANCE, `layer ${layer} head ${head} query ${query}: max relative error ${err}`);
    assert.deepEqual(Array.from(n.masked), Array.from({ length: t }, (_, j) => (j > query ? 1 : 0)));
    const d = config.head_dim;
    assert.ok(Math.abs(n.scaled[0] - n.terms[0].values[0] / Math.sqrt(d)) <= 1e-6 * (1 + Math.abs(n.scaled[0])));
    assert.match(n.describe, /q and k after RoPE/);
    // The output is the weighted sum of the values it lists.
    for (let c = 0; c < d; c++) {
      let sum = 0;
      for (let j = 0; j <= query; j++) sum += n.weights[j] * n.values[j * d + c];
      assert.ok(Math.abs(n.output[c] - sum) <= 1e-5 * (1 + Math.abs(sum)));
    }
  }
});

test('head scores on random characters repeated twice: PyTorch\'s, with an induction head and a previous-token head', async () => {
  const { ids, scores: want } = fixture.repeated;
  const { attentions } = await model.forward(ids, { outputAttentions: true });
  const scores = headScores(attentions.map((layer) => layer.data), model.heads, repeatTargets(ids.length, ids.length / 2));
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

test('the page\'s pictures of a long text: each cell the largest weight of its tokens, for the whole map and a zoomed window', async () => {
  // 1100 characters: 3 × 3 tokens a cell over the whole map, and query rows in two chunks.
  const text = `${fixture.prompt}${fixture.continuation.text}\n`.repeat(40).slice(0, 1100);
  const ids = trained.encode(text);
  const t = ids.length;
  const { attentions, logits } = await model.forward(ids, { outputAttentions: true });
  const runner = new AttentionRunner(attn);
  await runner.setModel(trained);
  const forward = await runner.modelForward(text);
  // (Asking for weights takes another kernel path: equal within float32 rounding, not bit for bit.)
  assert.ok(maxRelativeError(forward.next, logits.data) <= TOLERANCE, 'the kept forward\'s next-token logits');
  for (const window of [null, { row: 600, col: 450, size: 200 }, { row: 1000, col: 1050, size: 300 }]) {
    const grid = gridOf(t, t, window);
    const got = await modelPictures(attn, model, forward, grid);
    assert.equal(got.grid.step, window ? 1 : 3);
    assert.equal(got.checks.maxMaskedWeight, 0, 'masked weights are 0');
    assert.ok(got.checks.maxRowSumError <= 1e-5, `rows sum to 1 (error ${got.checks.maxRowSumError})`);
    assert.equal(got.checks.nonFinite, 0);
    const cells = grid.rows * grid.cols;
    for (let layer = 0; layer < model.layers; layer++) {
      for (let head = 0; head < model.heads; head++) {
        const picture = got.weights.subarray((layer * model.heads + head) * cells, (layer * model.heads + head + 1) * cells);
        const err = maxRelativeError(picture, pooled(attentions[layer].data.subarray(head * t * t, (head + 1) * t * t), t, grid));
        assert.ok(err <= TOLERANCE, `${JSON.stringify(window)} layer ${layer} head ${head}: max relative error ${err}`);
      }
    }
  }
  // The window is moved inside the map: { row: 1000, col: 1050, size: 300 } shows the last 300 tokens.
  assert.deepEqual(gridOf(t, t, { row: 1000, col: 1050, size: 300 }), { row: 800, col: 800, rowEnd: 1100, colEnd: 1100, step: 1, rows: 300, cols: 300 });
});

// The page hands the last pictures back (worker.js's 'recycle'): the next ones of that size are
// pooled into that array, which must then hold exactly what a fresh one would.
test('pictures pooled into the array the page gave back equal fresh ones', async () => {
  const request = (text) => ({ kind: 'model', sentences: [Array.from(text)], window: null, generate: false });
  const texts = [`${fixture.prompt} `.repeat(40).slice(0, 700), `${fixture.continuation.text} `.repeat(40).slice(0, 700)];
  const fresh = new AttentionRunner(attn);
  await fresh.setModel(trained);
  const want = (await fresh.run(request(texts[1]))).weights;
  const recycling = new AttentionRunner(attn);
  await recycling.setModel(trained);
  const first = (await recycling.run(request(texts[0]))).weights;
  recycling.spare = first;
  const got = (await recycling.run(request(texts[1]))).weights;
  assert.equal(got, first, 'the array given back is used');
  assert.deepEqual(got, want);
});

test('a generation request adds the most likely character and shows the text with it', async () => {
  const runner = new AttentionRunner(attn);
  await runner.setModel(trained);
  const result = await runner.run({ kind: 'model', sentences: [Array.from(fixture.prompt)], window: null, generate: true });
  const next = fixture.continuation.text[fixture.prompt.length];
  assert.equal(result.model.generated, next);
  assert.equal(result.tokens[0].join(''), fixture.prompt + next);
  assert.equal(result.n, fixture.prompt.length + 1);
});

test("an opened model's run stops at its signal with an AbortError, and runs again after it", async () => {
  const runner = new AttentionRunner(attn);
  const files = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']
    .map((name) => new File([read(`../fixtures/models/gpt2/${name}`)], name));
  await runner.openFolder(files, () => {});
  const request = { kind: 'opened', text: 'The cat sat on the mat.' };
  const controller = new AbortController();
  const layers = [];
  const run = runner.run(request, { signal: controller.signal, onProgress: ({ layer }) => { layers.push(layer); controller.abort(); } });
  await assert.rejects(run, { name: 'AbortError' });
  assert.deepEqual(layers, [1], 'stopped after the first layer');
  const result = await runner.run(request);
  assert.equal(result.kind, 'opened');
  await runner.opened.folder.dispose();
});

test("an opened model past 512 tokens: pictures of its heads, each cell the largest weight of its tokens; past 2048, the text is cut with a note", async () => {
  const runner = new AttentionRunner(attn);
  const files = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']
    .map((name) => new File([read(`../fixtures/models/gemma2/${name}`)], name));
  await runner.openFolder(files, () => {});
  const { model, tokenizer } = runner.opened.folder;
  const text = `${fixture.prompt} ${fixture.continuation.text} `.repeat(12);
  const { ids } = tokenizer.encode(text);
  const t = ids.length;
  assert.ok(t > 512 && t <= 2048, `${t} tokens`);
  const { attentions } = await model.forward(ids, { outputAttentions: true, logits: 'none' });
  // Each run reads the layers once: one forward, whose onLayer the pictures come from.
  const calls = { forward: 0, project: 0 };
  for (const method of ['forward', 'project']) {
    const call = model[method].bind(model);
    model[method] = (...args) => {
      calls[method]++;
      return call(...args);
    };
  }
  for (const window of [null, { row: t - 200, col: t - 300, size: 150 }]) {
    const before = { ...calls };
    const layersDrawn = [];
    const result = await runner.run({ kind: 'opened', text, window }, { onLayer: (layer) => layersDrawn.push({ layer, forwards: calls.forward - before.forward }) });
    // The model's first run also scores its heads on the standard sequence, in a forward of its
    // own after the text's: every layer of the text is drawn before it starts.
    const first = window === null;
    assert.deepEqual({ forward: calls.forward - before.forward, project: calls.project - before.project }, { forward: first ? 2 : 1, project: 0 });
    assert.deepEqual(layersDrawn, Array.from({ length: model.layers }, (_, layer) => ({ layer, forwards: 1 })));
    if (first) {
      const standardIds = repeatedRandomIds(Math.floor(0.1 * model.vocabSize), Math.ceil(0.9 * model.vocabSize), runner.opened.standardLength);
      const standard = await model.forward(standardIds, { outputAttentions: true, logits: 'none' });
      assert.deepEqual(result.model.scores, headScores(standard.attentions.map((layer) => layer.data), model.heads, repeatTargets(standardIds.length, runner.opened.standardLength)).flat());
    }
    // The whole map's scores on the text come from the same rows (none for a window).
    if (window === null) {
      const want = headScores(attentions.map((layer) => layer.data), model.heads, inductionTargets(ids)).flat();
      result.model.textScores.forEach((score, i) => {
        for (const key of ['previousToken', 'induction']) assert.ok(Math.abs(score[key] - want[i][key]) <= 1e-5, `head ${i} ${key}: ${score[key]} vs ${want[i][key]}`);
      });
    } else {
      assert.equal(result.model.textScores, null);
    }
    const grid = gridOf(t, t, window);
    assert.deepEqual(result.grid, grid);
    assert.equal(result.checks.maxMaskedWeight, 0);
    assert.ok(result.checks.maxRowSumError <= 1e-5);
    const cells = grid.rows * grid.cols;
    for (let layer = 0; layer < model.layers; layer++) {
      for (let head = 0; head < model.heads; head++) {
        const picture = result.weights.subarray((layer * model.heads + head) * cells, (layer * model.heads + head + 1) * cells);
        const err = maxRelativeError(picture, pooled(attentions[layer].data.subarray(head * t * t, (head + 1) * t * t), t, grid));
        assert.ok(err <= TOLERANCE, `${JSON.stringify(window)} layer ${layer} head ${head} (sliding window ${layer === 0}, soft cap): ${err}`);
      }
    }
    assert.equal(result.model.note, null);
  }
  const long = text.repeat(4);
  const cut = await runner.run({ kind: 'opened', text: long, window: null });
  assert.equal(cut.n, 2048);
  assert.match(cut.model.note, new RegExp(`^The text is ${tokenizer.encode(long).ids.length} tokens; the viewer reads its first 2048`));
  await runner.opened.folder.dispose();
});

test("head ablation: each token's change in log-probability and the predictions before and after are the package's forward with and without the heads", async () => {
  const runner = new AttentionRunner(attn);
  await runner.setModel(trained);
  const text = `${fixture.prompt}${fixture.continuation.text}`;
  const heads = [[1, 3], [0, 0]];
  const result = await runner.ablate({ kind: 'model', text, heads, position: 5 });
  const ids = trained.encode(text);
  const t = ids.length, vocab = config.vocab.length;
  const mask = [[0, 1, 1, 1], [1, 1, 1, 0]];
  const before = (await model.forward(ids, { logits: 'all' })).logits.data;
  const after = (await model.forward(ids, { logits: 'all', headMask: mask })).logits.data;
  const logProbability = (logits, i, id) => {
    const row = Array.from(logits.subarray(i * vocab, (i + 1) * vocab));
    const max = Math.max(...row);
    return row[id] - max - Math.log(row.reduce((sum, x) => sum + Math.exp(x - max), 0));
  };
  assert.equal(result.delta.length, t - 1);
  for (let i = 0; i < t - 1; i++) {
    const want = logProbability(after, i, ids[i + 1]) - logProbability(before, i, ids[i + 1]);
    assert.ok(Math.abs(result.delta[i] - want) <= 1e-4, `token ${i + 1}: ${result.delta[i]} vs ${want}`);
  }
  assert.ok(result.delta.some((d) => d < -0.1), 'removing the induction head lowers some predictions');
  assert.equal(result.position, 5);
  const top = (logits) => Array.from(logits.subarray(5 * vocab, 6 * vocab).keys()).sort((a, b) => logits[5 * vocab + b] - logits[5 * vocab + a])[0];
  assert.equal(result.before[0].token, config.vocab[top(before)]);
  assert.equal(result.after[0].token, config.vocab[top(after)]);
  assert.ok(result.loss.after > result.loss.before);
  await assert.rejects(runner.ablate({ kind: 'model', text: 'a', heads, position: null }), /two tokens or more/);
});

/** The page's runner with the fixture folder `name` of tests/fixtures/models/ opened, and its reference. */
async function openedRunner(name) {
  const runner = new AttentionRunner(attn);
  const files = ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']
    .map((file) => new File([read(`../fixtures/models/${name}/${file}`)], file));
  await runner.openFolder(files, () => {});
  return { runner, ref: JSON.parse(read(`../fixtures/models/${name}/reference.json`)) };
}

test("an opened model's layers reach the page as each finishes: the result's own heads, in order; a cancelled run sends no more", async () => {
  const { runner, ref } = await openedRunner('llama-gqa');
  const { layers, heads } = runner.opened.folder.model;
  const pictures = [];
  const result = await runner.run({ kind: 'opened', text: ref.text }, { onLayer: (layer, picture) => pictures.push({ layer, ...picture }) });
  const t = ref.ids.length;
  assert.deepEqual(pictures.map((p) => p.layer), Array.from({ length: layers }, (_, layer) => layer));
  for (const { layer, weights, masked, rows, cols } of pictures) {
    assert.deepEqual([rows, cols], [t, t], 'whole below 64 tokens');
    assert.deepEqual(weights, result.weights.slice(layer * heads * t * t, (layer + 1) * heads * t * t), `layer ${layer}`);
    assert.deepEqual(masked, result.masked);
  }
  // Past 64 tokens each cell is the largest weight of the tokens it covers.
  const long = `${ref.text} `.repeat(8);
  const seen = [];
  const big = await runner.run({ kind: 'opened', text: long }, { onLayer: (layer, picture) => seen.push({ layer, ...picture }) });
  const n = big.n;
  assert.ok(n > 64 && n <= 512, `${n} tokens`);
  for (const { layer, weights, rows, cols } of seen) {
    assert.deepEqual([rows, cols], [64, 64]);
    for (let h = 0; h < heads; h++) {
      const plane = big.weights.subarray((layer * heads + h) * n * n, (layer * heads + h + 1) * n * n);
      const want = new Float32Array(64 * 64);
      for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) {
        const cell = Math.floor((i * 64) / n) * 64 + Math.floor((j * 64) / n);
        want[cell] = Math.max(want[cell], plane[i * n + j]);
      }
      assert.deepEqual(weights.subarray(h * 64 * 64, (h + 1) * 64 * 64), want, `layer ${layer} head ${h}`);
    }
  }
  // Stopped after its first layer: that layer's heads came, no later one.
  const controller = new AbortController();
  const sent = [];
  await assert.rejects(runner.run({ kind: 'opened', text: 'Another text' }, {
    signal: controller.signal, onProgress: () => controller.abort(), onLayer: (layer) => sent.push(layer),
  }), { name: 'AbortError' });
  assert.deepEqual(sent, [0]);
  await runner.opened.folder.dispose();
});

/** Softmax of a row of float64 logits → [{ id, p }] of the `count` largest. */
function referenceTop(logits, row, vocab, count) {
  const values = logits.slice(row * vocab, (row + 1) * vocab);
  const max = Math.max(...values);
  const sum = values.reduce((total, x) => total + Math.exp(x - max), 0);
  return Array.from(values.keys()).sort((a, b) => values[b] - values[a]).slice(0, count).map((id) => ({ id, p: Math.exp(values[id] - max) / sum }));
}

test("an opened decoder's next tokens, after the last token and after any other, and its greedy generation are transformers'", async () => {
  const { runner, ref } = await openedRunner('pythia');
  const { tokenizer } = runner.opened.folder;
  const [t, vocab] = ref.logits.shape;
  const assertTop = (got, row, what) => {
    const want = referenceTop(ref.logits.data, row, vocab, 5);
    // Ids past the tokenizer's vocabulary (a padded embedding) are named by their number, as the page does.
    assert.deepEqual(got.map((g) => g.token), want.map((w) => tokenizer.id_to_token(w.id) ?? `[${w.id}]`), what);
    got.forEach((g, k) => assert.ok(Math.abs(g.p - want[k].p) <= 1e-5, `${what}: ${g.p} vs ${want[k].p}`));
  };
  const result = await runner.run({ kind: 'opened', text: ref.text });
  assertTop(result.model.next, t - 1, 'after the last token');
  for (const position of [0, 5, t - 2]) assertTop(await runner.predict({ kind: 'opened', text: ref.text, position }), position, `after token ${position}`);
  // One token a step, each step's text as the tokenizer decodes it and its ids kept for it.
  let text = ref.text;
  const generated = [];
  for (let step = 0; step < ref.generate.ids.length; step++) {
    const next = await runner.run({ kind: 'opened', text, generate: true });
    assert.equal(next.model.text, text + next.model.generated);
    text = next.model.text;
    generated.push(runner.opened.generated.ids.at(-1));
    assert.deepEqual(next.tokens[0], Array.from(runner.opened.generated.ids, (id) => tokenizer.id_to_token(id) ?? `[${id}]`));
    if (next.model.ended) break;
  }
  assert.deepEqual(generated, ref.generate.ids);
  await runner.opened.folder.dispose();
  const bert = await openedRunner('bert');
  await assert.rejects(bert.runner.run({ kind: 'opened', text: 'the cat', generate: true }), /BERT is an encoder/);
  await bert.runner.opened.folder.dispose();
});

test("an opened model's pictures of every head stay within 128 MiB: fewer cells for models of many heads", () => {
  // The fixtures' few heads keep MAX_GRID cells; Llama-3.2-1B's 16 × 32 heads get 256 (8 tokens a
  // cell at 2048), Llama-3.1-8B's 32 × 32 get 181.
  assert.equal(pictureCells(2 * 4), MAX_GRID);
  assert.equal(pictureCells(16 * 32), 256);
  assert.equal(pictureCells(32 * 32), 181);
  for (const planes of [1, 128, 336, 512, 1024, 4096]) assert.ok(4 * planes * pictureCells(planes) ** 2 <= 128 * 2 ** 20, `${planes} heads`);
  assert.deepEqual(gridOf(2048, 2048, null, pictureCells(16 * 32)), { row: 0, col: 0, rowEnd: 2048, colEnd: 2048, step: 8, rows: 256, cols: 256 });
});

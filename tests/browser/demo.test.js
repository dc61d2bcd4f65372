// The demo page (web/) and the package in headless Chromium, served with COOP/COEP and the strict
// CSP of scripts/serve.mjs. Run: node --test tests/browser/
// Results are read from the page's JSON data block (#attention-result); screenshots and exported
// files land in test-results/ (git-ignored) for a human to look at. Timings are reported, never
// asserted tightly: they belong in benchmarks.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { init } from '../../dist/index.mjs';
import { EXAMPLE_TEXT, MAX_TOKENS, VERSE_TEXT, embed, mulberry32, padBatch, sentencesOf } from '../../web/embeddings.js';
import { relativeParameters } from '../../web/parameters.js';
import {
  RESULTS_DIR, assertRows, at, browserForFile, cellPoint, nextFrames, openDemo, readResult, update,
} from './chromium.js';

const EXPORT_FILE = new URL('../../examples/mha_export.json', import.meta.url);
const KINDS = ['sdpa', 'mha', 'additive', 'relative'];
const MASKS = ['none', 'causal', 'padding', 'both'];

const browser = browserForFile();

/** Selects `value` and waits for the update, or returns the current result if it is already chosen. */
async function choose(selector, value) {
  if ((await browser.page.inputValue(selector)) === value) return readResult(browser.page);
  return update(browser.page, () => browser.page.selectOption(selector, value));
}

function assertNoErrors() {
  assert.deepEqual(browser.errors, [], 'no console errors or page errors');
}

/** The page's mask for a result, recomputed here: [N, n, m], 1 = masked. */
function expectedMask({ shape: [N, , n, m], lengths }, maskKind, customCells = []) {
  const causal = maskKind === 'causal' || maskKind === 'both';
  const padding = maskKind === 'padding' || maskKind === 'both';
  const custom = new Set(customCells.map(([i, j]) => `${i},${j}`));
  const mask = [];
  for (let b = 0; b < N; b++) {
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        mask.push((causal && j > i) || (padding && j >= lengths[b]) || custom.has(`${i},${j}`) ? 1 : 0);
      }
    }
  }
  return mask;
}

function assertClose(got, want, tolerance, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let k = 0; k < want.length; k++) {
    const error = Math.abs(got[k] - want[k]) / (1 + Math.abs(want[k]));
    assert.ok(error <= tolerance, `${what}[${k}]: got ${got[k]}, want ${want[k]} (relative error ${error})`);
  }
}

test('the page loads the package in a worker, shows its features and fits 1280 and 390 px', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  const result = await openDemo(browser.page, browser.server);
  // Screenshots first, of the untouched browser.page.
  await browser.page.screenshot({ path: join(RESULTS_DIR, 'demo-1280x800.png'), fullPage: true });
  await browser.page.setViewportSize({ width: 390, height: 844 });
  await nextFrames(browser.page);
  await browser.page.screenshot({ path: join(RESULTS_DIR, 'demo-390x844.png'), fullPage: true });
  const overflow = await browser.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling at 390 px (overflow ${overflow} px)`);
  await browser.page.setViewportSize({ width: 1280, height: 800 });

  assert.equal(await browser.page.evaluate(() => globalThis.crossOriginIsolated), true, 'the page is cross-origin isolated');
  assert.equal(result.crossOriginIsolated, true, 'the worker is cross-origin isolated');
  assert.equal(result.features.simd, true, 'features.simd');
  assert.equal(result.features.threads, 2, 'init({ threads: 2 }) took the pthreads build in the worker');
  // Chromium >= 114 runs relaxed SIMD, so the worker takes the relaxed pthreads build.
  assert.equal(result.build, 'threads-relaxed');
  assert.equal(await browser.page.textContent('#feature-simd'), 'yes, relaxed (FMA)');
  assert.equal(await browser.page.textContent('#feature-threads'), '2');
  assert.match(await browser.page.textContent('#feature-version'), /^\d+\.\d+\.\d+/);
  assert.match(await browser.page.textContent('#forward-time'), /^\d+\.\d+ ms$/);

  // The guided first run: the trained model over a verse written twice, its 2 layers × 4 heads,
  // the induction head (the best score on the repeated random characters) locked and explained.
  const characters = Array.from(VERSE_TEXT);
  assert.equal(result.kind, 'model');
  assert.deepEqual(result.tokens, [characters]);
  assert.deepEqual(result.shape, [1, 8, characters.length, characters.length]);
  assert.deepEqual(result.masked, expectedMask(result, 'causal'));
  assertRows(result, 'default view');
  const { scores } = result.model;
  const best = scores.reduce((top, s, head) => (s.induction > scores[top].induction ? head : top), 0);
  assert.deepEqual([Math.floor(best / 4) + 1, (best % 4) + 1], [2, 4], 'the trained model\'s induction head');
  assert.deepEqual(result.view.head, best);
  assert.equal(await browser.page.getAttribute('.grid-cell[data-layer="2"][data-head="4"]', 'aria-pressed'), 'true');
  assert.match(await browser.page.textContent('#guide'), /^Layer 2, head 4 is an induction head\. The verse is written twice/);
  assert.equal(await browser.page.isVisible('#guide'), true);
  // Its text scores find the same head: the verse's second copy repeats the first.
  const ownBest = result.model.textScores.reduce((top, s, head) => (s.induction > result.model.textScores[top].induction ? head : top), 0);
  assert.equal(ownBest, best);
  // The stripe: in the second copy, a query's largest weight is on the key after its token's twin.
  const period = characters.indexOf('\n') + 1;
  let onStripe = 0;
  for (let i = period + 2; i < characters.length; i++) {
    const row = result.weights.slice(at(result, 0, best, i, 0), at(result, 0, best, i, 0) + characters.length);
    if (row.indexOf(Math.max(...row)) === i - period + 1) onStripe++;
  }
  assert.ok(onStripe >= 0.7 * (characters.length - period - 2), `the stripe holds ${onStripe} of the second copy's queries`);
  // Typing ends the guided run.
  await update(browser.page, () => browser.page.fill('[data-testid="text"]', 'In the beginning'));
  assert.equal(await browser.page.isVisible('#guide'), false);

  // ?kind= opens another kind: the example's two sentences, a batch of two, multi-head with 4 heads.
  const mha = await openDemo(browser.page, browser.server, '?kind=mha');
  const sentences = sentencesOf(EXAMPLE_TEXT);
  assert.deepEqual(mha.tokens, padBatch(sentences));
  assert.deepEqual(mha.lengths, sentences.map((s) => s.length));
  assert.equal(mha.kind, 'mha');
  assert.deepEqual(mha.shape, [2, 4, 7, 7]);
  assert.deepEqual(mha.weightsShape, [2, 4, 7, 7], 'MultiheadAttention weights [N, H, n, m]');
  assert.deepEqual(mha.outputShape, [7, 2, 32], 'MultiheadAttention output (L, N, E)');
  assert.deepEqual(mha.masked, expectedMask(mha, 'both'));
  assertRows(mha, 'multi-head view');
  assertNoErrors();
});

test('scaled dot-product weights match a float64 reference (causal + key padding)', { timeout: 20_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  const result = await update(browser.page, () => browser.page.selectOption('#kind', 'sdpa'));
  assert.equal(result.kind, 'sdpa');
  assert.equal(result.maskKind, 'both');
  const { shape: [N, H, n, m], tokens, lengths, embedDim: d } = result;
  assert.equal(H, 1);
  const want = [];
  for (let b = 0; b < N; b++) {
    const { data: x } = embed(tokens[b], d);
    for (let i = 0; i < n; i++) {
      const open = Array.from({ length: m }, (_, j) => j <= i && j < lengths[b]);
      const scores = open.map((ok, j) => {
        if (!ok) return -Infinity;
        let dot = 0;
        for (let k = 0; k < d; k++) dot += x[i * d + k] * x[j * d + k];
        return dot / Math.sqrt(d);
      });
      const max = Math.max(...scores);
      const exps = scores.map((s) => Math.exp(s - max));
      const sum = exps.reduce((a, c) => a + c, 0);
      want.push(...exps.map((e) => e / sum));
    }
  }
  assertClose(result.weights, want, 2e-5, 'SDPA weights');
  assert.match(result.call, /attnMask: \[2, 1, 7\] \(1 = may attend\)/, 'padding goes to SDPA as "1 = may attend", broadcast over queries');
  assertNoErrors();
});

// Hatch lines (#7d8592) in the heatmap's top-right cell, read off the canvas: the page keeps the
// last hatching while the mask stays the same, so a changed mask must be drawn anew.
async function hatchInTopRightCell() {
  return browser.page.evaluate(() => {
    const canvas = document.getElementById('heatmap');
    const { left, top, cell } = JSON.parse(canvas.dataset.grid);
    const ratio = canvas.width / canvas.getBoundingClientRect().width;
    const columns = JSON.parse(document.getElementById('attention-result').textContent).shape[3];
    const x = Math.round((left + (columns - 1) * cell) * ratio), y = Math.round(top * ratio), size = Math.floor(cell * ratio);
    const { data } = canvas.getContext('2d').getImageData(x, y, size, size);
    let count = 0;
    for (let k = 0; k < data.length; k += 4) if (Math.abs(data[k] - 0x7d) < 8 && Math.abs(data[k + 1] - 0x85) < 8 && Math.abs(data[k + 2] - 0x92) < 8) count++;
    return count;
  });
}

test('the hatching follows the mask: drawn where a mask hides cells, gone when it no longer does', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=sdpa');
  for (const [maskKind, hatched] of [['causal', true], ['none', false], ['causal', true], ['padding', false]]) {
    await choose('#mask', maskKind);
    assert.equal((await hatchInTopRightCell()) > 0, hatched, `mask ${maskKind}: the top-right cell ${hatched ? 'is' : 'is not'} hatched`);
  }
  assertNoErrors();
});

test('every kind with every mask: masked cells weigh 0, rows sum to 1, each polarity converted', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  for (const kind of KINDS) {
    await choose('#kind', kind);
    for (const maskKind of MASKS) {
      const result = await choose('#mask', maskKind);
      const what = `${kind}, mask ${maskKind}`;
      assert.equal(result.kind, kind, what);
      assert.equal(result.maskKind, maskKind, what);
      assert.deepEqual(result.masked, expectedMask(result, maskKind), `${what}: the mask in force`);
      assertRows(result, what);
      assert.equal(result.checks.maxMaskedWeight, 0, `${what}: the page's own check`);
      assert.equal(result.checks.nonFinite, 0, `${what}: no NaN`);
      if (kind === 'mha' || kind === 'relative') assert.equal(result.shape[1], 4, `${what}: 4 heads`);
    }
  }
  // How each function was called (mask 'both'): the page's "masked" in each function's polarity.
  const calls = {};
  for (const kind of KINDS) calls[kind] = (await choose('#kind', kind)).call;
  assert.match(calls.sdpa, /isCausal: true, attnMask: \[2, 1, 7\] \(1 = may attend\)/);
  assert.match(calls.mha, /isCausal: true, keyPaddingMask: \[2, 7\] \(1 = padding\)/);
  assert.match(calls.additive, /attnMask: \[2, 7, 7\] \(1 = masked out\)/);
  assert.match(calls.relative, /mask: \[7, 7, 2\] \(0 = masked out\), weightsLayout: 'BHnm'/);

  // The relative weights the page asked for per head equal labml's [n, m, B, heads], computed in
  // Node from the same seeded parameters and embeddings, transposed here.
  const relative = await readResult(browser.page);
  const [N, H, L] = relative.shape;
  assert.deepEqual(relative.weightsShape, [N, H, L, L]);
  const { dModel } = relative.config;
  const attn = await init();
  const module = new attn.RelativeMultiHeadAttention(H, dModel, { P: MAX_TOKENS });
  module.loadStateDict(relativeParameters({ heads: H, dModel, P: MAX_TOKENS }, relative.seed));
  const x = new Float32Array(L * N * dModel);
  relative.tokens.forEach((tokens, b) => embed(tokens, dModel, x, b * dModel, N * dModel));
  const keep = new Uint8Array(L * L * N);
  expectedMask(relative, 'both').forEach((hidden, k) => {
    const b = Math.floor(k / (L * L));
    keep[(k % (L * L)) * N + b] = 1 - hidden;
  });
  const input = { data: x, shape: [L, N, dModel] };
  const labml = module.forward(input, input, input, { mask: { data: keep, shape: [L, L, N] } }).weights.data;
  module.dispose();
  const want = relative.weights.map((_, k) => {
    const [b, h, i, j] = [Math.floor(k / (H * L * L)), Math.floor(k / (L * L)) % H, Math.floor(k / L) % L, k % L];
    return labml[((i * L + j) * N + b) * H + h];
  });
  assertClose(relative.weights, want, 2e-5, 'relative: page vs Node');
  assertNoErrors();
});

test('clicking cells toggles the custom mask and the weights follow; a fully masked row gives zeros', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  await update(browser.page, () => browser.page.selectOption('#mask', 'none'));
  const before = await update(browser.page, () => browser.page.check('#custom'));
  assert.deepEqual(before.customCells, []);
  assert.ok(!before.masked.includes(1), 'nothing masked yet');

  // Masking key 1 for query 2 removes it from the softmax: the rest of row 2 is rescaled by
  // 1 / (1 - w[2, 1]) in every head and sentence (the custom mask applies to both); other rows stay.
  const p = await cellPoint(browser.page, 2, 1);
  const masked = await update(browser.page, () => browser.page.mouse.click(p.x, p.y));
  assert.deepEqual(masked.customCells, [[2, 1]]);
  assert.deepEqual(masked.masked, expectedMask(masked, 'none', [[2, 1]]));
  assert.match(masked.call, /attnMask: \[7, 7\] \(1 = not allowed\)/, 'the custom mask goes to MultiheadAttention as 1 = not allowed');
  assertRows(masked, 'custom [2, 1]');
  const [N, H, n, m] = masked.shape;
  for (let b = 0; b < N; b++) {
    for (let h = 0; h < H; h++) {
      const removed = before.weights[at(before, b, h, 2, 1)];
      assert.ok(removed > 0, 'the cell had weight before');
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < m; j++) {
          const was = before.weights[at(before, b, h, i, j)];
          const is = masked.weights[at(masked, b, h, i, j)];
          const want = i !== 2 ? was : j === 1 ? 0 : was / (1 - removed);
          assert.ok(Math.abs(is - want) <= 1e-5, `[${b}, ${h}, ${i}, ${j}]: ${is}, want ${want}`);
        }
      }
    }
  }
  // Hovering the cell says why it is masked.
  await browser.page.mouse.move(p.x, p.y);
  assert.match(await browser.page.textContent('#readout'), /^Query “sat” \(2\) → key “cat” \(1\): weight 0\.0000, masked \(custom\)/);

  // A second click unmasks it and the weights come back.
  const restored = await update(browser.page, () => browser.page.mouse.click(p.x, p.y));
  assert.deepEqual(restored.customCells, []);
  assertClose(restored.weights, before.weights, 1e-6, 'weights after unmasking');

  // Dragging along row 4 masks every cell it crosses (updates are coalesced while dragging).
  const a = await cellPoint(browser.page, 4, 0);
  const c = await cellPoint(browser.page, 4, 2);
  const dragged = await update(browser.page, async () => {
    await browser.page.mouse.move(a.x, a.y);
    await browser.page.mouse.down();
    await browser.page.mouse.move(c.x, c.y, { steps: 6 });
    await browser.page.mouse.up();
  });
  assert.deepEqual(dragged.customCells, [[4, 0], [4, 1], [4, 2]]);
  assertRows(dragged, 'dragged row 4');

  // Causal + a click on [0, 0]: query 0 may attend to nothing, in both sentences.
  await update(browser.page, () => browser.page.click('#clear-custom'));
  await update(browser.page, () => browser.page.selectOption('#mask', 'causal'));
  const q = await cellPoint(browser.page, 0, 0);
  const fully = await update(browser.page, () => browser.page.mouse.click(q.x, q.y));
  assert.deepEqual(fully.fullyMasked, [[0, 0], [1, 0]]);
  assert.deepEqual(assertRows(fully, 'fully masked row 0'), [[0, 0], [1, 0]]);
  assert.equal(fully.checks.maxFullyMaskedOutput, 0, 'zero output, not NaN');
  assert.match(await browser.page.textContent('#fully-masked'), /^Fully masked queries: “the” \(0\)\. Their weights are all 0 and their output is the zero vector \(max \|o\| = 0\)/);

  // The keyboard reaches the same mask: arrows move a cursor, Enter toggles the cell under it.
  await browser.page.focus('#heatmap');
  await browser.page.keyboard.press('ArrowDown'); // the first arrow puts the cursor on [0, 0]
  await browser.page.keyboard.press('ArrowDown');
  assert.match(await browser.page.textContent('#readout'), /^Query “cat” \(1\) → key “the” \(0\): weight 0\.\d{4}, not masked/);
  const keyed = await update(browser.page, () => browser.page.keyboard.press('Enter'));
  assert.deepEqual(keyed.customCells, [[0, 0], [1, 0]]);
  assert.deepEqual(keyed.fullyMasked, [[0, 0], [1, 0]], 'query 1 still sees itself');
  assertRows(keyed, 'keyboard mask');
  assert.equal(keyed.weights[at(keyed, 0, 0, 1, 1)], 1, 'query 1 attends only to itself');
  assert.match(await browser.page.textContent('#readout'), /^Query “cat” \(1\) → key “the” \(0\): weight 0\.0000, masked \(custom\)/);
  assertNoErrors();
});

test('bad input is an error on the page until it is fixed', { timeout: 20_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  const errorShown = (text) => browser.page.waitForFunction((want) => document.body.dataset.state === 'error' &&
    document.getElementById('error').textContent === want, text, { timeout: 10_000 });
  await browser.page.fill('#text', ' \n ');
  await errorShown('Type at least one word.');
  await browser.page.fill('#seed', '-1');
  await browser.page.fill('#text', 'One line only.');
  await errorShown('The weight seed must be an integer from 0 to 4294967295.');
  const fixed = await update(browser.page, () => browser.page.fill('#seed', '42'));
  assert.deepEqual(fixed.tokens, [['one', 'line', 'only', '.']]);
  assert.equal(fixed.seed, 42);
  assert.equal(await browser.page.isHidden('#error'), true);
  assert.equal(await browser.page.isHidden('#sentence-choice'), true, 'one sentence: no sentence choice');
  assertRows(fixed, 'one sentence');
  assertNoErrors();
});

test('thumbnails: hover shows a head, a click locks it; the large view draws that head', { timeout: 20_000 }, async () => {
  browser.errors.length = 0;
  const result = await openDemo(browser.page, browser.server, '?kind=mha');
  assert.equal(await browser.page.locator('.thumb').count(), 5, 'average + 4 heads');
  assert.match(await browser.page.textContent('#view-title'), /^Average of 4 heads · sentence 1/);
  await browser.page.hover('.thumb[data-head="1"]');
  assert.match(await browser.page.textContent('#view-title'), /^Head 2 of 4 · sentence 1/);
  await browser.page.mouse.move(0, 0);
  assert.match(await browser.page.textContent('#view-title'), /^Average of 4 heads/);

  await browser.page.click('.thumb[data-head="2"]');
  assert.equal(await browser.page.getAttribute('.thumb[data-head="2"]', 'aria-pressed'), 'true');
  await browser.page.mouse.move(0, 0);
  assert.match(await browser.page.textContent('#view-title'), /^Head 3 of 4 \(locked\)/);
  await browser.page.hover('.thumb[data-head="0"]');
  assert.match(await browser.page.textContent('#view-title'), /^Head 1 of 4 · /, 'hover still previews another head');
  await browser.page.mouse.move(0, 0);

  // The readout of a hovered cell is head 3's weight.
  const p = await cellPoint(browser.page, 5, 3);
  await browser.page.mouse.move(p.x, p.y);
  const weight = result.weights[at(result, 0, 2, 5, 3)].toFixed(4);
  assert.equal(await browser.page.textContent('#readout'),
    `Query “mat” (5) → key “on” (3): weight ${weight}, not masked. ` +
    `Output of this query: max |o| = ${result.outputMaxAbs[5].toFixed(4)}.`);

  // Sentence 2 and the relative colour scale redraw without a new computation.
  await browser.page.check('#sentence-1');
  assert.match(await browser.page.textContent('#view-title'), /sentence 2/);
  await browser.page.selectOption('#scale', 'row');
  await browser.page.click('.thumb[data-head="2"]'); // unlock
  assert.equal(await browser.page.getAttribute('.thumb[data-head="2"]', 'aria-pressed'), 'false');
  assertNoErrors();
});

test('export: a PNG of the view and a JSON of its weights and mask', { timeout: 20_000 }, async () => {
  browser.errors.length = 0;
  const result = await openDemo(browser.page, browser.server, '?kind=mha');

  const [png] = await Promise.all([browser.page.waitForEvent('download'), browser.page.click('#export-png')]);
  assert.equal(png.suggestedFilename(), 'attention-mha-s1-average.png');
  const pngPath = join(RESULTS_DIR, png.suggestedFilename());
  await png.saveAs(pngPath);
  const bytes = await readFile(pngPath);
  assert.ok(bytes.length > 1000, `PNG has ${bytes.length} bytes`);
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  assert.match(await browser.page.getAttribute('#png-link', 'href'), /^blob:/);
  assert.match(await browser.page.textContent('#png-link'), /^attention-mha-s1-average\.png \(\d+(\.\d)? KB\)$/);

  const [json] = await Promise.all([browser.page.waitForEvent('download'), browser.page.click('#export-json')]);
  const jsonPath = join(RESULTS_DIR, json.suggestedFilename());
  await json.saveAs(jsonPath);
  const exported = JSON.parse(await readFile(jsonPath, 'utf8'));
  const [, H, n, m] = result.shape;
  assert.equal(exported.kind, 'mha');
  assert.equal(exported.module, 'MultiheadAttention');
  assert.deepEqual(exported.tokens, result.tokens[0]);
  assert.equal(exported.heads, H);
  assert.deepEqual(exported.shape, [H, n, m]);
  assert.equal(exported.weights.length, H * n * m);
  const mean = exported.average.map((_, k) => exported.weights.reduce((sum, w, index) => (index % (n * m) === k ? sum + w : sum), 0) / H);
  assertClose(exported.average, mean, 1e-6, 'the average is the mean over heads');
  assert.deepEqual(exported.masked, result.masked.slice(0, n * m));
  assert.deepEqual(exported.weights, result.weights.slice(0, H * n * m));
  assertNoErrors();
});

test('a PyTorch state_dict loads from a file and matches the package in Node; bad files say why', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  const result = await update(browser.page, () => browser.page.setInputFiles('#file', EXPORT_FILE.pathname));
  assert.equal(result.weightsSource, 'file mha_export.json');
  assert.equal(result.embedDim, 16, 'the embedding size comes from the file');
  assert.deepEqual(result.shape, [2, 4, 7, 7]);
  assert.match(await browser.page.textContent('#file-info'), /^Weights from mha_export\.json: embedding 16, 4 heads/);
  assertRows(result, 'file weights');

  // The same module, inputs and masks in Node give the same weights: the page's plumbing
  // (embedding layout (L, N, E), keyPaddingMask, isCausal) is what a user would write.
  const { config, stateDict } = JSON.parse(await readFile(EXPORT_FILE, 'utf8'));
  const attn = await init();
  const { embedDim, numHeads, ...opts } = config;
  const mha = new attn.MultiheadAttention(embedDim, numHeads, opts);
  mha.loadStateDict(Object.fromEntries(Object.entries(stateDict).map(([k, t]) => [k, { shape: t.shape, data: Float32Array.from(t.data) }])));
  const [N, , L] = result.shape;
  const x = new Float32Array(L * N * embedDim);
  result.tokens.forEach((tokens, b) => embed(tokens, embedDim, x, b * embedDim, N * embedDim));
  const want = mha.forward({ data: x, shape: [L, N, embedDim] }, null, null, {
    isCausal: true, keyPaddingMask: attn.masks.keyPadding(result.lengths, L), averageAttnWeights: false,
  });
  mha.dispose();
  assertClose(result.weights, want.weights.data, 2e-5, 'page vs Node');

  // A module with every layout option: kdim and vdim (separate projections), bias_k / bias_v and a
  // zero-attention key (two extra, always attendable key columns) and batchFirst.
  const E = 8;
  const options = { bias: true, addBiasKV: true, addZeroAttn: true, kdim: 6, vdim: 5, batchFirst: true };
  const random = mulberry32(7);
  const tensor = (shape) => ({ shape, data: Array.from({ length: shape.reduce((p, q) => p * q, 1) }, () => random() - 0.5) });
  const odd = {
    module: 'MultiheadAttention',
    config: { embedDim: E, numHeads: 2, ...options },
    stateDict: {
      q_proj_weight: tensor([E, E]), k_proj_weight: tensor([E, 6]), v_proj_weight: tensor([E, 5]),
      in_proj_bias: tensor([3 * E]), bias_k: tensor([1, 1, E]), bias_v: tensor([1, 1, E]),
      'out_proj.weight': tensor([E, E]), 'out_proj.bias': tensor([E]),
    },
  };
  const oddResult = await update(browser.page, () => browser.page.setInputFiles('#file',
    { name: 'odd.json', mimeType: 'application/json', buffer: Buffer.from(JSON.stringify(odd)) }));
  assert.deepEqual(oddResult.shape, [2, 2, 7, 9], 'two extra key columns');
  assert.deepEqual(oddResult.extraKeys, ['bias_k', 'zero']);
  assert.deepEqual(oddResult.outputShape, [2, 7, E], 'batchFirst output (N, L, E)');
  assertRows(oddResult, 'bias_k + zero attention');
  const oddModule = new attn.MultiheadAttention(E, 2, options);
  oddModule.loadStateDict(Object.fromEntries(Object.entries(odd.stateDict).map(([k, t]) => [k, { shape: t.shape, data: Float32Array.from(t.data) }])));
  const batchFirst = (d) => {
    const data = new Float32Array(N * L * d);
    result.tokens.forEach((tokens, b) => embed(tokens, d, data, b * L * d, d));
    return { data, shape: [N, L, d] };
  };
  const oddWant = oddModule.forward(batchFirst(E), batchFirst(6), batchFirst(5), {
    isCausal: true, keyPaddingMask: attn.masks.keyPadding(result.lengths, L), averageAttnWeights: false,
  });
  oddModule.dispose();
  assertClose(oddResult.weights, oddWant.weights.data, 2e-5, 'page vs Node, every layout option');

  // Bad files: an error on the browser.page, and the page keeps working with the weights it had.
  const bad = async (name, contents, pattern) => {
    await browser.page.setInputFiles('#file', { name, mimeType: 'application/json', buffer: Buffer.from(contents) });
    await browser.page.waitForFunction((file) => {
      const error = document.getElementById('file-error');
      return !error.hidden && error.textContent.includes(file);
    }, name, { timeout: 10_000 });
    assert.match(await browser.page.textContent('#file-error'), pattern, name);
  };
  await bad('broken.json', '{"config": ', /^Could not load broken\.json: The file is not JSON/);
  await bad('other.json', JSON.stringify({ module: 'Transformer', config: {}, stateDict: {} }),
    /loads MultiheadAttention exports; the file holds "module": "Transformer"/);
  const misShaped = JSON.parse(await readFile(EXPORT_FILE, 'utf8'));
  misShaped.stateDict['out_proj.weight'] = { shape: [16, 15], data: Array(240).fill(0) };
  await bad('misshaped.json', JSON.stringify(misShaped), /MultiheadAttention rejected the file: AttentionError: .*out_proj\.weight/);
  const missing = JSON.parse(await readFile(EXPORT_FILE, 'utf8'));
  delete missing.stateDict.in_proj_bias;
  await bad('missing.json', JSON.stringify(missing), /MultiheadAttention rejected the file: AttentionError: .*in_proj_bias/);
  const still = await update(browser.page, () => browser.page.selectOption('#mask', 'causal'));
  assert.equal(still.weightsSource, 'file odd.json', 'the last good file stays loaded');

  // Back to seeded weights.
  const seeded = await update(browser.page, () => browser.page.click('#use-seeded'));
  assert.equal(seeded.weightsSource, 'seeded');
  assert.equal(seeded.embedDim, 32);
  const rerolled = await update(browser.page, () => browser.page.click('#reroll'));
  assert.notEqual(rerolled.seed, seeded.seed);
  assert.notDeepEqual(rerolled.weights, seeded.weights, 'another seed, other weights');
  assertNoErrors();
});

test('512 tokens: every kind completes, checked; times reported', { timeout: 60_000 }, async (t) => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  const rows = [];
  for (const kind of KINDS) {
    await choose('#kind', kind);
    let started = Date.now();
    const first = await update(browser.page, () => browser.page.selectOption('#length', '512'));
    const firstWall = Date.now() - started;
    // Three more updates at 512 tokens with the module already built: what interaction feels like.
    const later = [];
    for (const maskKind of ['causal', 'padding', 'both']) {
      started = Date.now();
      const result = await update(browser.page, () => browser.page.selectOption('#mask', maskKind));
      later.push({ result, wall: Date.now() - started });
    }
    const median = (key) => later.map(({ result }) => result[key]).sort((a, b) => a - b)[1];
    const again = later[1].result;
    const againWall = Math.max(...later.map(({ wall }) => wall));
    for (const r of [first, ...later.map(({ result }) => result)]) {
      assert.deepEqual(r.shape.slice(2), [512, 512], `${kind}: 512 x 512`);
      assert.equal(r.weights, null, `${kind}: the weights are not published at this size`);
      assert.equal(r.checks.maxMaskedWeight, 0, `${kind}: masked weights are 0`);
      assert.ok(r.checks.maxRowSumError <= 1e-4, `${kind}: rows sum to 1 (error ${r.checks.maxRowSumError})`);
      assert.equal(r.checks.nonFinite, 0, `${kind}: no NaN`);
    }
    assert.ok(firstWall < 15_000 && againWall < 15_000, `${kind}: updates complete (${firstWall} ms, ${againWall} ms)`);
    rows.push(`${kind.padEnd(8)} heads ${String(again.shape[1]).padStart(2)}  forward ${median('forwardMs').toFixed(1).padStart(6)} ms` +
      `  worker ${median('workerMs').toFixed(1).padStart(6)} ms  update ${median('updateMs').toFixed(1).padStart(6)} ms` +
      `  (first at 512: update ${first.updateMs.toFixed(1)} ms, wall ${firstWall} ms)`);
    await choose('#length', 'typed');
  }
  // Ten quick changes while one is computing: only the latest waits, so few are computed.
  await choose('#kind', 'mha');
  const start = await update(browser.page, () => browser.page.selectOption('#length', '512'));
  const burst = await update(browser.page, () => browser.page.evaluate(() => {
    const heads = document.getElementById('heads-count');
    for (let h = 1; h <= 10; h++) {
      heads.value = String(h);
      heads.dispatchEvent(new Event('input', { bubbles: true }));
    }
  }));
  assert.equal(burst.shape[1], 10, 'the last change is the one shown');
  assert.equal(burst.requests.requested - start.requests.requested, 10);
  const computed = burst.requests.computed - start.requests.computed;
  assert.ok(computed <= 3, `10 changes, ${computed} computed`);
  t.diagnostic(`10 rapid changes at 512 tokens: ${computed} computed`);
  // The largest configuration the controls allow, measured as the kinds above: three mask changes
  // once its module is built.
  const sixteen = await update(browser.page, () => browser.page.evaluate(() => {
    const heads = document.getElementById('heads-count');
    heads.value = '16';
    heads.dispatchEvent(new Event('input', { bubbles: true }));
  }));
  assert.equal(sixteen.shape[1], 16);
  const changes = [];
  for (const maskKind of ['causal', 'padding', 'both']) changes.push(await update(browser.page, () => browser.page.selectOption('#mask', maskKind)));
  for (const r of changes) assert.equal(r.checks.maxMaskedWeight, 0, 'mha, 16 heads: masked weights are 0');
  const median16 = (key) => changes.map((r) => r[key]).sort((a, b) => a - b)[1];
  rows.push(`mha      heads 16  forward ${median16('forwardMs').toFixed(1).padStart(6)} ms  worker ${median16('workerMs').toFixed(1).padStart(6)} ms` +
    `  update ${median16('updateMs').toFixed(1).padStart(6)} ms  (first at 16 heads: update ${sixteen.updateMs.toFixed(1)} ms)`);
  await browser.page.screenshot({ path: join(RESULTS_DIR, 'demo-512-tokens.png') });
  t.diagnostic(`512 tokens, batch of 2, medians of 3 mask changes (features ${JSON.stringify((await readResult(browser.page)).features)}):`);
  for (const row of rows) t.diagnostic(row);
  assertNoErrors();
});

test('the package runs in a browser page without the demo', { timeout: 20_000 }, async () => {
  // The demo page only provides the origin, headers and CSP; its own state does not matter here.
  browser.errors.length = 0;
  await browser.page.goto(`${browser.server.url}web/`, { waitUntil: 'load' });
  const got = await browser.page.evaluate(async () => {
    const { init: load } = await import('/dist/index.mjs');
    const attn = await load();
    const tensor = (values, shape) => ({ data: new Float32Array(values), shape });
    const q = tensor([1, 0, 0, 1], [2, 2]);
    const v = tensor([1, 2, 3, 4], [2, 2]);
    const plain = attn.scaledDotProductAttention(q, q, v, { needWeights: true });
    const causal = attn.scaledDotProductAttention(q, q, v, { needWeights: true, isCausal: true });
    return {
      features: attn.features,
      weights: Array.from(plain.weights.data),
      output: Array.from(plain.output.data),
      causalWeights: Array.from(causal.weights.data),
      causalOutput: Array.from(causal.output.data),
    };
  });
  // q = k = I, scale 1/sqrt(2): each row's scores are (1/sqrt(2), 0) in some order, so the weights
  // are a = sigmoid(1/sqrt(2)) = 0.66976155 and b = 1 - a = 0.33023845;
  // output row 0 = a [1, 2] + b [3, 4], row 1 = b [1, 2] + a [3, 4].
  const a = 0.66976155;
  const b = 0.33023845;
  assert.equal(got.features.simd, true);
  assertClose(got.weights, [a, b, b, a], 2e-5, 'weights');
  assertClose(got.output, [a + 3 * b, 2 * a + 4 * b, b + 3 * a, 2 * b + 4 * a], 2e-5, 'output');
  // Causal: query 0 sees only key 0; query 1 sees both, as above.
  assertClose(got.causalWeights, [1, 0, b, a], 2e-5, 'causal weights');
  assertClose(got.causalOutput, [1, 2, b + 3 * a, 2 * b + 4 * a], 2e-5, 'causal output');
  await browser.page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 20_000 });
  assertNoErrors();
});

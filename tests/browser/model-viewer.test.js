// Your own model in Chromium: each fixture folder of tests/fixtures/models/ opened through the
// page's folder input, its layers × heads grid, a head's JSON export against the float64
// reference, models opened in turn, folders the viewer cannot open with their messages, and the
// phone layout.
import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { Tokenizer } from '@huggingface/tokenizers';

import { visible } from '../../web/page.js';
import { TOLERANCE, maxRelativeError } from '../js/helpers.js';
import { browserForFile, cellPoint, definePicturesOf, lighter, openDemo, readResult, STEP_TIMEOUT } from './chromium.js';

const MODELS = fileURLToPath(new URL('../fixtures/models/', import.meta.url));
const browser = browserForFile();

async function reference(name) {
  return JSON.parse(await readFile(join(MODELS, name, 'reference.json'), 'utf8'));
}

/**
 * Opens a folder through the input and waits until the folder field is ready (or shows an error)
 * and, when it opened, until the page shows the model's heads.
 */
async function openFolder(page, folder) {
  // The field still says 'ready' for the last model until the input's change arrives.
  await page.$eval('#model-panel', (panel) => { panel.dataset.state = 'waiting'; });
  await page.setInputFiles('[data-testid="open-model"]', folder);
  await page.waitForFunction(() => ['ready', 'error'].includes(document.querySelector('#model-panel').dataset.state)
    && document.querySelector('#model-status').textContent !== '', null, { timeout: STEP_TIMEOUT });
  const opened = await page.$eval('#model-panel', (panel) => ({ state: panel.dataset.state, status: panel.querySelector('#model-status').textContent }));
  if (opened.state === 'ready') {
    await page.waitForFunction(() => {
      const { state } = document.body.dataset;
      const text = document.getElementById('attention-result').textContent;
      return state === 'error' || (state === 'ready' && JSON.parse(text).kind === 'opened');
    }, null, { timeout: STEP_TIMEOUT });
  }
  return opened;
}

/** A fixture folder's files as { name, bytes } for a page to make File objects of (a drop). */
function folderFiles(model) {
  return Promise.all(['config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors']
    .map(async (name) => ({ name, bytes: Array.from(await readFile(join(MODELS, model, name))) })));
}

/** The JSON the page exports for layer `layer`, head `head` (1-based). */
async function exportHead(page, layer, head) {
  await page.click(`.grid-cell[data-layer="${layer}"][data-head="${head}"]`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  return { name: download.suggestedFilename(), json: JSON.parse(await readFile(await download.path(), 'utf8')) };
}

test('opening each model folder: its grid, labels and a head exported as JSON match the reference', { timeout: 180_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  for (const name of ['gpt2', 'llama-gqa', 'bert', 'qwen3-qknorm', 'gemma2', 'gemma3', 'phi3', 'olmo2', 'gemma', 'pythia', 'llama-gqa-bf16']) {
    const ref = await reference(name);
    await page.fill('[data-testid="text"]', ref.text);
    const opened = await openFolder(page, join(MODELS, name));
    assert.equal(opened.state, 'ready', `${name}: ${opened.status}`);
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
    assert.equal(await page.inputValue('#kind'), 'opened');
    const [layers, heads, t] = [ref.attentions.shape[0], ref.attentions.shape[1], ref.ids.length];
    const result = await readResult(page);
    assert.deepEqual(result.tokens, [ref.tokens]);
    // It opens on its strongest induction head (on the standard sequence).
    const strongest = result.model.scores.reduce((best, s, i, all) => (s.induction > all[best].induction ? i : best), 0);
    assert.equal(result.view.head, strongest, `${name}: opens on head ${result.view.head}, the strongest is ${strongest}`);
    // The last model's download links are gone.
    assert.equal(await page.locator('.downloads a:not([hidden])').count(), 0, `${name}: no download link of another model`);
    // The coloured text reads as the tokenizer's decode: BERT's WordPiece tokens spaced.
    if (name === 'bert') assert.match(await page.textContent('#text-view'), /^\[CLS\] the cat sat on the mat\. the ?n the cat \[MASK\] on the \[SEP\]$/);
    assert.deepEqual(result.shape, [1, layers * heads, t, t]);
    assert.equal(result.checks.maxMaskedWeight, 0);
    const cells = await page.$$eval('.grid-cell', (all) => all.map((cell) => [Number(cell.dataset.layer), Number(cell.dataset.head)]));
    assert.equal(cells.length, layers * heads, `${name}: a cell per layer and head`);
    assert.deepEqual(cells.at(-1), [layers, heads]);
    // Under each cell its induction score on the standard sequence, which a newly opened model
    // computes after its first text's grid is drawn.
    assert.deepEqual(await page.$$eval('.grid-cell .scores', (all) => all.map((caption) => caption.textContent)),
      result.model.scores.map(({ induction }) => (induction === null ? '–' : induction.toFixed(2))));
    // Each head's induction and previous-token scores, on the standard sequence and on the text.
    assert.match(await page.textContent('#model-scores'),
      /^Strongest induction head: L\d+ H\d+ \(\d\.\d\d on \d+ random tokens repeated\)(; on your text L\d+ H\d+ \(\d\.\d\d\)|; your text repeats no span of 3 tokens, so it has none)\./);
    assert.match(await page.getAttribute('.grid-cell[data-layer="1"][data-head="1"]', 'title'),
      /^Layer 1, head 1: induction \d\.\d\d on the repeated random tokens, (\d\.\d\d|–) on your text; previous token \d\.\d\d, \d\.\d\d$/);
    const { name: file, json } = await exportHead(page, layers, heads);
    // The readout at the pointer names the cell's tokens and weight.
    const point = await cellPoint(page, t - 1, 1);
    await page.mouse.move(point.x, point.y);
    assert.match(await page.textContent('#readout'), new RegExp(`^Query “.*” \\(${t - 1}\\) → key “.*” \\(1\\): weight ${json.weights[t - 1][1].toFixed(4)}, `));
    // The neuron view follows that query through the head: its softmax column is the head's row.
    await page.waitForFunction((want) => document.querySelector('#neuron-title').textContent.includes(want) && document.querySelector('#neuron-body table'),
      `(${t - 1}) · layer ${layers}, head ${heads}`, { timeout: STEP_TIMEOUT });
    const header = await page.$$eval('#neuron-body thead th', (ths) => ths.map((th) => th.textContent));
    const rows = await page.$$eval('#neuron-body tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.textContent.trim())));
    const softmax = header.indexOf('softmax');
    assert.equal(header.includes('soft-capped'), name === 'gemma2', `${name}: a soft-capped column where the model caps its scores`);
    assert.ok(rows.length > 2, `${name}: q, the keys, the output`);
    for (const row of rows.slice(1, -1)) {
      const key = Number(row[0].match(/\((\d+)\)$/)[1]);
      assert.ok(Math.abs(Number(row[softmax]) - json.weights[t - 1][key]) <= 5e-4, `${name} key ${key}: neuron ${row[softmax]}, exported ${json.weights[t - 1][key]}`);
    }
    await page.mouse.move(0, 0);
    // The coloured text: the last query's row by default; a click on a token picks its row.
    const textWeights = () => page.$$eval('#text-view .text-token', (spans) => spans.map((s) => (s.dataset.weight === undefined ? null : Number(s.dataset.weight))));
    assert.equal((await textWeights()).length, t);
    await page.click(`#text-view .text-token[data-token="2"]`);
    const shown = await textWeights();
    json.weights[2].forEach((w, j) => {
      if (shown[j] === null) assert.ok(name !== 'bert' && j > 2, `only later tokens are masked, and only in causal models (token ${j})`);
      else assert.ok(Math.abs(shown[j] - w) <= 5e-5, `token ${j}: ${shown[j]} vs ${w}`);
    });
    assert.match(file, new RegExp(`-layer${layers}-head${heads}\\.json$`));
    assert.equal(json.pooled, false);
    assert.equal(json.model_type, JSON.parse(await readFile(join(MODELS, name, 'config.json'), 'utf8')).model_type);
    assert.deepEqual(json.tokens, ref.tokens);
    assert.deepEqual([json.layer, json.head], [layers, heads]);
    const plane = ref.attentions.data.slice(((layers - 1) * heads + heads - 1) * t * t, ((layers - 1) * heads + heads) * t * t);
    const err = maxRelativeError(Float32Array.from(json.weights.flat()), Float64Array.from(plane));
    assert.ok(err <= TOLERANCE, `${name}: the exported head is off by ${err}`);
  }
  assert.deepEqual(browser.errors, []);
});

test("an opened model's run names its layers as they finish, and typing runs once it pauses", { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  await page.fill('[data-testid="text"]', 'Hello');
  assert.equal((await openFolder(page, join(MODELS, 'pythia'))).state, 'ready');
  // Every text the busy line shows from now on, and the animations running on the page then.
  await page.evaluate(() => {
    window.busyTexts = [];
    window.animations = 0;
    new MutationObserver(() => {
      window.busyTexts.push(document.querySelector('#busy').textContent);
      window.animations = Math.max(window.animations, document.getAnimations().length);
    }).observe(document.querySelector('#busy'), { childList: true, characterData: true, subtree: true });
  });
  const before = (await readResult(page)).requests;
  await page.click('[data-testid="text"]');
  await page.keyboard.press('End');
  await page.keyboard.type(' there, world', { delay: 20 });
  await page.waitForFunction(() => document.body.dataset.state === 'ready'
    && JSON.parse(document.getElementById('attention-result').textContent).model?.text === 'Hello there, world', null, { timeout: STEP_TIMEOUT });
  const after = (await readResult(page)).requests;
  // 13 keystrokes 20 ms apart, within the 250 ms pause: one run (or two, on a slow machine), not 13.
  assert.ok(after.requested - before.requested <= 2, `${after.requested - before.requested} runs for one burst of typing`);
  const texts = await page.evaluate(() => window.busyTexts);
  assert.ok(texts.includes('Computing… layer 1 of 2') && texts.includes('Computing… layer 2 of 2'), JSON.stringify(texts));
  // Nothing moves while the page is busy (style.css says why): the busy line's words say the layer.
  assert.equal(await page.evaluate(() => window.animations), 0);
  // A keystroke's run waits for the pause; a paste's starts at once: its request leaves for the
  // worker within the input event.
  await page.evaluate(() => {
    window.computeSent = 0;
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function postMessage(message, ...rest) {
      if (message?.type === 'compute') window.computeSent++;
      return post.call(this, message, ...rest);
    };
  });
  const sentWithin = (inputType, text) => page.evaluate(({ inputType, text }) => {
    const before = window.computeSent;
    const box = document.querySelector('[data-testid="text"]');
    box.value = text;
    box.dispatchEvent(new InputEvent('input', { bubbles: true, inputType }));
    return window.computeSent - before;
  }, { inputType, text });
  const shown = (text) => page.waitForFunction((text) => document.body.dataset.state === 'ready'
    && JSON.parse(document.getElementById('attention-result').textContent).model?.text === text, text, { timeout: STEP_TIMEOUT });
  assert.equal(await sentWithin('insertText', 'Hello there, world!'), 0);
  await shown('Hello there, world!');
  assert.equal(await sentWithin('insertFromPaste', 'Pasted words'), 1);
  await shown('Pasted words');
  assert.deepEqual(browser.errors, []);
});

test('an opened model reads 2048 tokens: pictures of 4 × 4 tokens a cell, filled layer by layer during the forward, and a longer text is cut with a note', { timeout: 90_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  const ref = await reference('llama-gqa');
  await page.fill('[data-testid="text"]', `${ref.text} `.repeat(300)); // 14400 characters, about 2600 tokens
  // The busy line's layers (the forward's progress) and the grid's layers drawn, in one log.
  await page.evaluate(() => {
    window.fillLog = [];
    new MutationObserver(() => window.fillLog.push(document.querySelector('#busy').textContent))
      .observe(document.querySelector('#busy'), { childList: true, characterData: true, subtree: true });
    new MutationObserver(() => {
      const grid = document.querySelector('#heads');
      window.fillLog.push(`drawn ${grid.dataset.layersDone}, dimmed ${grid.querySelectorAll('.grid-cell.pending').length}`);
    }).observe(document.querySelector('#heads'), { attributes: true, attributeFilter: ['data-layers-done'] });
  });
  assert.equal((await openFolder(page, join(MODELS, 'llama-gqa'))).state, 'ready');
  const result = await readResult(page);
  assert.deepEqual([result.shape[2], result.grid.step, result.grid.rows], [2048, 4, 512]);
  // Each layer is drawn as the forward finishes it, before the next layer runs (not after a
  // second pass over the layers), and named in the busy line as it is drawn (in the same task, so
  // the busy line's observer, the first made, hears first): layer 1 drawn with layer 2's 4 heads
  // dimmed, then layer 2. (The result draws the whole grid once more.)
  const log = (await page.evaluate(() => window.fillLog)).filter((line) => line.startsWith('drawn') || line.startsWith('Computing… layer'));
  assert.deepEqual(log.slice(0, 4), ['Computing… layer 1 of 2', 'drawn 1, dimmed 4', 'Computing… layer 2 of 2', 'drawn 2, dimmed 0'], JSON.stringify(log));
  assert.equal(result.checks.maxMaskedWeight, 0);
  assert.ok(result.checks.maxRowSumError <= 1e-5);
  assert.match(await page.textContent('#text-cut'), /^The text is \d+ tokens; the viewer reads its first 2048 \(the viewer's limit\)\.$/);
  assert.ok(await page.isVisible('#text-cut'));
  assert.deepEqual(browser.errors, []);
});

test("head ablation on an opened decoder; BERT's button is off (it predicts masked tokens)", { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  const ref = await reference('pythia');
  await page.fill('[data-testid="text"]', ref.text);
  assert.equal((await openFolder(page, join(MODELS, 'pythia'))).state, 'ready');
  await page.click('.grid-cell[data-layer="1"][data-head="2"]');
  await page.click('#ablate-head');
  await page.waitForFunction(() => document.querySelector('#ablation').dataset.state === 'ready', null, { timeout: STEP_TIMEOUT });
  assert.match(await page.textContent('#ablation-summary'), /^Without L1 H2: /);
  assert.equal(await page.locator('#ablation-text .text-token').count(), ref.tokens.length);
  assert.equal(await page.locator('#ablation-text .text-token[data-delta]').count(), ref.tokens.length - 1);
  assert.equal((await openFolder(page, join(MODELS, 'bert'))).state, 'ready');
  assert.equal(await page.isDisabled('#ablate-head'), true);
  assert.equal(await page.locator('#ablated-heads .chip').count(), 0, 'the heads removed from another model are forgotten');
  assert.deepEqual(browser.errors, []);
});

test('a folder opened again gets a grid of its own, though its name and shape are the last one\'s', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  const ref = await reference('llama-gqa');
  await page.fill('[data-testid="text"]', ref.text);
  assert.equal((await openFolder(page, join(MODELS, 'llama-gqa'))).state, 'ready');
  const first = (await readResult(page)).model.openId;
  await page.$$eval('.grid-cell', (cells) => cells.forEach((cell) => { cell.dataset.before = 'yes'; }));
  await page.setInputFiles('[data-testid="open-model"]', join(MODELS, 'llama-gqa'));
  await page.waitForFunction((first) => {
    const text = document.getElementById('attention-result').textContent;
    return document.body.dataset.state === 'ready' && JSON.parse(text).model?.openId > first;
  }, first, { timeout: STEP_TIMEOUT });
  assert.equal(await page.locator('.grid-cell[data-before]').count(), 0, 'the last grid is gone');
  const result = await readResult(page);
  assert.deepEqual(await page.$$eval('.grid-cell .scores', (all) => all.map((caption) => caption.textContent)),
    result.model.scores.map(({ induction }) => (induction === null ? '–' : induction.toFixed(2))));
  assert.deepEqual(browser.errors, []);
});

test('a folder the viewer cannot open says which file is missing, and the next one opens', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  await page.fill('[data-testid="text"]', 'Hello world');
  const broken = await mkdtemp(join(tmpdir(), 'model-'));
  try {
    await cp(join(MODELS, 'gpt2', 'tokenizer.json'), join(broken, 'tokenizer.json'));
    await cp(join(MODELS, 'gpt2', 'model.safetensors'), join(broken, 'model.safetensors'));
    const refused = await openFolder(page, broken);
    assert.equal(refused.state, 'error');
    assert.match(refused.status, /a folder with config\.json.*got the files/);
    const opened = await openFolder(page, join(MODELS, 'bert'));
    assert.equal(opened.state, 'ready', opened.status);
  } finally {
    await rm(broken, { recursive: true, force: true });
  }
  assert.deepEqual(browser.errors, []);
});

test('a model folder\'s files dropped on the page open as the input\'s do', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  await page.fill('[data-testid="text"]', 'Hello world');
  const files = await folderFiles('gpt2');
  await page.$eval('#model-panel', (panel) => { panel.dataset.state = 'waiting'; });
  // A drop as the browser delivers it: a DataTransfer of File objects, on any part of the page.
  await page.evaluate((list) => {
    const transfer = new DataTransfer();
    for (const { name, bytes } of list) transfer.items.add(new File([Uint8Array.from(bytes)], name));
    const target = document.querySelector('#heatmap');
    for (const type of ['dragover', 'drop']) target.dispatchEvent(new DragEvent(type, { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }, files);
  await page.waitForFunction(() => document.querySelector('#model-panel').dataset.state === 'ready', null, { timeout: STEP_TIMEOUT });
  await page.waitForFunction(() => document.body.dataset.state === 'ready' && JSON.parse(document.getElementById('attention-result').textContent).kind === 'opened',
    null, { timeout: STEP_TIMEOUT });
  assert.match(await page.textContent('#model-status'), /^gpt2 \(gpt2, f32\): 2 layers × 4 heads/);
  assert.equal(await page.locator('.grid-cell').count(), 8);
  assert.deepEqual(browser.errors, []);
});

test("a folder dropped while the last model's first run is under way: that run stops, and the new model's grid is laid out whole", { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  await page.fill('[data-testid="text"]', (await reference('pythia')).text);
  const files = await folderFiles('gpt2');
  // As soon as pythia's first layer is drawn (its run still in flight: a MutationObserver runs
  // before the worker's next message), gpt2's folder is dropped; every result shown is recorded.
  await page.evaluate((list) => {
    window.resultsShown = [];
    new MutationObserver(() => window.resultsShown.push(JSON.parse(document.getElementById('attention-result').textContent).model?.name))
      .observe(document.getElementById('attention-result'), { childList: true, characterData: true, subtree: true });
    const grid = document.querySelector('#heads');
    const observer = new MutationObserver(() => {
      if (grid.dataset.layersDone !== '1' || !grid.dataset.model.includes(':pythia:')) return;
      observer.disconnect();
      window.atDrop = { inert: grid.inert, pending: grid.querySelectorAll('.grid-cell.pending').length, results: window.resultsShown.length };
      const transfer = new DataTransfer();
      for (const { name, bytes } of list) transfer.items.add(new File([Uint8Array.from(bytes)], name));
      for (const type of ['dragover', 'drop']) grid.dispatchEvent(new DragEvent(type, { dataTransfer: transfer, bubbles: true, cancelable: true }));
    });
    observer.observe(grid, { attributes: true, attributeFilter: ['data-layers-done'] });
  }, files);
  await page.setInputFiles('[data-testid="open-model"]', join(MODELS, 'pythia'));
  await page.waitForFunction(() => document.body.dataset.state === 'ready' && window.resultsShown.includes('gpt2'), null, { timeout: STEP_TIMEOUT });
  // The drop came during pythia's first run: its grid inert, its second layer still dimmed, no result yet.
  assert.deepEqual(await page.evaluate(() => window.atDrop), { inert: true, pending: 2, results: 0 });
  assert.deepEqual(await page.evaluate(() => window.resultsShown), ['gpt2'], 'only the new model\'s result is shown');
  assert.match(await page.textContent('#model-status'), /^gpt2 \(gpt2, f32\): 2 layers × 4 heads/);
  // gpt2's grid, whole: 2 × 4 cells of its own, none dimmed, usable.
  const grid = await page.$eval('#heads', (heads) => ({
    model: heads.dataset.model,
    done: heads.dataset.layersDone,
    inert: heads.inert,
    cells: Array.from(heads.querySelectorAll('.grid-cell'), (cell) => `${cell.dataset.layer}.${cell.dataset.head}`),
    pending: heads.querySelectorAll('.grid-cell.pending').length,
  }));
  assert.match(grid.model, /^opened:gpt2:/);
  assert.deepEqual(grid.cells, ['1.1', '1.2', '1.3', '1.4', '2.1', '2.2', '2.3', '2.4']);
  assert.deepEqual([grid.done, grid.inert, grid.pending], ['2', false, 0]);
  await page.click('.grid-cell[data-layer="2"][data-head="3"]');
  assert.equal(await page.getAttribute('.grid-cell[data-layer="2"][data-head="3"]', 'aria-pressed'), 'true');
  assert.deepEqual(browser.errors, []);
});

test('opening three models in turn, twice: each replaces the last, and the memory is back', { timeout: 90_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  await page.fill('[data-testid="text"]', 'Hello world');
  const memory = [];
  for (let round = 0; round < 2; round++)
    for (const name of ['gpt2', 'bert', 'llama-gqa']) {
      const opened = await openFolder(page, join(MODELS, name));
      assert.equal(opened.state, 'ready', opened.status);
      memory.push(JSON.parse(await page.getAttribute('#model-panel', 'data-memory')));
    }
  // The second round holds the same objects as the first, in a heap the first sized.
  for (let i = 0; i < 3; i++) {
    assert.equal(memory[i + 3].liveObjects, memory[i].liveObjects, `model ${i}: objects held`);
    assert.equal(memory[i + 3].wasmHeapBytes, memory[2].wasmHeapBytes, `model ${i}: the heap grew no further`);
  }
  assert.deepEqual(browser.errors, []);
});

test('on a phone (390 px): the input first, the grid and the map within the screen, a tap shows the readout', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await openDemo(page, server);
    await page.fill('[data-testid="text"]', 'Hello world, hello world');
    const opened = await openFolder(page, join(MODELS, 'gpt2'));
    assert.equal(opened.state, 'ready', opened.status);
    const layout = await page.evaluate(() => {
      const box = (selector) => document.querySelector(selector).getBoundingClientRect();
      return {
        inputFirst: box('[data-testid="text"]').top < box('#heads').top,
        map: box('#heatmap').right <= 390,
        grid: box('#heads').right <= 390,
        scroll: document.documentElement.scrollWidth <= window.innerWidth,
      };
    });
    assert.deepEqual(layout, { inputFirst: true, map: true, grid: true, scroll: true });
    // A tap (a touch pointer, which has no hover) leaves the cell's readout up.
    const point = await cellPoint(page, 3, 1);
    await page.evaluate(({ x, y }) => {
      const canvas = document.querySelector('#heatmap');
      for (const type of ['pointerdown', 'pointerup', 'pointerleave']) {
        canvas.dispatchEvent(new PointerEvent(type, { pointerType: 'touch', clientX: x, clientY: y, button: 0, bubbles: true }));
      }
    }, point);
    await page.waitForFunction(() => document.querySelector('#readout').textContent.startsWith('Query'));
    assert.match(await page.textContent('#readout'), /^Query “.*” \(3\) → key “.*” \(1\): weight 0\.\d{4}, not masked/);
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  assert.deepEqual(browser.errors, []);
});

test("an opened model's grid fills layer by layer: each layer's heads drawn as it finishes, the later ones dimmed", { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  const ref = await reference('pythia');
  await page.fill('[data-testid="text"]', ref.text);
  // What the grid holds each time a layer is drawn: the layers done, the cells still dimmed, the
  // first layer's pictures, and the colour at the middle of each picture of the last layer (on
  // its layer's canvas, under the cell's picture box). (A MutationObserver runs before the next
  // message's task.)
  await definePicturesOf(page);
  await page.evaluate(() => {
    window.gridSteps = [];
    new MutationObserver(() => {
      const grid = document.querySelector('#heads');
      if (grid.dataset.layersDone === '1') window.firstCell ??= grid.querySelector('.grid-cell[data-layer="1"]');
      window.gridSteps.push({
        done: grid.dataset.layersDone,
        inert: grid.inert,
        pending: Array.from(grid.querySelectorAll('.grid-cell.pending'), (cell) => Number(cell.dataset.layer)),
        first: window.picturesOf(1),
        lastLayer: window.picturesOf(grid.querySelectorAll('.layer-pictures').length),
      });
    }).observe(document.querySelector('#heads'), { attributes: true, attributeFilter: ['data-layers-done'] });
  });
  assert.equal((await openFolder(page, join(MODELS, 'pythia'))).state, 'ready');
  await page.waitForFunction(() => !document.querySelector('#heads').inert);
  const heads = ref.attentions.shape[1];
  const steps = await page.evaluate(() => window.gridSteps);
  // Before its first result the grid was laid out from the first layer's message, inert; then
  // layer 1 alone was drawn (layer 2 dimmed), then both.
  const firstLayer = steps.find((step) => step.done === '1');
  assert.deepEqual(firstLayer.pending, Array(heads).fill(2));
  assert.equal(firstLayer.inert, true);
  assert.ok(steps.some((step) => step.done === '2' && step.pending.length === 0));
  // The pictures drawn as layer 1 finished are the ones of the finished result.
  const final = await page.evaluate(() => window.picturesOf(1));
  assert.equal(final.length, heads);
  assert.deepEqual(firstLayer.first, final);
  // Each head's picture lies under its cell's picture box: opaque there, and clear below it, over
  // the caption.
  assert.ok(final.every(({ middle }) => middle[3] === 255), JSON.stringify(final.map(({ middle }) => middle)));
  const underCaption = await page.evaluate(() => {
    const canvas = document.querySelector('.layer-pictures[data-layer="1"]');
    const box = canvas.getBoundingClientRect();
    const caption = document.querySelector('.grid-cell[data-layer="1"] .scores').getBoundingClientRect();
    const ratio = canvas.width / box.width;
    return canvas.getContext('2d').getImageData(Math.floor((caption.left + caption.width / 2 - box.left) * ratio), Math.floor((caption.top + caption.height / 2 - box.top) * ratio), 1, 1).data[3];
  });
  assert.equal(underCaption, 0);
  // The result took over the grid laid out for its run rather than building another.
  assert.equal(await page.evaluate(() => document.querySelector('.grid-cell[data-layer="1"]') === window.firstCell), true);
  // Typing runs the text again: the grid dims and fills again, and ends whole.
  await page.evaluate(() => { window.gridSteps = []; });
  await page.click('[data-testid="text"]');
  await page.keyboard.press('End');
  await page.keyboard.type(' again and again', { delay: 10 });
  await page.waitForFunction(() => document.body.dataset.state === 'ready'
    && JSON.parse(document.getElementById('attention-result').textContent).model?.text.endsWith('again and again'), null, { timeout: STEP_TIMEOUT });
  const again = await page.evaluate(() => window.gridSteps);
  const firstAgain = again.find((step) => step.done === '1' && step.pending.length === heads && !step.inert);
  assert.ok(firstAgain, JSON.stringify(again.map((s) => [s.done, s.pending.length])));
  // While its layer is to come, the last text's picture is veiled: lighter than the new one in
  // every channel (the panel's white over it).
  const lastAgain = await page.evaluate(() => window.picturesOf(2).map(({ middle }) => middle));
  firstAgain.lastLayer.forEach(({ middle: veiled }, h) => assert.ok(lighter(veiled, lastAgain[h]), `head ${h + 1}: ${veiled} while pending, ${lastAgain[h]} drawn`));
  assert.equal(await page.locator('.grid-cell.pending').count(), 0);
  assert.equal(await page.getAttribute('#heads', 'data-layers-done'), '2');
  assert.deepEqual(browser.errors, []);
});

/** The `count` most likely ids of row `row` of float64 logits [t, vocab], with their probabilities. */
function referenceTop({ data, shape: [, vocab] }, row, count) {
  const values = data.slice(row * vocab, (row + 1) * vocab);
  const max = Math.max(...values);
  const sum = values.reduce((total, x) => total + Math.exp(x - max), 0);
  return Array.from(values.keys()).sort((a, b) => values[b] - values[a]).slice(0, count).map((id) => ({ id, p: Math.exp(values[id] - max) / sum }));
}

async function tokenizerOf(name) {
  const json = async (file) => JSON.parse(await readFile(join(MODELS, name, file), 'utf8'));
  return new Tokenizer(await json('tokenizer.json'), await json('tokenizer_config.json'));
}

test("an opened decoder's next tokens after the last token and after a token clicked, and its greedy generation, are transformers'", { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  const ref = await reference('pythia');
  const tokenizer = await tokenizerOf('pythia');
  await page.fill('[data-testid="text"]', ref.text);
  assert.equal((await openFolder(page, join(MODELS, 'pythia'))).state, 'ready');
  const t = ref.ids.length;
  // "“token” 12.3 %, …" as the page writes it, against softmax of the reference logits.
  const assertPredictions = (line, row, prefix) => {
    assert.ok(line.startsWith(prefix), `${line} starts with ${prefix}`);
    const got = [...line.slice(prefix.length).matchAll(/“(.*?)” (\d+\.\d) %/g)].map(([, token, p]) => ({ token, p: Number(p) }));
    const want = referenceTop(ref.logits, row, 5);
    // Ids past the tokenizer's vocabulary (a padded embedding) are named by their number, as the page does.
    assert.deepEqual(got.map((g) => g.token), want.map((w) => visible(tokenizer.id_to_token(w.id) ?? `[${w.id}]`)), line);
    got.forEach((g, k) => assert.ok(Math.abs(g.p - 100 * want[k].p) <= 0.051, `${g.p} % vs ${100 * want[k].p} %`));
  };
  assertPredictions(await page.textContent('#model-next'), t - 1, 'Next token: ');
  await page.click('#text-view .text-token[data-token="5"]');
  await page.waitForFunction(() => document.querySelector('#model-next').textContent.startsWith('After'), null, { timeout: STEP_TIMEOUT });
  assertPredictions(await page.textContent('#model-next'), 5, `After “${visible(ref.tokens[5])}” (5): `);

  // Generate: one token a step, the greedy ids transformers' generate wrote.
  assert.equal(await page.textContent('#generate'), 'Generate 32 tokens');
  await page.click('#generate');
  await page.waitForFunction(() => {
    const result = JSON.parse(document.getElementById('attention-result').textContent);
    return document.body.dataset.state === 'ready' && result.model?.generating === 0 && result.model.generated !== null;
  }, null, { timeout: 45_000 });
  const result = await readResult(page);
  const want = [...ref.ids, ...ref.generate.ids].map((id) => tokenizer.id_to_token(id) ?? `[${id}]`);
  assert.deepEqual(result.tokens[0].slice(0, want.length), want);
  assert.equal(await page.inputValue('[data-testid="text"]'), result.model.text);
  assert.ok(result.model.text.startsWith(ref.text));
  assert.equal(await page.textContent('#generated mark'), result.model.text.slice(ref.text.length), 'what was generated, highlighted');
  assert.match(await page.textContent('#decode-time'), /^\d+\.\d\d ms \(model\.generate: prefill and one step, f32 KV caches, \d+ tokens\)$/);
  // An encoder does not generate.
  assert.equal((await openFolder(page, join(MODELS, 'bert'))).state, 'ready');
  assert.equal(await page.isDisabled('#generate'), true);
  assert.equal(await page.getAttribute('#generate', 'title'), 'BERT is an encoder: it does not generate.');
  assert.equal(await page.textContent('#model-next'), '');
  assert.deepEqual(browser.errors, []);
});

// The model viewer in Chromium: each fixture folder of tests/fixtures/models/ opened through the
// page's folder input, its layers × heads grid, a head's JSON export against the float64
// reference, models opened in turn, and folders the viewer cannot open with their messages.
import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { TOLERANCE, maxRelativeError } from '../js/helpers.js';
import { browserForFile, openDemo, STEP_TIMEOUT } from './chromium.js';

const MODELS = fileURLToPath(new URL('../fixtures/models/', import.meta.url));
const browser = browserForFile();

async function reference(name) {
  return JSON.parse(await readFile(join(MODELS, name, 'reference.json'), 'utf8'));
}

/** Opens a folder through the input and waits until the panel is ready (or shows an error). */
async function openFolder(page, folder) {
  // The panel still says 'ready' for the last model until the input's change arrives.
  await page.$eval('#model-panel', (panel) => { panel.dataset.state = 'waiting'; });
  await page.setInputFiles('[data-testid="open-model"]', folder);
  await page.waitForFunction(() => ['ready', 'error'].includes(document.querySelector('#model-panel').dataset.state)
    && document.querySelector('#model-status').textContent !== '', null, { timeout: STEP_TIMEOUT });
  return page.$eval('#model-panel', (panel) => ({ state: panel.dataset.state, status: panel.querySelector('#model-status').textContent }));
}

/** The JSON the page exports for layer `layer`, head `head` (1-based). */
async function exportHead(page, layer, head) {
  await page.click(`.grid-cell[data-layer="${layer}"][data-head="${head}"]`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#model-export')]);
  return { name: download.suggestedFilename(), json: JSON.parse(await readFile(await download.path(), 'utf8')) };
}

test('opening each model folder: its grid, labels and a head exported as JSON match the reference', { timeout: 180_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  for (const name of ['gpt2', 'llama-gqa', 'bert', 'qwen3-qknorm', 'gemma2', 'gemma3', 'phi3', 'olmo2']) {
    const ref = await reference(name);
    await page.fill('[data-testid="text"]', ref.text);
    const opened = await openFolder(page, join(MODELS, name));
    assert.equal(opened.state, 'ready', `${name}: ${opened.status}`);
    const [layers, heads, t] = [ref.attentions.shape[0], ref.attentions.shape[1], ref.ids.length];
    const cells = await page.$$eval('.grid-cell', (all) => all.map((cell) => [Number(cell.dataset.layer), Number(cell.dataset.head)]));
    assert.equal(cells.length, layers * heads, `${name}: a cell per layer and head`);
    assert.deepEqual(cells.at(-1), [layers, heads]);
    // Each head's induction and previous-token scores, on the standard sequence and on the text.
    assert.match(await page.textContent('#model-scores'), /Strongest induction head: L\d+ H\d+ \(\d\.\d\d on \d+ random tokens repeated\); on your text L\d+ H\d+/);
    assert.match(await page.getAttribute('.grid-cell[data-layer="1"][data-head="1"]', 'title'), /^Layer 1, head 1: induction \d\.\d\d on the repeated random tokens, \d\.\d\d on your text; previous token/);
    const { name: file, json } = await exportHead(page, layers, heads);
    // The readout at the pointer names the cell's tokens and weight.
    const box = await page.locator('#model-head').boundingBox();
    const [cell, offset] = await page.$eval('#model-head', (c) => [Number(c.dataset.cell), Number(c.dataset.offset)]);
    await page.mouse.move(box.x + offset + 1.5 * cell, box.y + offset + (t - 0.5) * cell);
    assert.match(await page.textContent('#model-readout'), new RegExp(`^Query ${t} .* → key 2 .*: ${json.weights[t - 1][1].toFixed(4)}$`));
    // The coloured text: the last query's row by default; a click on a token picks its row.
    const textWeights = () => page.$$eval('#model-text-view .text-token', (spans) => spans.map((s) => (s.dataset.weight === undefined ? null : Number(s.dataset.weight))));
    assert.equal((await textWeights()).length, t);
    await page.click(`#model-text-view .text-token[data-token="2"]`);
    const shown = await textWeights();
    json.weights[2].forEach((w, j) => {
      if (shown[j] === null) assert.ok(j > 2, `only later tokens are masked (token ${j})`);
      else assert.ok(Math.abs(shown[j] - w) <= 5e-5, `token ${j}: ${shown[j]} vs ${w}`);
    });
    assert.match(file, new RegExp(`layer${layers}-head${heads}\\.json$`));
    assert.equal(json.model_type, JSON.parse(await readFile(join(MODELS, name, 'config.json'), 'utf8')).model_type);
    assert.deepEqual(json.tokens, ref.tokens);
    assert.deepEqual([json.layer, json.head], [layers, heads]);
    const plane = ref.attentions.data.slice(((layers - 1) * heads + heads - 1) * t * t, ((layers - 1) * heads + heads) * t * t);
    const err = maxRelativeError(Float32Array.from(json.weights.flat()), Float64Array.from(plane));
    assert.ok(err <= TOLERANCE, `${name}: the exported head is off by ${err}`);
  }
  assert.deepEqual(browser.errors, []);
});

test('a folder the viewer cannot open says which file is missing, and the next one opens', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
  const broken = await mkdtemp(join(tmpdir(), 'model-'));
  try {
    await cp(join(MODELS, 'gpt2', 'tokenizer.json'), join(broken, 'tokenizer.json'));
    await cp(join(MODELS, 'gpt2', 'model.safetensors'), join(broken, 'model.safetensors'));
    const refused = await openFolder(page, broken);
    assert.equal(refused.state, 'error');
    assert.match(refused.status, /no config\.json/);
    const opened = await openFolder(page, join(MODELS, 'bert'));
    assert.equal(opened.state, 'ready', opened.status);
  } finally {
    await rm(broken, { recursive: true, force: true });
  }
  assert.deepEqual(browser.errors, []);
});

test('opening three models in turn, twice: each replaces the last, and the memory is back', { timeout: 90_000 }, async () => {
  const { page, server } = browser;
  await openDemo(page, server);
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

test('on a phone (390 px) the panel fits the screen: the grid and the map scaled down whole', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await openDemo(page, server);
    const opened = await openFolder(page, join(MODELS, 'gpt2'));
    assert.equal(opened.state, 'ready', opened.status);
    const fits = await page.evaluate(() => {
      const panel = document.querySelector('#model-panel').getBoundingClientRect();
      const map = document.querySelector('#model-head').getBoundingClientRect();
      const grid = document.querySelector('#model-grid').getBoundingClientRect();
      return { panel: panel.right <= 390, map: map.right <= panel.right && Math.abs(map.width - map.height) < 1, grid: grid.right <= panel.right };
    });
    assert.deepEqual(fits, { panel: true, map: true, grid: true });
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  assert.deepEqual(browser.errors, []);
});

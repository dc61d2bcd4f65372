// The viewer's details a newcomer meets first, in Chromium, each measured on the page: the neuron
// view shown at once and fitting its box, token labels on a 64-token heatmap, the coloured text's
// scale, the text cursor during generation, the PNG export's resolution, the legend of the grid's
// numbers, the heatmap near the top on a phone, the lines view's labels at 100 tokens, and the
// lines of every head of a layer at once.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { VERSE_TEXT } from '../../web/embeddings.js';
import { colourOf } from '../../web/heatmap.js';
import { at, browserForFile, nextFrames, openDemo, STEP_TIMEOUT, update } from './chromium.js';

const MODELS = fileURLToPath(new URL('../fixtures/models/', import.meta.url));
const fixture = JSON.parse(await readFile(new URL('../fixtures/demo_model.json', import.meta.url), 'utf8'));
const browser = browserForFile();

/** Where the neuron view's table and its headers end, against its box (CSS px). */
function neuronFit(page) {
  return page.evaluate(() => {
    const box = document.querySelector('#neuron-body').getBoundingClientRect();
    const table = document.querySelector('#neuron-body table');
    const clipped = (cell) => cell.scrollWidth > cell.clientWidth + 1;
    return {
      boxRight: box.right,
      tableRight: table.getBoundingClientRect().right,
      headers: Array.from(table.tHead.rows[0].cells, (th) => ({ name: th.textContent, right: th.getBoundingClientRect().right, clipped: clipped(th) })),
      clippedNumbers: Array.from(table.querySelectorAll('td.number, td.weight')).filter(clipped).length,
    };
  });
}

function assertFits(fit, what) {
  assert.ok(fit.tableRight <= fit.boxRight + 0.5, `${what}: the table ends at ${fit.tableRight}, its box at ${fit.boxRight}`);
  for (const header of fit.headers) {
    assert.ok(header.right <= fit.boxRight + 0.5 && !header.clipped, `${what}: column "${header.name}" in view and whole`);
  }
  assert.ok(fit.headers.some((h) => h.name === 'softmax') && fit.headers.some((h) => h.name === 'weight · v'), what);
  assert.equal(fit.clippedNumbers, 0, `${what}: every number whole`);
}

test('the neuron view shows the locked head at the last query at once, and its table fits its box at 1280 and 390 px', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  const result = await openDemo(page, server);
  const t = result.shape[2];
  await page.waitForFunction(() => document.querySelector('#neuron-body table'), null, { timeout: STEP_TIMEOUT });
  const last = Array.from(VERSE_TEXT).at(-1);
  assert.match(await page.textContent('#neuron-title'), new RegExp(`^Query “\\${last}” \\(${t - 1}\\) · layer 2, head 4 `));
  // Its softmax column is the locked head's last row.
  const rows = await page.$$eval('#neuron-body tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.textContent.trim())));
  const header = await page.$$eval('#neuron-body thead th', (ths) => ths.map((th) => th.textContent));
  for (const row of rows.slice(1, -1)) {
    const key = Number(row[0].match(/\((\d+)\)$/)[1]);
    const drawn = result.weights[at(result, 0, 7, t - 1, key)];
    assert.ok(Math.abs(Number(row[header.indexOf('softmax')]) - drawn) <= 5e-4, `key ${key}`);
  }
  assertFits(await neuronFit(page), '1280 px');
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await nextFrames(page);
    assertFits(await neuronFit(page), '390 px');
    // The widest table: Gemma 2's, with its soft-capped column.
    await page.setInputFiles('[data-testid="open-model"]', join(MODELS, 'gemma2'));
    await page.waitForFunction(() => document.querySelector('#neuron-title').textContent.includes('soft cap')
      && document.querySelectorAll('#neuron-body thead th').length === 7, null, { timeout: STEP_TIMEOUT });
    assertFits(await neuronFit(page), 'gemma2 at 390 px');
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  assert.deepEqual(browser.errors, []);
});

test('the heatmap names its tokens on the axes at 64 tokens (every second one where cells are small)', { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  await openDemo(page, server);
  const result = await update(page, () => page.selectOption('#length', '64'));
  assert.equal(result.shape[2], 64);
  const grid = JSON.parse(await page.getAttribute('#heatmap', 'data-grid'));
  assert.ok(grid.labelEvery !== null && grid.labelEvery <= 2, `a token label every ${grid.labelEvery} cells`);
  assert.ok(grid.labelFont >= 9, `labels of ${grid.labelFont} px`);
  assert.ok(grid.labelEvery * grid.cell >= grid.labelFont, 'labels do not overlap');
  assert.deepEqual(browser.errors, []);
});

test("the coloured text spans its row's weights under the default 0-to-1 scale", { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  const result = await openDemo(page, server);
  assert.equal(await page.inputValue('#scale'), 'absolute');
  const spans = await page.$$eval('#text-view .text-token[data-weight]', (all) => all.map((s) => ({ weight: Number(s.dataset.weight), background: getComputedStyle(s).backgroundColor })));
  const t = result.shape[2];
  const row = Array.from({ length: t }, (_, j) => result.weights[at(result, 0, 7, t - 1, j)]);
  const largest = Math.max(...row);
  assert.equal(spans.length, t);
  spans.forEach(({ background }, j) => {
    const got = background.match(/\d+/g).map(Number);
    const want = colourOf(row[j] / largest);
    assert.ok(got.every((c, k) => Math.abs(c - want[k]) <= 1), `token ${j}: ${background}, want rgb(${want.join(', ')})`);
  });
  assert.ok(spans.some(({ background }) => background === 'rgb(253, 231, 37)'), 'the heaviest token at the top of the scale');
  assert.match(await page.textContent('#text-query'), new RegExp(`coloured from 0 to its largest weight \\(${largest.toFixed(4)}\\)`));
  assert.deepEqual(browser.errors, []);
});

test('the text cursor stays where the user put it while the model generates', { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  await openDemo(page, server);
  await update(page, () => page.fill('#text', fixture.prompt));
  await page.$eval('#text', (text) => text.setSelectionRange(5, 5));
  await page.click('#generate');
  await page.waitForFunction((length) => document.querySelector('#text').value.length >= length + 3, fixture.prompt.length);
  assert.deepEqual(await page.$eval('#text', (text) => [text.selectionStart, text.selectionEnd]), [5, 5]);
  await page.focus('#text');
  await page.keyboard.type('X');
  const typed = await page.inputValue('#text');
  assert.equal(typed.slice(0, 6), `${fixture.prompt.slice(0, 5)}X`, 'the edit lands where the cursor was');
  await page.waitForFunction(() => document.body.dataset.state === 'ready');
  assert.equal(await page.inputValue('#text'), typed, 'no character lands after the edit');
  assert.deepEqual(browser.errors, []);
});

/** Exports the view as PNG → its size in pixels and the heatmap's and legend's CSS boxes. */
async function exportedPng(page) {
  const css = await page.evaluate(() => [document.querySelector('#heatmap'), document.querySelector('#legend')].map((c) => c.getBoundingClientRect().toJSON()));
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
  const png = await readFile(await download.path());
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20), css };
}

test('the PNG export is drawn at twice the CSS pixels at least, or at the screen\'s ratio above it', { timeout: 60_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  // This browser's screen is of ratio 1 (exported at 2); then one of 3, as Chromium's DevTools emulate it.
  const cdp = await page.context().newCDPSession(page);
  try {
    for (const ratio of [2, 3]) {
      if (ratio === 3) await cdp.send('Emulation.setDeviceMetricsOverride', { width: 1280, height: 800, deviceScaleFactor: 3, mobile: false });
      await openDemo(page, server);
      assert.equal(await page.evaluate(() => devicePixelRatio), ratio === 2 ? 1 : 3);
      const { width, height, css } = await exportedPng(page);
      // The title's margins are 12 CSS px each side, scaled as the picture.
      assert.ok(width >= Math.round(ratio * css[0].width) + 24 * ratio, `ratio ${ratio}: ${width} px wide for a heatmap of ${css[0].width} CSS px`);
      assert.ok(height >= Math.round(ratio * (css[0].height + css[1].height)), `ratio ${ratio}: ${height} px high`);
      await nextFrames(page);
      const backing = await page.$eval('#heatmap', (canvas) => [canvas.width, Math.round(canvas.clientWidth * devicePixelRatio)]);
      assert.equal(backing[0], backing[1], 'the page draws at its own pixel ratio again');
    }
  } finally {
    await cdp.send('Emulation.clearDeviceMetricsOverride');
    await cdp.detach();
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  assert.deepEqual(browser.errors, []);
});

test("the grid's numbers have a legend, right above the grid; the other kinds have none", { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  await openDemo(page, server);
  assert.match(await page.textContent('#heads-legend'), /^The number under each head is its induction score on 100 random tokens repeated: /);
  const [legend, grid] = await page.evaluate(() => ['#heads-legend', '#heads'].map((s) => document.querySelector(s).getBoundingClientRect()));
  assert.ok(legend.bottom <= grid.top && grid.top - legend.bottom < 16, `legend ${legend.bottom}, grid ${grid.top}`);
  await openDemo(page, server, '?kind=mha');
  assert.equal(await page.isVisible('#heads-legend'), false);
  assert.deepEqual(browser.errors, []);
});

test('on a phone (390 px) the heatmap starts within the first screen, below the text', { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await openDemo(page, server);
    const [text, heatmap] = await page.evaluate(() => ['#text', '#heatmap'].map((s) => document.querySelector(s).getBoundingClientRect().top + window.scrollY));
    assert.ok(text < heatmap, 'the text first');
    assert.ok(heatmap < 844, `the heatmap starts ${heatmap} px down`);
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  assert.deepEqual(browser.errors, []);
});

test('the lines view labels about every second token at 100 tokens, none overlapping', { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  await openDemo(page, server);
  const result = await update(page, () => page.fill('#text', VERSE_TEXT.slice(0, 100)));
  assert.equal(result.shape[2], 100);
  const drawn = JSON.parse(await page.getAttribute('#lines', 'data-drawn'));
  assert.ok(drawn.labelFont >= 9);
  for (const rows of [drawn.queries, drawn.keys]) {
    assert.ok(rows.length >= 33, `${rows.length} of 100 labelled`);
    for (let k = 1; k < rows.length; k++) assert.ok((rows[k] - rows[k - 1]) * drawn.rowHeight >= drawn.labelFont + 1, `rows ${rows[k - 1]} and ${rows[k]} overlap`);
  }
  assert.ok(drawn.queries.includes(99), 'the selected query (the last) is labelled');
  assert.deepEqual(browser.errors, []);
});

test("the lines view draws every head of the layer at once, a colour each, the head shown strongest", { timeout: 30_000 }, async () => {
  const { page, server } = browser;
  browser.errors.length = 0;
  const result = await openDemo(page, server); // layer 2, head 4 locked
  await page.check('#lines-heads');
  const drawn = JSON.parse(await page.getAttribute('#lines', 'data-drawn'));
  assert.deepEqual(drawn.heads.map((h) => [h.head, h.emphasised]), [[4, false], [5, false], [6, false], [7, true]]);
  assert.equal(new Set(drawn.heads.map((h) => h.colour.join())).size, 4, 'a colour a head');
  // The last query's lines: a line for each key whose weight shows (the other heads at half strength).
  const t = result.shape[2];
  drawn.heads.forEach(({ head, emphasised }, k) => {
    const shown = Array.from({ length: t }, (_, j) => result.weights[at(result, 0, head, t - 1, j)]).filter((w) => w * (emphasised ? 1 : 0.5) >= 0.01).length;
    assert.equal(drawn.lines[k], shown, `head ${head + 1}: ${drawn.lines[k]} lines`);
  });
  const legend = await page.$$eval('#lines-legend .swatch', (all) => all.map((s) => [s.textContent, s.classList.contains('shown'), getComputedStyle(s).borderTopColor]));
  assert.deepEqual(legend, drawn.heads.map((h, k) => [`H${k + 1}`, h.emphasised, `rgb(${h.colour.join(', ')})`]));
  await page.uncheck('#lines-heads');
  assert.equal(JSON.parse(await page.getAttribute('#lines', 'data-drawn')).heads.length, 1);
  assert.equal(await page.isVisible('#lines-legend'), false);
  assert.deepEqual(browser.errors, []);
});

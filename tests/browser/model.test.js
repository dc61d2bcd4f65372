// The demo's trained model in Chromium: the layers × heads grid with each head's scores, "Repeat
// this text", generation through the worker's f16 KV caches, which must write what PyTorch's
// greedy decoding wrote (tests/fixtures/demo_model.json), and long texts with the zoom.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';

import { init } from '../../dist/index.mjs';
import { VERSE_TEXT, lengthen } from '../../web/embeddings.js';
import { TrainedModel } from '../../web/model.js';
import { assertRows, at, browserForFile, cellPoint, definePicturesOf, lighter, nextFrames, openDemo, readResult, update } from './chromium.js';

const fixture = JSON.parse(readFileSync(new URL('../fixtures/demo_model.json', import.meta.url), 'utf8'));
const MODEL_FOLDER = new URL('../../web/model/', import.meta.url);

const browser = browserForFile();

test('the grid: every layer and head, labelled with its induction and previous-token scores', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  const result = await openDemo(browser.page, browser.server);
  const { layers, heads, scores, textScores } = result.model;
  assert.deepEqual([layers, heads], [2, 4]);
  // A true layers × heads grid: a row a layer (its label first), a column a head, no average.
  assert.equal(await browser.page.locator('.thumb').count(), layers * heads, 'a cell per head');
  const columns = await browser.page.$eval('#heads', (grid) => getComputedStyle(grid).gridTemplateColumns.split(' ').length);
  assert.equal(columns, 1 + heads);
  // Each layer's pictures are drawn on one canvas over its row.
  assert.equal(await browser.page.locator('#heads > canvas.layer-pictures').count(), layers);
  const order = await browser.page.$$eval('#heads > :not(canvas)', (children) => children.map((c) => c.textContent.trim().slice(0, 2) || '·'));
  assert.deepEqual(order.slice(0, 1 + heads), ['·', 'H1', 'H2', 'H3', 'H4']);
  assert.equal(order[1 + heads], 'L1');
  assert.equal(order[2 * (1 + heads)], 'L2');
  for (let head = 0; head < layers * heads; head++) {
    const [layer, h] = [Math.floor(head / heads) + 1, (head % heads) + 1];
    const cell = `.grid-cell[data-layer="${layer}"][data-head="${h}"]`;
    assert.equal(await browser.page.textContent(`${cell} .scores`), scores[head].induction.toFixed(2));
    const own = textScores[head];
    assert.equal(await browser.page.getAttribute(cell, 'title'),
      `Layer ${layer}, head ${h}: induction ${scores[head].induction.toFixed(2)} on the repeated random tokens, ${own.induction.toFixed(2)} on your text; ` +
      `previous token ${scores[head].previousToken.toFixed(2)}, ${own.previousToken.toFixed(2)}`);
  }
  // The trained model has both kinds of head the scores look for (tests/js/demo-model.test.js
  // checks the scores themselves against PyTorch).
  assert.ok(Math.max(...scores.map((s) => s.induction)) >= 0.4, 'an induction head');
  assert.ok(Math.max(...scores.map((s) => s.previousToken)) >= 0.6, 'a previous-token head');
  assert.match(await browser.page.textContent('#model-scores'),
    /^Strongest induction head: L2 H4 \(0\.\d\d on 100 random tokens repeated\); on your text L2 H4 \(0\.\d\d\)\. Strongest previous-token head: L\d H\d/);
  // Each head's picture lies on its layer's canvas under its cell's picture box, also after the
  // grid's columns narrow (the canvases are measured and drawn again).
  await definePicturesOf(browser.page);
  const pictures = () => browser.page.evaluate(() => [1, 2].flatMap((layer) => window.picturesOf(layer)));
  const wide = await pictures();
  assert.ok(wide.every(({ middle }) => middle[3] === 255), JSON.stringify(wide.map(({ middle }) => middle)));
  // Each layer's canvas covers its own row, at the scale of its pixels in both directions.
  const rows = await browser.page.$$eval('.layer-pictures', (canvases) => canvases.map((canvas) => {
    const box = canvas.getBoundingClientRect();
    const cells = Array.from(document.querySelectorAll(`.grid-cell[data-layer="${canvas.dataset.layer}"]`), (cell) => cell.getBoundingClientRect());
    return { xScale: canvas.width / box.width, yScale: canvas.height / box.height, top: box.top, bottom: box.bottom, cellsTop: Math.min(...cells.map((c) => c.top)), cellsBottom: Math.max(...cells.map((c) => c.bottom)) };
  }));
  assert.equal(rows.length, layers);
  for (const row of rows) {
    assert.ok(Math.abs(row.xScale - row.yScale) < 0.05, JSON.stringify(row));
    assert.ok(row.top <= row.cellsTop + 0.5 && row.bottom >= row.cellsBottom - 0.5 && row.bottom - row.top < 1.5 * (row.cellsBottom - row.cellsTop), JSON.stringify(row));
  }
  const canvasWidth = () => browser.page.$eval('.layer-pictures', (canvas) => canvas.width);
  const wideCanvas = await canvasWidth();
  await browser.page.setViewportSize({ width: 150, height: 800 });
  try {
    await nextFrames(browser.page);
    assert.ok(await canvasWidth() < wideCanvas);
    const narrow = await pictures();
    assert.ok(narrow.every(({ middle }) => middle[3] === 255), JSON.stringify(narrow.map(({ middle }) => middle)));
  } finally {
    await browser.page.setViewportSize({ width: 1280, height: 800 });
  }
  await browser.page.hover('.grid-cell[data-layer="2"][data-head="2"]');
  assert.match(await browser.page.textContent('#view-title'), /^Layer 2, head 2 · the trained model$/);
  assert.match(await browser.page.textContent('#model-next'), /^Next character: “.+” \d+\.\d %/);

  // The JSON export: the head shown, by layer and head, with the tokens and every row of weights.
  await browser.page.click('.grid-cell[data-layer="2"][data-head="2"]');
  const [download] = await Promise.all([browser.page.waitForEvent('download'), browser.page.click('#export-json')]);
  assert.equal(download.suggestedFilename(), 'attention-trained-model-layer2-head2.json');
  const exported = JSON.parse(await readFile(await download.path(), 'utf8'));
  assert.equal(exported.model_type, 'llama');
  assert.deepEqual([exported.layer, exported.head, exported.pooled], [2, 2, false]);
  assert.deepEqual(exported.tokens, result.tokens[0]);
  const t = result.shape[2];
  assert.equal(exported.weights.length, t);
  exported.weights.forEach((row, i) => assert.deepEqual(row, result.weights.slice(at(result, 0, 5, i, 0), at(result, 0, 5, i, 0) + t)));
  assert.deepEqual(exported.scores, { standard: scores[5], text: textScores[5], standardLength: 100 });
  assert.deepEqual(browser.errors, []);
});

test('head ablation: removing the induction head lowers the repeated verse\'s predictions; the heads come back', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  const { page, server } = browser;
  await openDemo(page, server);
  const ablated = () => page.waitForFunction(() => ['ready', 'error'].includes(document.querySelector('#ablation').dataset.state), null, { timeout: 20_000 });
  // L2 H4's picture: veiled while the head is removed, as it was once it is back.
  await definePicturesOf(page);
  const picture = () => page.evaluate(() => window.picturesOf(2)[3]);
  const before = await picture();
  await page.click('.grid-cell[data-layer="2"][data-head="4"]');
  await page.click('#ablate-head');
  await ablated();
  assert.equal(await page.getAttribute('#ablation', 'data-state'), 'ready', await page.textContent('#ablation-summary'));
  assert.match(await page.textContent('#ablation-summary'),
    /^Without L2 H4: the next token's mean log-probability -\d\.\d{3} → -\d\.\d{3}\. After “.+” \(\d+\): (“.+” \d+\.\d %, ){4}“.+” \d+\.\d % → (“.+” \d+\.\d %, ){4}“.+” \d+\.\d %\.$/);
  const deltas = await page.$$eval('#ablation-text .text-token', (spans) => spans.map((s) => (s.dataset.delta === undefined ? null : Number(s.dataset.delta))));
  const { tokens } = await readResult(page);
  assert.equal(deltas.length, tokens[0].length);
  assert.equal(deltas[0], null, 'the first token is predicted by nothing');
  // The verse's second copy is what the induction head predicts: it falls most there.
  const half = Math.floor(deltas.length / 2);
  const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;
  assert.ok(mean(deltas.slice(half + 2)) < mean(deltas.slice(1, half)) - 0.05, `second copy ${mean(deltas.slice(half + 2))}, first ${mean(deltas.slice(1, half))}`);
  assert.equal(await page.getAttribute('.grid-cell[data-layer="2"][data-head="4"]', 'class').then((c) => c.includes('ablated')), true);
  const removed = await picture();
  assert.ok(lighter(removed.middle, before.middle), `${removed.middle} removed, ${before.middle} before`);
  // A second head, then both back.
  await page.click('.grid-cell[data-layer="1"][data-head="4"]');
  await page.click('#ablate-head');
  await ablated();
  assert.match(await page.textContent('#ablation-summary'), /^Without L2 H4, L1 H4:/);
  assert.deepEqual(await page.$$eval('#ablated-heads .chip', (chips) => chips.map((c) => c.textContent)), ['L2 H4 ×', 'L1 H4 ×']);
  await page.click('#ablation-restore');
  assert.equal(await page.getAttribute('#ablation', 'data-state'), 'empty');
  assert.equal(await page.locator('#ablation-text .text-token').count(), 0);
  assert.equal(await page.locator('.grid-cell.ablated').count(), 0);
  assert.equal((await picture()).pixels, before.pixels);
  assert.deepEqual(browser.errors, []);
});

test('the neuron view: a head\'s steps for the query under the pointer, ending in the weights drawn', { timeout: 20_000 }, async () => {
  browser.errors.length = 0;
  const result = await openDemo(browser.page, browser.server);
  const [layer, head, query] = [1, 2, 12];
  await browser.page.click(`.grid-cell[data-layer="${layer + 1}"][data-head="${head + 1}"]`);
  // Before any query is pointed at, the view follows the last one.
  await browser.page.waitForFunction((last) => document.querySelector('#neuron-title').textContent.includes(`(${last}) · layer 2, head 3`)
    && document.querySelector('#neuron-body table'), result.shape[2] - 1, { timeout: 10_000 });
  const point = await cellPoint(browser.page, query, 0);
  await browser.page.mouse.move(point.x, point.y);
  await browser.page.waitForFunction((want) => document.querySelector('#neuron-title').textContent.includes(want), `(${query}) · layer 2, head 3`, { timeout: 10_000 });
  const token = result.tokens[0][query];
  assert.equal(await browser.page.textContent('#neuron-title'),
    `Query “${token === ' ' ? '␣' : token}” (${query}) · layer 2, head 3 (key/value head 2) · d = 32, scale 1/√32, q and k after RoPE`);
  const rows = await browser.page.$$eval('#neuron-body tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.textContent.trim())));
  assert.equal(rows.length, 1 + (query + 1) + 1, 'q, every visible key, the output');
  for (let j = 0; j <= query; j++) {
    const [, , dot, scaled, softmax] = rows[1 + j];
    assert.ok(Math.abs(Number(scaled) - Number(dot) / Math.sqrt(32)) <= 2e-3 * (1 + Math.abs(Number(scaled))), `key ${j}: scaled = q·k / √32`);
    const drawn = result.weights[at(result, 0, layer * 4 + head, query, j)];
    assert.ok(Math.abs(Number(softmax) - drawn) <= 5e-4, `key ${j}: softmax ${softmax}, heatmap ${drawn}`);
  }
  assert.equal(rows.at(-1)[1], `${result.shape[2] - query - 1} keys masked; Σ = 1`, 'the later keys, causal');

  // The other kinds have it too; Transformer-XL's score splits into its content and position terms
  // (tests/js/demo-neuron.test.js checks every kind's numbers against the package).
  await openDemo(browser.page, browser.server, '?kind=relative');
  await browser.page.click('.thumb[data-head="1"]');
  const cell = await cellPoint(browser.page, 4, 0);
  await browser.page.mouse.move(cell.x, cell.y);
  await browser.page.waitForFunction(() => document.querySelector('#neuron-title').textContent.startsWith('Query “the” (4)'), null, { timeout: 10_000 });
  const header = await browser.page.$$eval('#neuron-body thead th', (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(header, ['key', 'k', 'content (q+u)·k', 'position q·R + b', 'scaled', 'softmax', 'weight · v']);
  assert.match(await browser.page.textContent('#neuron-title'), /^Query “the” \(4\) · head 2 of 4 · d = 8/);

  // Scaled dot-product with a soft cap: the neuron view shows the capped scores too.
  await openDemo(browser.page, browser.server, '?kind=sdpa');
  const capped = await update(browser.page, () => browser.page.fill('#softcap', '1.5'));
  assert.match(capped.call, /softcap: 1\.5/);
  const point16 = await cellPoint(browser.page, 6, 0);
  await browser.page.mouse.move(point16.x, point16.y);
  await browser.page.waitForFunction(() => document.querySelector('#neuron-title').textContent.includes('(6)')
    && document.querySelectorAll('#neuron-body thead th').length === 7, null, { timeout: 10_000 });
  const capHeader = await browser.page.$$eval('#neuron-body thead th', (ths) => ths.map((th) => th.textContent));
  assert.deepEqual(capHeader, ['key', 'k', 'q·k', 'scaled', 'soft-capped', 'softmax', 'weight · v']);
  const capRows = await browser.page.$$eval('#neuron-body tbody tr', (trs) => trs.map((tr) => Array.from(tr.cells, (c) => c.textContent.trim())));
  for (const [, , , scaled, soft] of capRows.slice(1, -1)) {
    assert.ok(Math.abs(Number(soft) - 1.5 * Math.tanh(Number(scaled) / 1.5)) <= 2e-3, `soft-capped ${soft} = 1.5 · tanh(${scaled} / 1.5)`);
  }
  await browser.page.fill('#softcap', '-1');
  await browser.page.waitForFunction(() => document.body.dataset.state === 'error');
  assert.equal(await browser.page.textContent('#error'), 'The soft cap must be a positive number, or 0 for none.');
  await update(browser.page, () => browser.page.fill('#softcap', '0'));
  assert.deepEqual(browser.errors, []);
});

/** Clicks an export button and returns the downloaded file's name and text. */
async function download(button) {
  const [file] = await Promise.all([browser.page.waitForEvent('download'), browser.page.click(button)]);
  return { name: file.suggestedFilename(), text: await readFile(await file.path(), 'utf8') };
}

test('export: an SVG with its labels and a self-contained HTML file of the view', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server);
  const result = await update(browser.page, () => browser.page.fill('#text', 'In the beginning'));
  await browser.page.click('.grid-cell[data-layer="2"][data-head="1"]');
  const svg = await download('#export-svg');
  const title = await browser.page.textContent('#view-title');
  assert.match(title, /^Layer 2, head 1 \(locked\) · /);
  assert.equal(svg.name, 'attention-trained-model-layer2-head1.svg');
  assert.match(svg.text, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.ok(svg.text.includes(`>${title}</text>`), 'the title');
  // The picture holds its title and legend: measured as Chromium lays the SVG out.
  const overflow = await browser.page.evaluate((text) => {
    const holder = document.createElement('div');
    holder.innerHTML = text;
    document.body.append(holder);
    const root = holder.firstElementChild;
    const box = root.getBoundingClientRect();
    const outside = [...root.querySelectorAll('text')].map((node) => node.getBoundingClientRect())
      .filter((r) => r.right > box.right + 0.5 || r.bottom > box.bottom + 0.5 || r.left < box.left - 0.5 || r.top < box.top - 0.5).length;
    holder.remove();
    return outside;
  }, svg.text);
  assert.equal(overflow, 0, 'no text outside the picture');
  const t = result.shape[2];
  const cells = [...svg.text.matchAll(/<rect x="\d+" y="\d+" width="\d+" height="\d+" fill="[^"]+"><title>([^<]*)<\/title>/g)];
  assert.equal(cells.length, t * t, 'a rect per cell');
  // Each cell's tooltip has its weight: the one the page published for that head.
  const k = 9 * t + 3;
  assert.equal(cells[k][1], `g → t: ${result.weights[(4 * t + 9) * t + 3].toFixed(4)}`, '"In the beginning": query 9 is g, key 3 is t');
  assert.equal(cells[3 * t + 9][1], 't → g: masked', 'a masked cell says so');
  for (const label of ['I', 'n', '␣', 'b', 'g']) assert.ok(svg.text.includes(`>${label}</text>`), `label ${label}`);
  assert.ok(!svg.text.includes('<image'), 'vector cells at this size');

  const html = await download('#export-html');
  assert.equal(html.name, 'attention-trained-model-layer2-head1.html');
  assert.match(html.text, /^<!doctype html>/);
  assert.ok(html.text.includes('<svg xmlns'), 'the SVG inline');
  assert.ok(!/<script|\ssrc=|<link|href="https?:/.test(html.text), 'nothing to fetch or run');
  assert.equal((html.text.match(/<tr><td>/g) ?? []).length, 8, 'a score row per head');
  assert.ok(html.text.includes('<code>In the beginning</code>'));

  // Long inputs: the cells become one embedded image; the file stays small.
  await update(browser.page, () => browser.page.selectOption('#length', '256'));
  const long = await download('#export-svg');
  assert.match(long.text, /<image width="\d+" height="\d+" preserveAspectRatio="none" style="image-rendering:pixelated" href="data:image\/png;base64,/);
  assert.ok(long.text.length < 1_000_000, `${long.text.length} characters`);
  assert.deepEqual(browser.errors, []);
});

test('"Repeat this text" adds a line break and the text again, and stops at the length limit', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server);
  await update(browser.page, () => browser.page.fill('#text', 'In the beginning'));
  const repeated = await update(browser.page, () => browser.page.click('#repeat-text'));
  assert.equal(await browser.page.inputValue('#text'), 'In the beginning\nIn the beginning');
  assert.deepEqual(repeated.tokens, [Array.from('In the beginning\nIn the beginning')]);
  assertRows(repeated, 'repeated text');
  // 1500 characters repeated are cut at the model's 2048, and the button stops there.
  const long = 'And God said, Let there be light: and there was light. '.repeat(28).slice(0, 1500);
  await update(browser.page, () => browser.page.fill('#text', long), { timeout: 60_000 });
  const cut = await update(browser.page, () => browser.page.click('#repeat-text'), { timeout: 60_000 });
  assert.equal(await browser.page.inputValue('#text'), `${long}\n${long}`.slice(0, 2048));
  assert.equal(cut.shape[2], 2048);
  assert.equal(await browser.page.isDisabled('#repeat-text'), true);
  assert.deepEqual(browser.errors, []);
});

test('typing during generation stops it: the text is what was typed, no character lands after it', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server);
  await update(browser.page, () => browser.page.fill('#text', fixture.prompt));
  await browser.page.click('#generate');
  // A few characters in, the user types.
  await browser.page.waitForFunction((prompt) => document.querySelector('#text').value.length >= prompt.length + 3, fixture.prompt);
  // The cursor stays where the fill left it (the prompt's end): the user goes to the text's end.
  await browser.page.focus('#text');
  await browser.page.keyboard.press('Control+End');
  await browser.page.keyboard.type('!');
  const typed = await browser.page.inputValue('#text');
  await browser.page.waitForFunction(() => document.body.dataset.state === 'ready');
  const result = await readResult(browser.page);
  assert.equal(await browser.page.inputValue('#text'), typed);
  // A character generated between the key to the end and the '!' lands after the cursor, so the
  // '!' may sit one character before the end (the cursor stays where the user put it).
  assert.ok(typed.endsWith('!') || typed.at(-2) === '!', typed);
  assert.equal(result.model.generating, 0);
  assert.equal(await browser.page.textContent('#generate'), 'Generate 32 characters');
  assert.deepEqual(result.tokens, [Array.from(typed)], 'the last result is of the typed text');
  assert.equal(await browser.page.isVisible('#generated'), false);
  assert.deepEqual(browser.errors, []);
});

test('Generate: one character a step through the f16 KV caches, as PyTorch decodes greedily', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server);
  await update(browser.page, () => browser.page.fill('#text', fixture.prompt));
  await browser.page.click('#generate');
  await browser.page.waitForFunction(() => {
    const result = JSON.parse(document.getElementById('attention-result').textContent);
    return document.body.dataset.state === 'ready' && result.model?.generating === 0 && result.model.generated !== null;
  }, null, { timeout: 20_000 });
  const result = await readResult(browser.page);
  assert.equal(await browser.page.inputValue('#text'), fixture.continuation.text);
  const t = fixture.continuation.ids.length;
  assert.deepEqual(result.shape, [1, 8, t, t], 'each step added a row (and a column) of weights');
  assert.deepEqual(result.tokens, [Array.from(fixture.continuation.text)]);
  assert.equal(result.requests.computed - result.requests.requested, 0, 'every step was computed');
  assertRows(result, 'after generation');
  assert.match(await browser.page.textContent('#decode-time'), /^\d+\.\d\d ms \(model\.generate: prefill and one step, f16 KV caches, \d+ tokens\)$/);
  assert.equal(await browser.page.textContent('#generate'), 'Generate 32 characters');
  // What was generated is shown highlighted, and underlined in the coloured text.
  const generated = fixture.continuation.text.slice(fixture.prompt.length);
  assert.equal(await browser.page.textContent('#generated mark'), generated);
  const underlined = await browser.page.$$eval('#text-view .text-token.generated', (spans) => spans.map((s) => s.textContent).join(''));
  assert.equal(underlined, generated);
  assert.deepEqual(browser.errors, []);
});

test('2048 characters: pictures of 4 × 4 tokens a cell, zoomed in down to the block\'s own weights; the page stays free', { timeout: 90_000 }, async (t) => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server);
  // Main-thread tasks over 50 ms while the worker computes and the page draws.
  await browser.page.evaluate(() => {
    window.longTasks = [];
    new PerformanceObserver((list) => window.longTasks.push(...list.getEntries().map((entry) => entry.duration))).observe({ type: 'longtask' });
  });
  const whole = await update(browser.page, () => browser.page.selectOption('#length', '2048'), { timeout: 60_000 });
  const longTasks = await browser.page.evaluate(() => window.longTasks);
  assert.deepEqual(whole.shape, [1, 8, 2048, 2048]);
  assert.deepEqual(whole.grid, { row: 0, col: 0, rowEnd: 2048, colEnd: 2048, step: 4, rows: 512, cols: 512 }, 'the page gets 512 × 512 cells a head');
  assert.equal(whole.weights, null, 'not published at this size');
  assert.equal(whole.checks.maxMaskedWeight, 0, 'masked weights are 0 (checked in the worker on every weight)');
  assert.ok(whole.checks.maxRowSumError <= 1e-4, `rows sum to 1 (error ${whole.checks.maxRowSumError})`);
  assert.equal(whole.checks.nonFinite, 0);
  assert.equal(await browser.page.textContent('#zoom-note'), 'whole map, 4 × 4 tokens a cell');
  const cell = await cellPoint(browser.page, 100, 10);
  await browser.page.mouse.move(cell.x, cell.y);
  await browser.page.waitForFunction(() => document.getElementById('readout').textContent.startsWith('Queries'));
  assert.match(await browser.page.textContent('#readout'), /^Queries 400–403 → keys 40–43 \(4 × 4 tokens a cell\): largest weight 0\.\d{4}\.$/);
  await browser.page.mouse.move(0, 0);

  // Each + halves the window around its middle; the worker computes only the window's rows.
  const zooms = [];
  for (let k = 0; k < 5; k++) {
    if (k !== 2) {
      zooms.push(await update(browser.page, () => browser.page.click('#zoom-in'), { timeout: 30_000 }));
      continue;
    }
    // The + key, then the pointer on a cell of the old 512-cell window while the worker computes
    // the next one (256 cells): the new picture must not read that cell.
    const stale = await cellPoint(browser.page, 300, 300);
    zooms.push(await update(browser.page, async () => {
      await browser.page.focus('#heatmap');
      await browser.page.keyboard.press('+');
      await browser.page.mouse.move(stale.x, stale.y);
    }, { timeout: 30_000 }));
    await browser.page.mouse.move(0, 0);
  }
  assert.deepEqual(zooms.map((r) => [r.grid.row, r.grid.rowEnd - r.grid.row, r.grid.step]),
    [[512, 1024, 2], [768, 512, 1], [896, 256, 1], [960, 128, 1], [992, 64, 1]]);
  const zoomed = zooms.at(-1);
  assert.equal(await browser.page.textContent('#zoom-note'), 'queries 992–1055 × keys 992–1055');
  // At 64 × 64 the weights are published: the block's own, from a full forward in Node.
  const attn = await init();
  const trained = await TrainedModel.open(attn, MODEL_FOLDER);
  const [characters] = lengthen([Array.from(VERSE_TEXT)], 2048, 2048);
  assert.deepEqual(whole.tokens, [characters]);
  const { attentions } = await trained.model.forward(trained.encode(characters.join('')), { outputAttentions: true, logits: 'none' });
  const weights = attentions.map((layer) => layer.data);
  let maxError = 0;
  for (let layer = 0; layer < 2; layer++) {
    for (let head = 0; head < 4; head++) {
      for (let i = 0; i < 64; i++) {
        for (let j = 0; j < 64; j++) {
          const want = weights[layer][(head * 2048 + 992 + i) * 2048 + 992 + j];
          maxError = Math.max(maxError, Math.abs(zoomed.weights[((layer * 4 + head) * 64 + i) * 64 + j] - want));
        }
      }
    }
  }
  await trained.dispose();
  attn.dispose();
  assert.ok(maxError <= 2e-5, `zoomed weights: max error ${maxError}`);
  const back = await update(browser.page, () => browser.page.click('#zoom-fit'), { timeout: 30_000 });
  assert.deepEqual(back.grid, whole.grid, '"Whole map" goes back');
  assert.equal(back.zoom, null);
  // On a phone the long view still fits its width.
  await browser.page.setViewportSize({ width: 390, height: 800 });
  await nextFrames(browser.page);
  const [scrollWidth, innerWidth] = await browser.page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(scrollWidth <= innerWidth, `no horizontal scroll at 390 px (${scrollWidth})`);
  await browser.page.setViewportSize({ width: 1280, height: 800 });
  t.diagnostic(`2048 characters: update ${whole.updateMs.toFixed(0)} ms (worker ${whole.workerMs.toFixed(0)} ms); ` +
    `zoomed to 512: ${zooms[1].updateMs.toFixed(0)} ms, to 64: ${zoomed.updateMs.toFixed(0)} ms; ` +
    `main-thread tasks over 50 ms during the 2048 update: ${longTasks.length ? longTasks.map((d) => `${d.toFixed(0)} ms`).join(', ') : 'none'}`);
  assert.deepEqual(browser.errors, []);
});

test('zoom on a result the page holds whole: cut out at once, the readout names the tokens', { timeout: 30_000 }, async () => {
  browser.errors.length = 0;
  await openDemo(browser.page, browser.server, '?kind=mha');
  const result = await update(browser.page, () => browser.page.selectOption('#length', '64'));
  await browser.page.click('.thumb[data-head="2"]');
  const requested = result.requests.computed;
  await browser.page.focus('#heatmap');
  // The first key puts the cursor on (0, 0); then to query 12, key 3.
  for (let k = 0; k < 13; k++) await browser.page.keyboard.press('ArrowDown');
  for (let k = 0; k < 3; k++) await browser.page.keyboard.press('ArrowRight');
  await browser.page.keyboard.press('+'); // around the cursor: query 12, key 3
  assert.equal(await browser.page.textContent('#zoom-note'), 'queries 0–31 × keys 0–31');
  await browser.page.keyboard.press('+');
  assert.equal(await browser.page.textContent('#zoom-note'), 'queries 5–20 × keys 0–15');
  assert.equal(await browser.page.isDisabled('#zoom-in'), true, '16 tokens a side at least');
  // The cursor stays on its tokens; two steps up and one right from there.
  const readout = async (i, j) => {
    const w = result.weights[at(result, 0, 2, i, j)];
    assert.match(await browser.page.textContent('#readout'),
      new RegExp(`^Query “${result.tokens[0][i]}” \\(${i}\\) → key “${result.tokens[0][j]}” \\(${j}\\): weight ${w.toFixed(4)}, `));
  };
  await readout(12, 3);
  for (const key of ['ArrowUp', 'ArrowUp', 'ArrowRight']) await browser.page.keyboard.press(key);
  await readout(10, 4);
  // The JSON export holds the whole result, weights, average and mask alike, and names the zoom.
  const exported = JSON.parse((await download('#export-json')).text);
  const [, H, n, m] = result.shape;
  assert.deepEqual(exported.shape, [H, n, m]);
  assert.deepEqual([exported.weights.length, exported.average.length, exported.masked.length], [H * n * m, n * m, n * m]);
  assert.deepEqual(exported.view, { head: 2, zoom: { row: 5, col: 0, size: 16 } });
  await browser.page.click('#zoom-out');
  assert.equal(await browser.page.textContent('#zoom-note'), 'queries 0–31 × keys 0–31');
  assert.equal((await readResult(browser.page)).requests.computed, requested, 'no new computation');
  assert.deepEqual(browser.errors, []);
});

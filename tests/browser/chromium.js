// Shared set-up for the browser tests: the demo server (scripts/serve.mjs, with COOP/COEP and the
// strict CSP) and Debian's Chromium driven by playwright-core, launched as CONTRIBUTING.md says (toolchain pitfall 8).
// Not a test file itself (node --test only runs *.test.js here).
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';

export const RESULTS_DIR = fileURLToPath(new URL('../../test-results/', import.meta.url));
export const STEP_TIMEOUT = 20_000;

/** One browser for a test file: opened before its tests (filling the object returned), closed after them. */
export function browserForFile() {
  const browser = {};
  before(async () => Object.assign(browser, await openBrowser()), { timeout: 30_000 });
  after(() => browser.close?.());
  return browser;
}

/**
 * Starts the server and a headless Chromium with one page at 1280 x 800. Console errors and page
 * errors are collected in `errors`. `args` are added to Chromium's command line.
 */
const watched = new WeakSet();

// Collects a page's console errors and uncaught errors into `errors` (once a page).
function watchErrors(page, errors) {
  if (watched.has(page)) return;
  watched.add(page);
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
}

export async function openBrowser({ args = [] } = {}) {
  const server = await startServer({ port: 0 });
  const userDataDir = await mkdtemp(join(tmpdir(), 'chr-'));
  // CONTRIBUTING.md, toolchain pitfall 8: Debian's Chromium as root, kept off the (closed) internet.
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    timeout: STEP_TIMEOUT,
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', ...args],
  });
  context.setDefaultTimeout(STEP_TIMEOUT);
  const errors = [];
  // Every page of the context reports its console errors and uncaught errors here.
  context.on('page', (opened) => watchErrors(opened, errors));
  const page = context.pages()[0] ?? (await context.newPage());
  watchErrors(page, errors);
  await mkdir(RESULTS_DIR, { recursive: true });
  return {
    server,
    context,
    page,
    errors,
    async close() {
      await context.close().catch(() => {});
      await server.close();
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

/** The demo's last published result (see web/main.js), or null before the first one. */
export async function readResult(page) {
  const text = await page.textContent('#attention-result');
  return text ? JSON.parse(text) : null;
}

/**
 * Runs `action` and waits until the page has published a newer result and has no work left
 * (state 'ready'); fails with the page's error message if it reaches state 'error'.
 * @returns {Promise<object>} the new result
 */
export async function update(page, action = async () => {}, { timeout = STEP_TIMEOUT } = {}) {
  const before = (await readResult(page))?.seq ?? 0;
  await action();
  await page.waitForFunction((seq) => {
    const { state } = document.body.dataset;
    if (state === 'error') return true;
    const text = document.getElementById('attention-result').textContent;
    return state === 'ready' && text !== '' && JSON.parse(text).seq > seq;
  }, before, { timeout });
  const state = await page.evaluate(() => document.body.dataset.state);
  if (state !== 'ready') assert.fail(`demo state is ${state}: ${await page.textContent('#error')}`);
  return readResult(page);
}

/** Loads the demo and waits for its first result. */
export async function openDemo(page, server, query = '') {
  await page.goto(`${server.url}web/${query}`, { waitUntil: 'load' });
  return update(page);
}

/** Waits for two animation frames (a ResizeObserver or requestAnimationFrame redraw). */
export function nextFrames(page) {
  return page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
}

/**
 * Defines window.picturesOf(layer) in the page: each head's picture of a model grid's layer, as
 * the pixels of the layer's canvas under the cell's picture box ({ pixels: 'r,g,b,a,…', middle:
 * [r, g, b, a] at its middle }); in the page, so that a MutationObserver can read it at once.
 */
export function definePicturesOf(page) {
  return page.evaluate(() => {
    window.picturesOf = (layer) => {
      const canvas = document.querySelector(`.layer-pictures[data-layer="${layer}"]`);
      const box = canvas.getBoundingClientRect();
      const ratio = canvas.width / box.width;
      const context = canvas.getContext('2d');
      return Array.from(document.querySelectorAll(`.grid-cell[data-layer="${layer}"] .picture`), (picture) => {
        const spot = picture.getBoundingClientRect();
        const size = Math.round(spot.width * ratio);
        const { data } = context.getImageData(Math.round((spot.left - box.left) * ratio), Math.round((spot.top - box.top) * ratio), size, size);
        const middle = ((size >> 1) * size + (size >> 1)) * 4;
        return { pixels: data.join(), middle: Array.from(data.subarray(middle, middle + 4)) };
      });
    };
  });
}

/** Whether colour `veiled` ([r, g, b, a]) is `plain` with white over it: no channel darker, some lighter. */
export const lighter = (veiled, plain) => veiled.every((value, c) => value >= plain[c]) && veiled.some((value, c) => value > plain[c]);

/** The viewport position of heatmap cell (row, col), scrolling the heatmap into view first. */
export async function cellPoint(page, row, col) {
  await page.locator('#heatmap').scrollIntoViewIfNeeded();
  const box = await page.locator('#heatmap').boundingBox();
  const grid = JSON.parse(await page.getAttribute('#heatmap', 'data-grid'));
  return { x: box.x + grid.left + (col + 0.5) * grid.cell, y: box.y + grid.top + (row + 0.5) * grid.cell };
}

/** Index of weight [b, h, i, j] in a result's flat [N, H, n, m] weights. */
export const at = ({ shape: [, H, n, m] }, b, h, i, j) => ((b * H + h) * n + i) * m + j;

/**
 * Checks every row of a result: masked cells weigh exactly 0; a row sums to 1, or to 0 (with a
 * zero output) when every key is masked. Returns the fully masked rows found, as [b, i].
 */
export function assertRows(result, what) {
  const { shape: [N, H, n, m], weights, masked, outputMaxAbs } = result;
  assert.ok(weights && masked, `${what}: weights and mask published`);
  assert.equal(weights.length, N * H * n * m, `${what}: weights length`);
  assert.equal(masked.length, N * n * m, `${what}: mask length`);
  const fully = [];
  for (let b = 0; b < N; b++) {
    for (let i = 0; i < n; i++) {
      const open = masked.slice((b * n + i) * m, (b * n + i + 1) * m).filter((x) => x === 0).length;
      if (open === 0) {
        fully.push([b, i]);
        assert.equal(outputMaxAbs[b * n + i], 0, `${what}: output of fully masked row [${b}, ${i}] is 0`);
      }
      for (let h = 0; h < H; h++) {
        let sum = 0;
        for (let j = 0; j < m; j++) {
          const w = weights[at(result, b, h, i, j)];
          if (masked[(b * n + i) * m + j]) assert.equal(w, 0, `${what}: masked weight [${b}, ${h}, ${i}, ${j}] is exactly 0`);
          sum += w;
        }
        const want = open === 0 ? 0 : 1;
        assert.ok(Math.abs(sum - want) <= 1e-5, `${what}: row [${b}, ${h}, ${i}] sums to ${sum}, want ${want}`);
      }
    }
  }
  assert.deepEqual(result.fullyMasked, fully, `${what}: fully masked rows reported`);
  return fully;
}

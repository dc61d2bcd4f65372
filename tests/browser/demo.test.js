// The demo page and the package in headless Chromium, served with COOP/COEP and the strict CSP of
// scripts/serve.mjs. Run: node --test tests/browser/
// Screenshots land in test-results/ (git-ignored) for a human to look at.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';
import { EMBED_DIM, EXAMPLE_SENTENCE, embed, tokenize } from '../../web/embeddings.js';

const RESULTS_DIR = fileURLToPath(new URL('../../test-results/', import.meta.url));
const STEP_TIMEOUT = 20_000;

let server;
let context;
let page;
let userDataDir;
const consoleErrors = [];

before(async () => {
  server = await startServer({ port: 0 });
  userDataDir = await mkdtemp(join(tmpdir(), 'chr-'));
  // As in TOOLCHAIN.md: Debian's Chromium as root, kept off the (closed) internet.
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    timeout: STEP_TIMEOUT,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  context.setDefaultTimeout(STEP_TIMEOUT);
  page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => consoleErrors.push(`pageerror: ${error.message}`));
  await mkdir(RESULTS_DIR, { recursive: true });
}, { timeout: 30_000 });

after(async () => {
  await context?.close().catch(() => {});
  await server?.close();
  if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
});

/** float64 reference: softmax(X X^T / sqrt(d)) over keys j <= i. */
function referenceCausalWeights({ data, shape: [n, d] }) {
  const weights = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    const scores = [];
    for (let j = 0; j <= i; j++) {
      let dot = 0;
      for (let k = 0; k < d; k++) dot += data[i * d + k] * data[j * d + k];
      scores.push(dot / Math.sqrt(d));
    }
    const max = Math.max(...scores);
    const exps = scores.map((s) => Math.exp(s - max));
    const sum = exps.reduce((a, b) => a + b, 0);
    exps.forEach((e, j) => { weights[i * n + j] = e / sum; });
  }
  return weights;
}

function assertClose(got, want, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let k = 0; k < want.length; k++) {
    const error = Math.abs(got[k] - want[k]) / (1 + Math.abs(want[k]));
    assert.ok(error <= 2e-5, `${what}[${k}]: got ${got[k]}, want ${want[k]} (relative error ${error})`);
  }
}

async function settleDemo() {
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null,
    { timeout: STEP_TIMEOUT });
}

async function assertDemoReady() {
  const state = await page.evaluate(() => document.body.dataset.state);
  if (state !== 'ready') {
    const message = await page.textContent('#error');
    assert.fail(`demo state is ${state}: ${message}\n${consoleErrors.join('\n')}`);
  }
}

test('the demo draws causal attention weights that match a float64 reference', { timeout: 40_000 }, async () => {
  consoleErrors.length = 0;
  await page.goto(`${server.url}web/`, { waitUntil: 'load' });
  await settleDemo();

  // Screenshots first, of the untouched page, so that they exist even when the demo failed.
  await page.screenshot({ path: join(RESULTS_DIR, 'demo-1280x800.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  // Let the ResizeObserver redraw at the new width.
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  await page.screenshot({ path: join(RESULTS_DIR, 'demo-390x844.png'), fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling at 390 px (overflow ${overflow} px)`);
  await page.setViewportSize({ width: 1280, height: 800 });

  await assertDemoReady();
  assert.equal(await page.evaluate(() => globalThis.crossOriginIsolated), true, 'crossOriginIsolated');

  const result = JSON.parse(await page.textContent('#attention-result'));
  assert.equal(result.features.simd, true, 'features.simd');
  assert.equal(await page.textContent('#feature-simd'), 'yes', 'SIMD shown on the page');

  const tokens = tokenize(EXAMPLE_SENTENCE);
  const n = tokens.length;
  assert.deepEqual(result.tokens, tokens);
  assert.deepEqual(result.shape, [n, n]);
  assert.equal(result.weights.length, n * n);

  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let j = 0; j < n; j++) {
      const w = result.weights[i * n + j];
      assert.equal(result.masked[i * n + j], j > i ? 1 : 0, `masked[${i}, ${j}]`);
      if (j > i) assert.equal(w, 0, `masked weight [${i}, ${j}] must be exactly 0`);
      sum += w;
    }
    assert.ok(Math.abs(sum - 1) <= 1e-5, `row ${i} sums to ${sum}`);
  }

  assertClose(result.weights, referenceCausalWeights(embed(tokens, EMBED_DIM)), 'weights');

  // Hovering reports a cell: just inside the grid's bottom-right corner (the grid ends at most
  // 8 + n px before the canvas' right edge and 8 px above its bottom) is "mat" attending to itself.
  await page.locator('#heatmap').scrollIntoViewIfNeeded();
  const box = await page.locator('#heatmap').boundingBox();
  await page.mouse.move(box.x + box.width - 8 - n - 6, box.y + box.height - 8 - 6);
  assert.match(await page.textContent('#readout'),
    /^Query “mat” \(5\) → key “mat” \(5\): weight 0\.\d{4}, not masked$/);
  // The keyboard reaches the same readout: the first arrow selects [0, 0], then n - 1 steps right.
  await page.mouse.move(0, 0);
  await page.focus('#heatmap');
  for (let k = 0; k < n; k++) await page.keyboard.press('ArrowRight');
  assert.equal(await page.textContent('#readout'), 'Query “the” (0) → key “mat” (5): weight 0.0000, masked');

  assert.deepEqual(consoleErrors, [], 'no console errors or page errors');
});

test('the package runs in a browser page without the demo', { timeout: 20_000 }, async () => {
  // The demo page only provides the origin, headers and CSP; its own state does not matter here.
  consoleErrors.length = 0;
  await page.goto(`${server.url}web/`, { waitUntil: 'load' });
  const got = await page.evaluate(async () => {
    const { init } = await import('/dist/index.mjs');
    const attn = await init();
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
  assertClose(got.weights, [a, b, b, a], 'weights');
  assertClose(got.output, [a + 3 * b, 2 * a + 4 * b, b + 3 * a, 2 * b + 4 * a], 'output');
  // Causal: query 0 sees only key 0; query 1 sees both, as above.
  assertClose(got.causalWeights, [1, 0, b, a], 'causal weights');
  assertClose(got.causalOutput, [1, 2, b + 3 * a, 2 * b + 4 * a], 'causal output');
  assert.deepEqual(consoleErrors, [], 'no console errors or page errors');
});

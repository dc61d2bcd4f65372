// The plain-page and module-worker examples (examples/browser/, examples/worker/) in headless
// Chromium, served by scripts/serve.mjs (COOP/COEP, so threads may run, and a strict CSP). Each
// imports dist/index.mjs by relative URL, with no bundler and no import map.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser, STEP_TIMEOUT } from './chromium.js';

const TOLERANCE = 2e-5;

let browser;

before(async () => {
  browser = await openBrowser();
}, { timeout: 30_000 });

after(async () => {
  await browser?.close();
});

/** Opens an example page and waits for its JSON result (body[data-state] = 'ready'). */
async function openExample(path, page = browser.page) {
  browser.errors.length = 0;
  await page.goto(`${browser.server.url}${path}`, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.state !== 'loading', null, { timeout: STEP_TIMEOUT });
  const state = await page.evaluate(() => document.body.dataset.state);
  if (state !== 'ready') assert.fail(`${path}: ${await page.textContent('#features')}`);
  return JSON.parse(await page.textContent('#result'));
}

function assertClose(got, want, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  got.forEach((x, i) => {
    const error = Math.abs(x - want[i]) / (1 + Math.abs(want[i]));
    assert.ok(error <= TOLERANCE, `${what}[${i}]: got ${x}, want ${want[i]}`);
  });
}

// Causal SDPA over x = [[1, 0], [0, 1], [1, 1]], computed here in float64.
function causalReference() {
  const x = [[1, 0], [0, 1], [1, 1]];
  const weights = [];
  const output = [];
  for (let i = 0; i < 3; i++) {
    const scores = x.map((k, j) => (j <= i ? (x[i][0] * k[0] + x[i][1] * k[1]) / Math.SQRT2 : -Infinity));
    const exps = scores.map((s) => Math.exp(s));
    const sum = exps.reduce((a, b) => a + b, 0);
    const w = exps.map((e) => e / sum);
    weights.push(...w);
    output.push(w.reduce((a, wj, j) => a + wj * x[j][0], 0), w.reduce((a, wj, j) => a + wj * x[j][1], 0));
  }
  return { weights, output };
}

test('examples/browser: the page imports dist/index.mjs and computes causal SDPA on 2 threads', { timeout: 30_000 }, async () => {
  const result = await openExample('examples/browser/');
  assert.equal(result.crossOriginIsolated, true);
  assert.equal(result.features.simd, true, 'features.simd');
  assert.equal(result.features.threads, 2, 'init({ threads: 2 }) in a cross-origin isolated page');
  const want = causalReference();
  assertClose(result.weights, want.weights, 'weights');
  assertClose(result.output, want.output, 'output');
  assert.deepEqual(browser.errors, []);
});

test('examples/worker: a module Web Worker runs MultiheadAttention on 2 threads', { timeout: 30_000 }, async () => {
  const result = await openExample('examples/worker/');
  assert.equal(result.crossOriginIsolated, true, 'the worker is cross-origin isolated');
  assert.equal(result.features.simd, true);
  assert.equal(result.features.threads, 2);
  assert.deepEqual(result.outputShape, [4, 1, 8]);
  assert.deepEqual(result.weightsShape, [1, 4, 4]);
  result.weightRowSums.forEach((sum, i) => assert.ok(Math.abs(sum - 1) <= 1e-5, `weights row ${i} sums to ${sum}`));
  assert.ok(result.output.every(Number.isFinite));
  assert.deepEqual(browser.errors, []);
});

// As on a host or bundler that does not serve the worker file, and with a worker that fails as it
// starts: one warning, no error, the one-thread build.
for (const [what, fulfill, reason] of [
  ['without its pthread worker file', { status: 404, body: 'Not Found' },
    /^attention-wasm: a pthread worker failed to start: could not load http:\/\/127\.0\.0\.1:\d+\/dist\/attention-threads-relaxed\.worker\.js\?no-inline; /],
  // (Its response needs COEP, as every worker script of a cross-origin isolated page does.)
  ['with a pthread worker that fails as it starts', {
    status: 200, contentType: 'text/javascript', body: 'throw new Error("no threads here");',
    headers: { 'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'same-origin' },
  },
    /^attention-wasm: a pthread worker failed to start: Uncaught Error: no threads here; /],
]) {
  test(`${what}, init({ threads: 2 }) falls back to one thread with one warning`, { timeout: 30_000 }, async () => {
    const page = await browser.context.newPage();
    const warnings = [];
    page.on('console', (message) => {
      if (message.type() === 'warning') warnings.push(message.text());
    });
    await browser.context.route('**/attention-threads*.worker.js*', (route) => route.fulfill(fulfill));
    try {
      const result = await openExample('examples/browser/', page);
      assert.equal(result.features.threads, 1, 'one thread');
      assert.equal(result.features.simd, true, 'on the SIMD build');
      assert.equal(result.build, 'relaxed', 'the one-thread build of the same (relaxed) SIMD');
      assertClose(result.weights, causalReference().weights, 'weights');
      assert.equal(warnings.length, 1, `one warning: ${JSON.stringify(warnings)}`);
      assert.match(warnings[0], reason);
      assert.match(warnings[0], /; using one thread \(the relaxed build\) instead\.$/);
      assert.deepEqual(browser.errors, []);
    } finally {
      await browser.context.unroute('**/attention-threads*.worker.js*');
      await page.close();
    }
  });
}

test('an HTML page served where a .wasm file belongs gives an error naming the URL', { timeout: 30_000 }, async () => {
  const page = await browser.context.newPage();
  // As a single-page app's fallback route answers for files that were not deployed. (The threads
  // build fails first, then the one-thread build init() falls back to: relaxed in Chromium.)
  await browser.context.route('**/attention-*.wasm', (route) =>
    route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>App</title>' }));
  try {
    await page.goto(`${browser.server.url}examples/browser/`, { waitUntil: 'load' });
    await page.waitForFunction(() => document.body.dataset.state !== 'loading', null, { timeout: STEP_TIMEOUT });
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'error');
    assert.match(await page.textContent('#features'),
      /^Error: attention-wasm: could not load attention-relaxed\.wasm from http:\/\/127\.0\.0\.1:\d+\/dist\/attention-relaxed\.wasm: the response is not WebAssembly .*wasmBaseUrl/);
  } finally {
    await browser.context.unroute('**/attention-*.wasm');
    await page.close();
  }
});

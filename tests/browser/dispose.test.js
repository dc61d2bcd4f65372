// attn.dispose() in Chromium: a page whose module worker re-creates its instance
// (tests/browser/reinit/: init({ threads: 2 }), one call, dispose(), again and again) ends with no
// pthread worker left and its memory back to a few MiB, where without dispose() every instance
// keeps two workers and 64 MiB of wasm memory.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser, STEP_TIMEOUT } from './chromium.js';

const CYCLES = 30;
// One instance's initial wasm memory: what is left after dispose() must be below it.
const MEMORY_BOUND = 64 * 2 ** 20;

let browser;

before(async () => {
  // Measures memory at once (a forced GC) instead of at the next GC, up to 20 s later.
  browser = await openBrowser({ args: ['--enable-blink-features=ForceEagerMeasureMemory'] });
}, { timeout: 30_000 });

after(async () => {
  await browser?.close();
});

/** Opens the re-init page and waits for the worker's report. */
async function reinit(query) {
  const { page } = browser;
  await page.goto(`${browser.server.url}tests/browser/reinit/?${query}`, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.state !== 'loading', null, { timeout: 60_000 });
  const result = JSON.parse(await page.textContent('#result'));
  assert.equal(result.error, undefined, result.error);
  return result;
}

// Polls `read` until `done(value)` or `ms` have passed; returns the last value.
async function poll(read, done, ms = 10_000) {
  const deadline = Date.now() + ms;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    value = await read();
  }
  return value;
}

// The page's memory, as Chromium attributes it (cross-origin isolated pages only): all, and the
// module worker's share.
function measureMemory(page) {
  return page.evaluate(async () => {
    const { bytes, breakdown } = await performance.measureUserAgentSpecificMemory();
    const worker = breakdown
      .filter((entry) => entry.attribution.some((a) => a.scope === 'DedicatedWorkerGlobalScope' && a.url.endsWith('/reinit/worker.js')))
      .reduce((sum, entry) => sum + entry.bytes, 0);
    return { bytes, worker };
  });
}

const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

test(`a worker that re-inits ${CYCLES} times with init({ threads: 2 }) and dispose() ends with no pthread worker and bounded memory`, { timeout: 90_000 }, async (t) => {
  const { page } = browser;
  const began = Date.now();
  const result = await reinit(`cycles=${CYCLES}`);
  t.diagnostic(`${CYCLES} instances in ${Date.now() - began} ms`);
  assert.equal(result.crossOriginIsolated, true);
  assert.equal(result.features.threads, 2, 'each instance ran on 2 threads');

  // Terminated workers go away asynchronously; only the page's own module worker may stay.
  const workers = await poll(() => page.workers().length, (n) => n === 1);
  assert.equal(workers, 1, `${workers - 1} pthread workers still running`);

  assert.equal(await page.evaluate(() => typeof performance.measureUserAgentSpecificMemory), 'function');
  // The last instance's memory goes at a garbage collection after its workers have ended: once a
  // clean-clone run still saw it 10 s on, so this waits up to 30 s.
  const memory = await poll(() => measureMemory(page), ({ bytes }) => bytes < MEMORY_BOUND, 30_000);
  t.diagnostic(`page memory ${mib(memory.bytes)}, of which the module worker ${mib(memory.worker)}`);
  assert.ok(memory.bytes < MEMORY_BOUND, `page memory ${mib(memory.bytes)} after ${CYCLES} disposed instances`);
  assert.deepEqual(browser.errors, []);
});

test('calibration: without dispose() the same page keeps two pthread workers per instance', { timeout: 60_000 }, async () => {
  await reinit('cycles=3&dispose=0');
  const workers = await poll(() => browser.page.workers().length, (n) => n >= 1 + 2 * 3);
  assert.equal(workers, 1 + 2 * 3);
  await browser.page.goto('about:blank'); // ends the page and its workers
});

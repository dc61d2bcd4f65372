// attn.dispose() in Chromium: a page whose module worker re-creates its instance
// (tests/browser/reinit/: init({ threads: 2 }), one call, dispose(), again and again) ends with no
// pthread worker left and its memory back to a few MiB, where without dispose() every instance
// keeps two workers and 64 MiB of wasm memory.
//
// Nothing here may assume how long a step takes: on a loaded machine (a build beside it) each step
// is slower, and one memory measurement can take a minute. The 30 instances took 6-15 s, idle or
// beside a build, and their workers were gone at once; but performance.measureUserAgentSpecificMemory(),
// asked right after the loop, sometimes answered only 60 s later (a timeout in Chromium, it seems,
// waiting on a worker that is being torn down), and with the memory as it was when asked: 66 or
// 194 MiB, one or three instances not yet collected. The next measurement gave 2 MiB. The test
// stopped polling after 30 s, so that one late, stale answer was its last word and it failed. The
// waits below are bounds for a machine in trouble, not estimates, and a late answer is always
// followed by another measurement.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser } from './chromium.js';

const CYCLES = 30;
// One instance's initial wasm memory: what is left after dispose() must be below it.
const MEMORY_BOUND = 64 * 2 ** 20;

// Bounds on the waits (each far above what an idle machine takes).
const RUN_WAIT = 180_000; // the page's 30 instances (8-15 s)
const WORKERS_WAIT = 60_000; // the pthread workers' end (at once)
const MEMORY_WAIT = 120_000; // the last instance's memory collected (under 1 s) ...
const MEASURE_WAIT = 60_000; // ... with one more measurement, which Chromium answers within 60 s
const MARGIN = 30_000;

let browser;

before(async () => {
  // Measures memory at once (a forced GC) instead of at the next GC, up to 20 s later.
  browser = await openBrowser({ args: ['--enable-blink-features=ForceEagerMeasureMemory'] });
}, { timeout: 120_000 });

after(async () => {
  await browser?.close();
});

/** Opens the re-init page and waits for the worker's report. */
async function reinit(query) {
  const { page } = browser;
  await page.goto(`${browser.server.url}tests/browser/reinit/?${query}`, { waitUntil: 'load', timeout: RUN_WAIT });
  await page.waitForFunction(() => document.body.dataset.state !== 'loading', null, { timeout: RUN_WAIT });
  const result = JSON.parse(await page.textContent('#result'));
  assert.equal(result.error, undefined, result.error);
  return result;
}

/**
 * Reads `read()` until `done(value)`: reads start until `ms` have passed, and at least `minReads`
 * of them whatever the time, so that a read that itself took long is never the last. Returns the
 * last value.
 */
async function poll(read, done, { ms, minReads = 1 }) {
  const deadline = Date.now() + ms;
  let reads = 0;
  let value;
  do {
    if (reads > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    value = await read();
    reads++;
  } while (!done(value) && (Date.now() < deadline || reads < minReads));
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

const TEST_TIMEOUT = RUN_WAIT + WORKERS_WAIT + MEMORY_WAIT + MEASURE_WAIT + MARGIN;

test(`a worker that re-inits ${CYCLES} times with init({ threads: 2 }) and dispose() ends with no pthread worker and bounded memory`, { timeout: TEST_TIMEOUT }, async (t) => {
  const { page } = browser;
  const began = Date.now();
  const result = await reinit(`cycles=${CYCLES}`);
  t.diagnostic(`${CYCLES} instances in ${Date.now() - began} ms`);
  assert.equal(result.crossOriginIsolated, true);
  assert.equal(result.features.threads, 2, 'each instance ran on 2 threads');

  // Terminated workers go away asynchronously; only the page's own module worker may stay.
  const workers = await poll(() => page.workers().length, (n) => n === 1, { ms: WORKERS_WAIT });
  assert.equal(workers, 1, `${workers - 1} pthread workers still running`);

  assert.equal(await page.evaluate(() => typeof performance.measureUserAgentSpecificMemory), 'function');
  // The last instance's memory goes at a garbage collection after its workers have ended (once a
  // clean-clone run still saw it 10 s on). A measurement answers with the memory as it was when
  // asked, possibly a minute earlier: at least two are taken, and the last one starts in time.
  const measuring = Date.now();
  let measures = 0;
  const memory = await poll(() => (measures++, measureMemory(page)), ({ bytes }) => bytes < MEMORY_BOUND, { ms: MEMORY_WAIT, minReads: 2 });
  t.diagnostic(`page memory ${mib(memory.bytes)}, of which the module worker ${mib(memory.worker)} (${measures} measurements in ${Date.now() - measuring} ms)`);
  assert.ok(memory.bytes < MEMORY_BOUND, `page memory ${mib(memory.bytes)} after ${CYCLES} disposed instances`);
  assert.deepEqual(browser.errors, []);
});

test('calibration: without dispose() the same page keeps two pthread workers per instance', { timeout: RUN_WAIT + WORKERS_WAIT + MARGIN }, async () => {
  await reinit('cycles=3&dispose=0');
  const workers = await poll(() => browser.page.workers().length, (n) => n >= 1 + 2 * 3, { ms: WORKERS_WAIT });
  assert.equal(workers, 1 + 2 * 3);
  await browser.page.goto('about:blank'); // ends the page and its workers
});

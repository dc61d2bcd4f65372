// The demo page's first update with its trained character model (the default kind) at 2048
// characters, in Debian's Chromium through playwright-core (tests/browser/chromium.js: the demo
// server with COOP/COEP, so 2 threads are cross-origin isolated). A round sets the page's text
// (2048 characters of a King James verse repeated, a different verse each round so that the worker
// runs the whole forward: it keeps only the last text's) as a paste does (value, then an 'input'
// event of inputType 'insertFromPaste'), and times it until the page publishes the result (document.body.dataset.state goes from
// 'busy' back to 'ready': web/main.js). Meanwhile a PerformanceObserver registered in the page
// before the change takes the main thread's long tasks (over 50 ms, Chromium's 'longtask'). On 2
// threads (the page's default) and on 1 (?threads=1). Beside the rows: the worker's time (the
// result's workerMs, of which forwardMs the model's forward) and the main thread's handling of the
// worker's result (its 'message' listeners, timed by an init script: the page is not edited).
// Goals: the first update within 400 ms; no main-thread task over 50 ms.
//
//   node bench/page.mjs [--json FILE] [--rounds 7] [--profile] [--baseline REV] [--quick]
//   (npm run bench -- --page [...] also builds first; BENCH_NO_BUILD=1 skips that)
//
// Rows (one per page and thread count): impl, threads, characters, rounds, median_ms and max_ms
// (the update), longest_task_ms and long_tasks (the most over 50 ms in one update),
// worker_median_ms, forward_median_ms, update_ms_median (the page's own updateMs),
// draw_median_ms (the 'result' handlers), per_round_ms and per_round_long_tasks_ms.
//
// --quick (a smoke run, tests/js/bench-smoke.test.js; its figures mean nothing): one round per
// thread count after the warm-up, at 640 characters, the fewest past 512 that still take the
// page's long-text paths (its picture pooled at 2 characters a cell, the weights in two chunks).
//
// --baseline REV also serves the page (web/) of git revision REV, on this build of the package
// (build/page-baseline/: web/ from `git archive`, dist/ and node_modules/ links to these), in the
// same browser: its rounds alternate with this page's, round by round, each page brought to the
// front for its own (a page in the background waits for animation frames), so both see the same
// machine.
//
// --profile adds, per thread count, one more round under V8's sampling profiler (main thread and
// compute worker) and prints their time by function (inclusive and self ms): where the time goes.
//
//   node bench/page.mjs --model FOLDER | NAME [--json FILE] [--quick] [--skip-long]   (bench/page-model.mjs)
//
// --model: your own model in the viewer instead. FOLDER: a checkpoint folder (config.json,
// safetensors, tokenizer.json); NAME: one of bench/open.mjs's CONFIGS (Llama-3.2-1B, ...), whose
// shape is written as a random-weight bf16 checkpoint under os.tmpdir() with the tokenizer.json of
// tests/fixtures/models/llama-gqa (the viewer pads the vocabulary past it), removed at the end.
// On the page's 2 threads, three runs: 'open' (the folder through the page's folder input, a text
// of 200 words in the box; the viewer scores the heads on its standard sequence after that text's
// grid, before the result), 'text' (another 200 words pasted on the open model, from the paste's
// input event: a paste runs at once, where typing waits for a 250 ms pause) and
// 'text-long' (2048 tokens, the viewer's limit; words are the tokenizer's whole-word tokens, so a
// word is a token). Rows 'page-opened-model' (one per run): model, scenario, tokens, threads,
// layers, heads, streamed, first_layer_ms (to the first layer's cells drawn), grid_ms (to every
// layer drawn), result_ms (to the result published), pss_mib (the peak PSS of Chromium's renderer
// processes, their workers inside, from /proc/PID/smaps_rollup every 2 s) and rss_mib (their peak
// RSS over the run, /proc/PID/status VmHWM restarted through clear_refs: it bounds PSS from
// above, and catches a peak between two samples), and bench/open.mjs's
// roofline for that many tokens: read_gbps (its readRate of the largest safetensors file),
// linear_gflops (its linearGflops on the model's MLP, 256 rows, 2 threads, before Chromium
// starts), roofline_ms (rooflineMs of partsOf; null where the config is not the Llama layout's);
// and page_read_gbps, the rate at which the page reads that file as a File (Blob slices of 16 MiB
// through byte-stream readers, as the package does), with page_roofline_ms, the roofline at that
// rate: a streamed model in a browser reads no faster. Goals (issue #36): 'open' within 5 s to the
// first layer's cells and 60 s to the whole grid; the other runs' grid within 1.5 × the roofline;
// the renderer under 2 GiB. --quick: SmolLM2-135M's shapes with 2 layers (NAME's config cut to 2
// layers), 20 words, 600 tokens. --skip-long: no 'text-long' (an 8B model's is minutes of
// arithmetic).
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { openBrowser } from '../tests/browser/chromium.js';
import { pageModelBench } from './page-model.mjs';
import { report } from './report.mjs';

const { values: args } = parseArgs({
  options: {
    json: { type: 'string' }, rounds: { type: 'string' }, profile: { type: 'boolean', default: false }, baseline: { type: 'string' },
    quick: { type: 'boolean', default: false }, model: { type: 'string' }, 'skip-long': { type: 'boolean', default: false },
  },
});
if (args.model !== undefined) {
  const other = ['rounds', 'profile', 'baseline'].filter((name) => args[name] !== undefined && args[name] !== false);
  if (other.length) throw new Error(`--model times an opened model; it takes --quick, --skip-long and --json, not --${other.join(', --')}`);
  await pageModelBench({ ...args, skipLong: args['skip-long'] });
  process.exit(0);
}
const ROUNDS = Number(args.rounds ?? (args.quick ? 1 : 7));
const CHARACTERS = args.quick ? 640 : 2048;
const GOAL_MS = 400;
const LONG_TASK_MS = 50;

// King James verses (every character is in the model's vocabulary), each repeated to CHARACTERS.
const VERSES = [
  'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep.',
  'In the beginning was the Word, and the Word was with God, and the Word was God. The same was in the beginning with God.',
  'The LORD is my shepherd; I shall not want. He maketh me to lie down in green pastures: he leadeth me beside the still waters.',
];
const TEXTS = VERSES.map((verse) => `${verse} `.repeat(Math.ceil(CHARACTERS / (verse.length + 1))).slice(0, CHARACTERS));

// Before the page's scripts: times every 'message' listener added to a Worker (main.js's worker
// is compute.js's; its 'result' handler draws the views), into window.__benchMessages.
function instrumentWorkers() {
  window.__benchMessages = [];
  const add = Worker.prototype.addEventListener;
  Worker.prototype.addEventListener = function addEventListener(type, listener, options) {
    if (type !== 'message' || typeof listener !== 'function') return add.call(this, type, listener, options);
    return add.call(this, type, function timed(event) {
      const start = performance.now();
      try {
        return listener.call(this, event);
      } finally {
        window.__benchMessages.push({ type: event.data?.type, start, ms: performance.now() - start });
      }
    }, options);
  };
}

/**
 * In the page: sets the text, waits for 'busy' then 'ready' with a newer result, and collects the
 * long tasks that overlap the update. → { ms, result: { seq, updateMs, workerMs, forwardMs,
 * workerPhases, grid, shape }, longTasks: [{ start, ms }] (start relative to the change),
 * messages: the timed 'result' handlers, ready: whether the page went busy and then ready }
 */
async function roundInPage({ text, timeoutMs }) {
  // The contract's [data-testid="text"]: the one there is, or the controls' one when a second
  // textarea (the model viewer's, in some versions of the page) has it too; else #text.
  const marked = document.querySelectorAll('[data-testid="text"]');
  const input = document.querySelector('#controls [data-testid="text"]') ?? (marked.length === 1 ? marked[0] : null) ?? document.querySelector('#text');
  if (!input) throw new Error('no text input: neither [data-testid="text"] nor #text');
  const resultBlock = document.getElementById('attention-result');
  const seqBefore = resultBlock.textContent ? JSON.parse(resultBlock.textContent).seq : 0;
  const longTasks = [];
  const observer = new PerformanceObserver((list) => longTasks.push(...list.getEntries()));
  observer.observe({ entryTypes: ['longtask'] });
  window.__benchMessages.length = 0;
  const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
  await frame(); // the observer is up, and the round starts on a quiet main thread
  await new Promise((resolve) => setTimeout(resolve, 50));

  let wentBusy = false;
  let readyAt = null;
  const done = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'ready' within ${timeoutMs} ms (state ${document.body.dataset.state})`)), timeoutMs);
    const states = new MutationObserver(() => {
      const { state } = document.body.dataset;
      if (state === 'busy') wentBusy = true;
      if (state === 'error') {
        clearTimeout(timer);
        states.disconnect();
        reject(new Error(`page error: ${document.getElementById('error')?.textContent}`));
      }
      if (state === 'ready' && wentBusy) {
        const seq = resultBlock.textContent ? JSON.parse(resultBlock.textContent).seq : 0;
        if (seq > seqBefore) {
          readyAt = performance.now();
          clearTimeout(timer);
          states.disconnect();
          resolve();
        }
      }
    });
    states.observe(document.body, { attributes: true, attributeFilter: ['data-state'] });
  });
  const start = performance.now();
  input.value = text;
  input.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertFromPaste' }));
  if (document.body.dataset.state === 'busy') wentBusy = true;
  if (!wentBusy) throw new Error(`setting ${input.id ? `#${input.id}` : 'the text'} did not start an update (state ${document.body.dataset.state})`);
  await done;
  // Long-task entries come after their task: wait two frames and a task, then take the rest.
  await frame();
  await frame();
  await new Promise((resolve) => setTimeout(resolve, 100));
  longTasks.push(...observer.takeRecords());
  observer.disconnect();
  const result = JSON.parse(resultBlock.textContent);
  return {
    input: input.id || input.dataset.testid,
    ms: readyAt - start,
    result: {
      seq: result.seq, updateMs: result.updateMs, workerMs: result.workerMs, forwardMs: result.forwardMs,
      workerPhases: result.workerPhases, grid: result.grid, shape: result.shape, kind: result.kind,
      crossOriginIsolated: result.crossOriginIsolated, threads: result.features?.threads,
    },
    longTasks: longTasks
      .filter((entry) => entry.startTime + entry.duration > start && entry.startTime < readyAt)
      .map((entry) => ({ start: entry.startTime - start, ms: entry.duration })),
    messages: window.__benchMessages.filter((m) => m.type === 'result').map((m) => ({ start: m.start - start, ms: m.ms })),
  };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** A V8 CPU profile as its busiest functions: [{ fn, ms (inclusive), self }] and the busy ms. */
function summarize(profile, count = 30) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const name = (node) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url ? url.slice(url.lastIndexOf('/') + 1) : '';
    return `${functionName || '(anonymous)'}${file ? ` ${file}:${lineNumber + 1}` : ''}`;
  };
  const inclusive = new Map();
  const self = new Map();
  let busy = 0;
  profile.samples.forEach((id, k) => {
    const dt = (profile.timeDeltas[k + 1] ?? 0) / 1000; // a sample lasts until the next
    const node = byId.get(id);
    if (['(idle)', '(program)', '(root)'].includes(node.callFrame.functionName)) return;
    busy += dt;
    self.set(name(node), (self.get(name(node)) ?? 0) + dt);
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const key = name(byId.get(at));
      if (seen.has(key) || key.startsWith('(root)')) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
    }
  });
  const top = [...inclusive.entries()].sort((a, b) => b[1] - a[1]).slice(0, count).map(([fn, ms]) => ({ fn, ms, self: self.get(fn) ?? 0 }));
  return { busy, top };
}

/**
 * One update under V8's sampling profiler, in the page's main thread and in its compute worker
 * (reached through CDP's Target.sendMessageToTarget) → { round, main, worker } (see summarize).
 */
async function profileRound(page, text) {
  const cdp = await page.context().newCDPSession(page);
  let session = null;
  let nextId = 1;
  const replies = new Map();
  cdp.on('Target.attachedToTarget', ({ sessionId, targetInfo }) => {
    if (targetInfo.type === 'worker' && targetInfo.url.endsWith('/web/worker.js')) session = sessionId;
  });
  cdp.on('Target.receivedMessageFromTarget', ({ message }) => {
    const reply = JSON.parse(message);
    replies.get(reply.id)?.(reply);
    replies.delete(reply.id);
  });
  const inWorker = (method, params = {}) => new Promise((resolve) => {
    const id = nextId++;
    replies.set(id, resolve);
    cdp.send('Target.sendMessageToTarget', { sessionId: session, message: JSON.stringify({ id, method, params }) });
  });
  await cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: false });
  for (let k = 0; k < 100 && !session; k++) await new Promise((resolve) => setTimeout(resolve, 20));
  for (const send of session ? [inWorker, (method, params) => cdp.send(method, params)] : [(method, params) => cdp.send(method, params)]) {
    await send('Profiler.enable', {});
    await send('Profiler.setSamplingInterval', { interval: 200 });
    await send('Profiler.start', {});
  }
  const round = await page.evaluate(roundInPage, { text, timeoutMs: 60_000 });
  const worker = session ? summarize((await inWorker('Profiler.stop')).result.profile) : null;
  const main = summarize((await cdp.send('Profiler.stop')).profile);
  await cdp.detach();
  return { round, main, worker };
}

function printProfile(threads, { round, main, worker }) {
  console.log(`\nprofiled round on ${threads} thread(s): ${round.ms.toFixed(0)} ms; worker ${round.result.workerMs.toFixed(0)} ms (forward and pictures ${round.result.forwardMs.toFixed(0)}); ` +
    `result handler ${round.messages.map((m) => `${m.ms.toFixed(0)} ms at +${m.start.toFixed(0)}`).join(', ')}; ` +
    `long tasks ${round.longTasks.map((t) => `${t.ms.toFixed(0)} ms at +${t.start.toFixed(0)}`).join(', ') || 'none'}`);
  for (const [what, summary] of [['main thread', main], ['worker', worker]]) {
    if (!summary) continue;
    console.log(`  ${what}, busy ${summary.busy.toFixed(0)} ms:  inclusive ms  self ms  function`);
    for (const { fn, ms, self } of summary.top) if (ms >= 2) console.log(`  ${''.padStart(what.length + 17)}${ms.toFixed(1).padStart(12)}  ${self.toFixed(1).padStart(7)}  ${fn}`);
  }
}

const rows = [];
const goals = [];
const notes = [];
const profiles = [];
console.log(`attention-wasm bench: the demo page's update, trained character model, ${CHARACTERS} characters, ${ROUNDS} rounds (Chromium)`);
console.log(`${'impl'.padEnd(24)}  thr  ${'median ms'.padStart(9)}  ${'max ms'.padStart(7)}  ${'worker ms'.padStart(9)}  ${'draw ms'.padStart(7)}  ${'longest task'.padStart(12)}  ${'tasks>50'.padStart(8)}`);
// The baseline's page beside this one: its web/ at REV, this package build under it.
const BASELINE_DIR = new URL('../build/page-baseline/', import.meta.url);
if (args.baseline) {
  rmSync(BASELINE_DIR, { recursive: true, force: true });
  mkdirSync(BASELINE_DIR, { recursive: true });
  const archive = execFileSync('git', ['archive', args.baseline, '--', 'web'], { cwd: new URL('..', import.meta.url), maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', fileURLToPath(BASELINE_DIR)], { input: archive });
  // What web/ imports from beside it: the package build and the tokenizer.
  for (const name of ['dist', 'node_modules']) symlinkSync(`../../${name}`, new URL(name, BASELINE_DIR));
}
const PAGES = [
  { impl: 'page-update', path: 'web/' },
  ...(args.baseline ? [{ impl: `page-update at ${args.baseline}`, path: 'build/page-baseline/web/' }] : []),
];

/** Opens `path` on `page` and waits for its first result: the trained model, ready. */
async function openPage(page, url) {
  await page.addInitScript(instrumentWorkers);
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.state === 'ready' && document.getElementById('attention-result').textContent !== '', null, { timeout: 60_000 });
  const kind = await page.evaluate(() => document.getElementById('kind')?.value);
  if (kind !== 'model') throw new Error(`${url} opened kind ${kind}, not the trained model`);
}

/** A bench row from one page's rounds, printed and judged. */
function summarizeRounds(impl, threads, rounds) {
  const { result } = rounds[0];
  if (threads === 2 && !result.crossOriginIsolated) notes.push(`${impl}, 2 threads: the page was not cross-origin isolated`);
  notes.push(`${impl}, ${threads} thread(s): text set through #${rounds[0].input}; page's threads ${result.threads}, picture ${result.grid.rows} x ${result.grid.cols} cells at ${result.grid.step} characters a cell`);
  const times = rounds.map((r) => r.ms);
  const longest = rounds.map((r) => Math.max(0, ...r.longTasks.map((t) => t.ms)));
  const counts = rounds.map((r) => r.longTasks.filter((t) => t.ms > LONG_TASK_MS).length);
  const row = {
    impl,
    threads,
    characters: CHARACTERS,
    median_ms: median(times),
    max_ms: Math.max(...times),
    longest_task_ms: Math.max(...longest),
    long_tasks: Math.max(...counts), // the most in one update
    rounds: ROUNDS,
    worker_median_ms: median(rounds.map((r) => r.result.workerMs)),
    forward_median_ms: median(rounds.map((r) => r.result.forwardMs)),
    update_ms_median: median(rounds.map((r) => r.result.updateMs)), // the page's own updateMs (to the drawn picture, before the publish)
    draw_median_ms: median(rounds.map((r) => r.messages.reduce((sum, m) => sum + m.ms, 0))),
    per_round_ms: times,
    per_round_long_tasks_ms: rounds.map((r) => r.longTasks.map((t) => Math.round(t.ms))),
  };
  rows.push(row);
  const longestText = row.longest_task_ms > 0 ? `${row.longest_task_ms.toFixed(0)} ms` : '< 50 ms';
  console.log(`${row.impl.padEnd(24)}  ${String(threads).padStart(3)}  ${row.median_ms.toFixed(0).padStart(9)}  ${row.max_ms.toFixed(0).padStart(7)}  ${row.worker_median_ms.toFixed(0).padStart(9)}  ${row.draw_median_ms.toFixed(0).padStart(7)}  ${longestText.padStart(12)}  ${String(row.long_tasks).padStart(8)}`);
  goals.push(`${impl} on ${threads} thread(s): first update median ${row.median_ms.toFixed(0)} ms, max ${row.max_ms.toFixed(0)} ms (goal < ${GOAL_MS} ms): ${row.median_ms < GOAL_MS ? 'met' : 'missed'}`);
  goals.push(`${impl} on ${threads} thread(s): longest main-thread task ${longestText}, at most ${row.long_tasks} over ${LONG_TASK_MS} ms in an update (goal: none over ${LONG_TASK_MS} ms): ${row.long_tasks === 0 ? 'met' : 'missed'}`);
  notes.push(`${impl}, ${threads} thread(s): per round ${times.map((t) => t.toFixed(0)).join(', ')} ms; long tasks ${row.per_round_long_tasks_ms.map((l) => `[${l.join(' ')}]`).join(' ')} ms`);
}

for (const threads of [2, 1]) {
  const browser = await openBrowser();
  try {
    const pages = [];
    for (const [index, { impl, path }] of PAGES.entries()) {
      const page = index === 0 ? browser.page : await browser.context.newPage();
      await openPage(page, `${browser.server.url}${path}${threads === 1 ? '?threads=1' : ''}`);
      pages.push({ impl, page, rounds: [] });
    }
    // One warm-up round each (the first long text's forward compiles and grows wasm memory),
    // then the rounds, the pages taking turns to go first.
    for (let k = 0; k <= ROUNDS; k++) {
      for (const { page, rounds } of k % 2 ? [...pages].reverse() : pages) {
        await page.bringToFront();
        const round = await page.evaluate(roundInPage, { text: TEXTS[k % TEXTS.length], timeoutMs: 60_000 });
        if (round.result.kind !== 'model' || round.result.shape[2] !== CHARACTERS) throw new Error(`unexpected result: ${JSON.stringify(round.result)}`);
        if (k > 0) rounds.push(round);
      }
    }
    for (const { impl, rounds } of pages) summarizeRounds(impl, threads, rounds);
    if (args.profile) {
      await browser.page.bringToFront();
      profiles.push([threads, await profileRound(browser.page, TEXTS[(ROUNDS + 1) % TEXTS.length])]);
    }
    if (browser.errors.length) notes.push(`${threads} thread(s): page errors: ${browser.errors.join('; ')}`);
  } finally {
    await browser.close();
  }
}
for (const [threads, profile] of profiles) printProfile(threads, profile);
console.log('');
for (const note of notes) console.log(note);
await report(goals, rows, args.json);

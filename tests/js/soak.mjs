// The soak test (opt-in: `npm run soak [-- --seconds N]`, 600 by default; not part of npm test;
// node --expose-gc tests/js/soak.mjs runs it without the build):
// a decode loop on the threads build for N seconds, with random cache truncations, bad calls and
// disposals of caches and blocks mixed in. Every minute (every tenth of the run when it is shorter)
// it prints the steps done, the median step time, the JS heap, the process RSS, the wasm heap and
// the live objects; it fails if any error other than the bad calls' own appears, or if memory grows
// after the first report: wasm heap not at all, JS heap by more than 16 MiB, RSS by more than 32 MiB.
import assert from 'node:assert/strict';
import { parseArgs } from 'node:util';

import { AttentionError, init } from 'attention-wasm';

import { randomTensor, rng } from './helpers.js';

const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '600' } } });
const seconds = Number(args.seconds);
const reportEvery = Math.min(60, seconds / 10) * 1000;
const MiB = 2 ** 20;
const HIDDEN = 256, HEADS = 8, KV_HEADS = 2, MAX_LENGTH = 1024;

const random = rng(2026);
const attn = await init({ threads: 2 });
assert.equal(attn.features.threads, 2, 'the threads build runs');

function newBlock() {
  const block = new attn.GroupedQueryAttention(HIDDEN, HEADS, KV_HEADS, { ropeBase: 500000, slidingWindow: random() < 0.5 ? 512 : null });
  const headDim = HIDDEN / HEADS;
  block.loadStateDict({
    'q_proj.weight': randomTensor([HEADS * headDim, HIDDEN], random),
    'k_proj.weight': randomTensor([KV_HEADS * headDim, HIDDEN], random),
    'v_proj.weight': randomTensor([KV_HEADS * headDim, HIDDEN], random),
    'o_proj.weight': randomTensor([HIDDEN, HEADS * headDim], random),
  });
  return block;
}

// Each must throw an AttentionError of code INVALID_ARGUMENT and change nothing.
const BAD_CALLS = [
  (block, cache) => block.forward(randomTensor([1, 1, HIDDEN + 1], random), { cache }),
  (block, cache) => cache.truncate(cache.length + 1),
  (block, cache) => cache.truncate(cache.window !== null && cache.position > cache.length ? cache.window - 2 : -1),
  (block, cache) => cache.attend(randomTensor([1, 3, 1, HIDDEN / HEADS], random)),
  (block, cache) => block.forward(randomTensor([1, 2, HIDDEN], random), { cache, positions: [0] }),
  (block, cache) => cache.append(randomTensor([1, KV_HEADS, 1, 7], random), randomTensor([1, KV_HEADS, 1, 7], random)),
];

let block = newBlock();
let cache = block.createCache(MAX_LENGTH, { dtype: random() < 0.5 ? 'f16' : 'f32' });
block.forward(randomTensor([1, 64, HIDDEN], random), { cache });

const reports = [];
let steps = 0, badCalls = 0, disposals = 0, truncations = 0;
let stepTimes = [];
const started = performance.now();
let nextReport = started + reportEvery;

function report() {
  const sorted = stepTimes.toSorted((a, b) => a - b);
  const stepMedianMs = sorted[sorted.length >> 1];
  stepTimes = [];  // a minute's step times (over a million numbers) are the soak's own, not measured
  globalThis.gc();  // what is live, not what the collector has yet to reach
  const { heapUsed, rss } = process.memoryUsage();
  const row = {
    seconds: Math.round((performance.now() - started) / 1000), steps, badCalls, truncations, disposals,
    stepMedianMs, heapMiB: heapUsed / MiB, rssMiB: rss / MiB,
    wasmHeapMiB: attn.stats().wasmHeapBytes / MiB, liveObjects: attn.stats().liveObjects,
  };
  reports.push(row);
  console.log(`${String(row.seconds).padStart(4)} s  ${String(steps).padStart(7)} steps  median step ${row.stepMedianMs.toFixed(3)} ms  ` +
    `JS heap ${row.heapMiB.toFixed(1)} MiB  RSS ${row.rssMiB.toFixed(1)} MiB  wasm heap ${row.wasmHeapMiB.toFixed(1)} MiB  ` +
    `live objects ${row.liveObjects}  (bad calls ${badCalls}, truncations ${truncations}, disposals ${disposals})`);
}

while (performance.now() - started < seconds * 1000) {
  const token = randomTensor([1, 1, HIDDEN], random);
  const start = performance.now();
  const { output } = block.forward(token, { cache });
  stepTimes.push(performance.now() - start);
  assert.ok(output.data.every(Number.isFinite), 'a finite output');
  steps++;
  if (cache.length >= MAX_LENGTH - 1 || random() < 0.01) {
    // A ring that has dropped positions keeps at least window − 1 (below, truncate() refuses).
    const least = cache.window !== null && cache.position > cache.length ? cache.window - 1 : 0;
    cache.truncate(least + Math.floor(random() * (cache.length - least)));
    truncations++;
  }
  if (random() < 0.01) {
    const bad = BAD_CALLS[badCalls % BAD_CALLS.length];
    const length = cache.length;
    assert.throws(() => bad(block, cache), (err) => err instanceof AttentionError && err.code === 'INVALID_ARGUMENT');
    assert.equal(cache.length, length, 'a refused call changes nothing');
    badCalls++;
  }
  if (random() < 0.002) {
    cache.dispose();
    if (random() < 0.3) {
      block.dispose();
      block = newBlock();
    }
    cache = block.createCache(MAX_LENGTH, { dtype: random() < 0.5 ? 'f16' : 'f32' });
    block.forward(randomTensor([1, 1 + Math.floor(random() * 64), HIDDEN], random), { cache });
    disposals++;
  }
  if (performance.now() >= nextReport) {
    report();
    nextReport += reportEvery;
  }
}
if (stepTimes.length) report();

const first = reports[0], last = reports.at(-1);
console.log(`\n${steps} steps in ${last.seconds} s; after the first report: JS heap ${(last.heapMiB - first.heapMiB).toFixed(1)} MiB, ` +
  `RSS ${(last.rssMiB - first.rssMiB).toFixed(1)} MiB, wasm heap ${(last.wasmHeapMiB - first.wasmHeapMiB).toFixed(1)} MiB`);
assert.equal(last.wasmHeapMiB, first.wasmHeapMiB, 'the wasm heap does not grow');
assert.ok(last.heapMiB - first.heapMiB <= 16, 'the JS heap grows by at most 16 MiB');
assert.ok(last.rssMiB - first.rssMiB <= 32, 'RSS grows by at most 32 MiB');
attn.dispose();

// Run by dispose.test.js in a child node with --expose-gc (not a test file itself):
//   node --expose-gc tests/js/dispose-leak.mjs <threads|plain> <count>
// Creates `count` instances one after another (init({ threads: 2 }), or the plain SIMD build),
// uses each (one small SDPA call, one module loaded and run), disposes it, and prints one JSON line
// with the process's memory, threads and listeners before and after. The caller keeps every
// disposed instance and its module, so what is freed is freed by dispose(), not by dropping them;
// another module per instance is dropped undisposed, so the FinalizationRegistry meets modules
// whose instance is gone (a double free there would throw in its callback and end this process).
import { readFileSync } from 'node:fs';

import { init } from 'attention-wasm';

const [kind, countArgument] = process.argv.slice(2);
const count = Number(countArgument);
const options = kind === 'threads' ? { threads: 2 } : { relaxedSimd: false };
// Past this growth the run stops early: a dispose() that frees nothing must fail the test, not
// take the machine's memory (100 threaded instances without it hold 1.7 GiB).
const ABORT_ABOVE = 512 * 2 ** 20;

// A listener of the user's own, which must stay.
const userListener = (reason) => {
  console.error('unhandled rejection:', reason);
  process.exit(1);
};
process.on('unhandledRejection', userListener);

const x = { shape: [2, 4, 8], data: Float32Array.from({ length: 64 }, (_, i) => Math.sin(i)) };
const stateDict = {
  in_proj_weight: { shape: [24, 8], data: Float32Array.from({ length: 192 }, (_, i) => Math.cos(i) * 0.1) },
  in_proj_bias: { shape: [24], data: new Float32Array(24) },
  'out_proj.weight': { shape: [8, 8], data: Float32Array.from({ length: 64 }, (_, i) => Math.sin(i) * 0.1) },
  'out_proj.bias': { shape: [8], data: new Float32Array(8) },
};

const listeners = () => Object.fromEntries(process.eventNames().map((name) => [String(name), process.listenerCount(name)]));

// OS threads of this process (Linux): each pthread worker is one. null elsewhere.
function osThreads() {
  try {
    return Number(/^Threads:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
  } catch {
    return null;
  }
}

const turn = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Terminated workers exit asynchronously: collect garbage and wait until the thread count is back
// to `threads` (at most 5 s), then a little longer for their memory to be returned.
async function settle(threads) {
  for (let waited = 0; waited < 5000; waited += 50) {
    gc();
    if (threads === undefined || osThreads() === null || osThreads() <= threads) break;
    await turn(50);
  }
  for (let i = 0; i < 3; i++) {
    gc();
    await turn(20);
  }
}

function measure() {
  const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapUsed, external, arrayBuffers, threads: osThreads(), listeners: listeners() };
}

async function cycle(kept) {
  const attn = await init(options);
  attn.scaledDotProductAttention(x, x, x, { isCausal: true });
  const module = new attn.MultiheadAttention(8, 2).loadStateDict(stateDict);
  module.forward(x);
  new attn.SelfAttention(8, 4, 4); // dropped without dispose()
  const during = JSON.stringify(listeners());
  attn.dispose();
  kept.push({ attn, module });
  return { build: attn.build, during };
}

// The first instance loads the glue, compiles the wasm and starts the worker machinery once: the
// baseline is taken after it.
const warmUp = [];
const { build } = await cycle(warmUp);
await settle();
const before = measure();

const kept = [];
let listenersChangedWhileAlive = 0;
let stoppedAt = null;
const began = performance.now();
for (let i = 0; i < count; i++) {
  const { during } = await cycle(kept);
  if (during !== JSON.stringify(before.listeners)) listenersChangedWhileAlive++;
  if ((i + 1) % Math.max(1, Math.floor(count / 4)) === 0 && process.memoryUsage().rss - before.rss > ABORT_ABOVE) {
    stoppedAt = i + 1;
    break;
  }
}
const ms = performance.now() - began;
await settle(before.threads);
const after = measure();

// The kept modules are of disposed instances: their dispose() does nothing, their use throws.
let keptModulesThrow = 0;
for (const { module } of kept) {
  module.dispose();
  try {
    module.forward(x);
  } catch (error) {
    if (error.code === 'DISPOSED') keptModulesThrow++;
  }
}

console.log(JSON.stringify({
  build,
  count,
  stoppedAt,
  kept: kept.length,
  keptModulesThrow,
  ms,
  before,
  after,
  listenersChangedWhileAlive,
  userListenerKept: process.listeners('unhandledRejection').includes(userListener),
}));

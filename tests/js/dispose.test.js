// attn.dispose(): after it every entry point of the instance (modules made earlier included)
// throws an AttentionError naming the disposed instance; the instance's objects are freed with it;
// and instances created, used and disposed by the hundred leave the process's memory, threads and
// listeners where they started (measured in a child node with --expose-gc: dispose-leak.mjs).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { Runtime } from '../../bindings/runtime.js';
import { MODULE_KINDS, assertAttentionError, bitIdentical, loadModuleFixtures, loadedModule, REPO_ROOT, tensorOf } from './helpers.js';

const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');

const KINDS = Object.entries(MODULE_KINDS).map(([kind, spec]) => ({ kind, ...spec, c: loadModuleFixtures(spec.file)[0] }));
const x = tensorOf([2, 4, 8]);
const mask = { data: new Uint8Array([0, 1, 0, 0]), shape: [2, 2] };

// Every entry point of an instance, called with valid arguments; `modules` were made before dispose.
function entryPoints(attn, modules) {
  const calls = {
    scaledDotProductAttention: () => attn.scaledDotProductAttention(x, x, x),
    stats: () => attn.stats(),
    'masks.causal': () => attn.masks.causal(3),
    'masks.keyPadding': () => attn.masks.keyPadding([1, 2], 2),
    'masks.padding2d': () => attn.masks.padding2d([1, 2], 2),
    'masks.merge': () => attn.masks.merge(null, mask, 1),
  };
  for (const { kind, create, forward, c } of KINDS) {
    calls[`new ${kind}`] = () => create(attn, c);
    const module = modules[kind];
    calls[`${kind}.forward`] = () => forward(module, c);
    calls[`${kind}.loadStateDict`] = () => module.loadStateDict(c.stateDict);
    calls[`${kind}.train`] = () => module.train();
    calls[`${kind}.eval`] = () => module.eval();
  }
  return calls;
}

for (const opts of [undefined, { threads: 2 }]) {
  describe(`dispose() on init(${opts ? JSON.stringify(opts) : ''})`, () => {
    test('every later call throws an AttentionError naming the call and the disposed instance', async () => {
      const attn = await init(opts);
      const modules = Object.fromEntries(KINDS.map(({ kind, c }) => [kind, loadedModule(attn, kind, c)]));
      for (const call of Object.values(entryPoints(attn, modules))) call(); // all fine while alive
      attn.dispose();
      for (const [argument, call] of Object.entries(entryPoints(attn, modules))) {
        const error = assertAttentionError(call, AttentionError, argument, [`attn (disposed instance of build '${attn.build}')`]);
        assert.equal(error.code, 'DISPOSED', argument);
      }
      // Even a call whose arguments are wrong: the instance is what is at fault.
      assertAttentionError(() => attn.scaledDotProductAttention(), AttentionError, 'scaledDotProductAttention');
      assertAttentionError(() => new attn.MultiheadAttention(8, 3), AttentionError, 'new MultiheadAttention');
      // What describes the instance stays readable.
      assert.equal(attn.features.threads, opts?.threads ?? 1);
      assert.equal(typeof attn.build, 'string');
    });

    test('a second dispose() does nothing; [Symbol.dispose] is dispose', async () => {
      const attn = await init(opts);
      assert.equal(attn[disposeSymbol], attn.dispose);
      attn[disposeSymbol]();
      assert.throws(() => attn.stats(), { code: 'DISPOSED' });
      attn.dispose();
      attn[disposeSymbol]();
      assert.throws(() => attn.stats(), { code: 'DISPOSED' });
    });

    test('modules made earlier are freed with the instance; their dispose() still does nothing', async () => {
      const attn = await init(opts);
      const modules = KINDS.map(({ kind, c }) => loadedModule(attn, kind, c));
      modules[0].dispose();
      assert.equal(attn.stats().liveObjects, modules.length - 1);
      attn.dispose();
      for (const module of modules) {
        module.dispose();
        module[disposeSymbol]();
      }
    });

    test('other instances keep working, with their modules', async () => {
      const attn = await init(opts);
      const other = await init(opts);
      const { kind, forward, c } = KINDS[0];
      const module = loadedModule(other, kind, c);
      const good = forward(module, c).output;
      const sdpa = other.scaledDotProductAttention(x, x, x).output;
      attn.dispose();
      assert.ok(bitIdentical(forward(module, c).output.data, good.data));
      assert.ok(bitIdentical(other.scaledDotProductAttention(x, x, x).output.data, sdpa.data));
      assert.equal(other.stats().liveObjects, 1);
      other.dispose();
    });
  });
}

describe('the runtime frees what an instance owns exactly once', () => {
  // A stand-in for the Emscripten module: only what Runtime asks of it.
  const fakeWasm = () => ({ _maxRank: 8, _malloc: () => 16, _setThreadCount: () => 1 });

  test('free(), then dispose() for the rest; free() after dispose() does nothing', () => {
    const runtime = new Runtime(fakeWasm(), 'simd');
    const released = [];
    const targets = ['a', 'b', 'c'].map((name) => ({ name }));
    const entries = targets.map(({ name }) => runtime.own(targets, () => released.push(name)));
    assert.equal(runtime.liveObjects, 3);
    runtime.free(entries[1]);
    runtime.free(entries[1]);
    assert.deepEqual(released, ['b']);
    assert.equal(runtime.liveObjects, 2);
    runtime.dispose();
    assert.deepEqual(released.sort(), ['a', 'b', 'c']);
    assert.equal(runtime.liveObjects, 0);
    entries.forEach((entry) => runtime.free(entry));
    runtime.dispose();
    assert.deepEqual(released.sort(), ['a', 'b', 'c']);
    assert.ok(!entries.some((entry) => runtime.owns(entry)));
    assert.throws(() => runtime.enter('stats'), { code: 'DISPOSED', argument: 'stats' });
  });
});

// What a leak run reported, as MiB, for the diagnostics.
const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

function runLeakChild(t, kind, count) {
  const child = spawnSync(process.execPath, ['--expose-gc', 'tests/js/dispose-leak.mjs', kind, String(count)], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(child.status, 0, `child failed: ${child.stderr}`);
  const report = JSON.parse(child.stdout.trim().split('\n').at(-1));
  const { before, after } = report;
  t.diagnostic(`${report.build}: ${report.count} instances in ${(report.ms / 1000).toFixed(1)} s; ` +
    `RSS ${mib(before.rss)} -> ${mib(after.rss)}, JS heap ${mib(before.heapUsed)} -> ${mib(after.heapUsed)}, ` +
    `external (wasm memory) ${mib(before.external)} -> ${mib(after.external)}, threads ${before.threads} -> ${after.threads}, ` +
    `listeners ${JSON.stringify(before.listeners)} -> ${JSON.stringify(after.listeners)}`);
  assert.equal(report.stoppedAt, null, `memory grew past 512 MiB after ${report.stoppedAt} instances`);
  assert.equal(report.kept, count);
  return report;
}

// Margins: after a warm-up instance, 100 threaded instances add ~30 MiB of RSS (what the allocator
// keeps of 200 workers' start-up, bounded: ~40 MiB after 700) and 1,000 plain ones ~16 MiB; without
// dispose() 100 threaded instances hold 1.7 GiB and each plain one 16 MiB of wasm memory. The JS
// heap holds ~5 KB per disposed instance the caller keeps (its classes and masks).
const RSS_MARGIN = 64 * 2 ** 20;
const HEAP_MARGIN = 16 * 2 ** 20;
const EXTERNAL_MARGIN = 16 * 2 ** 20;

function assertWhereTheyStarted(report) {
  const { before, after } = report;
  assert.ok(after.rss - before.rss <= RSS_MARGIN, `RSS grew by ${mib(after.rss - before.rss)}`);
  assert.ok(after.heapUsed - before.heapUsed <= HEAP_MARGIN, `JS heap grew by ${mib(after.heapUsed - before.heapUsed)}`);
  assert.ok(after.external - before.external <= EXTERNAL_MARGIN, `external memory grew by ${mib(after.external - before.external)}`);
  if (before.threads !== null) assert.ok(after.threads <= before.threads, `threads: ${before.threads} -> ${after.threads} (pthread workers left running)`);
  assert.deepEqual(after.listeners, before.listeners, 'process listeners');
  assert.equal(report.listenersChangedWhileAlive, 0, 'no process listener added while an instance lives');
  assert.ok(report.userListenerKept, "the user's own listener stays");
  assert.equal(report.keptModulesThrow, report.count, "modules of disposed instances throw, and their dispose() doesn't");
}

test('100 threaded instances created, used and disposed leave memory, threads and listeners where they started', { timeout: 60_000 }, (t) => {
  const report = runLeakChild(t, 'threads', 100);
  assert.equal(report.build, 'threads');
  assertWhereTheyStarted(report);
});

test('1,000 plain instances created, used and disposed (and still held) leave memory and listeners where they started', { timeout: 60_000 }, (t) => {
  const report = runLeakChild(t, 'plain', 1000);
  assert.equal(report.build, 'simd');
  assertWhereTheyStarted(report);
});

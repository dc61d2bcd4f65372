// Module lifetime: stats().liveObjects counts modules, dispose() frees at once (twice is fine),
// disposed modules and modules without weights refuse to run with a clear AttentionError, and
// thousands of create/load/forward/dispose cycles leave the instance as it was.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { MODULE_KINDS, assertAttentionError, bitIdentical, loadModuleFixtures, loadedModule, moduleFixture, tensorOf } from './helpers.js';

const disposeSymbol = Symbol.dispose ?? Symbol.for('Symbol.dispose');

// One fixture case per module kind, and how to build and run it.
const KINDS = Object.entries(MODULE_KINDS).map(([kind, spec]) => ({ kind, ...spec, c: loadModuleFixtures(spec.file)[0] }));

describe('lifecycle', () => {
  let attn;
  before(async () => {
    attn = await init();
  });

  const live = () => attn.stats().liveObjects;

  test('liveObjects counts modules: +1 per construction, -1 per dispose, dispose twice is fine', () => {
    const start = live();
    const modules = [];
    for (const { kind, create, c } of KINDS) {
      modules.push(create(attn, c));
      assert.equal(live(), start + modules.length, `after constructing a ${kind}`);
    }
    modules.push(new attn.MultiheadAttention(8, 2)); // never loaded: still counts
    assert.equal(live(), start + modules.length);
    for (let i = 0; i < modules.length; i++) {
      modules[i].dispose();
      assert.equal(live(), start + modules.length - i - 1, 'after dispose');
      modules[i].dispose();
      assert.equal(live(), start + modules.length - i - 1, 'a second dispose changes nothing');
    }
    assert.equal(live(), start);
  });

  test('a constructor that throws does not count (or leak) a module', () => {
    const start = attn.stats();
    for (let i = 0; i < 50; i++) {
      assert.throws(() => new attn.MultiheadAttention(8, 3), AttentionError); // refused by the core
      assert.throws(() => new attn.RelativeMultiHeadAttention(3, 8), AttentionError);
      assert.throws(() => new attn.SelfAttention(8, 0, 4), AttentionError); // refused in JS
    }
    assert.deepEqual(attn.stats(), start);
  });

  test('liveObjects belongs to its instance', async () => {
    const other = await init({ simd: false });
    const module = new other.MultiheadAttention(8, 2);
    assert.equal(other.stats().liveObjects, 1);
    assert.equal(live(), 0);
    module.dispose();
    assert.equal(other.stats().liveObjects, 0);
  });

  for (const { kind, create, forward, c } of KINDS) {
    describe(kind, () => {
      test('use after dispose throws an AttentionError naming the module', () => {
        const module = loadedModule(attn, kind, c);
        const good = forward(module, c);
        module.dispose();
        const calls = {
          forward: () => forward(module, c),
          loadStateDict: () => module.loadStateDict(c.stateDict),
          train: () => module.train(),
          eval: () => module.eval(),
        };
        for (const [what, call] of Object.entries(calls)) {
          const error = assertAttentionError(call, AttentionError, kind, [/dispose/]);
          assert.ok(error.message.includes(kind), `${what}: ${error.message}`);
        }
        module.dispose();
        // The instance is fine: a fresh module computes the same result.
        const again = loadedModule(attn, kind, c);
        try {
          assert.ok(bitIdentical(forward(again, c).output.data, good.output.data));
        } finally {
          again.dispose();
        }
      });

      test('[Symbol.dispose] disposes', () => {
        const start = live();
        const module = loadedModule(attn, kind, c);
        assert.equal(typeof module[disposeSymbol], 'function');
        assert.equal(live(), start + 1);
        module[disposeSymbol]();
        assert.equal(live(), start);
        assert.throws(() => forward(module, c), AttentionError);
        module[disposeSymbol]();
        module.dispose();
        assert.equal(live(), start);
      });

      test('forward before loadStateDict throws a clear AttentionError', () => {
        const module = create(attn, c);
        try {
          const error = assertAttentionError(() => forward(module, c), AttentionError, /./);
          assert.match(error.message, /loadStateDict/, error.message);
          assert.ok(error.message.includes(kind), `the message names the module: ${error.message}`);
          // Loading afterwards makes it work.
          module.loadStateDict(c.stateDict);
          forward(module, c);
        } finally {
          module.dispose();
        }
      });
    });
  }

  test('10,000 create -> loadStateDict -> forward -> dispose cycles leave heap and liveObjects unchanged', (t) => {
    const c = moduleFixture('mha', 'no_mask'); // E = 8, 2 heads
    const query = tensorOf([4, 2, 8]);
    const key = tensorOf([6, 2, 8], (i) => Math.cos(i));
    const cycle = () => {
      const module = new attn.MultiheadAttention(8, 2);
      module.loadStateDict(c.stateDict);
      const { output } = module.forward(query, key, key, { isCausal: true });
      module.dispose();
      return output;
    };
    const first = cycle();
    for (let i = 0; i < 200; i++) cycle(); // warm-up: lets the allocator reach its working set
    const start = attn.stats();
    const began = performance.now();
    for (let i = 0; i < 10_000; i++) {
      const output = cycle();
      if (i % 1000 === 0) assert.ok(bitIdentical(output.data, first.data), `cycle ${i} computes the same result`);
    }
    const ms = performance.now() - began;
    t.diagnostic(`10,000 cycles took ${ms.toFixed(0)} ms`);
    assert.deepEqual(attn.stats(), start);

    // Calibration: 10,000 such modules kept alive do grow the heap, so a leak would have shown.
    const kept = [];
    for (let i = 0; i < 10_000; i++) kept.push(new attn.MultiheadAttention(8, 2).loadStateDict(c.stateDict));
    assert.ok(attn.stats().wasmHeapBytes > start.wasmHeapBytes, 'modules held alive grow the heap');
    assert.equal(attn.stats().liveObjects, start.liveObjects + 10_000);
    kept.forEach((module) => module.dispose());
    assert.equal(attn.stats().liveObjects, start.liveObjects);
  });
});

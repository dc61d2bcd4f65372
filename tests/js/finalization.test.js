// A module dropped without dispose() is freed by the FinalizationRegistry. Needs a forced GC, so
// the check runs in a child node with --expose-gc.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

import { REPO_ROOT } from './helpers.js';

// Run from the repository root, whose package.json names the package, so the child imports it by
// name. Prints one JSON line: liveObjects while the modules are alive, and after collection.
const CHILD = `
import { init } from 'attention-wasm';
const attn = await init();
const heap0 = attn.stats().wasmHeapBytes;

function createAndDrop() {
  const sd = {
    in_proj_weight: { shape: [24, 8], data: new Float32Array(192).fill(0.01) },
    in_proj_bias: { shape: [24], data: new Float32Array(24) },
    'out_proj.weight': { shape: [8, 8], data: new Float32Array(64).fill(0.02) },
    'out_proj.bias': { shape: [8], data: new Float32Array(8) },
  };
  const x = { shape: [3, 2, 8], data: new Float32Array(48).fill(1) };
  for (let i = 0; i < 50; i++) {
    const module = i % 2 ? new attn.MultiheadAttention(8, 2) : new attn.SelfAttention(8, 4, 4);
    if (i % 2) {
      module.loadStateDict(sd);
      module.forward(x);
    }
  }
  return attn.stats().liveObjects;
}

const alive = createAndDrop();
const turn = () => new Promise((resolve) => setTimeout(resolve, 20));
let after = attn.stats().liveObjects;
const began = Date.now();
while (after !== 0 && Date.now() - began < 2000) {
  gc();
  await turn();
  after = attn.stats().liveObjects;
}
console.log(JSON.stringify({ alive, after, ms: Date.now() - began, heapGrew: attn.stats().wasmHeapBytes - heap0 }));
`;

test('modules dropped without dispose() are freed by the FinalizationRegistry', (t) => {
  const child = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '--eval', CHILD], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(child.status, 0, `child failed: ${child.stderr}`);
  const report = JSON.parse(child.stdout.trim().split('\n').at(-1));
  t.diagnostic(`finalized after ${report.ms} ms`);
  assert.equal(report.alive, 50, 'all 50 modules counted while reachable');
  assert.equal(report.after, 0, 'liveObjects back to 0 after gc()');
});

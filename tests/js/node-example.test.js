// examples/node.mjs runs as a user would run it (`node examples/node.mjs`), and its figures are right.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { REPO_ROOT, TOLERANCE } from './helpers.js';

const run = promisify(execFile);

test('examples/node.mjs computes SDPA, MultiheadAttention, masks, stats and errors', { timeout: 30_000 }, async () => {
  const { stdout: report } = await run(process.execPath, ['examples/node.mjs'], { cwd: REPO_ROOT });
  assert.match(report, /SDPA output/);
  assert.match(report, /AttentionError/);

  const { stdout } = await run(process.execPath, ['examples/node.mjs', '--json'], { cwd: REPO_ROOT });
  const got = JSON.parse(stdout);
  assert.deepEqual(got.features, { ...got.features, simd: true, threads: 2 });
  const e2 = Math.exp(2);
  const want = { output: [0, (10 * e2) / (1 + e2)], weights: [1, 0, 1 / (1 + e2), e2 / (1 + e2)] };
  for (const [name, values] of [['output', got.sdpa.output], ['weights', got.sdpa.weights], ['weights', got.masked]]) {
    values.forEach((x, i) => {
      const w = want[name][i];
      assert.ok(Math.abs(x - w) / (1 + Math.abs(w)) <= TOLERANCE, `${name}[${i}]: got ${x}, want ${w}`);
    });
  }
  assert.deepEqual(got.mha.outputShape, [3, 2, 8]);
  assert.deepEqual(got.mha.weightsShape, [2, 3, 3]);
  assert.deepEqual(got.mha.paddedKeyWeights, [0, 0, 0], 'the padded key gets no weight');
  assert.equal(got.mha.finite, true);
  assert.equal(got.error.argument, 'key');
  assert.equal(got.error.code, 'INVALID_ARGUMENT');
  assert.equal(got.stats.liveObjects, 0, 'the module was disposed');
});

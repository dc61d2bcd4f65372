// The examples run as users would run them, and reproduce PyTorch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

test('pytorch_to_js.mjs reproduces the exported nn.MultiheadAttention output', () => {
  const printed = execFileSync(process.execPath, ['examples/pytorch_to_js.mjs'], { cwd: root, encoding: 'utf8' });
  const result = JSON.parse(printed);
  assert.deepEqual(result.outputShape, [5, 2, 16]);
  assert.deepEqual(result.weightsShape, [2, 5, 7]);
  assert.ok(result.outputError <= 2e-5, `output error ${result.outputError}`);
  assert.ok(result.weightsError <= 2e-5, `weights error ${result.weightsError}`);
});

test('llama_attention.mjs runs the exported Llama block (prefill and 32 decode steps) as PyTorch does', () => {
  const printed = execFileSync(process.execPath, ['examples/llama_attention.mjs'], { cwd: root, encoding: 'utf8' });
  const result = JSON.parse(printed);
  assert.equal(result.steps, 33);
  assert.equal(result.cacheLength, 40);
  assert.ok(result.maxError <= 2e-5, `max error ${result.maxError}`);
});

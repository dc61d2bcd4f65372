// The examples run as users would run them, and reproduce PyTorch. The PyTorch exporters run too,
// each into a temporary folder, and must write what the repository holds (examples/mha_export.json
// and examples/llama_attention.safetensors), so the committed data cannot drift from its script.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));
// Debian's python3, for which python3-torch is installed (scripts/setup.sh); the python3 on PATH
// may be another one.
const PYTHON = '/usr/bin/python3';
// The inputs and weights come from torch's seeded generator and agree exactly; PyTorch's float32
// matmuls may round a last bit differently on another CPU (their SIMD path), within this.
const CLOSE = 1e-6;

/** Runs `python3 examples/<script> <temporary folder>/<name>` from the repository → the bytes written. */
function exported(script, name) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'attention-export-'));
  try {
    const file = path.join(dir, name);
    execFileSync(PYTHON, [`examples/${script}`, file], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    return readFileSync(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const close = (got, want) => Math.abs(got - want) <= CLOSE * (1 + Math.abs(want));

/** `got` has `want`'s structure and values, numbers within CLOSE (relative). */
function assertSameJson(got, want, where = '$') {
  if (typeof want === 'number') return assert.ok(typeof got === 'number' && close(got, want), `${where}: ${got}, committed ${want}`);
  if (want === null || typeof want !== 'object') return assert.equal(got, want, where);
  assert.equal(Array.isArray(got), Array.isArray(want), where);
  assert.deepEqual(Object.keys(got), Object.keys(want), where);
  for (const key of Object.keys(want)) assertSameJson(got[key], want[key], `${where}.${key}`);
}

test('export_pytorch.py writes examples/mha_export.json', () => {
  const written = JSON.parse(exported('export_pytorch.py', 'mha_export.json'));
  assertSameJson(written, JSON.parse(readFileSync(path.join(root, 'examples/mha_export.json'), 'utf8')));
});

test('export_llama_attention.py writes examples/llama_attention.safetensors', () => {
  const written = exported('export_llama_attention.py', 'llama_attention.safetensors');
  const committed = readFileSync(path.join(root, 'examples/llama_attention.safetensors'));
  assert.equal(written.length, committed.length);
  // The JSON header (names, shapes, offsets, the config) character for character; then the data,
  // every tensor float32.
  assert.equal(written.readBigUInt64LE(0), committed.readBigUInt64LE(0), 'header size');
  const dataStart = 8 + Number(committed.readBigUInt64LE(0));
  assert.equal(written.toString('utf8', 8, dataStart), committed.toString('utf8', 8, dataStart));
  const floats = (bytes) => new Float32Array(bytes.buffer.slice(bytes.byteOffset + dataStart, bytes.byteOffset + bytes.length));
  const [got, want] = [floats(written), floats(committed)];
  const far = want.findIndex((value, i) => !close(got[i], value));
  assert.equal(far, -1, `float ${far} of the data: ${got[far]}, committed ${want[far]}`);
});

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

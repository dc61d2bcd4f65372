// The published package: `npm pack` ships the built API and nothing else, and a fresh project can
// install the tarball and use it through its package name.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);
const NPM_ENV = { ...process.env, npm_config_update_notifier: 'false', npm_config_loglevel: 'error' };

let workDir;
let tarball;
let packed; // npm's JSON description of the tarball

before(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'attention-wasm-pack-'));
  const { stdout } = await run('npm', ['pack', '--pack-destination', workDir, '--json'], { cwd: REPO_ROOT, env: NPM_ENV });
  [packed] = JSON.parse(stdout);
  tarball = join(workDir, packed.filename);
});

after(async () => {
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

test('the tarball holds the built API and nothing else', async () => {
  // The archive itself, not only npm's report of it.
  const { stdout } = await run('tar', ['-tzf', tarball]);
  const files = stdout.trim().split('\n').map((entry) => entry.replace(/^package\//, ''));
  assert.deepEqual(files.toSorted(), packed.files.map((f) => f.path).toSorted());

  for (const required of [
    'package.json',
    'dist/index.mjs',
    'dist/index.d.mts',
    'dist/attention-simd.wasm',
    'dist/attention-scalar.wasm',
    'dist/attention-threads.wasm',
  ]) {
    assert.ok(files.includes(required), `${required} is packed`);
  }
  for (const file of files) {
    assert.doesNotMatch(file, /^(src|tests|build|node_modules|bindings)\//, `${file} must not be packed`);
    assert.doesNotMatch(file, /\.(cpp|h)$/, `${file} must not be packed`);
  }
  // The types entry must declare the API, not be an empty file.
  const types = packed.files.find((f) => f.path === 'dist/index.d.mts');
  assert.ok(types.size > 0, 'dist/index.d.mts is not empty');
});

test('a fresh project installs the tarball and computes attention', { timeout: 60_000 }, async () => {
  const project = join(workDir, 'consumer');
  await mkdir(project);
  await run('npm', ['init', '-y'], { cwd: project, env: NPM_ENV });
  const manifest = JSON.parse(await readFile(join(project, 'package.json'), 'utf8'));
  await writeFile(join(project, 'package.json'), JSON.stringify({ ...manifest, type: 'module' }, null, 2));
  await run('npm', ['install', tarball, '--no-audit', '--no-fund'], { cwd: project, env: NPM_ENV });

  // d = 1, so the default scale is 1. Query 0 sees key 0 only (causal); query 1 scores keys
  // [0, 1] as [0, 2]: weights [1, e^2] / (1 + e^2), output 10 e^2 / (1 + e^2).
  await writeFile(
    join(project, 'main.js'),
    `import { init } from 'attention-wasm';
const attn = await init();
const t = (shape, values) => ({ shape, data: Float32Array.from(values) });
const { output, weights } = attn.scaledDotProductAttention(t([2, 1], [1, 2]), t([2, 1], [0, 1]), t([2, 1], [0, 10]),
  { isCausal: true, needWeights: true });
console.log(JSON.stringify({ features: attn.features, output: [...output.data], outputShape: output.shape,
  weights: [...weights.data], weightsShape: weights.shape }));
`,
  );
  const { stdout } = await run(process.execPath, ['main.js'], { cwd: project });
  const got = JSON.parse(stdout);

  const e2 = Math.exp(2);
  const want = {
    output: [0, (10 * e2) / (1 + e2)],
    weights: [1, 0, 1 / (1 + e2), e2 / (1 + e2)],
  };
  assert.equal(got.features.simd, true);
  assert.deepEqual(got.outputShape, [2, 1]);
  assert.deepEqual(got.weightsShape, [2, 2]);
  for (const name of ['output', 'weights']) {
    got[name].forEach((value, i) => {
      const w = want[name][i];
      assert.ok(Math.abs(value - w) / (1 + Math.abs(w)) <= 2e-5, `${name}[${i}] = ${value}, want ${w}`);
    });
  }
});

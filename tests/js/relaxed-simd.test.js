// The relaxed builds (f32x4.relaxed_madd in the kernels): which engines load them, the option that
// keeps to plain SIMD, and the PyTorch fixtures run on them. Node 20 has relaxed SIMD only behind
// --experimental-wasm-relaxed-simd, so the runs on the relaxed builds are child processes with it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { relaxedSimd } from 'wasm-feature-detect';
import { AttentionError, init } from '../../dist/index.mjs';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);
const RELAXED_FLAG = '--experimental-wasm-relaxed-simd';
const bytesOf = (build) => readFile(new URL(`../../dist/attention-${build}.wasm`, import.meta.url));

test('the relaxed builds hold relaxed SIMD instructions: they validate exactly where the engine has relaxed SIMD', async () => {
  const engineHasRelaxed = await relaxedSimd();
  for (const build of ['relaxed', 'threads-relaxed']) {
    assert.equal(WebAssembly.validate(await bytesOf(build)), engineHasRelaxed, `attention-${build}.wasm`);
  }
  for (const build of ['simd', 'threads']) assert.equal(WebAssembly.validate(await bytesOf(build)), true, `attention-${build}.wasm`);
});

test('init() takes a relaxed build only where the engine has relaxed SIMD', async () => {
  const expected = (await relaxedSimd()) ? 'relaxed' : 'simd';
  assert.equal((await init()).build, expected);
  assert.equal((await init({ relaxedSimd: false })).build, 'simd');
  assert.equal((await init({ simd: false })).build, 'scalar');
  await assert.rejects(init({ relaxedSimd: 'yes' }), (error) => {
    assert.ok(error instanceof AttentionError);
    assert.equal(error.argument, 'relaxedSimd');
    return true;
  });
});

test(`with ${RELAXED_FLAG}, init() picks the relaxed builds unless told not to`, async () => {
  const script = `
    import { init } from './dist/index.mjs';
    const builds = [];
    for (const opts of [{}, { threads: 2 }, { relaxedSimd: false }, { threads: 2, relaxedSimd: false }, { simd: false }]) {
      const attn = await init(opts);
      builds.push([attn.build, attn.features.simd, attn.features.threads]);
    }
    // Given wasm bytes, relaxed builds only when asked for or given.
    const { readFile } = await import('node:fs/promises');
    const bytes = (build) => readFile(new URL('./dist/attention-' + build + '.wasm', import.meta.url));
    builds.push([(await init({ wasmBinary: await bytes('simd') })).build]);
    builds.push([(await init({ wasmBinary: { scalar: await bytes('scalar') } })).build]);
    builds.push([(await init({ wasmBinary: await bytes('relaxed'), relaxedSimd: true })).build]);
    builds.push([(await init({ wasmBinary: { relaxed: await bytes('relaxed') } })).build]);
    // The SIMD build's module links with the relaxed glue (its imports are one fewer, named alike):
    // init() must see that instead of running it with every import bound to the wrong function
    // (each build names itself in its first section).
    const wrong = await init({ wasmBinary: { relaxed: await bytes('simd') } }).catch((error) => error);
    builds.push([wrong.argument, wrong.message]);
    console.log(JSON.stringify(builds));`;
  const { stdout } = await run(process.execPath, [RELAXED_FLAG, '--input-type=module', '-e', script], { cwd: REPO_ROOT });
  const results = JSON.parse(stdout);
  const [argument, message] = results.pop();
  assert.deepEqual(results, [
    ['relaxed', true, 1],
    ['threads-relaxed', true, 2],
    ['simd', true, 1],
    ['threads', true, 2],
    ['scalar', false, 1],
    ['simd'],
    ['simd'],
    ['relaxed'],
    ['relaxed'],
  ]);
  assert.equal(argument, 'wasmBinary.relaxed');
  assert.match(message, /expected the bytes of attention-relaxed\.wasm .*, got the bytes of attention-simd\.wasm$/);
});

test(`the PyTorch fixture suites pass on the relaxed builds (${RELAXED_FLAG})`, async () => {
  const suites = ['tests/js/sdpa.test.js', 'tests/js/modern-sdpa.test.js', 'tests/js/modules.test.js', 'tests/js/masks.test.js'];
  // Without NODE_TEST_CONTEXT (set for this file's process), the child reports as a runner of its own.
  const { NODE_TEST_CONTEXT, ...env } = process.env;
  const { stdout } = await run(process.execPath, [RELAXED_FLAG, '--test', '--test-reporter=tap', ...suites], {
    cwd: REPO_ROOT,
    env,
    maxBuffer: 64 << 20,
  }).catch((error) => assert.fail(`the suites failed on the relaxed build:\n${error.stdout?.slice(-4000)}`));
  const count = (name) => Number(stdout.match(new RegExp(`^# ${name} (\\d+)$`, 'm'))?.[1]);
  assert.equal(count('fail'), 0);
  assert.ok(count('pass') > 300, `${count('pass')} tests passed`);
});

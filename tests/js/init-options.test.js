// init()'s loading options: wasmBinary (bytes for the build init picks, or per build) and
// wasmBaseUrl, with the errors bad values give.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { AttentionError, init } from '../../dist/index.mjs';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);

const dist = new URL('../../dist/', import.meta.url);
const bytesOf = (build) => readFile(new URL(`attention-${build}.wasm`, dist));

// d = 1: query 1 scores keys [0, 1] as [0, 2] (causal), so its output is 10 e² / (1 + e²).
function check(attn) {
  const t = (values) => ({ shape: [2, 1], data: Float32Array.from(values) });
  const { output } = attn.scaledDotProductAttention(t([1, 2]), t([0, 1]), t([0, 10]), { isCausal: true });
  const e2 = Math.exp(2);
  assert.ok(Math.abs(output.data[1] - (10 * e2) / (1 + e2)) < 1e-4, `output ${output.data}`);
}

function assertAttentionError(argument, pattern) {
  return (error) => {
    assert.ok(error instanceof AttentionError, `an AttentionError, got ${error}`);
    assert.equal(error.argument, argument);
    assert.equal(error.code, 'INVALID_ARGUMENT');
    assert.match(error.message, pattern);
    return true;
  };
}

test('wasmBinary: the bytes of the build init picks, as a Uint8Array or an ArrayBuffer', async () => {
  const simd = await bytesOf('simd');
  const attn = await init({ wasmBinary: simd });
  assert.equal(attn.features.simd, true);
  check(attn);
  const copy = new Uint8Array(simd).buffer;
  check(await init({ wasmBinary: copy }));
  const scalar = await init({ simd: false, wasmBinary: await bytesOf('scalar') });
  assert.equal(scalar.features.simd, false);
  check(scalar);
});

test('wasmBinary: one entry per build; a build without one is read from disk', async () => {
  const wasmBinary = { scalar: await bytesOf('scalar'), threads: await bytesOf('threads') };
  const threaded = await init({ threads: 2, wasmBinary });
  assert.deepEqual([threaded.features.simd, threaded.features.threads], [true, 2]);
  check(threaded);
  const scalar = await init({ simd: false, wasmBinary });
  assert.equal(scalar.features.simd, false);
  check(scalar);
  check(await init({ wasmBinary: { scalar: wasmBinary.scalar } })); // SIMD picked, fetched as usual
});

test('wasmBinary: wrong values throw an AttentionError naming wasmBinary', async () => {
  await assert.rejects(init({ wasmBinary: 'attention-simd.wasm' }), assertAttentionError('wasmBinary', /ArrayBuffer or Uint8Array/));
  await assert.rejects(init({ wasmBinary: new Float32Array(16) }), assertAttentionError('wasmBinary', /got Float32Array\(16\)/));
  await assert.rejects(init({ wasmBinary: new TextEncoder().encode('<!doctype html><p>Not Found') }),
    assertAttentionError('wasmBinary', /not WebAssembly/));
  await assert.rejects(init({ wasmBinary: { simdd: await bytesOf('simd') } }), assertAttentionError('wasmBinary.simdd', /one of the builds/));
  await assert.rejects(init({ wasmBinary: { scalar: 42 } }), assertAttentionError('wasmBinary.scalar', /got 42/));
  // Another build's bytes: each build names itself (scripts/tag-wasm.mjs).
  await assert.rejects(init({ wasmBinary: await bytesOf('threads') }),
    assertAttentionError('wasmBinary', /expected the bytes of attention-simd\.wasm .*, got the bytes of attention-threads\.wasm$/));
  await assert.rejects(init({ threads: 2, wasmBinary: { threads: await bytesOf('simd') } }),
    assertAttentionError('wasmBinary.threads', /expected the bytes of attention-threads\.wasm .*, got the bytes of attention-simd\.wasm$/));
  // A valid module that is none of the builds (here one that an older version would have been).
  const untagged = await bytesOf('simd');
  const size = untagged[9];
  await assert.rejects(init({ wasmBinary: Buffer.concat([untagged.subarray(0, 8), untagged.subarray(10 + size)]) }),
    assertAttentionError('wasmBinary', /got a module that is none of the builds of this version$/));
});

const BUILD_NAMES = ['simd', 'relaxed', 'scalar', 'threads', 'threads-relaxed'];
// The options under which init() picks each build (the relaxed ones where the engine has relaxed SIMD).
const PICKS = { simd: {}, relaxed: { relaxedSimd: true }, scalar: { simd: false }, threads: { threads: 2 }, 'threads-relaxed': { threads: 2, relaxedSimd: true } };
const pairMessage = (picked, given) =>
  `expected the bytes of attention-${picked}.wasm (the build init picked; its options threads, simd and relaxedSimd choose it), ` +
  `got the bytes of attention-${given}.wasm`;

// Issue #35: the scalar build's bytes resolved as build 'simd' (features.simd true) and ran at scalar
// speed: their imports are the SIMD glue's. Every build's file names its build.
test('wasmBinary: each build starts with a custom section naming it', async () => {
  for (const build of BUILD_NAMES) {
    const bytes = await bytesOf(build);
    // Its text is read at fixed offsets, before anything compiles (a relaxed build's bytes do not
    // compile in an engine without relaxed SIMD, yet are named).
    assert.equal(new TextDecoder().decode(bytes.subarray(11, 10 + bytes[9])), `attention-wasm${build}`);
    if (WebAssembly.validate(bytes)) {
      const [section] = WebAssembly.Module.customSections(new WebAssembly.Module(bytes), 'attention-wasm');
      assert.equal(new TextDecoder().decode(section), build);
    }
  }
});

test('wasmBinary: every pair of builds, bytes of one where init picks the other, throws naming both', async () => {
  // Here the engine has no relaxed SIMD (Node 20 without its flag), so init picks simd, scalar or
  // threads; the pairs picking a relaxed build run below, with the flag.
  const engineHasRelaxed = WebAssembly.validate(await bytesOf('relaxed'));
  for (const picked of engineHasRelaxed ? BUILD_NAMES : ['simd', 'scalar', 'threads'])
    for (const given of BUILD_NAMES) {
      const bytes = await bytesOf(given);
      for (const wasmBinary of [bytes, { [picked]: bytes }]) {
        const argument = wasmBinary === bytes ? 'wasmBinary' : `wasmBinary.${picked}`;
        if (given === picked) {
          const attn = await init({ ...PICKS[picked], wasmBinary });
          assert.equal(attn.build, picked);
          check(attn);
          attn.dispose();
          continue;
        }
        await assert.rejects(init({ ...PICKS[picked], wasmBinary }), (error) => {
          assertAttentionError(argument, /./)(error);
          assert.equal(error.message, `${argument}: ${pairMessage(picked, given)}`);
          return true;
        });
      }
    }
});

test('wasmBinary: every pair of builds with relaxed SIMD in the engine (--experimental-wasm-relaxed-simd)', async () => {
  const script = `
    import { readFile } from 'node:fs/promises';
    import { init } from './dist/index.mjs';
    const builds = ${JSON.stringify(BUILD_NAMES)}, picks = ${JSON.stringify(PICKS)};
    const results = [];
    for (const picked of builds)
      for (const given of builds) {
        const wasmBinary = await readFile(new URL('./dist/attention-' + given + '.wasm', import.meta.url));
        try {
          const attn = await init({ ...picks[picked], wasmBinary });
          results.push([picked, given, attn.build, attn.features.simd]);
          attn.dispose();
        } catch (error) {
          results.push([picked, given, error.name, error.message]);
        }
      }
    console.log(JSON.stringify(results));`;
  const { stdout } = await run(process.execPath, ['--experimental-wasm-relaxed-simd', '--input-type=module', '-e', script], { cwd: REPO_ROOT });
  const results = JSON.parse(stdout);
  assert.equal(results.length, 25);
  for (const [picked, given, ...got] of results) {
    if (picked === given) assert.deepEqual(got, [picked, picked !== 'scalar'], `${given} bytes`);
    else assert.deepEqual(got, ['AttentionError', `wasmBinary: ${pairMessage(picked, given)}`], `${given} bytes where ${picked} is picked`);
  }
});

test('wasmBaseUrl: a folder URL (trailing slash optional); a missing file names its URL', async () => {
  check(await init({ wasmBaseUrl: dist }));
  check(await init({ wasmBaseUrl: dist.href.replace(/\/$/, '') }));
  await assert.rejects(init({ wasmBaseUrl: 42 }), assertAttentionError('wasmBaseUrl', /a string or URL/));
  await assert.rejects(init({ wasmBaseUrl: 'no/base/' }), assertAttentionError('wasmBaseUrl', /absolute URL/));
  await assert.rejects(init({ wasmBaseUrl: new URL('./no-such-folder/', dist) }), (error) => {
    assert.ok(!(error instanceof AttentionError));
    assert.match(error.message, /could not load attention-simd\.wasm from file:.*no-such-folder\/attention-simd\.wasm: ENOENT/);
    return true;
  });
});

test('unknown or misspelt init options throw before anything loads', async () => {
  await assert.rejects(init({ wasmBinaries: new Uint8Array(8) }), assertAttentionError('wasmBinaries', /one of the options threads, simd, relaxedSimd, wasmBaseUrl, wasmBinary/));
  await assert.rejects(init({ thread: 2 }), assertAttentionError('thread', /unknown option/));
});

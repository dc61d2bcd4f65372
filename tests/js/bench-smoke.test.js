// Every `npm run bench` mode still runs: each through scripts/bench.sh (BENCH_NO_BUILD=1: the
// build is npm test's) with --quick, its smallest sizes, writing its rows with --json; the rows
// must hold the keys their script's header and docs/performance.md document, with finite figures.
// Their figures mean nothing (two modes run at once on a shared machine). bench/cache-accuracy.mjs
// runs too, and so does the page bench (--page: Chromium, one round per thread count after the
// page's load and a warm-up, with --profile's rounds; and --page --model, a 2-layer checkpoint in
// the viewer). Installs bench/node_modules on first use
// (npm ci), as `npm run bench` does.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** Runs `npm run bench -- <args> --json FILE` → the rows written and the output printed. */
async function bench(args) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-smoke-'));
  try {
    const json = path.join(dir, 'rows.json');
    const { stdout } = await run('bash', ['scripts/bench.sh', ...args, '--json', json], {
      cwd: root, env: { ...process.env, BENCH_NO_BUILD: '1' }, maxBuffer: 64 << 20, timeout: 120_000,
    });
    return { rows: JSON.parse(readFileSync(json, 'utf8')), stdout };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every row of `impl` (at least one) holds `keys`, the numeric ones finite and not negative. */
function checkRows(rows, impl, keys) {
  const matching = rows.filter((row) => (impl instanceof RegExp ? impl.test(row.impl) : row.impl === impl));
  assert.ok(matching.length > 0, `no ${impl} row among ${[...new Set(rows.map((row) => row.impl))].join(', ')}`);
  for (const row of matching)
    for (const key of keys) {
      assert.ok(key in row, `${row.impl} row without ${key}: ${JSON.stringify(row)}`);
      if (typeof row[key] === 'number') assert.ok(Number.isFinite(row[key]) && row[key] >= 0, `${row.impl}.${key} = ${row[key]}`);
    }
}

// Two modes at a time: the file stays within about a minute on 2 cores.
describe('npm run bench modes, --quick', { concurrency: 2 }, () => {
  test('default (MultiheadAttention against its peers)', async () => {
    const { rows } = await bench(['--quick']);
    checkRows(rows, 'ours-simd', ['impl', 'L', 'threads', 'weights', 'min_ms', 'median_ms', 'gflops', 'max_abs_err']);
    checkRows(rows, 'onnxruntime-web', ['impl', 'L', 'threads', 'median_ms', 'max_abs_err', 'formulation']);
    checkRows(rows, 'simd128-peak', ['impl', 'threads', 'gflops']);
    checkRows(rows, 'ours-gemm', ['impl', 'M', 'N', 'K', 'threads', 'gflops']);
  });

  test('--sdpa-options', async () => {
    const { rows } = await bench(['--sdpa-options', '--quick']);
    checkRows(rows, /^ours-.*-causal$/, ['impl', 'L', 'heads', 'threads', 'min_ms', 'median_ms']);
    checkRows(rows, /^onnxruntime-web-/, ['impl', 'L', 'heads', 'threads', 'min_ms', 'median_ms', 'max_abs_err']);
  });

  test('--decode', async () => {
    const { rows } = await bench(['--decode', '--quick']);
    checkRows(rows, 'read-bandwidth', ['impl', 'threads', 'gbps']);
    checkRows(rows, 'gemm-rate', ['impl', 'threads', 'gflops']);
    for (const impl of ['ours-decode-f32', 'ours-decode-f16', 'ours-decode-q8', 'ours-sdpa-per-step'])
      checkRows(rows, impl, ['impl', 'context', 'threads', 'median_ms', 'min_ms', 'max_abs_err', 'roofline_ms', 'gbps', 'of_read']);
    // The native step is timed where build/native has it (bash scripts/build.sh all).
    if (existsSync(path.join(root, 'build/native/attention_bench_decode_native'))) {
      checkRows(rows, 'native-read-bandwidth', ['impl', 'threads', 'gbps']);
      for (const dtype of ['f32', 'f16', 'q8']) {
        // Native rows on 1 and 2 threads; a read rate of its own for one thread only.
        const native = ['impl', 'context', 'threads', 'median_ms', 'max_abs_err', 'gbps'];
        checkRows(rows.filter((row) => row.threads === 1), `native-decode-${dtype}`, [...native, 'of_read']);
        checkRows(rows.filter((row) => row.threads === 2), `native-decode-${dtype}`, [...native, 'vs_one_thread']);
        checkRows(rows, `ours-decode-${dtype}`, ['vs_native']);
      }
    }
    for (const dtype of ['f32', 'f16', 'q8'])
      checkRows(rows.filter((row) => row.threads === 2), `ours-decode-${dtype}`, ['vs_one_thread']);
    checkRows(rows, 'onnxruntime-web-gqa', ['impl', 'context', 'threads', 'median_ms', 'min_ms', 'max_abs_err']);
    checkRows(rows, 'ours-block-decode', ['impl', 'context', 'threads', 'batch', 'median_ms', 'min_ms']);
    checkRows(rows.filter((row) => row.threads === 2), 'ours-block-decode', ['vs_one_thread']);
  });

  test('--linear', async () => {
    const { rows } = await bench(['--linear', '--quick', '--tokens', '16']);
    checkRows(rows, 'gemm-rate', ['impl', 'threads', 'gflops']);
    for (const impl of ['linear-f32', 'linear-f16', 'linear-bf16', 'linear-f32-fresh'])
      checkRows(rows, impl, ['impl', 'layer', 'in', 'out', 'threads', 'tokens', 'median_ms', 'gflops', 'gemm_gflops']);
    for (const impl of ['feed-forward', 'linear-x3-js-act'])
      checkRows(rows, impl, ['impl', 'model', 'in', 'inner', 'threads', 'tokens', 'median_ms', 'gflops', 'gemm_gflops']);
    for (const activation of ['silu', 'gelu', 'gelu_tanh']) checkRows(rows, `activate-${activation}`, ['impl', 'elements', 'gelements_per_s']);
  });

  test('--model', async () => {
    const { rows } = await bench(['--model', '--quick', '--tokens', '32']);
    for (const impl of ['model-forward', 'model-forward-last'])
      checkRows(rows, impl, ['impl', 'threads', 'tokens', 'median_ms', 'linear_gflops', 'gemm_gflops']);
    assert.deepEqual([...new Set(rows.map((row) => row.threads))], [1, 2]);
  });

  test('--open', async () => {
    const { rows, stdout } = await bench(['--open', '--quick']);
    assert.doesNotMatch(stdout, /failed|MISMATCH/);
    checkRows(rows, 'model-open', ['impl', 'model', 'params', 'tokens', 'threads', 'open_ms', 'forward_ms', 'read_gbps', 'linear_gflops',
      'roofline_ms', 'peak_rss_mib', 'streamed']);
    checkRows(rows, 'model-forward-f32', ['impl', 'model', 'tokens', 'threads', 'forward_ms', 'max_abs_err']);
    checkRows(rows, 'ort-web-model-forward', ['impl', 'model', 'tokens', 'threads', 'forward_ms']);
    assert.deepEqual(rows.filter((row) => row.impl === 'model-open').map((row) => row.threads), [1, 2]);
    // The checkpoints lived in a temporary folder, removed at the end.
    const folder = stdout.match(/checkpoints in (\S+)/)[1];
    assert.ok(folder.startsWith(os.tmpdir()), folder);
    assert.throws(() => readFileSync(path.join(folder, 'SmolLM2-135M', 'config.json')), { code: 'ENOENT' });
  });

  test('--page', async () => {
    const { rows, stdout } = await bench(['--page', '--quick', '--profile']);
    checkRows(rows, 'page-update', ['impl', 'threads', 'characters', 'rounds', 'median_ms', 'max_ms', 'longest_task_ms', 'long_tasks',
      'worker_median_ms', 'forward_median_ms', 'update_ms_median', 'draw_median_ms', 'per_round_ms', 'per_round_long_tasks_ms']);
    assert.deepEqual(rows.map((row) => [row.threads, row.characters, row.rounds, row.per_round_ms.length]), [[2, 640, 1, 1], [1, 640, 1, 1]]);
    for (const row of rows) assert.ok(row.per_round_ms.every((ms) => Number.isFinite(ms) && ms > 0), `per_round_ms ${row.per_round_ms}`);
    for (const threads of [2, 1]) assert.match(stdout, new RegExp(`^profiled round on ${threads} thread\\(s\\): \\d+ ms`, 'm'));
  });

  test('--page --model NAME (a checkpoint of that shape opened in the viewer)', async () => {
    const { rows, stdout } = await bench(['--page', '--quick', '--model', 'SmolLM2-135M']);
    checkRows(rows, 'page-opened-model', ['impl', 'model', 'scenario', 'tokens', 'threads', 'layers', 'heads', 'streamed', 'first_layer_ms', 'grid_ms',
      'result_ms', 'pss_mib', 'read_gbps', 'linear_gflops', 'roofline_ms']);
    // From the folder input, then a new text, then one past 512 tokens (the pooled pictures), on the page's 2 threads.
    assert.deepEqual(rows.map((row) => [row.scenario, row.threads, row.layers, row.heads]), [['open', 2, 2, 9], ['text', 2, 2, 9], ['text-long', 2, 2, 9]]);
    assert.ok(rows[2].tokens > 512, `${rows[2].tokens} tokens`);
    for (const row of rows) {
      assert.ok(row.first_layer_ms > 0 && row.first_layer_ms <= row.grid_ms && row.grid_ms <= row.result_ms, JSON.stringify(row));
      assert.ok(row.pss_mib > 0 && row.roofline_ms > 0, JSON.stringify(row));
    }
    assert.match(stdout, /renderer PSS \d+ MiB \(goal < 2048 MiB\): (met|missed)/);
    // The checkpoint lived in a temporary folder, removed at the end.
    const folder = stdout.match(/written in (\S+) \(removed at the end\)/)[1];
    assert.ok(folder.startsWith(os.tmpdir()), folder);
    assert.throws(() => readFileSync(path.join(folder, 'SmolLM2-135M', 'config.json')), { code: 'ENOENT' });
  });

  // The SIMD128 build of the kernel rows (the relaxed one needs Node's relaxed-SIMD flag).
  test('the wasm kernel rows (bench/kernels_wasm.cpp): every decode kernel, RoPE and the activation, a few calls each', async () => {
    const { loadKernels } = await import('../../bench/peers/kernels.mjs');
    const kernels = await loadKernels('bench-kernels');
    for (const kernel of ['gemm_nt', 'gemm_nt_f16', 'gemm_nt_q8', 'gemm_nn_add', 'gemm_nn_add_f16', 'gemm_nn_add_q8']) {
      const [M, N, K] = kernel.startsWith('gemm_nt') ? [4, 128, 64] : [4, 64, 128];
      const gflops = kernels.decodeKernelGflops(kernel, M, N, K, 20, 2);
      assert.ok(Number.isFinite(gflops) && gflops > 0, `${kernel}: ${gflops}`);
    }
    for (const interleaved of [false, true]) {
      const rate = kernels.ropeRate({ interleaved }, 20, 2);
      assert.ok(Number.isFinite(rate) && rate > 0, `rope, interleaved ${interleaved}: ${rate}`);
    }
    for (const activation of ['silu', 'gelu', 'gelu_tanh']) {
      const rate = kernels.activateRate(activation, { gated: activation !== 'gelu' }, 20, 2);
      assert.ok(Number.isFinite(rate) && rate > 0, `activate ${activation}: ${rate}`);
    }
  });

  test('bench/cache-accuracy.mjs', async () => {
    const { stdout } = await run(process.execPath, ['bench/cache-accuracy.mjs'], { cwd: root });
    assert.match(stdout, /^\| f32 \| \d\.\de[-+]\d+ \| \d+\.\d \| \(reference\) \|$/m);
    assert.match(stdout, /^\| f16 \| \d\.\de[-+]\d+ \| \d+\.\d \| \d\.\de[-+]\d+ \|$/m);
    for (const dtype of ['f32', 'f16', 'q8']) assert.match(stdout, new RegExp(`^\\| ${dtype} \\| \\d\\.\\de[-+]\\d+ \\| \\d+ of 32 \\|$`, 'm'));
    // Every decoder checkpoint of tests/fixtures/models, a figure for each cache dtype.
    for (const name of ['gemma', 'gemma2', 'gemma3', 'gpt2', 'llama-gqa', 'llama-gqa-bf16', 'olmo2', 'phi3', 'pythia', 'qwen3-qknorm'])
      assert.match(stdout, new RegExp(`^\\| ${name} \\| \\d+ \\| \\d+\\.\\d( \\| \\d\\.\\de[-+]\\d+){3} \\|$`, 'm'));
  });
});

// The benchmark of issue #6: causal self-attention through torch.nn.MultiheadAttention's
// computation (E = 512, H = 8, head dim 64, N = 1, input and output projections with bias), for
// L = 128, 512, 2048 (and 4096 with --large), in one process: the package (SIMD, relaxed SIMD,
// scalar, 1 and 2 threads, weights off and on), the same core built natively, onnxruntime-web,
// tfjs-wasm and plain JS, all on the same weights and input; every output is checked against ours
// before timing. The relaxed rows need an engine with relaxed SIMD: scripts/bench.sh runs Node with
// --experimental-wasm-relaxed-simd (Node 20 has it behind that flag; Chrome >= 114 by default).
// Then what masks cost our streaming path (ours-simd-mask rows: none, key padding, a float
// attnMask, causal, causal + key padding).
//
//   node bench/attention.mjs [--large] [--json FILE] [--only impl,...] [--shapes L,...] [--quick]
//   (npm run bench -- ... also builds first: scripts/bench.sh)
import os from 'node:os';
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { E, H, HEAD_DIM, flops, input, maxAbsError } from './problem.mjs';
import { jsonRows, tableHeader, tableRow } from './report.mjs';
import { measure, measureAlternating, planFor, timeOnce } from './timing.mjs';
import { loadKernels } from './peers/kernels.mjs';
import { nativeAvailable, runNative } from './peers/native.mjs';
import { OrtWorker } from './peers/onnxruntime.mjs';
import { FORMULATIONS } from './peers/onnxruntime-graphs.mjs';
import { heapGrowth, loadOurs } from './peers/ours.mjs';
import { plainJsAttention } from './peers/plain-js.mjs';
import { loadTfjs } from './peers/tfjs.mjs';

const TOLERANCE = 1e-4;
const THREADS = [1, 2];
const GEMM = { M: 1024, N: 1024, K: 1024 };
const MEMORY_L = 16384;
const MEMORY_LIMIT = 64 * 2 ** 20;
const SLOW_L = 2048;  // the scalar build and plain JS start here only with --large (above 512 for plain JS)

const { values: args } = parseArgs({
  options: {
    large: { type: 'boolean', default: false },
    json: { type: 'string' },
    only: { type: 'string' },
    shapes: { type: 'string' },
    quick: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log(`usage: node bench/attention.mjs [--large] [--json FILE] [--only impl,...] [--shapes L,...]
  --large     adds L = 4096, the scalar build and plain JS at every L, and the L = ${MEMORY_L} memory row
  --json      writes the measured rows to FILE
  --only      runs only these impls (ours-simd always runs: it is the reference; ours-simd-mask: the mask costs)
  --shapes    these L instead of the default ones
  --quick     L = 128 only, two timed runs a row and short warm-ups (a smoke run: its figures are rough)`);
  process.exit(0);
}
const SHAPES = args.shapes ? args.shapes.split(',').map(Number) : args.quick ? [128] : args.large ? [128, 512, 2048, 4096] : [128, 512, 2048];
// --quick: every row's plan two runs after one, without the warm-up's second.
const plan = (L) => (args.quick ? { warmup: 1, warmupMs: 0, minRuns: 2, maxRuns: 2, budgetMs: 0 } : planFor(L));
const only = args.only ? new Set(args.only.split(',')) : null;
const selected = (impl) => !only || only.has(impl);

const rows = [];
let peak = NaN;  // simd128 GFLOP/s, one thread
let failures = 0;
const reference = new Map();  // `${L}/${threads}` -> ours-simd weights-off median; `${L}` -> its output

/** Completes a row (GFLOP/s, % of peak, ratio), prints it and keeps it for --json. */
function report(row) {
  if (row.median_ms !== undefined && row.L !== undefined) {
    row.gflops = flops(row.L) / (row.median_ms * 1e6);
    row.peakPct = (100 * row.gflops) / (peak * row.threads);
    row.ratio = row.median_ms / reference.get(`${row.L}/${row.threads}`);
  }
  if (row.max_abs_err !== undefined && !(row.max_abs_err <= TOLERANCE)) {
    row.note = `OUTPUT MISMATCH (> ${TOLERANCE})${row.note ? `; ${row.note}` : ''}`;
    ++failures;
  }
  rows.push(row);
  console.log(tableRow(row));
}

function reportFailure(row, error) {
  ++failures;
  report({ ...row, note: `failed: ${describeError(error)}` });
}

/** Checks a local implementation's output, then times it; a failure (out of memory, say) is a note. */
async function checkAndTime(row, run) {
  try {
    const [output, firstRunMs] = await timeOnce(run);
    const max_abs_err = maxAbsError(output, reference.get(`${row.L}`));
    report({ ...row, max_abs_err, ...(await measure(run, plan(row.L), { firstRunMs })) });
  } catch (error) {
    reportFailure(row, error);
  }
}

/** The gist of an error, on one line. ORT's read "... ERROR_MESSAGE: <file>:<line> <function>() <what>". */
function describeError(error) {
  let text = String(error?.message ?? error).trim();
  const ort = text.match(/ERROR_MESSAGE: (.*)/s);
  if (ort) text = ort[1].replace(/^\S+:\d+ /, '').replace(/^.*\(\)\s+/s, '');
  return text.split('\n')[0].slice(0, 80);
}

// ---------------------------------------------------------------------------------------------
// Loading, machine, versions.

const started = performance.now();
const ours = {
  simd1: await loadOurs({ threads: 1, relaxedSimd: false }),
  simd2: await loadOurs({ threads: 2, relaxedSimd: false }),
  scalar: await loadOurs({ threads: 1, simd: false }),
};
// init() takes the relaxed builds wherever the engine runs them.
const relaxed1 = selected('ours-relaxed') ? await loadOurs({ threads: 1 }) : null;
const relaxed = relaxed1?.attn.build === 'relaxed';
if (relaxed) Object.assign(ours, { relaxed1, relaxed2: await loadOurs({ threads: 2 }) });
else relaxed1?.dispose();
const tfjs = selected('tfjs-wasm') ? await loadTfjs() : null;
const kernels = await loadKernels();
const ortVersions = selected('onnxruntime-web') || selected('onnxruntime-web-gemm') ? await ortCall(1, (w) => w.call('versions')) : null;

const cpus = os.cpus();
console.log('attention-wasm bench: causal self-attention as torch.nn.MultiheadAttention computes it');
console.log(`  E = ${E}, H = ${H} (head dim ${HEAD_DIM}), N = 1, in/out projections with bias, is_causal; same weights and input everywhere`);
console.log(`machine: ${cpus[0].model}, ${cpus.length} cores, ${os.platform()} ${os.arch()}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`);
console.log(`versions: node ${process.version}, v8 ${process.versions.v8}, attention-wasm ${ours.simd1.features.version}` +
  ` (builds: ${Object.values(ours).map((o) => `${o.attn.build} x${o.features.threads}`).join(', ')}),` +
  ` onnxruntime-web ${ortVersions?.ort ?? '-'}, tfjs-core ${tfjs?.version ?? '-'}`);

// ---------------------------------------------------------------------------------------------
// Kernel figures: the wasm SIMD128 peak of this machine, our GEMM and ORT's on 1024^3.

console.log('\nkernels (1 thread)');
{
  const { gflops, iterations } = kernels.simd128PeakGflops();
  peak = gflops;
  rows.push({ impl: 'simd128-peak', threads: 1, gflops, note: `${iterations.toExponential(1)} iterations of 7 f32x4 mul + 7 add chains, best of 3` });
  console.log(`  simd128-peak          ${gflops.toFixed(1).padStart(6)} GFLOP/s  (independent f32x4 multiply and add chains, best of 3)`);
  const gemm = kernels.gemmGflops(GEMM.M, GEMM.N, GEMM.K, 5);
  rows.push({ impl: 'ours-gemm', ...GEMM, threads: 1, gflops: gemm });
  console.log(`  ours-gemm             ${gemm.toFixed(1).padStart(6)} GFLOP/s  (${GEMM.M}x${GEMM.N}x${GEMM.K}, best of 5; ${((100 * gemm) / peak).toFixed(0)}% of peak)`);
  if (relaxed) {
    const fused = (await loadKernels('bench-kernels-relaxed')).gemmGflops(GEMM.M, GEMM.N, GEMM.K, 5);
    rows.push({ impl: 'ours-gemm-relaxed', ...GEMM, threads: 1, gflops: fused });
    console.log(`  ours-gemm-relaxed     ${fused.toFixed(1).padStart(6)} GFLOP/s  (the same with f32x4.relaxed_madd; ${((100 * fused) / peak).toFixed(0)}% of the mul + add peak)`);
  }
  // What holds the GEMM below the peak: its inner loop with either kind of load taken out.
  const loop = kernels.gemmLoopGflops();
  rows.push({ impl: 'ours-gemm-loop', M: 32, N: 128, K: 64, threads: 1, gflops: loop.kernel, gflops_all_loads: loop.allLoads,
    gflops_no_splats: loop.noSplats, gflops_no_panel_loads: loop.noPanelLoads });
  console.log(`  ours-gemm-loop        ${loop.kernel.toFixed(1).padStart(6)} GFLOP/s  (32x128x64 in L1; its 4x8 loop as written ${loop.allLoads.toFixed(1)},` +
    ` without A's load-splats ${loop.noSplats.toFixed(1)}, without the panel loads ${loop.noPanelLoads.toFixed(1)})`);
  if (selected('onnxruntime-web-gemm')) {
    try {
      const { gflops: ortGemm } = await ortCall(1, (w) => w.call('gemm', { ...GEMM, repeats: 5 }));
      rows.push({ impl: 'onnxruntime-web-gemm', ...GEMM, threads: 1, gflops: ortGemm });
      console.log(`  onnxruntime-web-gemm  ${ortGemm.toFixed(1).padStart(6)} GFLOP/s  (ONNX MatMul, same shape, best of 5; ${((100 * ortGemm) / peak).toFixed(0)}% of peak)`);
    } catch (error) {
      console.log(`  onnxruntime-web-gemm  failed: ${describeError(error)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Attention, per L.

console.log(`
GFLOP/s = (8·L·E² + 4·L²·E) / median (causal counted as full); % peak = GFLOP/s / (simd128-peak x threads);
ratio = median / ours-simd median at the same L and threads (weights off): > 1 means ours-simd is faster (< 1 on ours-relaxed: relaxed is).
max abs err: against ours-simd (1 thread, weights off) over the whole output; ours-native: the 8 values it prints (query row 0).
`);
console.log(tableHeader());

// Every build of ours runs for a while first: V8 compiles hot wasm functions in the background,
// and without this the first rows were timed partly on baseline code (ours at L = 128: 13 ms
// median against 9 once compiled).
for (const instance of Object.values(ours)) {
  if (instance === ours.scalar) continue;
  const run = instance.runner(input(128), 128, false);
  for (const start = performance.now(); performance.now() - start < (args.quick ? 200 : 2000); ) run();
}

for (const L of SHAPES) {
  const x = input(L);
  await benchOurs(L, x);
  if (selected('ours-native')) await benchNative(L);
  if (selected('onnxruntime-web')) for (const threads of THREADS) await benchOrt(L, threads);
  if (tfjs) {
    const run = tfjs.runner(x, L);
    await checkAndTime({ impl: 'tfjs-wasm', L, threads: 1, weights: false }, run);
    run.dispose();
  }
  if (selected('plain-js')) {
    if (L > 512 && !args.large) report({ impl: 'plain-js', L, threads: 1, weights: false, note: 'skipped above L = 512 (slow; --large runs it)' });
    else await checkAndTime({ impl: 'plain-js', L, threads: 1, weights: false }, () => plainJsAttention(x, L));
  }
}

async function benchOurs(L, x) {
  const simd1 = ours.simd1.runner(x, L, false);
  const [output] = await timeOnce(simd1);
  reference.set(`${L}`, output.slice());
  for (const [impl, simd] of [['ours-simd', 'simd'], ['ours-relaxed', 'relaxed']]) {
    if (!selected(impl) && impl !== 'ours-simd') continue;
    for (const threads of THREADS) {
      const instance = ours[`${simd}${threads}`];
      for (const weights of [false, true]) {
        const row = { impl, L, threads, weights };
        if (!instance) {
          report({ ...row, note: 'skipped: no relaxed SIMD in this engine (Node 20: --experimental-wasm-relaxed-simd)' });
          continue;
        }
        try {
          const run = instance.runner(x, L, weights);
          const [out, firstRunMs] = await timeOnce(run);
          const timing = await measure(run, plan(L), { firstRunMs });
          if (impl === 'ours-simd' && !weights) reference.set(`${L}/${threads}`, timing.median_ms);
          const note = impl === 'ours-simd' && threads === 1 && !weights ? 'the reference output'
            : weights ? 'averaged weights [1, L, L] returned too' : undefined;
          report({ ...row, max_abs_err: maxAbsError(out, output), ...timing, note });
        } catch (error) {
          reportFailure(row, error);
        }
      }
    }
  }
  if (!selected('ours-scalar')) return;
  const scalar = { impl: 'ours-scalar', L, threads: 1, weights: false };
  if (L >= SLOW_L && !args.large) report({ ...scalar, note: `skipped at L >= ${SLOW_L} (slow; --large runs it)` });
  else await checkAndTime(scalar, ours.scalar.runner(x, L, false));
}

async function benchNative(L) {
  for (const threads of THREADS) {
    const row = { impl: 'ours-native', L, threads, weights: false };
    if (!nativeAvailable()) {
      report({ ...row, note: 'build/native/attention_bench_native missing (bash scripts/build.sh all)' });
      continue;
    }
    try {
      const runs = args.quick ? 2 : L <= 128 ? 20 : L <= 512 ? 10 : 5;
      const { min_ms, median_ms, output_head } = await runNative(L, threads, false, runs);
      const max_abs_err = maxAbsError(Float32Array.from(output_head), reference.get(`${L}`), output_head.length);
      report({ ...row, max_abs_err, min_ms, median_ms, runs, note: 'the core built natively with g++ (the SIMD128 kernels through SIMDe); err over 8 values' });
    } catch (error) {
      reportFailure(row, error);
    }
  }
}

/** Runs `fn(worker)` on a fresh ORT worker with `threads` threads, then ends the worker. */
async function ortCall(threads, fn) {
  const worker = new OrtWorker(threads);
  try {
    return await fn(worker);
  } finally {
    await worker.terminate();
  }
}

/** Every formulation: checked, then timed; the row is the fastest one that matches. */
async function benchOrt(L, threads) {
  const results = await ortCall(threads, async (worker) => {
    const out = [];
    for (const formulation of Object.keys(FORMULATIONS)) {
      try {
        const { output, ms: firstRunMs } = await worker.call('prepare', { L, formulation });
        const max_abs_err = maxAbsError(output, reference.get(`${L}`));
        if (!(max_abs_err <= TOLERANCE)) {
          out.push({ formulation, failed: `output mismatch ${max_abs_err.toExponential(1)}` });
          continue;
        }
        out.push({ formulation, max_abs_err, ...(await worker.call('measure', { plan: plan(L), firstRunMs })) });
        await worker.call('release');
      } catch (error) {
        out.push({ formulation, failed: describeError(error) });
      }
    }
    return out;
  });
  const ok = results.filter((r) => !r.failed).sort((a, b) => a.median_ms - b.median_ms);
  const summary = results.map((r) => (r.failed ? `${r.formulation} FAILED: ${r.failed}` : `${r.formulation} ${r.median_ms.toFixed(1)}`)).join('; ');
  const row = { impl: 'onnxruntime-web', L, threads, weights: false };
  if (!ok.length) {
    ++failures;
    report({ ...row, note: `every formulation failed: ${summary}` });
    return;
  }
  const { formulation, failed, ...best } = ok[0];
  report({ ...row, ...best, formulation, note: `won: ${formulation} (medians ms: ${summary})` });
}

// ---------------------------------------------------------------------------------------------
// What masks cost on the streaming path (ours-simd, 1 thread, weights off), against no mask.

if (selected('ours-simd-mask')) {
  console.log(`
mask cost: ours-simd, 1 thread, weights off, the five timed in alternation; ratio = median / the unmasked median at the same L
(key padding hides the last 7 keys; the float attnMask [L, L] adds -1 to every 13th score).`);
  console.log(tableHeader());
  for (const L of SHAPES.filter((l) => l <= 2048)) {
    const x = input(L);
    const padding = ours.simd1.masks.keyPadding([L - 7], L);
    const floatMask = { data: new Float32Array(L * L).map((_, k) => (k % 13 === 0 ? -1 : 0)), shape: [L, L] };
    const variants = [
      ['none', {}],
      ['keyPadding', { keyPaddingMask: padding }],
      ['float attnMask', { attnMask: floatMask }],
      ['causal', { isCausal: true }],
      ['causal + keyPadding', { isCausal: true, keyPaddingMask: padding }],
    ];
    // All five are timed in alternation, so that their ratios hold on a drifting machine.
    try {
      const runs = variants.map(([, options]) => ours.simd1.runner(x, L, false, options));
      let firstRunMs = 0;
      for (const run of runs) firstRunMs = Math.max(firstRunMs, (await timeOnce(run))[1]);
      const timings = await measureAlternating(runs, plan(L), { firstRunMs });
      for (const [i, [mask]] of variants.entries()) {
        const row = { impl: 'ours-simd-mask', L, threads: 1, weights: false, mask, ...timings[i], ratio: timings[i].median_ms / timings[0].median_ms };
        rows.push(row);
        console.log(tableRow({ ...row, note: mask }));
      }
    } catch (error) {
      reportFailure({ impl: 'ours-simd-mask', L, threads: 1, weights: false }, error);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// --large: memory of the streaming path at L = 16384.

if (args.large && selected('ours-simd')) {
  const { before, after, ms } = await heapGrowth(MEMORY_L, input(MEMORY_L));
  const growth = after - before;
  const ok = growth <= MEMORY_LIMIT;
  if (!ok) ++failures;
  const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  rows.push({ impl: 'ours-simd-memory', L: MEMORY_L, threads: 1, weights: false, heap_before_bytes: before, heap_after_bytes: after, heap_growth_bytes: growth, forward_ms: ms, within_limit: ok });
  console.log(`\nmemory: ours-simd, weights off, L = ${MEMORY_L} (E = ${E}, H = ${H}), one forward of ${(ms / 1000).toFixed(1)} s:` +
    ` wasm heap ${mib(before)} -> ${mib(after)}, growth ${mib(growth)} (limit ${mib(MEMORY_LIMIT)}: ${ok ? 'ok' : 'EXCEEDED'})`);
}

// ---------------------------------------------------------------------------------------------
// The ratios issue #6 sets goals for: each peer against our fastest build at the same L and threads.

console.log('\nagainst our fastest build (weights off): peer median / ours at the same L and threads; speed-up = ours 1 thread / ours 2 threads');
const medianOf = (impl, L, threads) => rows.find((r) => r.impl === impl && r.L === L && r.threads === threads && !r.weights && r.median_ms)?.median_ms;
for (const L of SHAPES) {
  const fastest = (threads) => ['ours-simd', 'ours-relaxed']
    .map((impl) => ({ impl, ms: medianOf(impl, L, threads) }))
    .filter((r) => r.ms)
    .sort((a, b) => a.ms - b.ms)[0];
  for (const threads of THREADS) {
    const ours = fastest(threads);
    if (!ours) continue;
    const peers = ['onnxruntime-web', 'tfjs-wasm', 'plain-js']
      .map((impl) => [impl, medianOf(impl, L, threads)])
      .filter(([, ms]) => ms)
      .map(([impl, ms]) => `${impl} ${(ms / ours.ms).toFixed(2)}x`);
    const speedUp = threads > 1 && fastest(1) ? `; speed-up ${(fastest(1).ms / ours.ms).toFixed(2)}x` : '';
    console.log(`  L = ${String(L).padEnd(5)} ${threads} thread${threads > 1 ? 's' : ' '}  ${ours.impl} ${ours.ms.toFixed(1)} ms: ${peers.join(', ') || 'no peer row'}${speedUp}`);
  }
}

if (args.json) {
  await writeFile(args.json, `${JSON.stringify(jsonRows(rows), null, 2)}\n`);
  console.log(`\nwrote ${args.json}`);
}
console.log(`\ndone in ${((performance.now() - started) / 1000).toFixed(0)} s${failures ? `; ${failures} FAILURE(S) (see notes)` : ''}`);
// The threads build's pthreads and tfjs keep Node alive; every result is out.
process.exit(failures ? 1 : 0);

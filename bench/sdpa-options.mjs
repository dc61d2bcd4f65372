// The benchmark of the v2 scaledDotProductAttention options (SDPA alone, batch 1, head dim 64,
// float32): what a sliding window saves against plain causal, what grouped heads cost against
// their own keys, what ALiBi, a soft cap and documents cost against plain causal. The rows each
// comparison sets against each other are timed in alternation, one run of each per round. The
// peer is onnxruntime-web's decomposed graph (MatMul, Mul, Add of the same additive mask,
// Softmax, MatMul): its wasm backend has no sliding-window or ALiBi op.
//
//   node --experimental-wasm-relaxed-simd bench/sdpa-options.mjs [--json FILE] [--quick]
//   (npm run bench -- --sdpa-options [--json FILE] [--quick] also builds first)
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { init } from '../dist/index.mjs';
import { encodeModel, floats } from './onnx-model.mjs';
import { maxAbsError } from './problem.mjs';
import { OrtWorker } from './peers/onnxruntime.mjs';
import { measureAlternating, timeOnce } from './timing.mjs';
import { rng } from '../tests/js/random.js';

const D = 64;
const TOLERANCE = 1e-4;
const { values: args } = parseArgs({ options: { json: { type: 'string' }, quick: { type: 'boolean', default: false } } });
const quick = args.quick;
const plan = (L) => ({ warmup: 1, warmupMs: quick ? 0 : 1000, minRuns: quick ? 2 : 5, maxRuns: quick ? 2 : L >= 8192 ? 5 : 9, budgetMs: 2000 });

const rows = [];
let failures = 0;

// Uniform values in [-1, 1) from a fixed-seed generator.
function tensor(shape, seed) {
  const random = rng(seed);
  return { data: Float32Array.from({ length: shape.reduce((x, y) => x * y, 1) }, () => 2 * random() - 1), shape };
}

const print = (row) => {
  const cells = [row.impl.padEnd(34), String(row.L).padStart(5), String(row.heads).padStart(7), String(row.threads).padStart(3),
    row.min_ms?.toFixed(1).padStart(9) ?? ''.padStart(9), row.median_ms?.toFixed(1).padStart(9) ?? ''.padStart(9),
    row.max_abs_err === undefined ? ''.padStart(9) : row.max_abs_err.toExponential(1).padStart(9),
    row.ratio === undefined ? ''.padStart(6) : row.ratio.toFixed(2).padStart(6), row.note ?? ''];
  console.log(cells.join('  '));
};
function header(title) {
  console.log(`\n${title}`);
  console.log(`${'impl'.padEnd(34)}  ${'L'.padStart(5)}  ${'heads'.padStart(7)}  thr  ${'min ms'.padStart(9)}  ${'median ms'.padStart(9)}  ${'max err'.padStart(9)}  ${'ratio'.padStart(6)}  note`);
}

/**
 * Times `variants` ([impl, options]) of one problem in alternation on `attn`; ratio = median /
 * the first variant's median. Outputs of the variants are not compared (they compute different
 * things); each one is compared with the peer where a peer runs the same thing.
 */
async function alternate(attn, threads, { L, heads, q, k, v }, variants) {
  const runs = variants.map(([, options]) => () => attn.scaledDotProductAttention(q, k, v, options).output.data);
  const outputs = [];
  for (const run of runs) outputs.push((await timeOnce(run))[0]);
  const timings = await measureAlternating(runs, plan(L));
  variants.forEach(([impl], i) => {
    const row = { impl, L, heads, threads, ...timings[i], ratio: timings[i].median_ms / timings[0].median_ms };
    rows.push(row);
    print(row);
  });
  return outputs;
}

// ---- onnxruntime-web: softmax(q·kᵀ·scale [+ tanh cap] + mask)·v, q/k/v fed each run.

function ortModel(H, L, mask, softcap) {
  const capped = softcap ? [
    { op: 'Div', inputs: ['scaled', 'cap'], outputs: ['divided'] },
    { op: 'Tanh', inputs: ['divided'], outputs: ['tanh'] },
    { op: 'Mul', inputs: ['tanh', 'cap'], outputs: ['capped'] },
  ] : [];
  return encodeModel({
    nodes: [
      { op: 'Transpose', inputs: ['k'], outputs: ['kt'], attrs: { perm: [0, 1, 3, 2] } },
      { op: 'MatMul', inputs: ['q', 'kt'], outputs: ['scores'] },
      { op: 'Mul', inputs: ['scores', 'scale'], outputs: ['scaled'] },
      ...capped,
      { op: 'Add', inputs: [softcap ? 'capped' : 'scaled', 'mask'], outputs: ['masked'] },
      { op: 'Softmax', inputs: ['masked'], outputs: ['probs'], attrs: { axis: -1 } },
      { op: 'MatMul', inputs: ['probs', 'v'], outputs: ['out'] },
    ],
    initializers: {
      scale: floats([], Float32Array.of(1 / Math.sqrt(D))),
      mask: floats(mask.shape, mask.data),
      ...(softcap ? { cap: floats([], Float32Array.of(softcap)) } : {}),
    },
    inputs: ['q', 'k', 'v'].map((name) => ({ name, dims: [1, H, L, D] })),
    outputs: [{ name: 'out', dims: [1, H, L, D] }],
  });
}

// The additive mask of causal (+ window) (+ ALiBi): [L, L], or [H, L, L] with ALiBi.
function additiveMask(H, L, { window = 0, slopes = null }) {
  const planes = slopes ? H : 1;
  const data = new Float32Array(planes * L * L);
  for (let h = 0; h < planes; h++)
    for (let i = 0; i < L; i++)
      for (let j = 0; j < L; j++) {
        const hidden = j > i || (window && i - j >= window);
        data[(h * L + i) * L + j] = hidden ? -Infinity : slopes ? slopes[h] * (j - i) : 0;
      }
  return { data, shape: slopes ? [1, H, L, L] : [L, L] };
}

async function ortRow(impl, problem, ours, mask, softcap) {
  const { L, heads, q, k, v } = problem;
  const worker = new OrtWorker(1);
  const row = { impl, L, heads, threads: 1 };
  try {
    const feeds = Object.fromEntries([['q', q], ['k', k], ['v', v]].map(([name, t]) => [name, { data: t.data, dims: t.shape }]));
    const { output, ms } = await worker.call('prepareModel', { model: ortModel(heads, L, mask, softcap), feeds, output: 'out' });
    row.max_abs_err = maxAbsError(output, ours);
    if (!(row.max_abs_err <= TOLERANCE)) {
      ++failures;
      row.note = `OUTPUT MISMATCH (> ${TOLERANCE})`;
    }
    Object.assign(row, await worker.call('measure', { plan: plan(L), firstRunMs: ms }));
  } catch (error) {
    row.note = `failed: ${String(error?.message ?? error).split('\n')[0].slice(0, 80)}`;
  } finally {
    await worker.terminate();
  }
  rows.push(row);
  print(row);
  return row;
}

function problem(L, heads, kvHeads = heads, seed = L) {
  return { L, heads, q: tensor([1, heads, L, D], seed), k: tensor([1, kvHeads, L, D], seed + 1), v: tensor([1, kvHeads, L, D], seed + 2) };
}

// ---------------------------------------------------------------------------------------------

const started = performance.now();
const simd = await init({ threads: 1, relaxedSimd: false });
const fastest = await init({ threads: 1 });
const twoThreads = await init({ threads: 2 });
console.log(`attention-wasm bench: scaledDotProductAttention v2 options, batch 1, head dim ${D}; builds ${simd.build}, ${fastest.build}, ${twoThreads.build} x${twoThreads.features.threads}`);
const goals = [];

// 1. Sliding window against plain causal.
header('sliding window 256 against plain causal (ratio = median / causal median)');
for (const L of quick ? [512, 1024] : [2048, 4096, 8192]) {
  const p = problem(L, 8);
  for (const [attn, threads, build] of [[fastest, 1, fastest.build], [twoThreads, 2, twoThreads.build]]) {
    const [causal, windowed] = await alternate(attn, threads, p, [[`ours-${build}-causal`, { isCausal: true }], [`ours-${build}-window256`, { isCausal: true, window: 256 }]]);
    const ratio = rows.at(-2).median_ms / rows.at(-1).median_ms;
    if (threads === 1 && L === (quick ? 1024 : 8192)) goals.push(`window 256 at L = ${L}, 1 thread: ${ratio.toFixed(1)}x faster than causal (goal >= 10x): ${ratio >= 10 ? 'met' : 'missed'}`);
    if (threads === 1 && L <= 4096) {
      await ortRow('onnxruntime-web-decomposed-causal', p, causal, additiveMask(8, L, {}));
      await ortRow('onnxruntime-web-decomposed-window256', p, windowed, additiveMask(8, L, { window: 256 }));
    }
  }
}

// 2. Grouped heads (32 query / 8 key-value) against 32 heads with their own keys.
header('grouped heads: 32 query heads over 8 key/value heads against 32 over 32, causal (ratio = median / 32-over-32 median)');
{
  const L = quick ? 512 : 2048;
  const own = problem(L, 32, 32, 7);
  const grouped = { ...own, k: tensor([1, 8, L, D], 8), v: tensor([1, 8, L, D], 9) };
  const runs = [
    () => fastest.scaledDotProductAttention(own.q, own.k, own.v, { isCausal: true }).output.data,
    () => fastest.scaledDotProductAttention(grouped.q, grouped.k, grouped.v, { isCausal: true, enableGqa: true }).output.data,
  ];
  for (const run of runs) await timeOnce(run);
  const timings = await measureAlternating(runs, plan(L));
  for (const [i, impl] of [`ours-${fastest.build}-32-over-32`, `ours-${fastest.build}-gqa-32-over-8`].entries()) {
    const row = { impl, L, heads: 32, threads: 1, ...timings[i], ratio: timings[i].median_ms / timings[0].median_ms };
    rows.push(row);
    print(row);
  }
  const ratio = timings[1].median_ms / timings[0].median_ms;
  goals.push(`grouped heads at L = ${L}: ${ratio.toFixed(2)}x the 32-over-32 time (goal <= 1.1x): ${ratio <= 1.1 ? 'met' : 'missed'}`);
}

// 3. ALiBi and soft cap against plain causal; 4. documents.
header('ALiBi, soft cap and documents against plain causal (ratio = median / causal median)');
{
  const L = quick ? 512 : 2048;
  const p = problem(L, 8, 8, 11);
  const slopes = Float32Array.from({ length: 8 }, (_, h) => 2 ** (-(h + 1)));
  const [causal, alibi, capped] = await alternate(fastest, 1, p, [
    [`ours-${fastest.build}-causal`, { isCausal: true }],
    [`ours-${fastest.build}-alibi`, { isCausal: true, alibi: true }],
    [`ours-${fastest.build}-softcap50`, { isCausal: true, softcap: 50 }],
    [`ours-${fastest.build}-alibi-softcap50`, { isCausal: true, alibi: true, softcap: 50 }],
  ]);
  const base = rows.at(-4).median_ms;
  for (const [name, row] of [['ALiBi', rows.at(-3)], ['soft cap', rows.at(-2)], ['both', rows.at(-1)]]) {
    const cost = 100 * (row.median_ms / base - 1);
    goals.push(`${name} at L = ${L}: ${cost.toFixed(1)} % over plain causal (goal <= 10 %): ${cost <= 10 ? 'met' : 'missed'}`);
  }
  await ortRow('onnxruntime-web-decomposed-causal', p, causal, additiveMask(8, L, {}));
  await ortRow('onnxruntime-web-decomposed-alibi', p, alibi, additiveMask(8, L, { slopes }));
  await ortRow('onnxruntime-web-decomposed-softcap50', p, capped, additiveMask(8, L, {}), 50);

  const docsL = quick ? 1024 : 4096;
  const d = problem(docsL, 8, 8, 13);
  const documentIds = { data: Int32Array.from({ length: docsL }, (_, i) => Math.floor(i / (docsL / 8))), shape: [docsL] };
  await alternate(fastest, 1, d, [[`ours-${fastest.build}-causal`, { isCausal: true }], [`ours-${fastest.build}-8-documents`, { isCausal: true, documentIds }]]);
}

console.log('\ngoals');
for (const line of goals) console.log(`  ${line}`);
if (args.json) {
  await writeFile(args.json, `${JSON.stringify(rows, null, 2)}\n`);
  console.log(`wrote ${args.json}`);
}
console.log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s${failures ? `; ${failures} FAILURE(S)` : ''}`);
process.exit(failures ? 1 : 0);

// The decode benchmark: one new token a step through Llama-3.2-1B's attention (32 query heads over
// 8 key/value heads, head dim 64, batch 1) at contexts 512, 4096 and 16384, on 1 and 2 threads.
// Rows: our KVCache (f32, f16 and q8: append the token, attend, truncate back so every step has
// the same context), the same step built natively on 1 and 2 threads (native-decode-*, bench/decode_native.cpp:
// -march=native, the wasm kernels through SIMDe) with its own read rate (native-read-bandwidth),
// our v1-style call that passes the whole K/V from JS each step, onnxruntime-web's
// com.microsoft.GroupQueryAttention op fed past_key/past_value and reading present_* back each step
// (as transformers.js runs it), and the read rate of 64 MiB inside wasm, which gives each row's
// floor (the bytes of keys and values a step reads ÷ that rate). Our rows on 1 and 2 threads (two
// instances) and the native ones are timed in alternation, one run each per round, so that two
// threads' speed-up compares runs of the same rounds; onnxruntime runs in its own worker thread and is timed alone after them
// (its thread pool spins after each run and would slow whatever runs next). Every row's output of
// its last step is checked against a float64 reference of that step. Each row's roofline is the
// larger of its floor and its multiply-adds at our relaxed GEMM's rate on as many threads
// (gemm-rate.mjs, the `gemm-rate` rows), measured in the same run; each step's GB/s is its bytes
// over its median, `of read` that rate over the read rate of its own build (wasm or native). Then the whole attention block
// (GroupedQueryAttention: projections, RoPE, the cache, o_proj) at 4096 on 1 thread: plain RoPE,
// Llama 3's scaled RoPE (which should cost nothing more), and a batch of 4 left-padded rows beside
// batch 1; and plain RoPE on 2 threads; also in alternation.
//
//   node --experimental-wasm-relaxed-simd bench/decode.mjs [--json FILE] [--quick]
//   (npm run bench -- --decode [--json FILE] [--quick] also builds first)
import { rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { init } from '../dist/index.mjs';
import { rng } from '../tests/js/random.js';
import { readBandwidth } from './bandwidth.mjs';
import { gemmRate } from './gemm-rate.mjs';
import { report } from './report.mjs';
import { encodeModel, INT32 } from './onnx-model.mjs';
import { NativeDecoder } from './peers/native-decode.mjs';
import { OrtWorker } from './peers/onnxruntime.mjs';
import { measureAlternating } from './timing.mjs';

const HQ = 32, HKV = 8, D = 64;
const { values: args } = parseArgs({ options: { json: { type: 'string' }, quick: { type: 'boolean', default: false } } });
const contexts = args.quick ? [512] : [512, 4096, 16384];
const plan = { warmup: 3, warmupMs: args.quick ? 200 : 1000, minRuns: 9, maxRuns: args.quick ? 9 : 41, budgetMs: args.quick ? 300 : 1500 };
const TOLERANCE = 1e-4;
const F16_TOLERANCE = 1e-2;  // keys and values rounded to binary16 (the reference is not)
// Keys, values and the query rounded through q8, by up to 1/254 of each block's largest.
const Q8_TOLERANCE = 1e-2;
const DTYPES = ['f32', 'f16', 'q8'];
// Bytes a step reads per position and key/value head, keys and values: q8 keeps 64 bytes and two
// binary16 scales a row of 64.
const BYTES_PER_ROW = { f32: 2 * D * 4, f16: 2 * D * 2, q8: 2 * (D + 2 * Math.ceil(D / 32)) };
const TOLERANCES = { f32: TOLERANCE, f16: F16_TOLERANCE, q8: Q8_TOLERANCE };

const rows = [];
const goals = [];
let failures = 0;

function tensor(shape, random) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = random() * 2 - 1;
  return { shape, data };
}

// The step's attention in float64: query [HQ, D] over keys/values [HKV, context, D].
function reference(q, keys, values, context) {
  const out = new Float64Array(HQ * D);
  const scores = new Float64Array(context);
  for (let h = 0; h < HQ; h++) {
    const g = Math.floor(h / (HQ / HKV));
    let max = -Infinity;
    for (let j = 0; j < context; j++) {
      let s = 0;
      for (let c = 0; c < D; c++) s += q[h * D + c] * keys[(g * context + j) * D + c];
      scores[j] = s / Math.sqrt(D);
      max = Math.max(max, scores[j]);
    }
    let sum = 0;
    for (let j = 0; j < context; j++) sum += scores[j] = Math.exp(scores[j] - max);
    for (let j = 0; j < context; j++)
      for (let c = 0; c < D; c++) out[h * D + c] += (scores[j] / sum) * values[(g * context + j) * D + c];
  }
  return out;
}

const maxAbsError = (got, want) => got.reduce((worst, x, i) => Math.max(worst, Math.abs(x - want[i])), 0);

// GroupQueryAttention (onnxruntime contrib op): BSNH query/key/value, BNSH past and present.
function gqaModel(context) {
  return encodeModel({
    nodes: [{
      op: 'GroupQueryAttention', domain: 'com.microsoft',
      inputs: ['query', 'key', 'value', 'past_key', 'past_value', 'seqlens_k', 'total_sequence_length'],
      outputs: ['output', 'present_key', 'present_value'],
      attrs: { num_heads: HQ, kv_num_heads: HKV },
    }],
    inputs: [
      { name: 'query', dims: [1, 1, HQ * D] },
      { name: 'key', dims: [1, 1, HKV * D] },
      { name: 'value', dims: [1, 1, HKV * D] },
      { name: 'past_key', dims: [1, HKV, context - 1, D] },
      { name: 'past_value', dims: [1, HKV, context - 1, D] },
      { name: 'seqlens_k', dims: [1], type: INT32 },
      { name: 'total_sequence_length', dims: [1], type: INT32 },
    ],
    outputs: [
      { name: 'output', dims: [1, 1, HQ * D] },
      // [1, HKV, context, D]; ORT infers the past's length, left to it.
      { name: 'present_key', dims: null },
      { name: 'present_value', dims: null },
    ],
    opsets: { '': 21, 'com.microsoft': 1 },
  });
}

const print = (row) => {
  const cells = [row.impl.padEnd(28), String(row.context ?? '').padStart(6), String(row.threads).padStart(3),
    row.min_ms?.toFixed(3).padStart(9) ?? ''.padStart(9), row.median_ms?.toFixed(3).padStart(9) ?? ''.padStart(9),
    row.max_abs_err === undefined ? ''.padStart(9) : row.max_abs_err.toExponential(1).padStart(9),
    row.floor_ms === undefined ? ''.padStart(8) : row.floor_ms.toFixed(3).padStart(8),
    row.roofline_ms === undefined ? ''.padStart(8) : row.roofline_ms.toFixed(3).padStart(8),
    row.roofline_ms === undefined ? ''.padStart(6) : (row.median_ms / row.roofline_ms).toFixed(2).padStart(6),
    row.gbps === undefined ? ''.padStart(7) : row.gbps.toFixed(1).padStart(7),
    row.of_read === undefined ? ''.padStart(7) : row.of_read.toFixed(2).padStart(7),
    row.gflops === undefined ? ''.padStart(6) : row.gflops.toFixed(1).padStart(6), row.note ?? ''];
  console.log(cells.join('  '));
};

// One problem: the context − 1 held positions, the new token's key/value, the query.
function problem(context) {
  const random = rng(context);
  const past = { k: tensor([1, HKV, context - 1, D], random), v: tensor([1, HKV, context - 1, D], random) };
  const step = { k: tensor([1, HKV, 1, D], random), v: tensor([1, HKV, 1, D], random), q: tensor([1, HQ, 1, D], random) };
  // The whole K/V [1, HKV, context, D] with the new token last, for the v1-style call and the reference.
  const whole = (pastT, stepT) => {
    const data = new Float32Array(HKV * context * D);
    for (let g = 0; g < HKV; g++) {
      data.set(pastT.data.subarray(g * (context - 1) * D, (g + 1) * (context - 1) * D), g * context * D);
      data.set(stepT.data.subarray(g * D, (g + 1) * D), (g * context + context - 1) * D);
    }
    return { shape: [1, HKV, context, D], data };
  };
  const K = whole(past.k, step.k), V = whole(past.v, step.v);
  return { context, past, step, K, V, want: reference(step.q.data, K.data, V.data, context) };
}

// Our steps over f32, f16 and q8 caches and the v1-style call; with `native`, the same three steps
// in the native build, their caches loaded with the same values.
async function ourRows(attn, p, native) {
  const caches = DTYPES.map((dtype) => {
    const cache = new attn.KVCache({ heads: HKV, headDim: D, maxLength: p.context, dtype });
    for (let first = 0; first < p.context - 1; first += 1024) {
      const t = Math.min(1024, p.context - 1 - first);
      const slice = (x) => {
        const data = new Float32Array(HKV * t * D);
        for (let g = 0; g < HKV; g++) data.set(x.data.subarray((g * (p.context - 1) + first) * D, (g * (p.context - 1) + first + t) * D), g * t * D);
        return { shape: [1, HKV, t, D], data };
      };
      cache.append(slice(p.past.k), slice(p.past.v));
    }
    return cache;
  });
  const outputs = {};
  const step = (impl, cache) => () => {
    cache.append(p.step.k, p.step.v);
    outputs[impl] = cache.attend(p.step.q).output.data;
    cache.truncate(p.context - 1);
  };
  const runs = DTYPES.map((dtype, i) => [`ours-decode-${dtype}`, step(`ours-decode-${dtype}`, caches[i])]);
  runs.push(['ours-sdpa-per-step', () => {
    outputs['ours-sdpa-per-step'] = attn.scaledDotProductAttention(p.step.q, p.K, p.V, { enableGqa: true, isCausal: 'lowerRight' }).output.data;
  }]);
  const nativeNames = [];
  if (native) {
    const file = path.join(os.tmpdir(), `decode-native-${process.pid}.f32`);
    try {
      for (const dtype of DTYPES) {
        const name = `${dtype}-${p.context}`;
        await native.load(name, dtype, p.context, file, [p.past.k.data, p.past.v.data, p.step.k.data, p.step.v.data, p.step.q.data]);
        nativeNames.push(name);
        runs.push([`native-decode-${dtype}`, () => native.step(name)]);
      }
    } finally {
      rmSync(file, { force: true });
    }
  }
  // After the timing: the native outputs read, every cache freed.
  const finish = async () => {
    caches.forEach((cache) => cache.dispose());
    for (const [i, name] of nativeNames.entries()) {
      outputs[`native-decode-${DTYPES[i]}`] = await native.output(name);
      await native.free(name);
    }
  };
  return { outputs, runs, finish };
}

// Llama-3.2-1B's attention block, one token a step at `context` held positions (the cache filled
// directly: its keys' values do not change the time), timed in alternation: plain RoPE, llama3
// scaling, and batch 4 with rows left-padded by 0, 100, 500 and 1000 positions on 1 thread, and
// plain RoPE on 2 (`instances`: one instance a thread count), where the pool's calls, several a
// step, show.
async function blockRows(instances, context) {
  const hidden = HQ * D, random = rng(7);
  const stateDict = {};
  for (const [name, shape] of [['q_proj.weight', [hidden, hidden]], ['k_proj.weight', [HKV * D, hidden]], ['v_proj.weight', [HKV * D, hidden]], ['o_proj.weight', [hidden, hidden]]])
    stateDict[name] = tensor(shape, random);
  const llama3 = { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
  const setups = [
    ['ours-block-decode', {}, 1, 1],
    ['ours-block-decode-llama3', { ropeScaling: llama3 }, 1, 1],
    ['ours-block-decode-padded-b4', { ropeScaling: llama3 }, 4, 1],
    ['ours-block-decode', {}, 1, 2],
  ].map(([impl, opts, batch, threads]) => {
    const attn = instances[threads - 1];
    const block = new attn.GroupedQueryAttention(hidden, HQ, HKV, { ropeBase: 500000, ...opts });
    block.loadStateDict(stateDict);
    const cache = block.createCache(context, { batch });
    const padding = [0, 100, 500, 1000];
    const mask = { shape: [batch, context - 1], data: new Uint8Array(batch * (context - 1)) };
    for (let b = 0; b < batch; b++) mask.data.fill(1, b * (context - 1) + padding[b], (b + 1) * (context - 1));
    const rows = tensor([batch, HKV, context - 1, D], random);
    cache.append(rows, rows, { mask });
    const x = tensor([batch, 1, hidden], random);
    const run = () => {
      block.forward(x, { cache });
      cache.truncate(context - 1);
    };
    return { impl, batch, threads, build: attn.build, block, cache, run };
  });
  const timings = await measureAlternating(setups.map(({ run }) => run), plan);
  const result = setups.map(({ impl, batch, threads, build }, i) => ({
    impl, context, threads, batch, median_ms: timings[i].median_ms, min_ms: timings[i].min_ms, build,
  }));
  for (const { block, cache } of setups) {
    cache.dispose();
    block.dispose();
  }
  return result;
}

async function ortRow(p, threads, ours) {
  const row = { impl: 'onnxruntime-web-gqa', context: p.context, threads };
  const worker = new OrtWorker(threads);
  try {
    const feeds = {
      query: { data: p.step.q.data, dims: [1, 1, HQ * D] },
      key: { data: p.step.k.data, dims: [1, 1, HKV * D] },
      value: { data: p.step.v.data, dims: [1, 1, HKV * D] },
      past_key: { data: p.past.k.data, dims: [1, HKV, p.context - 1, D] },
      past_value: { data: p.past.v.data, dims: [1, HKV, p.context - 1, D] },
      seqlens_k: { data: Int32Array.of(p.context - 1), dims: [1], type: 'int32' },
      total_sequence_length: { data: Int32Array.of(p.context), dims: [1], type: 'int32' },
    };
    const { output } = await worker.call('prepareModel', { model: gqaModel(p.context), feeds, output: 'output' });
    row.max_abs_err = maxAbsError(output, p.want);
    row.vs_ours = maxAbsError(output, ours);
    if (!(row.max_abs_err <= TOLERANCE)) {
      ++failures;
      row.note = `OUTPUT MISMATCH (> ${TOLERANCE})`;
    }
    Object.assign(row, await worker.call('measure', { plan, firstRunMs: 0 }));
  } catch (error) {
    ++failures;
    row.note = `failed: ${String(error?.message ?? error).split('\n')[0].slice(0, 100)}`;
  } finally {
    await worker.terminate();
  }
  return row;
}

// ---------------------------------------------------------------------------------------------

console.log(`attention-wasm bench: decode, ${HQ} query heads over ${HKV} key/value heads, head dim ${D}, batch 1, one new token a step`);
console.log(`${'impl'.padEnd(28)}  ${'context'.padStart(6)}  thr  ${'min ms'.padStart(9)}  ${'median ms'.padStart(9)}  ${'max err'.padStart(9)}  ${'floor ms'.padStart(8)}  ${'roof ms'.padStart(8)}  ${'x roof'.padStart(6)}  ${'GB/s'.padStart(7)}  ${'of read'.padStart(7)}  ${'GF/s'.padStart(6)}  note`);
const problems = contexts.map(problem);
// One native process per thread count, so that neither rebuilds its thread pool between steps.
const natives = NativeDecoder.available() ? [new NativeDecoder(), new NativeDecoder()] : null;
let nativeGbps;
if (natives) {
  for (const [i, native] of natives.entries()) await native.threads(i + 1);
  nativeGbps = Math.max(await natives[0].readGbps(), await natives[0].readGbps());
  const row = { impl: 'native-read-bandwidth', threads: 1, gbps: nativeGbps };
  rows.push(row);
  print(row);
} else {
  print({ impl: 'native-decode', threads: 1, note: 'build/native/attention_bench_decode_native missing (bash scripts/build.sh all)' });
}
// The read and GEMM rates of each thread count, then each context's rows on 1 and 2 threads and
// natively, all timed in alternation: two threads' speed-up is a ratio of rows measured in the
// same rounds, not of runs minutes apart on a machine whose speed drifts.
const rates = {};
for (const threads of [1, 2]) {
  const gbps = Math.max(await readBandwidth(threads), await readBandwidth(threads));
  const gflops = await gemmRate(threads);
  rates[threads] = { gbps, gflops };
  for (const row of [{ impl: 'read-bandwidth', threads, gbps }, { impl: 'gemm-rate', threads, gflops }]) {
    rows.push(row);
    print(row);
  }
}
const instances = [await init({ threads: 1 }), await init({ threads: 2 })];
for (const p of problems) {
  const sets = [];
  for (const [i, attn] of instances.entries()) sets.push({ attn, threads: i + 1, ...await ourRows(attn, p, natives?.[i]) });
  const runs = sets.flatMap((set) => set.runs.map(([impl, run]) => ({ impl, run, set })));
  const timings = await measureAlternating(runs.map(({ run }) => run), plan);
  for (const set of sets) await set.finish();
  const byThreads = { 1: {}, 2: {} };
  runs.forEach(({ impl, set: { attn, threads, outputs } }, i) => {
    const { gbps, gflops } = rates[threads];
    const dtype = DTYPES.find((name) => impl.endsWith(`-decode-${name}`)) ?? 'f32';
    const isNative = impl.startsWith('native-');
    const bytes = p.context * HKV * BYTES_PER_ROW[dtype];
    // A score and a weighted value per query head and key: 2 · HQ · context · D multiply-adds.
    const flops = 4 * HQ * p.context * D;
    const floor_ms = bytes / (gbps * 1e6);
    const median_ms = timings[i].median_ms;
    const row = { impl, context: p.context, threads, median_ms, min_ms: timings[i].min_ms,
      max_abs_err: maxAbsError(outputs[impl], p.want), floor_ms, roofline_ms: Math.max(floor_ms, flops / (gflops * 1e6)),
      gbps: bytes / (median_ms * 1e6), build: isNative ? 'native' : attn.build };
    // The native read rate is one thread's.
    row.of_read = isNative ? (threads === 1 ? row.gbps / nativeGbps : undefined) : row.gbps / gbps;
    if (!(row.max_abs_err <= TOLERANCES[dtype])) {
      ++failures;
      row.note = 'OUTPUT MISMATCH';
    }
    byThreads[threads][impl] = row;
  });
  const one = byThreads[1];
  for (const dtype of DTYPES) {
    for (const kind of ['ours', 'native']) {
      const two = byThreads[2][`${kind}-decode-${dtype}`];
      if (two) two.vs_one_thread = one[`${kind}-decode-${dtype}`].median_ms / two.median_ms;
    }
    for (const rowsOf of Object.values(byThreads)) {
      const ours = rowsOf[`ours-decode-${dtype}`], mine = rowsOf[`native-decode-${dtype}`];
      if (mine) ours.vs_native = ours.median_ms / mine.median_ms;
    }
  }
  const notes = (row) => row.note ?? ([
    row.vs_one_thread && `${row.vs_one_thread.toFixed(2)}x 1 thread`, row.vs_native && `${row.vs_native.toFixed(2)}x native`,
  ].filter(Boolean).join(', ') || undefined);
  for (const threads of [1, 2]) {
    for (const row of Object.values(byThreads[threads])) {
      rows.push(row);
      print({ ...row, note: notes(row) });
    }
    const ort = await ortRow(p, threads, sets[0].outputs['ours-decode-f32']);
    rows.push(ort);
    print(ort);
    if (threads === 1 && p.context === 4096) {
      const speedup = ort.median_ms / one['ours-decode-f32'].median_ms;
      goals.push(`ours-decode-f32 at 4096, 1 thread: ${speedup.toFixed(1)}x faster than onnxruntime-web-gqa (goal >= 3x): ${speedup >= 3 ? 'met' : 'missed'}`);
    }
  }
  if (p.context === 4096 || p.context === 16384) {
    // Within 1.25x the roofline; or, where the native build of the same step is itself further
    // than that from it (the roofline is out of WebAssembly's reach), within 1.1x native.
    for (const dtype of DTYPES) {
      const row = one[`ours-decode-${dtype}`], mine = one[`native-decode-${dtype}`];
      const over = row.median_ms / row.roofline_ms, nativeOver = mine && mine.median_ms / row.roofline_ms;
      const verdict = over <= 1.25 ? 'met'
        : nativeOver > 1.25 && row.vs_native <= 1.1 ? `met by the native clause (native is ${nativeOver.toFixed(2)}x the roofline)` : 'missed';
      const versus = mine ? `, ${row.vs_native.toFixed(2)}x native` : ', no native build';
      goals.push(`${row.impl} at ${p.context}, 1 thread: ${over.toFixed(2)}x the roofline${versus} (goal <= 1.25x the roofline, or <= 1.1x native where native is over 1.25x): ${verdict}`);
    }
  }
  if (p.context === 16384) {
    const ratio = one['ours-decode-q8'].median_ms / one['ours-decode-f16'].median_ms;
    goals.push(`ours-decode-q8 at 16384, 1 thread: ${ratio.toFixed(2)}x f16's time (goal <= 0.6x): ${ratio <= 0.6 ? 'met' : 'missed'}`);
    for (const dtype of ['f32', 'f16']) {
      const speedup = byThreads[2][`ours-decode-${dtype}`].vs_one_thread, mine = byThreads[2][`native-decode-${dtype}`];
      const versus = mine ? `; the native build ${mine.vs_one_thread.toFixed(2)}x` : '';
      goals.push(`ours-decode-${dtype} at 16384: 2 threads ${speedup.toFixed(2)}x faster than 1, timed in alternation${versus} (goal >= 1.8x): ${speedup >= 1.8 ? 'met' : 'missed'}`);
    }
  }
}
natives?.forEach((native) => native.close());
{
  const [plain, llama3, padded, twoThreads] = await blockRows(instances, args.quick ? 512 : 4096);
  twoThreads.vs_one_thread = plain.median_ms / twoThreads.median_ms;
  for (const row of [plain, llama3, padded, twoThreads]) {
    rows.push(row);
    const perRow = row.batch > 1 ? `, ${(row.median_ms / row.batch).toFixed(3)} ms a row` : '';
    print({ ...row, note: `batch ${row.batch}${perRow}${row.vs_one_thread ? `, ${row.vs_one_thread.toFixed(2)}x 1 thread` : ''}` });
  }
  const ratio = llama3.median_ms / plain.median_ms;
  goals.push(`ours-block-decode-llama3 at ${llama3.context}: ${ratio.toFixed(2)}x the unscaled step (goal: the same speed)`);
  goals.push(`ours-block-decode-padded-b4 at ${padded.context}: ${(padded.median_ms / llama3.median_ms).toFixed(2)}x batch 1 for 4 rows`);
}
instances.forEach((attn) => attn.dispose());
// The JSON keeps each kind of row's own fields.
await report(goals, rows.map(({ impl, context, threads, batch, median_ms, min_ms, max_abs_err, gbps, of_read, vs_native, vs_one_thread, gflops, roofline_ms }) => {
  if (impl.endsWith('read-bandwidth')) return { impl, threads, gbps };
  if (impl === 'gemm-rate') return { impl, threads, gflops };
  if (batch) return { impl, context, threads, batch, median_ms, min_ms, vs_one_thread };
  return { impl, context, threads, median_ms, min_ms, max_abs_err, roofline_ms, gbps, of_read, vs_native, vs_one_thread };
}), args.json);
if (failures) {
  console.error(`${failures} row(s) failed or disagreed with the reference`);
  process.exitCode = 1;
}

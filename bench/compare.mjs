// Compares builds of this package in one process, in alternation: every round runs each build
// once, so the machine's drift (±30 % between minutes on a shared VM) slows them alike, where
// separate `npm run bench` runs minutes apart cannot tell a few per cent from noise.
//
//   node bench/compare.mjs [--L 2048] [--rounds 12] [--threads 1] [--sdpa [--softcap C] | --decode
//                          [--dtype f32] [--head-dim 128]] DIST_A DIST_B ...
//
// Each DIST is a built `dist/` directory (for an older commit: `git worktree add ../old <commit>`,
// then `npm ci && npm run build` there). The problem is the bench's MultiheadAttention forward
// (causal, weights off); `--sdpa` times causal scaledDotProductAttention on [1, 8, L, 64] instead,
// `--sdpa --softcap C` with a soft cap of C, each build's plain causal SDPA timed beside it in the
// same rounds (the cap's cost over it is printed per build), `--decode` one decode step (32 query
// heads over a KVCache of 8 heads of 128, L positions; `--dtype` f16 or q8 and `--head-dim 64`
// give bench/decode.mjs's caches).
// Prints min and median ms per build, and the largest difference between the builds' outputs.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { E, H, HEAD_DIM, input, maxAbsError, stateDict } from './problem.mjs';
import { measureAlternating, summarize } from './timing.mjs';

const { values, positionals: dists } = parseArgs({
  allowPositionals: true,
  options: {
    L: { type: 'string', default: '2048' },
    rounds: { type: 'string', default: '12' },
    threads: { type: 'string', default: '1' },
    sdpa: { type: 'boolean', default: false },
    softcap: { type: 'string' },
    decode: { type: 'boolean', default: false },
    dtype: { type: 'string', default: 'f32' },
    'head-dim': { type: 'string', default: '128' },
  },
});
if (dists.length < 2) throw new Error('usage: node bench/compare.mjs [--L N] [--rounds N] [--threads N] [--sdpa [--softcap C] | --decode [--dtype D] [--head-dim N]] DIST_A DIST_B ...');
const L = Number(values.L), rounds = Number(values.rounds), threads = Number(values.threads);
const softcap = values.softcap === undefined ? undefined : Number(values.softcap);
if (softcap !== undefined && !values.sdpa) throw new Error('--softcap needs --sdpa');
const headDim = Number(values['head-dim']);

const x = input(L);
const builds = [];
for (const dist of dists) {
  const { init } = await import(pathToFileURL(path.resolve(dist, 'index.mjs')).href);
  const attn = await init({ threads });
  let run, plain;
  if (values.decode) {
    const cache = new attn.KVCache({ heads: 8, headDim, maxLength: L, dtype: values.dtype });
    const rows = { data: input(2 * L).subarray(0, 8 * L * headDim), shape: [1, 8, L, headDim] };
    cache.append(rows, rows);
    const query = { data: x.subarray(0, 32 * headDim), shape: [1, 32, 1, headDim] };
    run = () => cache.attend(query).output.data;
  } else if (values.sdpa) {
    const qkv = { data: x.subarray(0, H * L * HEAD_DIM), shape: [1, H, L, HEAD_DIM] };
    const sdpa = (options) => () => attn.scaledDotProductAttention(qkv, qkv, qkv, { isCausal: true, ...options }).output.data;
    run = sdpa({ softcap });
    if (softcap !== undefined) plain = sdpa({});
  } else {
    const mha = new attn.MultiheadAttention(E, H).loadStateDict(stateDict());
    const query = { data: x, shape: [L, 1, E] };
    run = () => mha.forward(query, null, null, { isCausal: true, needWeights: false }).output.data;
  }
  builds.push({ dist, run, plain });
}

const outputs = builds.map(({ run }) => run());
// One run of each build per round, after at least a second of warm-up (V8 runs wasm on its
// baseline tier until TurboFan has compiled the hot functions). Rounds are timed one at a time so
// that each build's soft cap can be set against its plain causal of the same round: the ratio of
// two runs back to back drifts far less on a shared machine than either median does.
const runs = builds.flatMap(({ run, plain }) => (plain ? [run, plain] : [run]));
await measureAlternating(runs, { warmup: 1, warmupMs: 1000, minRuns: 0, maxRuns: 0, budgetMs: 0 });
const times = runs.map(() => []);
for (let round = 0; round < rounds; ++round) {
  const once = await measureAlternating(runs, { warmup: 0, warmupMs: 0, minRuns: 1, maxRuns: 1, budgetMs: 0 });
  once.forEach(({ min_ms }, i) => times[i].push(min_ms));
}
const perBuild = softcap === undefined ? 1 : 2;
const timings = builds.map((_, i) => summarize(times[i * perBuild]));
const costs = builds.map((_, i) =>
  softcap === undefined ? null : summarize(times[i * perBuild].map((ms, r) => ms / times[i * perBuild + 1][r])));

const capped = softcap === undefined ? '' : `, softcap ${softcap}`;
const problem = values.decode ? `decode step, 32 query heads over an ${values.dtype} cache [1, 8, ${L}, ${headDim}]` : values.sdpa ? `causal SDPA [1, ${H}, ${L}, ${HEAD_DIM}]${capped}` : `MultiheadAttention forward, causal, L = ${L}, E = ${E}, H = ${H}`;
console.log(`${problem}, ${threads} thread(s), ${rounds} rounds in alternation`);
// A decode step takes about a millisecond: three decimals, and each median over the first build's.
const digits = values.decode ? 3 : 1;
for (const [i, { dist }] of builds.entries()) {
  const cost = costs[i] ? `   ${(100 * (costs[i].median_ms - 1)).toFixed(1).padStart(5)} % over its plain causal (median of the rounds' ratios)` : '';
  console.log(`  ${dist.padEnd(30)} min ${timings[i].min_ms.toFixed(digits).padStart(8)} ms   median ${timings[i].median_ms.toFixed(digits).padStart(8)} ms   ${(timings[i].median_ms / timings[0].median_ms).toFixed(3)}x the first${cost}`);
}
const maxDiff = Math.max(...outputs.slice(1).map((output) => maxAbsError(output, outputs[0])));
console.log(`  max |difference| between the builds' outputs: ${maxDiff.toExponential(1)}`);

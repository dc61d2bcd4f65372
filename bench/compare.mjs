// Compares builds of this package in one process, in alternation: every round runs each build
// once, so the machine's drift (±30 % between minutes on a shared VM) slows them alike, where
// separate `npm run bench` runs minutes apart cannot tell a few per cent from noise.
//
//   node bench/compare.mjs [--L 2048] [--rounds 12] [--threads 1] [--sdpa] DIST_A DIST_B ...
//
// Each DIST is a built `dist/` directory (for an older commit: `git worktree add ../old <commit>`,
// then `npm ci && npm run build` there). The problem is the bench's MultiheadAttention forward
// (causal, weights off); `--sdpa` times causal scaledDotProductAttention on [1, 8, L, 64] instead.
// Prints min and median ms per build, and the largest difference between the builds' outputs.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { E, H, HEAD_DIM, input, stateDict } from './problem.mjs';

const { values, positionals: dists } = parseArgs({
  allowPositionals: true,
  options: {
    L: { type: 'string', default: '2048' },
    rounds: { type: 'string', default: '12' },
    threads: { type: 'string', default: '1' },
    sdpa: { type: 'boolean', default: false },
  },
});
if (dists.length < 2) throw new Error('usage: node bench/compare.mjs [--L N] [--rounds N] [--threads N] [--sdpa] DIST_A DIST_B ...');
const L = Number(values.L), rounds = Number(values.rounds), threads = Number(values.threads);

const x = input(L);
const builds = [];
for (const dist of dists) {
  const { init } = await import(pathToFileURL(path.resolve(dist, 'index.mjs')).href);
  const attn = await init({ threads });
  let run;
  if (values.sdpa) {
    const qkv = { data: x.subarray(0, H * L * HEAD_DIM), shape: [1, H, L, HEAD_DIM] };
    run = () => attn.scaledDotProductAttention(qkv, qkv, qkv, { isCausal: true }).output.data;
  } else {
    const mha = new attn.MultiheadAttention(E, H).loadStateDict(stateDict());
    const query = { data: x, shape: [L, 1, E] };
    run = () => mha.forward(query, null, null, { isCausal: true, needWeights: false }).output.data;
  }
  builds.push({ dist, run, times: [] });
}

// Warm-up: V8 runs wasm on its baseline tier until TurboFan has compiled the hot functions.
const outputs = builds.map(({ run }) => {
  for (const start = performance.now(); performance.now() - start < 1000; ) run();
  return run();
});
for (let r = 0; r < rounds; ++r)
  for (const build of builds) {
    const start = performance.now();
    build.run();
    build.times.push(performance.now() - start);
  }

const problem = values.sdpa ? `causal SDPA [1, ${H}, ${L}, ${HEAD_DIM}]` : `MultiheadAttention forward, causal, L = ${L}, E = ${E}, H = ${H}`;
console.log(`${problem}, ${threads} thread(s), ${rounds} rounds in alternation`);
for (const { dist, times } of builds) {
  times.sort((a, b) => a - b);
  console.log(`  ${dist.padEnd(30)} min ${times[0].toFixed(1).padStart(8)} ms   median ${times[times.length >> 1].toFixed(1).padStart(8)} ms`);
}
let maxDiff = 0;
for (const output of outputs.slice(1))
  for (let i = 0; i < output.length; ++i) maxDiff = Math.max(maxDiff, Math.abs(output[i] - outputs[0][i]));
console.log(`  max |difference| between the builds' outputs: ${maxDiff.toExponential(1)}`);

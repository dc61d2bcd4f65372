// The one timing helper every peer uses (in the main thread and in the onnxruntime workers).

/**
 * Runs per shape: more for small L, at least 5, within a time budget per row. The warm-up lasts
 * `warmup` runs and at least `warmupMs`: V8 runs wasm in its baseline tier (Liftoff) until
 * TurboFan has compiled the hot functions in the background, which takes a wall-clock while (at
 * L = 128 ours took 14 ms a call for its first 20 calls, 9 after).
 */
export function planFor(L) {
  return {
    warmup: L <= 512 ? 2 : 1,
    warmupMs: 1000,
    minRuns: 5,
    maxRuns: L <= 128 ? 40 : L <= 512 ? 15 : 7,
    budgetMs: 2000,
  };
}

/** Times one call of `fn` (sync or async); returns [result, ms]. */
export async function timeOnce(fn) {
  const start = performance.now();
  const result = await fn();
  return [result, performance.now() - start];
}

/**
 * Warms up, then times `fn` until `minRuns` runs are done and either `maxRuns` or the budget is
 * reached. `firstRunMs` (the correctness run that came before) skips the warm-up of rows that take
 * seconds per run: that run already warmed them up.
 */
export async function measure(fn, plan, options) {
  const [summary] = await measureAlternating([fn], plan, options);
  return summary;
}

/**
 * measure() for several variants of one implementation at once, one run of each per round: on a
 * machine whose speed drifts from minute to minute (a shared VM), they are slowed alike, so their
 * ratios hold. (Peers in other threads are timed alone: onnxruntime's pool spins after each run,
 * and ours ran up to 30 % slower right after its runs.) The budget is per variant.
 */
export async function measureAlternating(fns, plan, { firstRunMs = 0 } = {}) {
  if (firstRunMs <= 2000) {
    const start = performance.now();
    for (let i = 0; i < plan.warmup || performance.now() - start < plan.warmupMs; ++i) for (const fn of fns) await fn();
  }
  const times = fns.map(() => []);
  const budgetMs = plan.budgetMs * fns.length;
  const start = performance.now();
  // A function that times itself (a child process's step, timed there) returns { ownMs }.
  while (times[0].length < plan.minRuns || (times[0].length < plan.maxRuns && performance.now() - start < budgetMs))
    for (const [i, fn] of fns.entries()) {
      const [result, ms] = await timeOnce(fn);
      times[i].push(result?.ownMs ?? ms);
    }
  return times.map(summarize);
}

/** min and median (the mean of the middle two for an even count) of run times in ms. */
export function summarize(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { min_ms: sorted[0], median_ms: median, runs: sorted.length };
}

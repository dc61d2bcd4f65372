// The one timing helper every peer uses (in the main thread and in the onnxruntime workers).

/** Runs per shape: more for small L, at least 5, within a time budget per row. */
export function planFor(L) {
  return {
    warmup: L <= 512 ? 2 : 1,
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
export async function measure(fn, plan, { firstRunMs = 0 } = {}) {
  const warmup = firstRunMs > 2000 ? 0 : plan.warmup;
  for (let i = 0; i < warmup; ++i) await fn();
  const times = [];
  const start = performance.now();
  while (times.length < plan.minRuns || (times.length < plan.maxRuns && performance.now() - start < plan.budgetMs))
    times.push((await timeOnce(fn))[1]);
  return summarize(times);
}

/** min and median (the mean of the middle two for an even count) of run times in ms. */
export function summarize(times) {
  const sorted = [...times].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { min_ms: sorted[0], median_ms: median, runs: sorted.length };
}

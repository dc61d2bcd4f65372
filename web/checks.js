// What the page shows and promises about a result's weights, shared by the worker (runner.js)
// and the page (heatmap-view.js, export-view.js): the average over heads, and the checks that
// masked weights are 0 and every other row sums to 1. No DOM.
import { maxPoolRow } from './grid.js';

/** Sentence b's mean over heads of weights [N, H, plane], as [plane]. */
export function headAverage(weights, b, H, plane) {
  const average = new Float32Array(plane);
  const first = b * H * plane;
  // Four planes a pass, each read in order: a quarter of the loads and stores of `average`.
  let h = 0;
  for (; h + 4 <= H; h += 4) {
    const p0 = first + h * plane;
    const p1 = p0 + plane;
    const p2 = p1 + plane;
    const p3 = p2 + plane;
    for (let k = 0; k < plane; k++) average[k] += weights[p0 + k] + weights[p1 + k] + weights[p2 + k] + weights[p3 + k];
  }
  for (; h < H; h++) {
    const p = first + h * plane;
    for (let k = 0; k < plane; k++) average[k] += weights[p + k];
  }
  for (let k = 0; k < plane; k++) average[k] /= H;
  return average;
}

/** The checks before any row is read: checkRows raises them. */
export const noFindings = () => ({ maxMaskedWeight: 0, maxRowSumError: 0, maxFullyMaskedOutput: 0, nonFinite: 0 });

/**
 * Checks the rows of one head's weights [rows, m] against their mask [rows, m] (1 = masked),
 * raising `checks`' maxima: the largest masked weight, the largest distance of a row's sum from 1
 * (from 0 when every key is masked), and the rows whose sum is NaN or infinite (nonFinite).
 */
export function checkRows(weights, masked, rows, m, checks) {
  for (let i = 0; i < rows; i++) {
    const row = i * m;
    let open = 0;
    let sum = 0;
    for (let j = row; j < row + m; j++) {
      const w = weights[j];
      sum += w;
      if (masked[j] === 1) {
        const a = w < 0 ? -w : w;
        if (a > checks.maxMaskedWeight) checks.maxMaskedWeight = a;
      } else {
        open++;
      }
    }
    endRow(sum, open, checks);
  }
}

/**
 * checkRows for causal rows, without a mask to build and read: row i of weights [rows, m] sees
 * keys 0 … first + i, the rest are masked. With `pool` ({ rowBin, columns, cols, out }, maxPool's
 * arguments), the visible weights of the pooled columns are max-pooled into `out` in the same pass:
 * at 2048 tokens a layer's weights are 134 M numbers, and reading them once, the masked half only
 * for its check, halves the time the page spends on them. Masked cells keep what `out` held.
 */
export function checkCausalRows(weights, rows, m, first, checks, pool = null) {
  const poolStart = pool ? pool.columns.first : 0, poolEnd = pool ? poolStart + pool.columns.bins.length : 0;
  for (let i = 0; i < rows; i++) {
    const row = i * m;
    const open = Math.min(m, first + i + 1);
    // Visible keys [0, open): [0, from) and [to, open) summed, [from, to) also pooled.
    const from = Math.min(poolStart, open), to = Math.max(from, Math.min(poolEnd, open));
    let sum = 0;
    for (let j = row; j < row + from; j++) sum += weights[j];
    if (to > from) sum += maxPoolRow(weights, row, from, to, poolStart, pool.columns.step ?? 1, pool.out, pool.rowBin[i] * pool.cols);
    for (let j = row + to; j < row + open; j++) sum += weights[j];
    // Masked keys hold zeros, which change neither the sum nor the largest masked weight: they are
    // only compared (no chain of additions), and summed once one is not 0 (or is NaN).
    let masked = row + open;
    while (masked < row + m && weights[masked] === 0) masked++;
    for (let j = masked; j < row + m; j++) {
      const w = weights[j];
      sum += w;
      const a = w < 0 ? -w : w;
      if (a > checks.maxMaskedWeight) checks.maxMaskedWeight = a;
    }
    endRow(sum, open, checks);
  }
}

// A row's sum against what it should be: 1, or 0 when every key is masked.
function endRow(sum, open, checks) {
  if (!Number.isFinite(sum)) checks.nonFinite++;
  const error = Math.abs(sum - (open === 0 ? 0 : 1));
  if (error > checks.maxRowSumError) checks.maxRowSumError = error;
}

/**
 * What the page promises, checked on a result of run() that holds every weight (the model's
 * pictures bring their checks with them): masked weights are 0, other rows sum to 1, fully masked
 * rows have zero weights and a zero output; nonFinite counts rows whose sum is NaN or infinite.
 */
export function checkResult({ weights, masked, outputMaxAbs, fullyMasked, N, H, n, m }) {
  const checks = noFindings();
  const plane = n * m;
  for (let b = 0; b < N; b++) {
    for (let h = 0; h < H; h++) {
      checkRows(weights.subarray((b * H + h) * plane, (b * H + h + 1) * plane), masked.subarray(b * plane, (b + 1) * plane), n, m, checks);
    }
  }
  for (const [b, i] of fullyMasked) checks.maxFullyMaskedOutput = Math.max(checks.maxFullyMaskedOutput, outputMaxAbs[b * n + i]);
  return checks;
}

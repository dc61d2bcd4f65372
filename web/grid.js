// Weights at lower resolution: which part of an [n, m] map a picture covers (a window, zoomed in)
// and how many tokens each of its cells stands for, and max-pooling into those cells. Pooling
// keeps the largest weight of each block, so a sharp peak (an induction head's stripe) survives at
// 2048 tokens. Masked weights are exactly 0 (the package's promise, checked by the page, or by the
// worker for the model's pictures), so the largest weight of a block is its largest visible one.
// No DOM: the worker pools too.

/** Cells a side of the worker's pictures at most; longer windows get cells of several tokens. */
export const MAX_GRID = 512;
/** The smallest window a zoom reaches, in tokens a side. */
export const MIN_WINDOW = 16;

/**
 * The picture of `window` ({ row, col, size } in tokens, or null for the whole map) of an [n, m]
 * map: { row, col, rowEnd, colEnd (the tokens covered), step (tokens a cell), rows, cols (cells) }.
 * The window is moved and shrunk to fit inside the map.
 */
export function gridOf(n, m, window = null, maxCells = MAX_GRID) {
  const size = window ? Math.max(1, Math.min(window.size, Math.max(n, m))) : Math.max(n, m);
  const clampStart = (start, length) => Math.max(0, Math.min(start, length - Math.min(size, length)));
  const row = window ? clampStart(window.row, n) : 0;
  const col = window ? clampStart(window.col, m) : 0;
  const rowEnd = Math.min(n, row + size);
  const colEnd = Math.min(m, col + size);
  const step = Math.max(1, Math.ceil(Math.max(rowEnd - row, colEnd - col) / maxCells));
  return { row, col, rowEnd, colEnd, step, rows: Math.ceil((rowEnd - row) / step), cols: Math.ceil((colEnd - col) / step) };
}

/** The first and last index of cell k over indices [start, end), `step` a cell. */
export const cellSpan = (start, end, step, k) => [start + k * step, Math.min(end, start + (k + 1) * step) - 1];

/** Whether a grid is the whole [n, m] map at one token a cell. */
export const isWhole = (grid, n, m) => grid.step === 1 && grid.row === 0 && grid.col === 0 && grid.rowEnd === n && grid.colEnd === m;

/** For indices first … first + count − 1 (none before `start`): the cell of each, cells `step` wide from `start`. */
export function binsOf(first, count, start, step) {
  return Int32Array.from({ length: count }, (_, k) => Math.floor((first + k - start) / step));
}

/** Cells of a picture `cells` wide from `count` indices, as evenly as they divide (count ≥ cells). */
export function evenBins(count, cells) {
  return Int32Array.from({ length: count }, (_, k) => Math.floor((k * cells) / count));
}

/** The columns [start, end) in cells `step` wide: { first: start, bins: the cell of each, step }. */
export function columnsOf(start, end, step) {
  return { first: start, bins: Int32Array.from({ length: Math.max(0, end - start) }, (_, k) => Math.floor(k / step)), step };
}

/**
 * out[rowBin[i] · cols + bins[k]] = max(itself, plane[i · m + first + k] · (rowScale?.[i] ?? 1))
 * for the [n, m] plane's columns first … first + bins.length − 1 (`columns`, as columnsOf gives).
 * `out` starts at 0 (or a previous chunk's maxima).
 */
export function maxPool(plane, n, m, rowBin, { first, bins, step = 1 }, cols, out, rowScale = null) {
  if (step > 1 && !rowScale) {
    maxPoolRuns(plane, n, m, rowBin, first, bins.length, step, cols, out);
    return;
  }
  for (let i = 0; i < n; i++) {
    const base = rowBin[i] * cols;
    const row = i * m + first;
    const scale = rowScale ? rowScale[i] : 1;
    // No branch but the comparison in here: a skipped-column test made this loop 1.5× slower.
    for (let k = 0; k < bins.length; k++) {
      const value = plane[row + k] * scale;
      const at = base + bins[k];
      if (value > out[at]) out[at] = value;
    }
  }
}

// maxPool over `length` columns `step` a cell (columnsOf's), unscaled: each cell's run of columns
// reduced to its maximum first, then one comparison with the cell (a quarter of the loads and
// stores at 4 tokens a cell). As maxPool, a NaN never lands in a cell.
function maxPoolRuns(plane, n, m, rowBin, first, length, step, cols, out) {
  for (let i = 0; i < n; i++) maxPoolRow(plane, i * m, first, first + length, first, step, out, rowBin[i] * cols);
}

/**
 * Columns [from, to) of the row that starts at plane[row], in cells `step` columns wide from column
 * `first` (columnsOf's), the first of the row's cells at out[base]: each cell's run reduced to its
 * maximum, then compared once with the cell (a NaN never lands) → the columns' sum, which
 * checks.js's checkCausalRows needs of the same pass.
 */
export function maxPoolRow(plane, row, from, to, first, step, out, base) {
  let sum = 0;
  let cell = base + Math.floor((from - first) / step);
  for (let start = from; start < to; cell++) {
    const end = Math.min(to, first + (cell - base + 1) * step);
    let max = out[cell];
    for (let j = row + start; j < row + end; j++) {
      const w = plane[j];
      sum += w;
      if (w > max) max = w;
    }
    out[cell] = max;
    start = end;
  }
  return sum;
}

/** out[cell] = 0 unless every cell of the [n, m] mask that falls in it is 1 (masked); out starts at 1. */
export function allPool(masked, n, m, rowBin, { first, bins }, cols, out) {
  for (let i = 0; i < n; i++) {
    const base = rowBin[i] * cols;
    const row = i * m + first;
    for (let k = 0; k < bins.length; k++) if (!masked[row + k]) out[base + bins[k]] = 0;
  }
}

/**
 * `count` planes [rows, cols] (laid out one after the other in `planes`) and the mask they share,
 * max-pooled to at most `size` cells a side, in arrays of their own: the small pictures of a
 * layer's heads the page draws while the next layers compute. → { weights, masked, rows, cols }
 */
export function pooledPlanes(planes, count, rows, cols, masked, size) {
  const [pr, pc] = [Math.min(rows, size), Math.min(cols, size)];
  if (pr === rows && pc === cols) return { weights: planes.slice(0, count * rows * cols), masked: masked.slice(), rows, cols };
  const rowBin = evenBins(rows, pr);
  const columns = { first: 0, bins: evenBins(cols, pc) };
  const weights = new Float32Array(count * pr * pc);
  for (let h = 0; h < count; h++) {
    maxPool(planes.subarray(h * rows * cols, (h + 1) * rows * cols), rows, cols, rowBin, columns, pc, weights.subarray(h * pr * pc, (h + 1) * pr * pc));
  }
  const pooledMask = new Uint8Array(pr * pc).fill(1);
  allPool(masked, rows, cols, rowBin, columns, pc, pooledMask);
  return { weights, masked: pooledMask, rows: pr, cols: pc };
}

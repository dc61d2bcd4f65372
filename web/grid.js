// Weights at lower resolution: which part of an [n, m] map a picture covers (a window, zoomed in)
// and how many tokens each of its cells stands for, and max-pooling into those cells. Pooling
// keeps the largest weight of each block, so a sharp peak (an induction head's stripe) survives at
// 2048 tokens. Masked weights are exactly 0 (the package's promise, checked by the page), so the
// largest weight of a block is its largest visible one. No DOM: the worker pools too.

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

/** Whether a grid is the whole [n, m] map at one token a cell. */
export const isWhole = (grid, n, m) => grid.step === 1 && grid.row === 0 && grid.col === 0 && grid.rowEnd === n && grid.colEnd === m;

/** For indices first … first + count − 1: the cell of each (−1 outside [start, end)), cells `step` wide. */
export function binsOf(first, count, start, end, step) {
  return Int32Array.from({ length: count }, (_, k) => {
    const index = first + k;
    return index >= start && index < end ? Math.floor((index - start) / step) : -1;
  });
}

/** Where the cells of indices [start, end), `step` a cell, begin, and where the last ends. */
export function edgesOf(start, end, step) {
  const cells = Math.ceil((end - start) / step);
  return Int32Array.from({ length: cells + 1 }, (_, c) => Math.min(end, start + c * step));
}

/** Cells of a picture `cells` wide from `count` indices, as evenly as they divide (count ≥ cells): bins and edges. */
export function evenBins(count, cells) {
  return Int32Array.from({ length: count }, (_, k) => Math.floor((k * cells) / count));
}

export function evenEdges(count, cells) {
  return Int32Array.from({ length: cells + 1 }, (_, c) => Math.ceil((c * count) / cells));
}

/**
 * out[rowBin[i] · cols + c] = max(itself, plane[i · m + j] · (rowScale?.[i] ?? 1)) over the [n, m]
 * plane's columns colEdges[c] ≤ j < colEdges[c + 1] (the first colEdges.length − 1 of `out`'s
 * `cols` cells a row); rows whose bin is −1 are skipped. `out` starts at 0 (or a previous chunk's
 * maxima).
 */
export function maxPool(plane, n, m, rowBin, colEdges, cols, out, rowScale = null) {
  for (let i = 0; i < n; i++) {
    if (rowBin[i] < 0) continue;
    const base = rowBin[i] * cols;
    const row = i * m;
    const scale = rowScale ? rowScale[i] : 1;
    for (let c = 0; c < colEdges.length - 1; c++) {
      let max = 0;
      for (let at = row + colEdges[c], last = row + colEdges[c + 1]; at < last; at++) if (plane[at] > max) max = plane[at];
      if (max * scale > out[base + c]) out[base + c] = max * scale;
    }
  }
}

/** out[cell] = 0 unless every cell of the [n, m] mask that falls in it is 1 (masked); out starts at 1. */
export function allPool(masked, n, m, rowBin, colEdges, out) {
  const cols = colEdges.length - 1;
  for (let i = 0; i < n; i++) {
    if (rowBin[i] < 0) continue;
    const base = rowBin[i] * cols;
    for (let c = 0; c < cols; c++) {
      if (!out[base + c]) continue;
      for (let at = i * m + colEdges[c], last = i * m + colEdges[c + 1]; at < last; at++) {
        if (!masked[at]) {
          out[base + c] = 0;
          break;
        }
      }
    }
  }
}

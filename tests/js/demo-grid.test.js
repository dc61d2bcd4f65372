// The demo's max-pooling (web/grid.js) and checks (web/checks.js): columns a whole number of tokens
// a cell take a faster path (a partial last cell and earlier chunks' maxima included), and causal
// rows are checked without a mask; each must give what the general one gives.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { checkCausalRows, checkRows, noFindings } from '../../web/checks.js';
import { binsOf, columnsOf, maxPool } from '../../web/grid.js';
import { rng } from './random.js';

test('max-pooling runs of columns equals pooling column by column', () => {
  const random = rng(3);
  for (const [n, m, first, end, step] of [[7, 30, 2, 29, 4], [5, 16, 0, 16, 2], [9, 21, 3, 20, 3]]) {
    const plane = Float32Array.from({ length: n * m }, () => random());
    const rowBin = binsOf(0, n, 0, step);
    const columns = columnsOf(first, end, step);
    const cols = Math.ceil((end - first) / step);
    const start = Float32Array.from({ length: Math.ceil(n / step) * cols }, () => 0.5 * random()); // an earlier chunk's maxima
    const runs = start.slice();
    maxPool(plane, n, m, rowBin, columns, cols, runs);
    const general = start.slice();
    maxPool(plane, n, m, rowBin, { first: columns.first, bins: columns.bins }, cols, general);
    assert.deepEqual(runs, general);
    // And by definition: each cell the largest of its tokens' weights and what it held.
    for (let cell = 0; cell < general.length; cell++) {
      const [r, c] = [Math.floor(cell / cols), cell % cols];
      let max = start[cell];
      for (let i = r * step; i < Math.min(n, (r + 1) * step); i++)
        for (let j = first + c * step; j < Math.min(end, first + (c + 1) * step); j++) max = Math.max(max, plane[i * m + j]);
      assert.equal(general[cell], max);
    }
  }
});

test('checking causal rows without a mask finds what checkRows finds with one', () => {
  const random = rng(4);
  const [rows, m, first] = [6, 12, 5];
  const weights = Float32Array.from({ length: rows * m }, () => random());
  const masked = new Uint8Array(rows * m);
  for (let i = 0; i < rows; i++) masked.fill(1, i * m + first + i + 1, (i + 1) * m);
  masked.forEach((bit, k) => { if (bit) weights[k] = 0; });
  weights[2 * m + 11] = -0.75; // a masked weight after masked zeros, and a row whose sum is off
  weights[3 * m + 10] = -0; // a negative zero among masked zeros
  weights[4 * m] = NaN;
  weights[5 * m + 11] = NaN; // a masked NaN after masked zeros
  const withMask = noFindings();
  checkRows(weights, masked, rows, m, withMask);
  const causal = noFindings();
  checkCausalRows(weights, rows, m, first, causal);
  assert.deepEqual(causal, withMask);
  assert.equal(causal.maxMaskedWeight, 0.75);
  assert.equal(causal.nonFinite, 2);
});

test('checking causal rows while pooling them gives maxPool\'s cells and the same findings', () => {
  const random = rng(5);
  // Rows 4 … 12 of a 17-key causal map, pooled 3 tokens a cell from column 2 (a zoomed window) up
  // to column 14, over an earlier chunk's maxima; one masked weight off zero (past the pooled
  // columns), one visible NaN.
  const [rows, m, first, step, colStart, colEnd] = [9, 17, 4, 3, 2, 14];
  const weights = Float32Array.from({ length: rows * m }, () => random());
  for (let i = 0; i < rows; i++) weights.fill(0, i * m + first + i + 1, (i + 1) * m);
  weights[1 * m + 15] = 0.25;
  weights[3 * m + 5] = NaN;
  const rowBin = binsOf(first, rows, first, step);
  const columns = columnsOf(colStart, colEnd, step);
  const cols = Math.ceil((colEnd - colStart) / step);
  const start = Float32Array.from({ length: Math.ceil(rows / step) * cols }, () => 0.5 * random());
  const expected = start.slice();
  maxPool(weights, rows, m, rowBin, { first: columns.first, bins: columns.bins }, cols, expected);
  const plain = noFindings();
  checkCausalRows(weights, rows, m, first, plain);
  const pooled = start.slice();
  const both = noFindings();
  checkCausalRows(weights, rows, m, first, both, { rowBin, columns, cols, out: pooled });
  assert.deepEqual(both, plain);
  assert.equal(both.maxMaskedWeight, 0.25);
  assert.equal(both.nonFinite, 1);
  assert.deepEqual(pooled, expected);
});

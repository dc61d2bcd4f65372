// The viewer's head scores (web/models/scores.js) on attention patterns whose scores are known:
// a head that reads the previous token, an induction head on a repeated sequence, a uniform head,
// a text without repeats; and the standard repeated random sequence.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { headScores, repeatedRandomIds } from '../../web/models/scores.js';

// [heads, t, t] weights of heads given as functions (i → the key that query i attends to fully).
function pattern(t, ...heads) {
  const weights = new Float32Array(heads.length * t * t);
  heads.forEach((key, h) => {
    for (let i = 0; i < t; i++) weights[(h * t + i) * t + key(i)] = 1;
  });
  return weights;
}

test('a previous-token head scores 1 and an induction head 1; a self-attending head 0', () => {
  // "a b c d a b c d": query i ≥ 5 has its previous token at i − 5, which was followed by i − 4.
  const ids = [1, 2, 3, 4, 1, 2, 3, 4];
  const t = ids.length;
  const previous = (i) => Math.max(0, i - 1);
  const induction = (i) => (i >= 5 ? i - 4 : i);
  const self = (i) => i;
  const [[prev, ind, own]] = headScores([pattern(t, previous, induction, self)], 3, ids);
  assert.equal(prev.previousToken, 1);
  assert.equal(ind.induction, 1);
  assert.equal(own.previousToken, 0);
  assert.equal(own.induction, 0);
  // Here the earlier continuation is never the previous token itself.
  assert.equal(ind.previousToken, 0);
});

test('a uniform causal head scores 1/i on average; a text that repeats nothing has no induction score', () => {
  const ids = [5, 6, 7, 8];
  const t = ids.length;
  const weights = new Float32Array(t * t);
  for (let i = 0; i < t; i++) for (let j = 0; j <= i; j++) weights[i * t + j] = 1 / (i + 1);
  const [[uniform]] = headScores([weights], 1, ids);
  assert.ok(Math.abs(uniform.previousToken - (1 / 2 + 1 / 3 + 1 / 4) / 3) < 1e-7);
  assert.equal(uniform.induction, null);
});

test('the standard sequence is random tokens from the range given, repeated once, the same every time', () => {
  const ids = repeatedRandomIds(10, 90, 50);
  assert.equal(ids.length, 100);
  assert.deepEqual(ids.subarray(0, 50), ids.subarray(50));
  assert.ok(ids.every((id) => id >= 10 && id < 90));
  assert.ok(new Set(ids).size > 30, 'spread over the range');
  assert.deepEqual(repeatedRandomIds(10, 90, 50), ids);
});

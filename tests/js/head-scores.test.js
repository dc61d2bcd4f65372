// The viewer's head scores (web/scores.js) on attention patterns whose scores are known:
// a head that reads the previous token, an induction head on a repeated sequence, a uniform head,
// a text without repeats; and the standard repeated random sequence.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { HeadScorer, MIN_SPAN, headScores, inductionTargets, repeatTargets, repeatedRandomIds } from '../../web/scores.js';

// [heads, t, t] weights of heads given as functions (i → the key that query i attends to fully).
function pattern(t, ...heads) {
  const weights = new Float32Array(heads.length * t * t);
  heads.forEach((key, h) => {
    for (let i = 0; i < t; i++) weights[(h * t + i) * t + key(i)] = 1;
  });
  return weights;
}

test('a previous-token head scores 1 and an induction head 1; a head reading the earlier copy of its own token 0', () => {
  // "a b c d a b c d": query i ≥ 4 saw its token at i − 4, which was followed by i − 3; the
  // repeat is a span of 3 tokens from query 6 on.
  const ids = [1, 2, 3, 4, 1, 2, 3, 4];
  const t = ids.length;
  assert.equal(MIN_SPAN, 3);
  assert.deepEqual(Array.from(inductionTargets(ids)), [-1, -1, -1, -1, -1, -1, 3, 4]);
  const previous = (i) => Math.max(0, i - 1);
  const induction = (i) => (i >= 4 ? i - 3 : i);
  const duplicate = (i) => (i >= 4 ? i - 4 : i); // the earlier copy itself: not an induction head
  const [[prev, ind, dup]] = headScores([pattern(t, previous, induction, duplicate)], 3, inductionTargets(ids));
  assert.equal(prev.previousToken, 1);
  assert.equal(ind.induction, 1);
  assert.equal(dup.previousToken, 0);
  assert.equal(dup.induction, 0);
  // Here the earlier continuation is never the previous token itself.
  assert.equal(ind.previousToken, 0);
  // On a repeated sequence every second-half query has a target, one period back plus one
  // (TransformerLens' diagonal): the induction head scores 1 there too.
  assert.deepEqual(Array.from(repeatTargets(t, 4)), [-1, -1, -1, -1, 1, 2, 3, 4]);
  assert.equal(headScores([pattern(t, induction)], 1, repeatTargets(t, 4))[0][0].induction, 1);
});

test('a query follows the earlier occurrence that repeats the longest span; shorter repeats have no target', () => {
  // "1 2 3 4 7 3 4 1 2 3 4": the last 4 repeats the span "1 2 3 4" (at 3), not "3 4" (at 6),
  // and reads what followed it (4); "3 4" alone (query 6) is too short to count.
  assert.deepEqual(Array.from(inductionTargets([1, 2, 3, 4, 7, 3, 4, 1, 2, 3, 4])), [-1, -1, -1, -1, -1, -1, -1, -1, -1, 3, 4]);
  // Of equal spans, the latest: "5 5 5 5" has query 3 repeat "5 5 5" ending at 2.
  assert.deepEqual(Array.from(inductionTargets([5, 5, 5, 5])), [-1, -1, -1, 3]);
});

test('scores added in chunks of rows equal the scores of the whole plane', () => {
  const ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
  const t = ids.length;
  const plane = Float32Array.from({ length: t * t }, (_, k) => ((k * 7919) % 101) / 101);
  const whole = headScores([plane], 1, inductionTargets(ids));
  const scorer = new HeadScorer(1, 1, inductionTargets(ids));
  for (const [first, count] of [[7, 4], [2, 5], [0, 2]]) scorer.add(0, 0, plane.subarray(first * t, (first + count) * t), first, count, t);
  assert.deepEqual(scorer.scores(), whole);
});

test('a uniform causal head scores 1/i on average; a text that repeats nothing has no induction score', () => {
  const ids = [5, 6, 7, 8];
  const t = ids.length;
  const weights = new Float32Array(t * t);
  for (let i = 0; i < t; i++) for (let j = 0; j <= i; j++) weights[i * t + j] = 1 / (i + 1);
  const [[uniform]] = headScores([weights], 1, inductionTargets(ids));
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

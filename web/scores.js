// What each head does, in two numbers (Olsson et al., 2022, "In-context learning and induction
// heads"): the previous-token score, the mean weight a query puts on the token just before it,
// and the induction score, the mean weight a query whose token appeared earlier puts on the token
// that followed that earlier occurrence (where a copy of the earlier continuation comes from;
// TransformerLens' induction score on a repeated sequence). Both are measured on the user's text
// (the spans it repeats: inductionTargets) and on a standard sequence, random tokens repeated once
// (repeatTargets: every second-half query has its earlier occurrence one period back).
// No DOM.
import { mulberry32 } from './embeddings.js';

/** A repeat counts from this many tokens: shorter ones (a letter pair, "of the") recur by chance. */
export const MIN_SPAN = 3;

/**
 * For each query of `ids`, the key an induction head would read: the token after the earlier
 * occurrence that repeats the longest span ending at the query (the latest of equals), when that
 * span is at least MIN_SPAN tokens long; else −1. Dynamic programming over the lengths of the
 * spans that end at each pair of positions: O(t²) time, O(t) memory.
 */
export function inductionTargets(ids) {
  const t = ids.length;
  const target = new Int32Array(t).fill(-1);
  let previous = new Int32Array(t); // previous[j]: the span ending at (i − 1, j)
  let current = new Int32Array(t);
  for (let i = 0; i < t; i++) {
    let best = 0;
    for (let j = 0; j < i; j++) {
      current[j] = ids[j] === ids[i] ? (j > 0 ? previous[j - 1] : 0) + 1 : 0;
      if (current[j] >= best) {
        best = current[j];
        if (best >= MIN_SPAN) target[i] = j + 1;
      }
    }
    [previous, current] = [current, previous];
  }
  return target;
}

/** A sequence of `t` tokens that repeats after `period` (random within it): the key after the query's token one period back. */
export const repeatTargets = (t, period) => Int32Array.from({ length: t }, (_, i) => (i >= period ? i - period + 1 : -1));

/**
 * Each head's scores, from rows of its weights as they are computed (a long text comes in chunks
 * of rows): add() a head's rows, then scores() → per layer, per head, { previousToken, induction }
 * (induction null when no query has a target, previousToken null for a single token).
 */
export class HeadScorer {
  constructor(layers, heads, targets) {
    this.heads = heads;
    this.targets = targets;
    this.previous = new Float64Array(layers * heads);
    this.induction = new Float64Array(layers * heads);
  }

  /** Rows first … first + count − 1 of `layer`, `head`: `plane` [count, m]. */
  add(layer, head, plane, first, count, m) {
    let previous = 0, induction = 0;
    for (let r = 0; r < count; r++) {
      const i = first + r;
      if (i > 0) previous += plane[r * m + i - 1];
      if (this.targets[i] >= 0) induction += plane[r * m + this.targets[i]];
    }
    this.previous[layer * this.heads + head] += previous;
    this.induction[layer * this.heads + head] += induction;
  }

  scores() {
    const t = this.targets.length;
    const repeats = this.targets.filter((k) => k >= 0).length;
    return Array.from({ length: this.previous.length / this.heads }, (_, layer) => Array.from({ length: this.heads }, (_, head) => ({
      previousToken: t > 1 ? this.previous[layer * this.heads + head] / (t - 1) : null,
      induction: repeats ? this.induction[layer * this.heads + head] / repeats : null,
    })));
  }
}

/** attentions: per layer [heads, t, t] weights → per layer, per head, { previousToken, induction }. */
export function headScores(attentions, heads, targets) {
  const t = targets.length;
  const scorer = new HeadScorer(attentions.length, heads, targets);
  attentions.forEach((layer, l) => {
    for (let h = 0; h < heads; h++) scorer.add(l, h, layer.subarray(h * t * t, (h + 1) * t * t), 0, t, t);
  });
  return scorer.scores();
}

/**
 * The standard sequence: `length` token ids drawn from [first, end) (a tokenizer's ordinary tokens)
 * by a fixed generator, then the same again: 2 · length ids.
 */
export function repeatedRandomIds(first, end, length, seed = 1) {
  const next = mulberry32(seed);
  const half = Int32Array.from({ length }, () => first + Math.floor(next() * (end - first)));
  const ids = new Int32Array(2 * length);
  ids.set(half);
  ids.set(half, length);
  return ids;
}

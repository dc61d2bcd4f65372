// What each head does, in two numbers (Olsson et al., 2022, "In-context learning and induction
// heads"): the previous-token score, the mean weight a query puts on the token just before it,
// and the induction score, the mean weight a query whose previous token appeared earlier puts on
// the token that followed that earlier occurrence (where a copy of the earlier continuation would
// come from). Both are measured on the user's text (its own repeated spans) and on a standard
// sequence: random tokens repeated once, where every second-half query has such an occurrence.
// No DOM.
import { mulberry32 } from '../embeddings.js';

/**
 * attentions: per layer [heads, t, t] weights over token ids `ids` → per layer, per head,
 * { previousToken, induction } (induction null when no token of `ids` repeats one before it).
 */
export function headScores(attentions, heads, ids) {
  const t = ids.length;
  // For each query i, the key after the latest earlier occurrence of token i − 1 (or −1).
  const target = new Int32Array(t).fill(-1);
  const last = new Map();
  for (let i = 1; i < t; i++) {
    const earlier = last.get(ids[i - 1]);
    if (earlier !== undefined) target[i] = earlier + 1;
    last.set(ids[i - 1], i - 1);
  }
  const repeats = target.filter((k) => k >= 0).length;
  return attentions.map((layer) =>
    Array.from({ length: heads }, (_, head) => {
      const row = (i) => (head * t + i) * t;
      let previous = 0, induction = 0;
      for (let i = 1; i < t; i++) {
        previous += layer[row(i) + i - 1];
        if (target[i] >= 0) induction += layer[row(i) + target[i]];
      }
      return { previousToken: t > 1 ? previous / (t - 1) : null, induction: repeats ? induction / repeats : null };
    }),
  );
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

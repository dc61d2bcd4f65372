// Deterministic toy token embeddings for the demo: the same words give the same vectors in every
// browser, in the worker and in Node (the browser tests recompute attention from them). No DOM here.
//
// embedding(token, position) = hashVector(token) + 0.5 * sinusoid(position)
// where hashVector draws d uniform values in [-1, 1) from a PRNG seeded by a hash of the token
// (never Math.random), and sinusoid is the positional encoding of "Attention Is All You Need":
// PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)).

export const EXAMPLE_TEXT = 'The cat sat on the mat.\nA dog barked!';
/** The trained model's first text: a verse twice, so that its induction head has a copy to follow. */
export const VERSE_TEXT = 'In the beginning God created the heaven and the earth.\nIn the beginning God created the heaven and the earth.';
export const EMBED_DIM = 16;
/** Tokens per sentence at most; also the relative module's P (it needs n <= P). */
export const MAX_TOKENS = 512;
/** Characters the trained model reads at most (its pictures are downsampled: see grid.js). */
export const MODEL_MAX_TOKENS = 2048;
/** Tokens of your own model the viewer reads at most (a longer text is cut, with a note). */
export const OPENED_MAX_TOKENS = 2048;
export const MAX_SENTENCES = 2;
export const PAD = '<pad>';

const POSITION_WEIGHT = 0.5;

// A word is a run of letters, digits and marks, with inner apostrophes ("don't"); every other
// visible character is a token of its own (punctuation, symbols).
const TOKEN = /[\p{L}\p{N}\p{M}]+(?:['’][\p{L}\p{N}\p{M}]+)*|[^\s\p{L}\p{N}\p{M}]/gu;

/** Lower-cased words and punctuation marks; at most MAX_TOKENS of them. */
export function tokenize(text) {
  return (text.toLowerCase().match(TOKEN) ?? []).slice(0, MAX_TOKENS);
}

/** The non-empty lines of `text` (at most MAX_SENTENCES), each tokenized. */
export function sentencesOf(text) {
  return text.split(/\r?\n/u).map(tokenize).filter((tokens) => tokens.length > 0).slice(0, MAX_SENTENCES);
}

/**
 * Repeats each sentence so that the longest has `count` tokens (at most `max`); the others grow in
 * proportion, so their padding stays visible. Used to reach long sequences from a short text.
 */
export function lengthen(sentences, count, max = MAX_TOKENS) {
  const longest = Math.max(...sentences.map((s) => s.length));
  return sentences.map((tokens) => {
    const target = Math.min(max, Math.max(1, Math.round((tokens.length * count) / longest)));
    return Array.from({ length: target }, (_, i) => tokens[i % tokens.length]);
  });
}

/** Pads every sentence with PAD to the longest one's length. */
export function padBatch(sentences) {
  const L = Math.max(...sentences.map((s) => s.length));
  return sentences.map((tokens) => [...tokens, ...Array(L - tokens.length).fill(PAD)]);
}

/** 32-bit FNV-1a over the UTF-16 code units of `text`. */
export function hashString(text) {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** mulberry32: a tiny seeded PRNG with uniform output in [0, 1). */
export function mulberry32(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Both parts of an embedding are fixed, and the page asks for the same tokens and positions on
// every update: they are computed once (in float64, as the formula gives them) and then added.
const tokenVectors = new Map(); // `${d} ${token}` -> Float64Array [d]: the token's 2·uniform − 1
const TOKEN_VECTORS_KEPT = 4096;
const positionTables = new Map(); // d -> Float64Array [positions, d]: POSITION_WEIGHT · sinusoid

function tokenVector(token, d) {
  const key = `${d} ${token}`;
  let vector = tokenVectors.get(key);
  if (!vector) {
    if (tokenVectors.size >= TOKEN_VECTORS_KEPT) tokenVectors.clear();
    const random = mulberry32(hashString(token));
    vector = Float64Array.from({ length: d }, () => 2 * random() - 1);
    tokenVectors.set(key, vector);
  }
  return vector;
}

function positionTable(d, n) {
  let table = positionTables.get(d);
  if (!table || table.length < n * d) {
    const positions = Math.max(n, MAX_TOKENS);
    const frequencies = Float64Array.from({ length: d }, (_, k) => 1 / 10000 ** ((k - (k % 2)) / d));
    table = new Float64Array(positions * d);
    for (let p = 0; p < positions; p++) {
      for (let k = 0; k < d; k++) {
        const angle = p * frequencies[k];
        table[p * d + k] = POSITION_WEIGHT * (k % 2 === 0 ? Math.sin(angle) : Math.cos(angle));
      }
    }
    positionTables.set(d, table);
  }
  return table;
}

/**
 * Embeds `tokens` as a tensor [n, d] (row i is token i at position i), or writes row i at
 * `out[offset + i * stride ...]` when `out` is given (to fill a batch in its layout directly).
 * @param {string[]} tokens
 * @param {number} [d]
 * @returns {{ data: Float32Array, shape: [number, number] }}
 */
export function embed(tokens, d = EMBED_DIM, out = null, offset = 0, stride = d) {
  const n = tokens.length;
  const data = out ?? new Float32Array(n * d);
  const positions = positionTable(d, n);
  tokens.forEach((token, position) => {
    const vector = tokenVector(token, d);
    const row = offset + position * stride;
    for (let k = 0; k < d; k++) data[row + k] = vector[k] + positions[position * d + k];
  });
  return { data, shape: [n, d] };
}

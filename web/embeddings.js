// Deterministic toy token embeddings for the demo: the same words give the same vectors in every
// browser and in Node (the browser test recomputes the attention from them). No DOM here.
//
// embedding(token, position) = hashVector(token) + 0.5 * sinusoid(position)
// where hashVector draws d uniform values in [-1, 1) from a PRNG seeded by a hash of the token
// (never Math.random), and sinusoid is the positional encoding of "Attention Is All You Need":
// PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)).

export const EXAMPLE_SENTENCE = 'the cat sat on the mat';
export const EMBED_DIM = 16;
export const MAX_TOKENS = 32;

const POSITION_WEIGHT = 0.5;

/** Lower-cased words split on whitespace; at most MAX_TOKENS of them. */
export function tokenize(text) {
  return text.trim().toLowerCase().split(/\s+/u).filter(Boolean).slice(0, MAX_TOKENS);
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
function mulberry32(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Embeds `tokens` as a tensor [n, d] (row i is token i at position i).
 * @param {string[]} tokens
 * @param {number} [d]
 * @returns {{ data: Float32Array, shape: [number, number] }}
 */
export function embed(tokens, d = EMBED_DIM) {
  const n = tokens.length;
  const data = new Float32Array(n * d);
  tokens.forEach((token, position) => {
    const random = mulberry32(hashString(token));
    for (let k = 0; k < d; k++) {
      const frequency = 1 / 10000 ** ((k - (k % 2)) / d);
      const angle = position * frequency;
      const sinusoid = k % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
      data[position * d + k] = 2 * random() - 1 + POSITION_WEIGHT * sinusoid;
    }
  });
  return { data, shape: [n, d] };
}

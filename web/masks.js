// The page's masks and their translation into each function's own convention. No DOM here.
//
// The page thinks in one polarity only: `masked = 1` means "this query may not attend to this key".
// A mask spec is { N, n, m, causal, lengths, custom }: a batch of N sentences padded to n = m
// tokens; `causal` hides keys j > i; `lengths` (or null) hides keys j >= lengths[b] (key padding);
// `custom` (Uint8Array [n * m], or null) hides the cells the user clicked, in every sentence.
//
// What each function wants (README, "Masks: which value means masked"):
//   scaledDotProductAttention attnMask   boolean 1 = MAY ATTEND        (+ isCausal)
//   MultiheadAttention attnMask          boolean 1 = NOT ALLOWED       (+ isCausal)
//   MultiheadAttention keyPaddingMask    boolean 1 = PADDING
//   AdditiveAttention attnMask           boolean 1 = MASKED OUT
//   RelativeMultiHeadAttention mask      boolean 0 = MASKED OUT, laid out [n, m, B]

export const MASK_KINDS = ['none', 'causal', 'padding', 'both'];

/** Which parts a mask kind turns on. */
export function maskParts(kind) {
  return { causal: kind === 'causal' || kind === 'both', padding: kind === 'padding' || kind === 'both' };
}

/**
 * The mask in force, in the page's polarity, for every sentence: Uint8Array [N, n, m] (1 = masked).
 * Columns from `m` to `mTotal` (MultiheadAttention's bias_k / zero-attention keys) are never masked.
 */
export function maskedCells({ N, n, m, causal, lengths, custom }, mTotal = m) {
  const masked = new Uint8Array(N * n * mTotal);
  for (let b = 0; b < N; b++) {
    const length = lengths ? lengths[b] : m;
    for (let i = 0; i < n; i++) {
      const row = (b * n + i) * mTotal;
      for (let j = 0; j < m; j++) {
        masked[row + j] = (causal && j > i) || j >= length || (custom !== null && custom[i * m + j] === 1) ? 1 : 0;
      }
    }
  }
  return masked;
}

/**
 * One boolean mask holding the requested parts, in the smallest shape that broadcasts to [N, n, m]:
 * [n or 1, m] when no part depends on the sentence, else [N, n or 1, m]. `hidden` is the value
 * written for a masked cell (1 - hidden for the others). Returns null when nothing is masked.
 */
export function booleanMask({ N, n, m, causal, lengths, custom }, hidden) {
  const perSentence = lengths !== null;
  const perQuery = causal || custom !== null;
  if (!perSentence && !perQuery) return null;
  const Nb = perSentence ? N : 1;
  const nb = perQuery ? n : 1;
  const data = new Uint8Array(Nb * nb * m).fill(1 - hidden);
  for (let b = 0; b < Nb; b++) {
    const length = perSentence ? lengths[b] : m;
    for (let i = 0; i < nb; i++) {
      const row = (b * nb + i) * m;
      for (let j = 0; j < m; j++) {
        if ((causal && j > i) || j >= length || (custom !== null && custom[i * m + j] === 1)) data[row + j] = hidden;
      }
    }
  }
  return { data, shape: perSentence ? [Nb, nb, m] : [nb, m] };
}

/** scaledDotProductAttention: causal as `isCausal`, the rest as attnMask with 1 = may attend. */
export function sdpaMasks(spec) {
  return { isCausal: spec.causal, attnMask: booleanMask({ ...spec, causal: false }, 0) };
}

/**
 * MultiheadAttention: causal as `isCausal`, padding as keyPaddingMask [N, m] (1 = padding; the
 * worker uses the package's own masks.keyPadding for it), the custom cells as a 2-D attnMask
 * [n, m] with 1 = not allowed.
 */
export function mhaMasks(spec) {
  const custom = spec.custom === null ? null : { data: Uint8Array.from(spec.custom), shape: [spec.n, spec.m] };
  return { isCausal: spec.causal, attnMask: custom };
}

/** AdditiveAttention: everything in one attnMask with 1 = masked out. */
export function additiveMask(spec) {
  return booleanMask(spec, 1);
}

/** RelativeMultiHeadAttention: mask [n or 1, m, B or 1] with 0 = masked out (1 = keep). */
export function relativeMask(spec) {
  const keep = booleanMask(spec, 0);
  if (keep === null) return null;
  const [Nb, nb, m] = keep.shape.length === 3 ? keep.shape : [1, ...keep.shape];
  // [Nb, nb, m] -> [nb, m, Nb]
  const data = new Uint8Array(keep.data.length);
  for (let b = 0; b < Nb; b++) {
    for (let i = 0; i < nb; i++) {
      for (let j = 0; j < m; j++) data[(i * m + j) * Nb + b] = keep.data[(b * nb + i) * m + j];
    }
  }
  return { data, shape: [nb, m, Nb] };
}

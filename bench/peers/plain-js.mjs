// plain-js: the computation written as straightforward loops over Float32Array, no tricks.
import { E, H, HEAD_DIM, parameters } from '../problem.mjs';

// y[L, outFeatures] = x[L, inFeatures] · W^T + b, W [outFeatures, inFeatures] as in PyTorch.
function linear(x, L, W, b, inFeatures, outFeatures, rowOffset = 0) {
  const y = new Float32Array(L * outFeatures);
  for (let i = 0; i < L; ++i) {
    for (let o = 0; o < outFeatures; ++o) {
      const w = (rowOffset + o) * inFeatures;
      let sum = b[rowOffset + o];
      for (let k = 0; k < inFeatures; ++k) sum += x[i * inFeatures + k] * W[w + k];
      y[i * outFeatures + o] = sum;
    }
  }
  return y;
}

/** out [L, E] of causal self-attention for x [L, E]. */
export function plainJsAttention(x, L) {
  const p = parameters();
  const q = linear(x, L, p.inProjWeight, p.inProjBias, E, E, 0);
  const k = linear(x, L, p.inProjWeight, p.inProjBias, E, E, E);
  const v = linear(x, L, p.inProjWeight, p.inProjBias, E, E, 2 * E);
  const scale = 1 / Math.sqrt(HEAD_DIM);
  const attended = new Float32Array(L * E);
  const scores = new Float32Array(L);
  for (let h = 0; h < H; ++h) {
    const off = h * HEAD_DIM;
    for (let i = 0; i < L; ++i) {
      let max = -Infinity;
      for (let j = 0; j <= i; ++j) {  // causal: keys j <= i
        let dot = 0;
        for (let d = 0; d < HEAD_DIM; ++d) dot += q[i * E + off + d] * k[j * E + off + d];
        scores[j] = dot * scale;
        if (scores[j] > max) max = scores[j];
      }
      let sum = 0;
      for (let j = 0; j <= i; ++j) {
        scores[j] = Math.exp(scores[j] - max);
        sum += scores[j];
      }
      for (let j = 0; j <= i; ++j) {
        const weight = scores[j] / sum;
        for (let d = 0; d < HEAD_DIM; ++d) attended[i * E + off + d] += weight * v[j * E + off + d];
      }
    }
  }
  return linear(attended, L, p.outProjWeight, p.outProjBias, E, E);
}

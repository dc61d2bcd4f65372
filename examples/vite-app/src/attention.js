// What both the page and the worker compute: a causal scaled dot-product attention whose answer is
// known in closed form, so the result can be checked anywhere.
import { init } from 'attention-wasm';

export async function run(where) {
  const started = performance.now();
  // Two threads where the page is cross-origin isolated; one otherwise (features.threads says).
  const attn = await init({ threads: 2 });
  const t = (shape, values) => ({ shape, data: Float32Array.from(values) });
  // d = 1, so the scale is 1. Query 0 sees key 0 only; query 1 scores keys [0, 1] as [0, 2].
  const { output, weights } = attn.scaledDotProductAttention(t([2, 1], [1, 2]), t([2, 1], [0, 1]), t([2, 1], [0, 10]), {
    isCausal: true,
    needWeights: true,
  });
  const e2 = Math.exp(2);
  return {
    where,
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    features: { ...attn.features },
    output: [...output.data],
    weights: [...weights.data],
    expected: { output: [0, (10 * e2) / (1 + e2)], weights: [1, 0, 1 / (1 + e2), e2 / (1 + e2)] },
    ms: Math.round(performance.now() - started),
  };
}

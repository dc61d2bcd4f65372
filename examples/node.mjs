// attention-wasm in Node: scaled dot-product attention, a MultiheadAttention loaded from a
// state_dict, the mask helpers, memory stats and errors.
//
//   node examples/node.mjs            # a readable report
//   node examples/node.mjs --json     # the same figures as JSON (tests/js/node-example.test.js)
//
// Inside this repository 'attention-wasm' resolves to the package itself (dist/); elsewhere,
// `npm install attention-wasm` first.
import { AttentionError, init } from 'attention-wasm';

const json = process.argv.includes('--json');
const log = json ? () => {} : console.log;
const tensor = (shape, values) => ({ shape, data: Float32Array.from(values) });

// threads > 1 takes the pthreads build (Node always has SharedArrayBuffer).
const attn = await init({ threads: 2 });
log('features', attn.features);

// 1. SDPA with a closed-form answer. d = 1, so the scale is 1; causal: query 0 sees key 0 only,
// query 1 scores keys [0, 1] as [0, 2], so its weights are [1, e²] / (1 + e²).
const query = tensor([2, 1], [1, 2]);
const key = tensor([2, 1], [0, 1]);
const value = tensor([2, 1], [0, 10]);
const sdpa = attn.scaledDotProductAttention(query, key, value, { isCausal: true, needWeights: true });
log('SDPA output', [...sdpa.output.data], 'weights', [...sdpa.weights.data]);

// The same with a boolean mask. SDPA's polarity is PyTorch's: 1 = may attend.
const mayAttend = { shape: [2, 2], data: Uint8Array.from([1, 0, 1, 1]) };
const masked = attn.scaledDotProductAttention(query, key, value, { attnMask: mayAttend, needWeights: true });
log('SDPA with attnMask (1 = may attend)', [...masked.weights.data]);

// 2. nn.MultiheadAttention(8, 2) with deterministic weights, self-attention over (L=3, N=2, E=8),
// padding the last key of the second sequence. Its masks use the opposite polarity: 1 = padding.
const E = 8;
const ramp = (n, scale) => Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * scale);
const mha = new attn.MultiheadAttention(E, 2);
mha.loadStateDict({
  in_proj_weight: tensor([3 * E, E], ramp(3 * E * E, 0.3)),
  in_proj_bias: tensor([3 * E], ramp(3 * E, 0.1)),
  'out_proj.weight': tensor([E, E], ramp(E * E, 0.2)),
  'out_proj.bias': tensor([E], ramp(E, 0.05)),
});
const x = tensor([3, 2, E], ramp(3 * 2 * E, 1));
const keyPaddingMask = attn.masks.keyPadding([3, 2], 3); // [N, m], 1 = padding
const mhaResult = mha.forward(x, x, x, { keyPaddingMask });
log('MHA output', mhaResult.output.shape, 'weights', mhaResult.weights.shape);
log('stats with the module alive', attn.stats());
mha.dispose(); // frees its wasm memory now (a FinalizationRegistry would, later)

// 3. Errors name the argument, the expected and the given shape.
let error;
try {
  attn.scaledDotProductAttention(query, tensor([2, 2], [0, 0, 0, 0]), value);
} catch (e) {
  if (!(e instanceof AttentionError)) throw e;
  error = { argument: e.argument, code: e.code, message: e.message };
  log('AttentionError', error);
}

const stats = attn.stats();
log('stats after dispose', stats);

if (json) {
  console.log(JSON.stringify({
    features: attn.features,
    sdpa: { output: [...sdpa.output.data], weights: [...sdpa.weights.data] },
    masked: [...masked.weights.data],
    mha: {
      outputShape: mhaResult.output.shape,
      weightsShape: mhaResult.weights.shape,
      // Weights on the padded key of sequence 1: all zero.
      paddedKeyWeights: [0, 1, 2].map((i) => mhaResult.weights.data[(1 * 3 + i) * 3 + 2]),
      finite: mhaResult.output.data.every(Number.isFinite),
    },
    error,
    stats,
  }));
}

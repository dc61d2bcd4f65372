// Seeded module parameters for the demo: the same seed gives the same state_dict() everywhere.
// No DOM here. Each entry has PyTorch's name and shape, so loadStateDict() takes it as it would a
// real checkpoint's.
//
// Every entry draws from its own PRNG, seeded by (seed XOR hash(name)): changing one module's
// size does not reshuffle the others. Projections are uniform in ±GAIN·bound, where bound is
// PyTorch's default for that entry (xavier for in_proj_weight, 1/sqrt(fan_in) for nn.Linear);
// GAIN > 1 makes untrained heads less uniform, so their patterns are visible. Biases PyTorch sets
// to zero stay zero; Transformer-XL's positional tables (zeros in the labml.ai code, learned in a
// real model) are uniform in [-1, 1).
import { hashString, mulberry32 } from './embeddings.js';

export const GAIN = 3;

function uniform(name, shape, bound, seed) {
  const random = mulberry32((seed ^ hashString(name)) >>> 0);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let k = 0; k < data.length; k++) data[k] = (2 * random() - 1) * bound;
  return { data, shape };
}

const zeros = (shape) => ({ data: new Float32Array(shape.reduce((a, b) => a * b, 1)), shape });

/** torch.nn.MultiheadAttention(embedDim, numHeads) with bias, kdim = vdim = embedDim. */
export function multiheadParameters({ embedDim: E }, seed) {
  return {
    in_proj_weight: uniform('in_proj_weight', [3 * E, E], GAIN * Math.sqrt(6 / (E + 3 * E)), seed),
    in_proj_bias: zeros([3 * E]),
    'out_proj.weight': uniform('out_proj.weight', [E, E], 1 / Math.sqrt(E), seed),
    'out_proj.bias': zeros([E]),
  };
}

/** AdditiveAttention(querySize = keySize = d, hiddenSize). */
export function additiveParameters({ d, hiddenSize: h }, seed) {
  return {
    'W_q.weight': uniform('W_q.weight', [h, d], GAIN / Math.sqrt(d), seed),
    'W_k.weight': uniform('W_k.weight', [h, d], GAIN / Math.sqrt(d), seed),
    'W_v.weight': uniform('W_v.weight', [1, h], GAIN / Math.sqrt(h), seed),
  };
}

/** RelativeMultiHeadAttention(heads, dModel, { P }). */
export function relativeParameters({ heads: H, dModel: E, P }, seed) {
  const dk = E / H;
  const linear = (name, out, bound) => uniform(name, [out, E], bound, seed);
  return {
    'query.linear.weight': linear('query.linear.weight', E, GAIN / Math.sqrt(E)),
    'key.linear.weight': linear('key.linear.weight', E, GAIN / Math.sqrt(E)),
    'value.linear.weight': linear('value.linear.weight', E, 1 / Math.sqrt(E)),
    'value.linear.bias': uniform('value.linear.bias', [E], 1 / Math.sqrt(E), seed),
    'output.weight': linear('output.weight', E, 1 / Math.sqrt(E)),
    'output.bias': uniform('output.bias', [E], 1 / Math.sqrt(E), seed),
    key_pos_embeddings: uniform('key_pos_embeddings', [2 * P, H, dk], 1, seed),
    key_pos_bias: uniform('key_pos_bias', [2 * P, H], 1, seed),
    query_pos_bias: uniform('query_pos_bias', [H, dk], 1, seed),
  };
}

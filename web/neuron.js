// The neuron view's numbers: one query of one head, written out step by step as the block
// computes it, so the page can show what the package fuses: for the trained model and an opened
// Hugging Face model (modelNeuron) and for the other kinds (scaled dot-product,
// MultiheadAttention, additive, Transformer-XL relative) with the page's seeded weights and toy
// embeddings (kindNeuron). No DOM.
import { embed, padBatch } from './embeddings.js';
import { maskedCells } from './masks.js';
import { additiveParameters, multiheadParameters, relativeParameters } from './parameters.js';

/**
 * rows [r, inner] · (rows first … first + out − 1 of w [·, inner])ᵀ, plus bias[first …] → [r, out]:
 * the package's Linear over those rows of the weight.
 */
function project(attn, rows, w, inner, first, out, bias = null) {
  const linear = new attn.Linear(inner, out, { bias: bias !== null });
  try {
    const weight = { data: w.subarray(first * inner, (first + out) * inner), shape: [out, inner] };
    linear.loadStateDict(bias ? { weight, bias: { data: bias.subarray(first, first + out), shape: [out] } } : { weight });
    return linear.forward({ data: rows, shape: [rows.length / inner, inner] }).data;
  } finally {
    linear.dispose();
  }
}

const dot = (a, b, bOffset, d) => {
  let sum = 0;
  for (let c = 0; c < d; c++) sum += a[c] * b[bOffset + c];
  return sum;
};

/**
 * Finishes the numbers every kind shares: the score terms summed and scaled, soft-capped when
 * `softcap` is given (c · tanh(s / c), Gemma 2), masked keys hidden, the softmax over the rest (all
 * zeros when every key is masked, as the package gives) and the weighted sum of the values.
 * → { q, keys, terms, scaled, capped (or null), masked, weights, values, output, describe }
 */
export function finishNeuron({ q, keys, terms, scale, softcap = null, masked, values, describe }) {
  const m = masked.length;
  const dv = values.length / m;
  const scaled = Float32Array.from({ length: m }, (_, j) => scale * terms.reduce((sum, term) => sum + term.values[j], 0));
  const capped = softcap === null ? null : scaled.map((s) => softcap * Math.tanh(s / softcap));
  const scores = capped ?? scaled;
  let max = -Infinity;
  for (let j = 0; j < m; j++) if (!masked[j]) max = Math.max(max, scores[j]);
  const weights = new Float32Array(m);
  let sum = 0;
  for (let j = 0; j < m; j++) if (!masked[j]) sum += weights[j] = Math.exp(scores[j] - max);
  const output = new Float32Array(dv);
  for (let j = 0; j < m; j++) {
    if (masked[j]) continue;
    weights[j] /= sum;
    for (let c = 0; c < dv; c++) output[c] += weights[j] * values[j * dv + c];
  }
  return { q, keys, terms, scaled, capped, masked, weights, values, output, describe };
}

/**
 * What q and k are in a model of `model.modelType`, for the neuron view's line.
 */
export function aboutParts({ modelType }) {
  if (modelType === 'gpt2') return 'positions learned (wpe), added to the input';
  if (modelType === 'bert') return 'bidirectional; positions learned, added to the input';
  return `q and k after ${['qwen3', 'gemma3_text', 'olmo2'].includes(modelType) ? 'QK-norm and ' : ''}RoPE`;
}

/**
 * A model's neuron view (the trained model's or an opened Hugging Face model's): head `head` of
 * layer `layer` for query `query`, from what the layer's attention reads, `parts` (the package's
 * model.project: q, k, v [1, heads or kvHeads, t, d], scale, softcap, window, causal), `about`
 * saying what q and k are. → finishNeuron's numbers (q and keys as the block scores them) and kvHead.
 */
export function modelNeuron(parts, layer, head, query, about) {
  const { scale, softcap, window, causal } = parts;
  const [, heads, t, d] = parts.query.shape;
  const kvHead = Math.floor(head / (heads / parts.key.shape[1])); // its key/value head
  const rows = (tensor, h) => tensor.data.subarray(h * t * d, (h + 1) * t * d);
  const q = rows(parts.query, head).slice(query * d, (query + 1) * d);
  const keys = rows(parts.key, kvHead).slice();
  const values = rows(parts.value, kvHead).slice();
  const dots = Float32Array.from({ length: t }, (_, j) => dot(q, keys, j * d, d));
  // HF's masks: causal (j ≤ query) and the sliding window (j > query − window).
  const masked = Uint8Array.from({ length: t }, (_, j) => ((causal && j > query) || (window !== null && j <= query - window) ? 1 : 0));
  const scaleText = Math.abs(scale * Math.sqrt(d) - 1) < 1e-6 ? `1/√${d}` : Number(scale.toPrecision(4));
  const group = heads === parts.key.shape[1] ? '' : ` (key/value head ${kvHead + 1})`;
  const extras = [window !== null ? `window ${window}` : '', softcap !== null ? `soft cap ${softcap}` : ''].filter(Boolean).join(', ');
  const describe = `layer ${layer + 1}, head ${head + 1}${group} · d = ${d}, scale ${scaleText}, ${about}${extras ? ` · ${extras}` : ''}`;
  return { ...finishNeuron({ q, keys, terms: [{ name: 'q·k', values: dots }], scale, softcap, masked, values, describe }), kvHead };
}

/**
 * attn: the package instance (its Linear projects); selection: { request (a compute request of
 * runner.js, seeded weights), sentence, head, query };
 * P: RelativeMultiHeadAttention's relative positions each side.
 */
export function kindNeuron(attn, { request, sentence, head, query }, P) {
  const { kind, config, seed } = request;
  if (request.fileId !== null) throw new Error('The neuron view reads the seeded weights; weights loaded from a file stay in the worker\'s module.');
  const tokens = padBatch(request.sentences);
  const L = tokens[0].length;
  const lengths = request.sentences.map((s) => s.length);
  const spec = { N: tokens.length, n: L, m: L, causal: request.causal, lengths: request.padding ? lengths : null, custom: request.custom };
  const masked = maskedCells(spec).slice((sentence * L + query) * L, (sentence * L + query + 1) * L);

  if (kind === 'sdpa') {
    const { d, softcap = null } = config;
    const x = embed(tokens[sentence], d).data;
    const q = x.slice(query * d, (query + 1) * d);
    const dots = Float32Array.from({ length: L }, (_, j) => dot(q, x, j * d, d));
    const cap = softcap === null ? '' : `, soft cap ${softcap}`;
    return finishNeuron({
      q, keys: x, terms: [{ name: 'q·k', values: dots }], scale: 1 / Math.sqrt(d), softcap, masked, values: x, describe: `d = ${d}, scale 1/√${d}${cap}; q = k = v = the embeddings`,
    });
  }
  if (kind === 'mha') {
    const { embedDim: E, numHeads: H } = config;
    const d = E / H;
    const sd = multiheadParameters(config, seed);
    const w = sd.in_proj_weight.data;
    const b = sd.in_proj_bias.data;
    const x = embed(tokens[sentence], E).data;
    const q = project(attn, x.subarray(query * E, (query + 1) * E), w, E, head * d, d, b);
    const keys = project(attn, x, w, E, E + head * d, d, b);
    const values = project(attn, x, w, E, 2 * E + head * d, d, b);
    const dots = Float32Array.from({ length: L }, (_, j) => dot(q, keys, j * d, d));
    return finishNeuron({ q, keys, terms: [{ name: 'q·k', values: dots }], scale: 1 / Math.sqrt(d), masked, values, describe: `head ${head + 1} of ${H} · d = ${d}, scale 1/√${d}` });
  }
  if (kind === 'additive') {
    const { d, hiddenSize: h } = config;
    const sd = additiveParameters(config, seed);
    const x = embed(tokens[sentence], d).data;
    const q = project(attn, x.subarray(query * d, (query + 1) * d), sd['W_q.weight'].data, d, 0, h);
    const keys = project(attn, x, sd['W_k.weight'].data, d, 0, h);
    const wv = sd['W_v.weight'].data;
    const scores = Float32Array.from({ length: L }, (_, j) => {
      let sum = 0;
      for (let c = 0; c < h; c++) sum += wv[c] * Math.tanh(q[c] + keys[j * h + c]);
      return sum;
    });
    return finishNeuron({ q, keys, terms: [{ name: 'w·tanh(Wq q + Wk k)', values: scores }], scale: 1, masked, values: x, describe: `hidden ${h}: q and k shown projected (W_q q, W_k k); no scale` });
  }
  if (kind === 'relative') {
    const { heads: H, dModel: E } = config;
    const d = E / H;
    const sd = relativeParameters({ ...config, P }, seed);
    const x = embed(tokens[sentence], E).data;
    const q = project(attn, x.subarray(query * E, (query + 1) * E), sd['query.linear.weight'].data, E, head * d, d);
    const keys = project(attn, x, sd['key.linear.weight'].data, E, head * d, d);
    const values = project(attn, x, sd['value.linear.weight'].data, E, head * d, d, sd['value.linear.bias'].data);
    const u = sd.query_pos_bias.data.subarray(head * d, (head + 1) * d);
    const R = sd.key_pos_embeddings.data;
    const positionBias = sd.key_pos_bias.data;
    const content = new Float32Array(L);
    const position = new Float32Array(L);
    for (let j = 0; j < L; j++) {
      const r = P + j - query; // the queries are the last n of the m keys, and n = m here
      for (let c = 0; c < d; c++) {
        content[j] += (q[c] + u[c]) * keys[j * d + c];
        position[j] += q[c] * R[(r * H + head) * d + c];
      }
      position[j] += positionBias[r * H + head];
    }
    return finishNeuron({
      q, keys, terms: [{ name: 'content (q+u)·k', values: content }, { name: 'position q·R + b', values: position }],
      scale: 1 / Math.sqrt(d), masked, values, describe: `head ${head + 1} of ${H} · d = ${d}, scale 1/√${d}; Transformer-XL terms`,
    });
  }
  throw new Error(`Unknown attention kind ${JSON.stringify(kind)}.`);
}

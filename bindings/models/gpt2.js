// GPT-2 (Hugging Face's GPT2LMHeadModel): token and learned position embeddings, per layer
// x += attention(LayerNorm(x)) and x += MLP(LayerNorm(x)) with gelu_new, a final LayerNorm and the
// head tied to the token embedding. Its Conv1D weights are stored [in, out]: transposed as stored
// (16-bit words stay 16-bit) into the package's Linear; attention is scaledDotProductAttention.
import { rowAttention } from './attention.js';
import { addInto, layerNorm, splitHeads } from './ops.js';
import { linearFrom } from './parts.js';

// A Conv1D's weight [in, out] as a Linear's [out, in], in its own dtype.
function transposed({ data, shape: [inFeatures, out], dtype }) {
  const values = new data.constructor(data.length);
  for (let i = 0; i < inFeatures; i++) for (let o = 0; o < out; o++) values[o * inFeatures + i] = data[i * out + o];
  return dtype ? { data: values, shape: [out, inFeatures], dtype } : { data: values, shape: [out, inFeatures] };
}

export class Gpt2Family {
  constructor(attn, config, checkpoint) {
    this.attn = attn;
    this.config = config;
    this.layers = config.n_layer;
    this.heads = this.kvHeads = config.n_head;
    this.width = config.n_embd;
    this.headDim = this.width / this.heads;
    this.inner = config.n_inner ?? 4 * this.width;
    this.eps = config.layer_norm_epsilon ?? 1e-5;
    this.act = config.activation_function ?? 'gelu_new';
    this.causal = true;
    // GPT2LMHeadModel's names, or GPT2Model's without the 'transformer.' prefix (openai-community/gpt2).
    this.root = checkpoint.has('transformer.wte.weight') ? 'transformer.' : '';
    this.embedding = `${this.root}wte.weight`;
    this.vocabSize = checkpoint.entry(this.embedding).shape[0];
    this.maxPositions = checkpoint.entry(`${this.root}wpe.weight`).shape[0];
    this.linearHead = { name: checkpoint.has('lm_head.weight') ? 'lm_head.weight' : this.embedding, softcap: null };
  }

  globals() {
    return { [`${this.root}ln_f.weight`]: [this.width], [`${this.root}ln_f.bias`]: [this.width] };
  }

  layerTensors(layer) {
    const p = `${this.root}h.${layer}.`, w = this.width, inner = this.inner;
    const conv = (name, inFeatures, out) => [{ name: `${p}${name}.weight`, shape: [inFeatures, out], matrix: true }, { name: `${p}${name}.bias`, shape: [out], matrix: false }];
    const norm = (name) => ['weight', 'bias'].map((part) => ({ name: `${p}${name}.${part}`, shape: [w], matrix: false }));
    return [...norm('ln_1'), ...conv('attn.c_attn', w, 3 * w), ...conv('attn.c_proj', w, w), ...norm('ln_2'), ...conv('mlp.c_fc', w, inner), ...conv('mlp.c_proj', inner, w)];
  }

  buildLayer(tensors, layer, own) {
    const p = `${this.root}h.${layer}.`;
    const conv = (name) => {
      const linear = new Map([[`${name}.weight`, transposed(tensors.get(`${p}${name}.weight`))], [`${name}.bias`, tensors.get(`${p}${name}.bias`)]]);
      return own(linearFrom(this.attn, linear, name));
    };
    const norm = (name) => ({ w: tensors.get(`${p}${name}.weight`).data, b: tensors.get(`${p}${name}.bias`).data });
    return { ln1: norm('ln_1'), ln2: norm('ln_2'), qkv: conv('attn.c_attn'), proj: conv('attn.c_proj'), fc: conv('mlp.c_fc'), fcProj: conv('mlp.c_proj') };
  }

  /** Token rows plus the learned rows of each token's position. */
  async embed(checkpoint, ids, positions) {
    return addInto(await checkpoint.rows(this.embedding, ids), await checkpoint.rows(`${this.root}wpe.weight`, positions));
  }

  // c_attn's rows of ln_1(x): q | k | v, each a slice of the [N · t, 3 · width] rows.
  qkv(block, x, rows) {
    const width = this.width;
    const qkv = block.qkv.forward({ data: layerNorm(x, block.ln1.w, block.ln1.b, width, this.eps), shape: [rows, width] }).data;
    return [0, 1, 2].map((part) => ({ data: qkv, rowWidth: 3 * width, offset: part * width }));
  }

  project(block, x, { n, t }) {
    const [query, key, value] = this.qkv(block, x, n * t).map((part) => splitHeads(part.data, n, t, this.heads, this.headDim, part.rowWidth, part.offset));
    return { query, key, value, scale: 1 / Math.sqrt(this.headDim), softcap: null, window: null, causal: true };
  }

  runLayer(block, x, ctx) {
    const { n, t } = ctx, width = this.width, rows = n * t;
    const [q, k, v] = this.qkv(block, x, rows);
    const { output, weights } = rowAttention(this.attn, q, k, v, { n, t, heads: this.heads, d: this.headDim, causal: true, ctx });
    addInto(x, block.proj.forward({ data: output, shape: [rows, width] }).data);
    const normed = { data: layerNorm(x, block.ln2.w, block.ln2.b, width, this.eps), shape: [rows, width] };
    addInto(x, this.attn.feedForward(normed, { up: block.fc, down: block.fcProj }, { activation: this.act }).data);
    return weights;
  }

  final(x, globals) {
    return layerNorm(x, globals.get(`${this.root}ln_f.weight`).data, globals.get(`${this.root}ln_f.bias`).data, this.width, this.eps);
  }

}

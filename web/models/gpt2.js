// GPT-2 (Hugging Face's GPT2LMHeadModel): token and learned position embeddings, per layer
// x += attention(LayerNorm(x)) and x += MLP(LayerNorm(x)) with gelu_new, a final LayerNorm and the
// head tied to the token embedding. Its Conv1D weights are stored [in, out], transposed here once
// into the package's Linear; attention is scaledDotProductAttention, causal. No DOM.
import { layerNormOf, linearOf, owning, tensorOf } from './weights.js';
import { activate, addInto, embed, floats, headRows, layerNorm, layerOut, mergeHeads, splitHeads } from './ops.js';

// A Linear from a Conv1D (weight [in, out], bias [out]): y = x · W + b.
function conv1d(attn, tensors, name) {
  const weight = tensorOf(tensors, `${name}.weight`);
  const [inFeatures, out] = weight.shape;
  const values = floats(weight), transposed = new Float32Array(values.length);
  for (let i = 0; i < inFeatures; i++) for (let o = 0; o < out; o++) transposed[o * inFeatures + i] = values[i * out + o];
  const linear = new attn.Linear(inFeatures, out, { dtype: weight.dtype === 'f16' ? 'f16' : 'f32' });
  // Transposed binary16 weights go in as floats rounded back to binary16: the same values.
  return linear.loadStateDict({ weight: { data: transposed, shape: [out, inFeatures] }, bias: { data: floats(tensorOf(tensors, `${name}.bias`)), shape: [out] } });
}

export class Gpt2Model {
  constructor(attn, config, tensors) {
    this.attn = attn;
    this.config = config;
    this.modelType = 'gpt2';
    this.layers = config.n_layer;
    this.heads = config.n_head;
    this.width = config.n_embd;
    this.eps = config.layer_norm_epsilon ?? 1e-5;
    this.act = config.activation_function ?? 'gelu_new';
    // GPT2LMHeadModel's names, or GPT2Model's without the 'transformer.' prefix (openai-community/gpt2).
    const root = tensors.has('transformer.wte.weight') ? 'transformer.' : '';
    this.tokens = tensorOf(tensors, `${root}wte.weight`);
    this.positions = tensorOf(tensors, `${root}wpe.weight`);
    this.vocabSize = this.tokens.shape[0];
    this.maxPositions = this.positions.shape[0];
    const norm = (name) => layerNormOf(tensors, name);
    this.owned = owning((own) => {
      this.blocks = Array.from({ length: this.layers }, (_, layer) => {
        const prefix = `${root}h.${layer}.`;
        return {
          ln1: norm(`${prefix}ln_1`), ln2: norm(`${prefix}ln_2`),
          qkv: own(conv1d(attn, tensors, `${prefix}attn.c_attn`)), proj: own(conv1d(attn, tensors, `${prefix}attn.c_proj`)),
          fc: own(conv1d(attn, tensors, `${prefix}mlp.c_fc`)), fcProj: own(conv1d(attn, tensors, `${prefix}mlp.c_proj`)),
        };
      });
      this.finalNorm = norm(`${root}ln_f`);
      this.head = own(tensors.has('lm_head.weight') ? linearOf(attn, tensors, 'lm_head') : linearOf(attn, tensors, `${root}wte`));
    });
  }

  /** As DecoderModel's (decoder.js). */
  forward(ids, { needWeights = false, logits = 'all', needInputs = false, weightsInto = null } = {}) {
    const t = ids.length, width = this.width, heads = this.heads, d = width / heads;
    if (t > this.maxPositions) throw new Error(`gpt2 reads at most ${this.maxPositions} tokens (n_positions); got ${t}`);
    const x = addInto(embed(this.tokens, ids, width), embed(this.positions, Int32Array.from({ length: t }, (_, i) => i), width));
    const attentions = [], attentionInputs = [];
    this.blocks.forEach((block, layer) => {
      const input = layerNorm(x, block.ln1.w, block.ln1.b, width, this.eps);
      if (needInputs) attentionInputs.push(input);
      const { query, key, value } = this.attentionParts(input, layer);
      const { output, weights } = this.attn.scaledDotProductAttention(query, key, value, { isCausal: true, needWeights, out: layerOut(weightsInto, needWeights, layer, heads, t) });
      attentions.push(weights ? weights.data : null);
      addInto(x, block.proj.forward({ data: mergeHeads(output.data, t, heads, d), shape: [t, width] }).data);
      const hidden = activate(block.fc.forward({ data: layerNorm(x, block.ln2.w, block.ln2.b, width, this.eps), shape: [t, width] }).data, this.act);
      addInto(x, block.fcProj.forward({ data: hidden, shape: [t, hidden.length / t] }).data);
    });
    const final = layerNorm(x, this.finalNorm.w, this.finalNorm.b, width, this.eps);
    return { logits: headRows(this.head, final, t, width, logits), attentions: needWeights ? attentions : null, attentionInputs: needInputs ? attentionInputs : null };
  }

  /** As DecoderModel's: q, k, v [1, heads, t, d] from c_attn of ln_1's output. */
  attentionParts(input, layer) {
    const t = input.length / this.width, width = this.width, d = width / this.heads;
    const qkv = this.blocks[layer].qkv.forward({ data: input, shape: [t, width] }).data;
    const [query, key, value] = [0, 1, 2].map((part) => splitHeads(qkv, t, this.heads, d, 3 * width, part * width));
    return { query, key, value, scale: 1 / Math.sqrt(d), softcap: null, window: null, causal: true, about: 'positions learned (wpe), added to the input' };
  }

  dispose() {
    this.owned.dispose();
  }
}

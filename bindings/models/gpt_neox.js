// GPT-NeoX (Hugging Face's GPTNeoXForCausalLM: Pythia): per layer LayerNorms with biases, one
// query_key_value projection fused per head, RoPE on the first rotary_pct of each head, and with
// use_parallel_residual x + attn(ln1(x)) + mlp(ln2(x)) (else one after the other); a final
// LayerNorm and an untied embed_out. Attention is the package's GroupedQueryAttention (as many
// key/value heads as query heads) over q, k and v rows taken out of the fused weight.
import { AttentionError, describe } from '../errors.js';
import { addInto, layerNorm } from './ops.js';
import { attentionParts, linearFrom, multiHeadSizes } from './parts.js';

// query_key_value's rows [heads, 3, d] (modeling_gpt_neox.py views its output as [..., heads,
// 3 · d] and chunks q | k | v) as the rows of q, k or v: `part` 0, 1 or 2.
function fusedPart({ data, shape, dtype }, heads, d, part) {
  const cols = shape.length === 2 ? shape[1] : 1;
  const values = new data.constructor(heads * d * cols);
  for (let h = 0; h < heads; h++) values.set(data.subarray(((h * 3 + part) * d) * cols, ((h * 3 + part + 1) * d) * cols), h * d * cols);
  const rows = shape.length === 2 ? [heads * d, cols] : [heads * d];
  return dtype ? { data: values, shape: rows, dtype } : { data: values, shape: rows };
}

export class GptNeoxFamily {
  constructor(attn, config, checkpoint) {
    Object.assign(this, { attn, config, ...multiHeadSizes(config) });
    this.eps = config.layer_norm_eps ?? 1e-5;
    this.act = config.hidden_act ?? 'gelu';
    this.parallel = config.use_parallel_residual ?? true;
    this.causal = true;
    // v5 standardises rotary_pct / rotary_emb_base into rope_parameters.
    const rope = config.rope_parameters ?? {};
    if ((rope.rope_type ?? 'default') !== 'default' || config.rope_scaling)
      throw new AttentionError('config.rope_scaling', 'none (gpt_neox with scaled RoPE is not supported)', describe(config.rope_scaling ?? rope.rope_type));
    const fraction = config.rotary_pct ?? rope.partial_rotary_factor ?? config.partial_rotary_factor ?? 0.25;
    this.attentionOptions = {
      headDim: this.headDim,
      rotaryDim: Math.trunc(this.headDim * fraction),
      ropeBase: config.rotary_emb_base ?? rope.rope_theta ?? config.rope_theta ?? 10000,
      qkvBias: config.attention_bias ?? true,
      outputBias: config.attention_bias ?? true,
      maxPositionEmbeddings: config.max_position_embeddings,
    };
    this.embedding = 'gpt_neox.embed_in.weight';
    this.vocabSize = checkpoint.entry(this.embedding).shape[0];
    this.maxPositions = config.max_position_embeddings ?? Infinity;
    this.linearHead = { name: checkpoint.has('embed_out.weight') ? 'embed_out.weight' : this.embedding, softcap: null };
  }

  globals() {
    return { 'gpt_neox.final_layer_norm.weight': [this.width], 'gpt_neox.final_layer_norm.bias': [this.width] };
  }

  layerTensors(layer) {
    const p = `gpt_neox.layers.${layer}.`, w = this.width, bias = this.attentionOptions.qkvBias;
    const linear = (name, out, inFeatures, withBias = true) => [{ name: `${p}${name}.weight`, shape: [out, inFeatures], matrix: true },
      ...(withBias ? [{ name: `${p}${name}.bias`, shape: [out], matrix: false }] : [])];
    const norm = (name) => ['weight', 'bias'].map((part) => ({ name: `${p}${name}.${part}`, shape: [w], matrix: false }));
    return [...norm('input_layernorm'), ...linear('attention.query_key_value', 3 * w, w, bias), ...linear('attention.dense', w, w, bias),
      ...norm('post_attention_layernorm'), ...linear('mlp.dense_h_to_4h', this.inner, w), ...linear('mlp.dense_4h_to_h', w, this.inner)];
  }

  buildLayer(tensors, layer, own) {
    const p = `gpt_neox.layers.${layer}.`, { heads, headDim } = this;
    const fused = tensors.get(`${p}attention.query_key_value.weight`);
    const attention = own(new this.attn.GroupedQueryAttention(this.width, heads, heads, { ...this.attentionOptions, dtype: fused.dtype ?? 'f32' }));
    const state = new Map();
    ['q_proj', 'k_proj', 'v_proj'].forEach((name, part) => {
      state.set(`${name}.weight`, fusedPart(fused, heads, headDim, part));
      if (this.attentionOptions.qkvBias) state.set(`${name}.bias`, fusedPart(tensors.get(`${p}attention.query_key_value.bias`), heads, headDim, part));
    });
    state.set('o_proj.weight', tensors.get(`${p}attention.dense.weight`));
    if (this.attentionOptions.outputBias) state.set('o_proj.bias', tensors.get(`${p}attention.dense.bias`));
    attention.loadStateDict(state);
    const norm = (name) => ({ w: tensors.get(`${p}${name}.weight`).data, b: tensors.get(`${p}${name}.bias`).data });
    return {
      attention, ln1: norm('input_layernorm'), ln2: norm('post_attention_layernorm'),
      up: own(linearFrom(this.attn, tensors, `${p}mlp.dense_h_to_4h`)), down: own(linearFrom(this.attn, tensors, `${p}mlp.dense_4h_to_h`)),
    };
  }

  project(block, x, { n, t, positions }) {
    return attentionParts(block.attention, layerNorm(x, block.ln1.w, block.ln1.b, this.width, this.eps), n, t, this.width, positions);
  }

  async embed(checkpoint, ids) {
    return checkpoint.rows(this.embedding, ids);
  }

  runLayer(block, x, ctx) {
    const { n, t } = ctx, width = this.width, rows = n * t;
    const input = layerNorm(x, block.ln1.w, block.ln1.b, width, this.eps);
    const { output, weights } = block.attention.forward({ data: input, shape: [n, t, width] }, ctx.attentionOptions());
    const mlp = (values) => {
      const normed = { data: layerNorm(values, block.ln2.w, block.ln2.b, width, this.eps), shape: [rows, width] };
      return this.attn.feedForward(normed, { up: block.up, down: block.down }, { activation: this.act }).data;
    };
    if (this.parallel) {
      const fromMlp = mlp(x);
      addInto(x, output.data);
      addInto(x, fromMlp);
    } else {
      addInto(x, output.data);
      addInto(x, mlp(x));
    }
    return weights;
  }

  final(x, globals) {
    return layerNorm(x, globals.get('gpt_neox.final_layer_norm.weight').data, globals.get('gpt_neox.final_layer_norm.bias').data, this.width, this.eps);
  }

}

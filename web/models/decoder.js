// Decoders in the Llama layout (Llama, SmolLM2, Mistral, Qwen2, Qwen3): token embeddings, then
// per layer x += attention(RMSNorm(x)) and x += MLP(RMSNorm(x)) with a SwiGLU MLP, a final RMSNorm
// and the output head (Hugging Face's LlamaForCausalLM and its kin). Attention is the package's
// GroupedQueryAttention configured by fromConfig, the projections its Linear. No DOM.
import { activate, addInto, embed, floats, headRows, rmsNorm } from './ops.js';

export const DECODER_TYPES = ['llama', 'mistral', 'qwen2', 'qwen3'];

// A tensor of the checkpoint, or an error naming it.
export function tensorOf(tensors, name) {
  const tensor = tensors.get(name);
  if (!tensor) throw new Error(`the weights have no '${name}'`);
  return tensor;
}

// A Linear over a checkpoint's weight (and bias), in the weight's own dtype.
export function linearOf(attn, tensors, name, { bias = false } = {}) {
  const weight = tensorOf(tensors, `${name}.weight`);
  const [out, inFeatures] = weight.shape;
  const linear = new attn.Linear(inFeatures, out, { bias, dtype: weight.dtype === 'f16' ? 'f16' : 'f32' });
  const sd = { weight };
  if (bias) sd.bias = { data: floats(tensorOf(tensors, `${name}.bias`)), shape: [out] };
  return linear.loadStateDict(sd);
}

// The checkpoint's tensors under `prefix` as float32, for modules that hold f32 weights.
function floatsUnder(tensors, prefix) {
  const out = new Map();
  for (const [name, tensor] of tensors) if (name.startsWith(prefix)) out.set(name, { data: floats(tensor), shape: tensor.shape });
  return out;
}

export class DecoderModel {
  /** attn: a package instance; config: config.json parsed; tensors: loadSafetensors' map. */
  constructor(attn, config, tensors) {
    this.config = config;
    this.modelType = config.model_type;
    this.layers = config.num_hidden_layers;
    this.heads = config.num_attention_heads;
    this.width = config.hidden_size;
    this.maxPositions = config.max_position_embeddings ?? Infinity;
    this.eps = config.rms_norm_eps ?? 1e-6;
    this.act = config.hidden_act ?? 'silu';
    this.embedding = tensorOf(tensors, 'model.embed_tokens.weight');
    this.vocabSize = this.embedding.shape[0];
    this.finalNorm = floats(tensorOf(tensors, 'model.norm.weight'));
    const owned = [];
    this.blocks = [];
    try {
      for (let layer = 0; layer < this.layers; layer++) {
        const prefix = `model.layers.${layer}.`;
        const attention = attn.GroupedQueryAttention.fromConfig(config, { layer });
        owned.push(attention);
        attention.loadStateDict(floatsUnder(tensors, `${prefix}self_attn.`), { prefix: `${prefix}self_attn.` });
        const [gate, up, down] = ['gate_proj', 'up_proj', 'down_proj'].map((name) => {
          const linear = linearOf(attn, tensors, `${prefix}mlp.${name}`, { bias: config.mlp_bias === true });
          owned.push(linear);
          return linear;
        });
        this.blocks.push({
          attention, gate, up, down,
          inputNorm: floats(tensorOf(tensors, `${prefix}input_layernorm.weight`)),
          postNorm: floats(tensorOf(tensors, `${prefix}post_attention_layernorm.weight`)),
        });
      }
      // The output head: its own weight, or the embedding's when tied (SmolLM2, Llama 3.2).
      this.head = tensors.has('lm_head.weight') ? linearOf(attn, tensors, 'lm_head') : linearOf(attn, tensors, 'model.embed_tokens');
      owned.push(this.head);
    } catch (error) {
      for (const module of owned) module.dispose();
      throw error;
    }
    this.owned = owned;
  }

  /**
   * ids (token ids) → { logits [t, vocab] (or as `logits` says: 'all', 'last', 'none'),
   * attentions: per layer [heads, t, t] (the softmax weights) or null }.
   */
  forward(ids, { needWeights = false, logits = 'all' } = {}) {
    const t = ids.length, width = this.width;
    const x = embed(this.embedding, ids, width);
    const attentions = [];
    for (const block of this.blocks) {
      const normed = rmsNorm(x, block.inputNorm, width, this.eps);
      const { output, weights } = block.attention.forward({ data: normed, shape: [1, t, width] }, { needWeights });
      addInto(x, output.data);
      attentions.push(weights ? weights.data : null);
      addInto(x, this.mlp(rmsNorm(x, block.postNorm, width, this.eps), block, t));
    }
    return { logits: headRows(this.head, rmsNorm(x, this.finalNorm, width, this.eps), t, width, logits), attentions: needWeights ? attentions : null };
  }

  // down(act(gate(x)) · up(x))
  mlp(x, block, t) {
    const rows = { data: x, shape: [t, this.width] };
    const gate = activate(block.gate.forward(rows).data, this.act);
    const up = block.up.forward(rows).data;
    for (let i = 0; i < gate.length; i++) gate[i] *= up[i];
    return block.down.forward({ data: gate, shape: [t, gate.length / t] }).data;
  }

  dispose() {
    for (const module of this.owned) module.dispose();
  }
}

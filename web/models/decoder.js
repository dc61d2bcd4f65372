// Decoders in the Llama layout (Llama, SmolLM2, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3,
// OLMo 2): token embeddings, per layer an attention block and a gated MLP each added to the
// residual stream with RMSNorms around them, a final RMSNorm and the output head (Hugging Face's
// LlamaForCausalLM and its kin). Attention is the package's GroupedQueryAttention configured by
// fromConfig, the projections its Linear. No DOM.
import { activate, addInto, blockParts, embed, floats, headRows, layerOut, rmsNorm } from './ops.js';
import { linearOf, owning, tensorOf } from './weights.js';

// How each family arranges a layer (its modeling_*.py DecoderLayer):
// - norms 'pre': x += attn(norm(x)); x += mlp(norm(x)) (input_layernorm, post_attention_layernorm);
// - 'sandwich' (Gemma): the block's input and output normed, four norms a layer;
// - 'post' (OLMo 2): x += norm(attn(x)); x += norm(mlp(x)).
// unitOffset: RMSNorm scales by 1 + w; embedScale: embeddings times sqrt(hidden), rounded to f32
// as Gemma's normalizer tensor is; finalSoftcap: final_logit_softcapping; fusedMlp: Phi-3's
// gate_up_proj, its first half the gate.
const LAYOUTS = {
  llama: { norms: 'pre' },
  mistral: { norms: 'pre' },
  qwen2: { norms: 'pre' },
  qwen3: { norms: 'pre' },
  gemma2: { norms: 'sandwich', unitOffset: true, embedScale: true, finalSoftcap: true },
  gemma3_text: { norms: 'sandwich', unitOffset: true, embedScale: true, finalSoftcap: true },
  phi3: { norms: 'pre', fusedMlp: true },
  olmo2: { norms: 'post' },
};
export const DECODER_TYPES = Object.keys(LAYOUTS);

// The checkpoint's tensors under `prefix`, as they are (binary16 ones stay binary16).
const tensorsUnder = (tensors, prefix) => new Map([...tensors].filter(([name]) => name.startsWith(prefix)));

export class DecoderModel {
  /** attn: a package instance; config: config.json parsed; tensors: loadSafetensors' map. */
  constructor(attn, config, tensors) {
    this.config = config;
    this.modelType = config.model_type;
    this.layout = LAYOUTS[config.model_type];
    this.layers = config.num_hidden_layers;
    this.heads = config.num_attention_heads;
    this.width = config.hidden_size;
    this.maxPositions = config.max_position_embeddings ?? Infinity;
    this.eps = config.rms_norm_eps ?? 1e-6;
    this.act = config.hidden_activation ?? config.hidden_act ?? 'silu';
    // The decoder's names sit under 'model.' (…ForCausalLM) or deeper in a multimodal checkpoint
    // ('language_model.model.'): where the token embedding is.
    const embeddingName = [...tensors.keys()].find((name) => name.endsWith('embed_tokens.weight')) ?? 'model.embed_tokens.weight';
    const root = embeddingName.slice(0, -'embed_tokens.weight'.length);
    this.embedding = tensorOf(tensors, embeddingName);
    this.vocabSize = this.embedding.shape[0];
    this.embedScale = this.layout.embedScale ? Math.fround(Math.sqrt(this.width)) : 1;
    this.finalSoftcap = this.layout.finalSoftcap ? config.final_logit_softcapping ?? null : null;
    this.finalNorm = floats(tensorOf(tensors, `${root}norm.weight`));
    this.blocks = [];
    this.owned = owning((own) => {
      for (let layer = 0; layer < this.layers; layer++) {
        const prefix = `${root}layers.${layer}.`;
        // An f16 checkpoint's projections stay binary16 in the attention too (half the memory).
        const attention = own(attn.GroupedQueryAttention.fromConfig(config, { layer, dtype: this.embedding.dtype === 'f16' ? 'f16' : 'f32' }));
        attention.loadStateDict(tensorsUnder(tensors, `${prefix}self_attn.`), { prefix: `${prefix}self_attn.` });
        const linear = (name) => own(linearOf(attn, tensors, `${prefix}mlp.${name}`, { bias: config.mlp_bias === true }));
        const mlp = this.layout.fusedMlp ? { gateUp: linear('gate_up_proj'), down: linear('down_proj') }
          : { gate: linear('gate_proj'), up: linear('up_proj'), down: linear('down_proj') };
        const need = (name) => floats(tensorOf(tensors, `${prefix}${name}.weight`));
        const { norms } = this.layout;
        this.blocks.push({
          attention, ...mlp,
          inputNorm: norms === 'post' ? null : need('input_layernorm'),
          postNorm: need('post_attention_layernorm'),
          preFeedforwardNorm: norms === 'sandwich' ? need('pre_feedforward_layernorm') : null,
          postFeedforwardNorm: norms === 'pre' ? null : need('post_feedforward_layernorm'),
        });
      }
      // The output head: its own weight, or the embedding's when tied (SmolLM2, Llama 3.2, Gemma).
      const headName = embeddingName.replace(/(model\.)?embed_tokens\.weight$/, 'lm_head.weight');
      this.head = own(linearOf(attn, tensors, (tensors.has(headName) ? headName : embeddingName).slice(0, -'.weight'.length)));
    });
  }

  /**
   * ids (token ids) → { logits [t, vocab] (or as `logits` says: 'all', 'last', 'none'),
   * attentions: per layer [heads, t, t] (the softmax weights; views of `weightsInto`
   * [layers · heads, t, t] when given) or null, attentionInputs: per layer the attention block's
   * input [t, width] (with `needInputs`) or null }.
   */
  forward(ids, { needWeights = false, logits = 'all', needInputs = false, weightsInto = null } = {}) {
    const t = ids.length, width = this.width, heads = this.heads;
    // Every norm's result is used up before the next norm: one buffer serves them all (fresh
    // memory for each would cost more than the norms themselves).
    const normed = new Float32Array(t * width);
    const buffers = {}; // the MLP's (mlp())
    const norm = (values, weight) => rmsNorm(values, weight, width, this.eps, this.layout.unitOffset, normed);
    const x = embed(this.embedding, ids, width, this.embedScale);
    const attentions = [], attentionInputs = [];
    const { norms } = this.layout;
    this.blocks.forEach((block, layer) => {
      const input = norms === 'post' ? x : norm(x, block.inputNorm);
      if (needInputs) attentionInputs.push(input.slice()); // `normed` and x change on
      const { output, weights } = block.attention.forward({ data: input, shape: [1, t, width] }, { needWeights, out: layerOut(weightsInto, needWeights, layer, heads, t) });
      attentions.push(weights ? weights.data : null);
      addInto(x, norms === 'pre' ? output.data : norm(output.data, block.postNorm));
      const mlpInput = norms === 'pre' ? norm(x, block.postNorm) : norms === 'sandwich' ? norm(x, block.preFeedforwardNorm) : x;
      const mlpOutput = this.mlp(mlpInput, block, t, buffers);
      addInto(x, norms === 'pre' ? mlpOutput : norm(mlpOutput, block.postFeedforwardNorm));
    });
    const result = headRows(this.head, norm(x, this.finalNorm), t, width, logits);
    if (result && this.finalSoftcap) for (let i = 0; i < result.length; i++) result[i] = Math.tanh(result[i] / this.finalSoftcap) * this.finalSoftcap;
    return { logits: result, attentions: needWeights ? attentions : null, attentionInputs: needInputs ? attentionInputs : null };
  }

  /**
   * What layer `layer`'s attention reads from its input [t, width] (forward's attentionInputs), and
   * how it scores: ops.js's blockParts.
   */
  attentionParts(input, layer) {
    return blockParts(this.blocks[layer].attention, input, this.width);
  }

  // down(act(gate(x)) · up(x)); Phi-3's gate and up come as the two halves of one projection.
  // `buffers` ({ gate, up, gateUp, down }, filled in on first use) are the forward's own arrays for
  // these results, reused layer after layer: fresh memory for each would cost more than the
  // activations themselves.
  mlp(x, block, t, buffers) {
    const rows = { data: x, shape: [t, this.width] };
    const inner = (block.gateUp ?? block.gate).outFeatures / (block.gateUp ? 2 : 1);
    buffers.gate ??= new Float32Array(t * inner);
    buffers.up ??= new Float32Array(t * inner);
    const { gate, up } = buffers;
    if (block.gateUp) {
      buffers.gateUp ??= new Float32Array(2 * t * inner);
      const both = block.gateUp.forward(rows, { out: buffers.gateUp }).data;
      for (let i = 0; i < t; i++) {
        gate.set(both.subarray(2 * i * inner, (2 * i + 1) * inner), i * inner);
        up.set(both.subarray((2 * i + 1) * inner, (2 * i + 2) * inner), i * inner);
      }
    } else {
      block.gate.forward(rows, { out: gate });
      block.up.forward(rows, { out: up });
    }
    activate(gate, this.act);
    for (let i = 0; i < gate.length; i++) gate[i] *= up[i];
    buffers.down ??= new Float32Array(t * this.width);
    return block.down.forward({ data: gate, shape: [t, inner] }, { out: buffers.down }).data;
  }

  dispose() {
    this.owned.dispose();
  }
}

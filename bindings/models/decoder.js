// Decoders in the Llama layout (Llama, SmolLM2, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3,
// Phi-3, OLMo 2): token embeddings, per layer an attention block and a gated MLP each added to the
// residual stream with RMSNorms around them, a final RMSNorm and the output head (Hugging Face's
// LlamaForCausalLM and its kin). Attention is the package's GroupedQueryAttention configured by
// fromConfig, the projections its Linear.
import { configArguments } from '../from_config.js';
import { addInto, rmsNorm } from './ops.js';
import { attentionParts, linearFrom } from './parts.js';

// How each family arranges a layer (its modeling_*.py DecoderLayer):
// - norms 'pre': x += attn(norm(x)); x += mlp(norm(x)) (input_layernorm, post_attention_layernorm);
// - 'sandwich' (Gemma 2 and 3): the block's input and output normed, four norms a layer;
// - 'post' (OLMo 2): x += norm(attn(x)); x += norm(mlp(x)).
// unitOffset: RMSNorm scales by 1 + w; embedScale: embeddings times sqrt(hidden), rounded to f32
// as Gemma's normalizer tensor is; finalSoftcap: final_logit_softcapping; fusedMlp: Phi-3's
// gate_up_proj, its first half the gate.
const GEMMA = { unitOffset: true, embedScale: true };
const LAYOUTS = {
  llama: { norms: 'pre' },
  mistral: { norms: 'pre' },
  qwen2: { norms: 'pre' },
  qwen3: { norms: 'pre' },
  gemma: { norms: 'pre', ...GEMMA },
  gemma2: { norms: 'sandwich', ...GEMMA, finalSoftcap: true },
  gemma3_text: { norms: 'sandwich', ...GEMMA, finalSoftcap: true },
  phi3: { norms: 'pre', fusedMlp: true },
  olmo2: { norms: 'post' },
};
export const DECODER_TYPES = Object.keys(LAYOUTS);

// The norms a layer holds, by layout.
const NORMS = {
  pre: ['input_layernorm', 'post_attention_layernorm'],
  sandwich: ['input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm', 'post_feedforward_layernorm'],
  post: ['post_attention_layernorm', 'post_feedforward_layernorm'],
};

// The MLP's activation, as transformers v5 reads config.json: Gemma 1's GemmaMLP takes hidden_act
// (default gelu_pytorch_tanh) and ignores hidden_activation, so google/gemma-2b's "gelu" is the
// erf form; Gemma 2 and 3 take hidden_activation.
function activationOf(config) {
  if (config.model_type === 'gemma') return config.hidden_act ?? 'gelu_pytorch_tanh';
  return config.hidden_activation ?? config.hidden_act ?? 'silu';
}

export class DecoderFamily {
  constructor(attn, config, checkpoint) {
    this.attn = attn;
    this.config = config;
    this.layout = LAYOUTS[config.model_type];
    const [width, heads, kvHeads, options] = configArguments(config);
    Object.assign(this, { width, heads, kvHeads, headDim: options.headDim, causal: true });
    this.layers = config.num_hidden_layers;
    this.inner = config.intermediate_size;
    this.eps = config.rms_norm_eps ?? 1e-6;
    this.act = activationOf(config);
    // The decoder's names sit under 'model.' (…ForCausalLM) or deeper in a multimodal checkpoint
    // ('language_model.model.'): where the token embedding is.
    this.embedding = [...checkpoint.tensors.keys()].find((name) => name.endsWith('embed_tokens.weight')) ?? 'model.embed_tokens.weight';
    this.root = this.embedding.slice(0, -'embed_tokens.weight'.length);
    this.vocabSize = checkpoint.entry(this.embedding).shape[0];
    this.maxPositions = config.max_position_embeddings ?? Infinity;
    this.embedScale = this.layout.embedScale ? Math.fround(Math.sqrt(width)) : 1;
    this.finalSoftcap = this.layout.finalSoftcap ? config.final_logit_softcapping ?? null : null;
    // The output head: its own weight, or the embedding's when tied (SmolLM2, Llama 3.2, Gemma).
    const head = this.embedding.replace(/(model\.)?embed_tokens\.weight$/, 'lm_head.weight');
    this.linearHead = { name: checkpoint.has(head) ? head : this.embedding, softcap: this.finalSoftcap };
  }

  /** The tensors besides the layers', read as float32 once: { name: shape }. */
  globals() {
    return { [`${this.root}norm.weight`]: [this.width] };
  }

  /** Layer `layer`'s sliding window (its generation cache is a ring of that length), or null. */
  windowOf(layer) {
    return configArguments(this.config, { layer })[3].slidingWindow ?? null;
  }

  /** Layer `layer`'s tensors: [{ name, shape, matrix }] (matrices are read in the model's dtype). */
  layerTensors(layer) {
    const p = `${this.root}layers.${layer}.`, { width, heads, kvHeads, headDim, inner, config } = this;
    const [, , , options] = configArguments(config, { layer });
    const matrix = (name, shape) => ({ name: `${p}${name}`, shape, matrix: true });
    const vector = (name, size) => ({ name: `${p}${name}`, shape: [size], matrix: false });
    const q = heads * headDim, kv = kvHeads * headDim;
    const attention = this.config.model_type === 'phi3' ? [matrix('self_attn.qkv_proj.weight', [q + 2 * kv, width])]
      : [matrix('self_attn.q_proj.weight', [q, width]), matrix('self_attn.k_proj.weight', [kv, width]), matrix('self_attn.v_proj.weight', [kv, width])];
    attention.push(matrix('self_attn.o_proj.weight', [width, q]));
    if (options.qkvBias) attention.push(vector('self_attn.q_proj.bias', q), vector('self_attn.k_proj.bias', kv), vector('self_attn.v_proj.bias', kv));
    if (options.outputBias) attention.push(vector('self_attn.o_proj.bias', width));
    if (options.qkNorm) {
      const scope = options.qkNorm.scope === 'head';
      attention.push(vector('self_attn.q_norm.weight', scope ? headDim : q), vector('self_attn.k_norm.weight', scope ? headDim : kv));
    }
    const mlp = this.layout.fusedMlp ? [matrix('mlp.gate_up_proj.weight', [2 * inner, width])]
      : [matrix('mlp.gate_proj.weight', [inner, width]), matrix('mlp.up_proj.weight', [inner, width])];
    mlp.push(matrix('mlp.down_proj.weight', [width, inner]));
    if (config.mlp_bias === true) mlp.push(...mlp.map(({ name, shape }) => ({ name: name.replace(/weight$/, 'bias'), shape: [shape[0]], matrix: false })));
    return [...attention, ...mlp, ...NORMS[this.layout.norms].map((name) => vector(`${name}.weight`, width))];
  }

  /** Layer `layer` built from its tensors (a Map): its wasm modules and norms; `own` keeps each module. */
  buildLayer(tensors, layer, own) {
    const p = `${this.root}layers.${layer}.`, attn = this.attn;
    const matrixDtype = tensors.get(`${p}mlp.down_proj.weight`).dtype ?? 'f32';
    const attention = own(attn.GroupedQueryAttention.fromConfig(this.config, { layer, dtype: matrixDtype }));
    attention.loadStateDict(new Map([...tensors].filter(([name]) => name.startsWith(`${p}self_attn.`))), { prefix: `${p}self_attn.` });
    const linear = (name) => own(linearFrom(attn, tensors, `${p}mlp.${name}`));
    // attn.feedForward's parts.
    const mlp = this.layout.fusedMlp ? { gateUp: linear('gate_up_proj'), down: linear('down_proj') }
      : { gate: linear('gate_proj'), up: linear('up_proj'), down: linear('down_proj') };
    const block = { attention, mlp };
    for (const name of NORMS[this.layout.norms]) block[name] = tensors.get(`${p}${name}.weight`).data;
    return block;
  }

  /** The token embedding rows of `ids`, scaled as the family does. */
  async embed(checkpoint, ids) {
    const x = await checkpoint.rows(this.embedding, ids);
    if (this.embedScale !== 1) for (let i = 0; i < x.length; i++) x[i] *= this.embedScale;
    return x;
  }

  norm(values, weight, out) {
    return rmsNorm(values, weight, this.width, this.eps, this.layout.unitOffset, out);
  }

  /**
   * One layer over x [N · t, width] in place; ctx: { n, t, attention (GroupedQueryAttention.forward's
   * options), buffers (the call's reused arrays) } → the attention's weights tensor, or null.
   */
  runLayer(block, x, ctx) {
    const { n, t, buffers } = ctx, width = this.width, norms = this.layout.norms;
    // Every norm's result is used up before the next norm: one buffer serves them all.
    buffers.normed ??= new Float32Array(n * t * width);
    const norm = (values, name) => this.norm(values, block[name], buffers.normed);
    const input = norms === 'post' ? x : norm(x, 'input_layernorm');
    const { output, weights } = block.attention.forward({ data: input, shape: [n, t, width] }, ctx.attentionOptions());
    addInto(x, norms === 'pre' ? output.data : norm(output.data, 'post_attention_layernorm'));
    const mlpInput = norms === 'pre' ? norm(x, 'post_attention_layernorm') : norms === 'sandwich' ? norm(x, 'pre_feedforward_layernorm') : x;
    const mlpOutput = this.mlp(mlpInput, block, n * t, buffers);
    addInto(x, norms === 'pre' ? mlpOutput : norm(mlpOutput, 'post_feedforward_layernorm'));
    return weights;
  }

  /** What the layer's attention reads from x [N · t, width]: Model.project's parts. */
  project(block, x, { n, t, positions }) {
    const input = this.layout.norms === 'post' ? x : this.norm(x, block.input_layernorm);
    return attentionParts(block.attention, input, n, t, this.width, positions);
  }

  // down(act(gate(x)) · up(x)) (Phi-3's gate and up the two halves of one projection), into an
  // array of the call's `buffers`, reused layer after layer.
  mlp(x, block, rows, buffers) {
    buffers.mlp ??= new Float32Array(rows * this.width);
    return this.attn.feedForward({ data: x, shape: [rows, this.width] }, block.mlp, { activation: this.act, out: buffers.mlp }).data;
  }

  /** The final hidden rows, normed, that the head reads. */
  final(x, globals) {
    return this.norm(x, globals.get(`${this.root}norm.weight`).data);
  }
}

// The demo's trained model (scripts/train_demo_model.py): a two-layer, character-level decoder in
// the Llama layout whose attention blocks are the package's GroupedQueryAttention and whose MLP and
// output head (tied to the embedding) are its Linear; the embedding and RMSNorm are plain JS. No
// DOM: the tests run this file under Node.
import { addInto, blockParts, headRows, rmsNorm } from './models/ops.js';

// The Hugging Face state-dict names the training script writes.
const layerPrefix = (layer) => `model.layers.${layer}.`;

export class CharModel {
  /**
   * attn: an initialised package instance; config: web/model/config.json; tensors: the Map
   * attn.loadSafetensors returned for web/model/model.safetensors.
   */
  constructor(attn, config, tensors) {
    this.config = config;
    this.vocab = config.vocab;
    this.layers = config.num_hidden_layers;
    this.heads = config.num_attention_heads;
    this.width = config.hidden_size;
    this.inner = config.intermediate_size;
    this.eps = config.rms_norm_eps;
    const weight = (name) => {
      const tensor = tensors.get(name);
      if (!tensor) throw new Error(`model: ${name} is missing from the weights file`);
      return tensor.data;
    };
    this.embedding = weight('model.embed_tokens.weight');
    this.finalNorm = weight('model.norm.weight');
    const linear = (name, inFeatures, out) => new attn.Linear(inFeatures, out, { bias: false }).loadStateDict({ weight: { data: weight(name), shape: [out, inFeatures] } });
    this.head = linear('model.embed_tokens.weight', this.width, this.vocab.length);
    this.blocks = [];
    for (let layer = 0; layer < this.layers; layer++) {
      const prefix = layerPrefix(layer);
      const attention = new attn.GroupedQueryAttention(this.width, this.heads, config.num_key_value_heads, {
        headDim: config.head_dim,
        ropeBase: config.rope_theta,
      });
      attention.loadStateDict(tensors, { prefix: `${prefix}self_attn.` });
      this.blocks.push({
        attention,
        inputNorm: weight(`${prefix}input_layernorm.weight`),
        postNorm: weight(`${prefix}post_attention_layernorm.weight`),
        gate: linear(`${prefix}mlp.gate_proj.weight`, this.width, this.inner),
        up: linear(`${prefix}mlp.up_proj.weight`, this.width, this.inner),
        down: linear(`${prefix}mlp.down_proj.weight`, this.inner, this.width),
      });
    }
  }

  /** Token ids of `text`: one per character; characters outside the vocabulary become '?'. */
  encode(text) {
    const unknown = this.vocab.indexOf('?');
    return Int32Array.from(text, (c) => {
      const id = this.vocab.indexOf(c);
      return id < 0 ? unknown : id;
    });
  }

  decode(ids) {
    return Array.from(ids, (id) => this.vocab[id]).join('');
  }

  /** One f16 (or f32) KVCache per layer, for generation. */
  createCaches(maxLength, dtype = 'f16') {
    return this.blocks.map((block) => block.attention.createCache(maxLength, { dtype }));
  }

  /**
   * Runs `ids` (appended to `caches` when given: the positions continue from what they hold).
   * → { logits [t, vocab] (or as `logits` says: 'all', 'last', 'none'), weights: per layer
   * [heads, t, m] or null, attentionInputs: per layer the normalised [t, width] rows each attention
   * block read (the neuron view's q and k come from them) }.
   */
  forward(ids, { caches = null, needWeights = false, logits = 'all' } = {}) {
    const t = ids.length;
    const width = this.width;
    const x = new Float32Array(t * width);
    for (let i = 0; i < t; i++) x.set(this.embedding.subarray(ids[i] * width, (ids[i] + 1) * width), i * width);
    const weights = [];
    const attentionInputs = [];
    // Arrays reused layer after layer (fresh ones cost more than these small layers): one for the
    // norms whose result is used up at once (the MLP's input, the head's), and the MLP's results
    // (mlp()). The attention inputs stay fresh: forward() returns them.
    const normed = new Float32Array(t * width);
    const buffers = {};
    this.blocks.forEach((block, layer) => {
      const input = rmsNorm(x, block.inputNorm, width, this.eps);
      attentionInputs.push(input);
      const result = block.attention.forward({ shape: [1, t, width], data: input }, { cache: caches?.[layer] ?? null, needWeights });
      addInto(x, result.output.data);
      weights.push(result.weights ? result.weights.data : null);
      addInto(x, this.mlp(rmsNorm(x, block.postNorm, width, this.eps, false, normed), block, t, buffers));
    });
    const result = headRows(this.head, rmsNorm(x, this.finalNorm, width, this.eps, false, normed), t, width, logits);
    return { logits: result, weights: needWeights ? weights : null, attentionInputs };
  }

  /**
   * What layer `layer`'s attention reads from its input rows x [t, width] (forward()'s
   * attentionInputs, or some of their rows with their `positions`), and how it scores: ops.js's
   * blockParts.
   */
  attentionParts(x, layer, positions = undefined) {
    return blockParts(this.blocks[layer].attention, x, this.width, positions);
  }

  /** down(SiLU(gate(x)) · up(x)), its results in `buffers` ({ gate, up, down }, made on first use). */
  mlp(x, block, t, buffers) {
    const rows = { data: x, shape: [t, this.width] };
    const gate = block.gate.forward(rows, { out: buffers.gate ??= new Float32Array(t * this.inner) }).data;
    const up = block.up.forward(rows, { out: buffers.up ??= new Float32Array(t * this.inner) }).data;
    for (let i = 0; i < gate.length; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i]; // SiLU(gate) · up
    return block.down.forward({ data: gate, shape: [t, this.inner] }, { out: buffers.down ??= new Float32Array(t * this.width) }).data;
  }

  /** Frees the model's modules (its attention blocks and Linear layers) in wasm memory. */
  dispose() {
    this.head.dispose();
    for (const block of this.blocks) for (const module of [block.attention, block.gate, block.up, block.down]) module.dispose();
  }
}

/**
 * Greedy generation through f16 KV caches, one token a step, keeping every layer's weights as
 * they arrive (a prefill's square, then one row a step) so a view can redraw the growing map.
 */
export class Generation {
  constructor(model, ids, maxLength, dtype = 'f16') {
    this.model = model;
    this.maxLength = maxLength;
    this.caches = model.createCaches(maxLength, dtype);
    this.ids = Array.from(ids);
    this.rows = model.blocks.map(() => []); // per layer: per query position, its [heads, position + 1] row
    const { logits, weights } = model.forward(Int32Array.from(ids), { caches: this.caches, needWeights: true, logits: 'last' });
    const t = ids.length;
    weights.forEach((layer, l) => {
      for (let i = 0; i < t; i++) {
        const row = new Float32Array(model.heads * (i + 1));
        for (let h = 0; h < model.heads; h++) row.set(layer.subarray((h * t + i) * t, (h * t + i) * t + i + 1), h * (i + 1));
        this.rows[l].push(row);
      }
    });
    this.next = logits;
  }

  get full() {
    return this.ids.length >= this.maxLength;
  }

  /** Appends the most likely next token and runs it through the caches. → { id, stepMs }. */
  step() {
    if (this.full) throw new Error(`Generation: the caches hold ${this.maxLength} tokens and are full`);
    const id = argmax(this.next);
    this.ids.push(id);
    const started = performance.now();
    const { logits, weights } = this.model.forward(Int32Array.of(id), { caches: this.caches, needWeights: true });
    const stepMs = performance.now() - started;
    weights.forEach((layer, l) => this.rows[l].push(Float32Array.from(layer)));
    this.next = logits;
    return { id, stepMs };
  }

  /** Every layer's weights so far as one [layers · heads, t, t] array, zeros above the diagonal. */
  weights() {
    const { heads } = this.model;
    const t = this.ids.length;
    const out = new Float32Array(this.rows.length * heads * t * t);
    this.rows.forEach((rows, l) => rows.forEach((row, i) => {
      for (let h = 0; h < heads; h++) out.set(row.subarray(h * (i + 1), (h + 1) * (i + 1)), ((l * heads + h) * t + i) * t);
    }));
    return out;
  }

  dispose() {
    for (const cache of this.caches) cache.dispose();
  }
}

function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

/** x [rows, inner] · w[outer, inner]ᵀ → [rows, outer]: nn.Linear's layout, rows of w contiguous. */
export function matmulTransposed(x, w, rows, inner, outer) {
  const out = new Float32Array(rows * outer);
  for (let r = 0; r < rows; r++) {
    const xRow = r * inner;
    const outRow = r * outer;
    let o = 0;
    // Four outputs at once read each x[i] once for four rows of w: twice as fast in V8 as one.
    for (; o + 4 <= outer; o += 4) {
      const w0 = o * inner;
      const w1 = w0 + inner;
      const w2 = w1 + inner;
      const w3 = w2 + inner;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      for (let i = 0; i < inner; i++) {
        const xi = x[xRow + i];
        s0 += xi * w[w0 + i];
        s1 += xi * w[w1 + i];
        s2 += xi * w[w2 + i];
        s3 += xi * w[w3 + i];
      }
      out[outRow + o] = s0;
      out[outRow + o + 1] = s1;
      out[outRow + o + 2] = s2;
      out[outRow + o + 3] = s3;
    }
    for (; o < outer; o++) {
      let sum = 0;
      for (let i = 0, at = o * inner; i < inner; i++, at++) sum += x[xRow + i] * w[at];
      out[outRow + o] = sum;
    }
  }
  return out;
}

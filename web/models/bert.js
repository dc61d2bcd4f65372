// BERT (Hugging Face's BertForMaskedLM): word, position and token-type embeddings with a
// LayerNorm, per layer a bidirectional self-attention and an MLP, each added and LayerNormed after
// (post-norm), and the masked-LM head (dense, GELU, LayerNorm, the decoder tied to the word
// embeddings, a bias). Attention is scaledDotProductAttention; the projections the package's
// Linear. No DOM.
import { layerNormOf, linearOf, owning, tensorOf } from './weights.js';
import { activate, addInto, embed, floats, headRows, layerNorm, layerOut, mergeHeads, splitHeads } from './ops.js';

export class BertModel {
  constructor(attn, config, tensors) {
    this.attn = attn;
    this.config = config;
    this.modelType = 'bert';
    this.layers = config.num_hidden_layers;
    this.heads = config.num_attention_heads;
    this.width = config.hidden_size;
    this.eps = config.layer_norm_eps ?? 1e-12;
    this.act = config.hidden_act ?? 'gelu';
    // BertForMaskedLM's names, or BertModel's without the 'bert.' prefix (then no masked-LM head).
    const root = tensors.has('bert.embeddings.word_embeddings.weight') ? 'bert.' : '';
    const e = `${root}embeddings.`;
    this.words = tensorOf(tensors, `${e}word_embeddings.weight`);
    this.positions = tensorOf(tensors, `${e}position_embeddings.weight`);
    this.types = tensorOf(tensors, `${e}token_type_embeddings.weight`);
    this.vocabSize = this.words.shape[0];
    this.maxPositions = this.positions.shape[0];
    const norm = (name) => layerNormOf(tensors, name);
    this.embeddingNorm = norm(`${e}LayerNorm`);
    this.owned = owning((own) => {
      const linear = (name) => own(linearOf(attn, tensors, name, { bias: true }));
      this.blocks = Array.from({ length: this.layers }, (_, layer) => {
        const prefix = `${root}encoder.layer.${layer}.`;
        return {
          query: linear(`${prefix}attention.self.query`), key: linear(`${prefix}attention.self.key`), value: linear(`${prefix}attention.self.value`),
          output: linear(`${prefix}attention.output.dense`), attentionNorm: norm(`${prefix}attention.output.LayerNorm`),
          intermediate: linear(`${prefix}intermediate.dense`), ffnOutput: linear(`${prefix}output.dense`), ffnNorm: norm(`${prefix}output.LayerNorm`),
        };
      });
      const p = 'cls.predictions.';
      if (!tensors.has(`${p}transform.dense.weight`)) return;
      this.transform = linear(`${p}transform.dense`);
      this.transformNorm = norm(`${p}transform.LayerNorm`);
      // The decoder is tied to the word embeddings; its bias is cls.predictions.bias.
      this.decoder = own(new attn.Linear(this.width, this.vocabSize, { dtype: this.words.dtype === 'f16' ? 'f16' : 'f32' }));
      this.decoder.loadStateDict({ weight: tensors.get(`${p}decoder.weight`) ?? this.words, bias: { data: floats(tensorOf(tensors, `${p}bias`)), shape: [this.vocabSize] } });
    });
  }

  /**
   * ids → { logits (masked-LM) [t, vocab], attentions: per layer [heads, t, t] or null,
   * attentionInputs: per layer [t, width] (with `needInputs`) or null }.
   */
  forward(ids, { needWeights = false, logits = 'all', needInputs = false, weightsInto = null } = {}) {
    const t = ids.length, width = this.width, heads = this.heads, d = width / heads;
    if (t > this.maxPositions) throw new Error(`bert reads at most ${this.maxPositions} tokens (max_position_embeddings); got ${t}`);
    const x0 = embed(this.words, ids, width);
    addInto(x0, embed(this.positions, Int32Array.from({ length: t }, (_, i) => i), width));
    addInto(x0, embed(this.types, new Int32Array(t), width));  // token_type_ids 0: one segment
    let x = layerNorm(x0, this.embeddingNorm.w, this.embeddingNorm.b, width, this.eps);
    const attentions = [], attentionInputs = [];
    const rows = (data) => ({ data, shape: [t, data.length / t] });
    this.blocks.forEach((block, layer) => {
      if (needInputs) attentionInputs.push(x);
      const { query, key, value } = this.attentionParts(x, layer);
      const { output, weights } = this.attn.scaledDotProductAttention(query, key, value, { needWeights, out: layerOut(weightsInto, needWeights, layer, heads, t) });
      attentions.push(weights ? weights.data : null);
      const attended = addInto(block.output.forward(rows(mergeHeads(output.data, t, heads, d))).data, x);
      x = layerNorm(attended, block.attentionNorm.w, block.attentionNorm.b, width, this.eps);
      const hidden = activate(block.intermediate.forward(rows(x)).data, this.act);
      x = layerNorm(addInto(block.ffnOutput.forward(rows(hidden)).data, x), block.ffnNorm.w, block.ffnNorm.b, width, this.eps);
    });
    const kept = { attentions: needWeights ? attentions : null, attentionInputs: needInputs ? attentionInputs : null };
    if (logits === 'none' || !this.transform) return { logits: null, ...kept };
    const transformed = activate(this.transform.forward(rows(x)).data, this.act);
    const final = layerNorm(transformed, this.transformNorm.w, this.transformNorm.b, width, this.eps);
    return { logits: headRows(this.decoder, final, t, width, logits), ...kept };
  }

  /** As DecoderModel's (decoder.js): q, k, v [1, heads, t, d] of the layer's input; no mask. */
  attentionParts(input, layer) {
    const t = input.length / this.width, d = this.width / this.heads;
    const block = this.blocks[layer];
    const [query, key, value] = [block.query, block.key, block.value].map((linear) => splitHeads(linear.forward({ data: input, shape: [t, this.width] }).data, t, this.heads, d));
    return { query, key, value, scale: 1 / Math.sqrt(d), softcap: null, window: null, causal: false, about: 'bidirectional; positions learned, added to the input' };
  }

  dispose() {
    this.owned.dispose();
  }
}

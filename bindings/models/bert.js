// BERT (Hugging Face's BertForMaskedLM, or BertModel's names without a head): word, position and
// token-type embeddings with a LayerNorm, per layer a bidirectional self-attention and an MLP, each
// added and LayerNormed after (post-norm), and the masked-LM head (dense, GELU, LayerNorm, the
// decoder tied to the word embeddings, a bias). Attention is scaledDotProductAttention.
import { rowAttention } from './attention.js';
import { activate, addInto, layerNorm, splitHeads } from './ops.js';
import { linearFrom, linearHead, multiHeadSizes } from './parts.js';

export class BertFamily {
  constructor(attn, config, checkpoint) {
    Object.assign(this, { attn, config, ...multiHeadSizes(config) });
    this.eps = config.layer_norm_eps ?? 1e-12;
    this.act = config.hidden_act ?? 'gelu';
    this.causal = false;
    this.root = checkpoint.has('bert.embeddings.word_embeddings.weight') ? 'bert.' : '';
    const e = `${this.root}embeddings.`;
    this.embedding = `${e}word_embeddings.weight`;
    this.positionRows = `${e}position_embeddings.weight`;
    this.typeRows = `${e}token_type_embeddings.weight`;
    this.vocabSize = checkpoint.entry(this.embedding).shape[0];
    this.maxPositions = checkpoint.entry(this.positionRows).shape[0];
    // BertModel's checkpoints have no masked-LM head: their logits are none.
    this.hasHead = checkpoint.has('cls.predictions.transform.dense.weight');
    // The decoder is tied to the word embeddings unless the file holds its own.
    this.decoderName = checkpoint.has('cls.predictions.decoder.weight') ? 'cls.predictions.decoder.weight' : this.embedding;
  }

  globals() {
    const w = this.width, e = `${this.root}embeddings.LayerNorm.`;
    return { [`${e}weight`]: [w], [`${e}bias`]: [w] };
  }

  layerTensors(layer) {
    const p = `${this.root}encoder.layer.${layer}.`, w = this.width;
    const linear = (name, out, inFeatures) => [{ name: `${p}${name}.weight`, shape: [out, inFeatures], matrix: true }, { name: `${p}${name}.bias`, shape: [out], matrix: false }];
    const norm = (name) => ['weight', 'bias'].map((part) => ({ name: `${p}${name}.${part}`, shape: [w], matrix: false }));
    return [...['query', 'key', 'value'].flatMap((name) => linear(`attention.self.${name}`, w, w)), ...linear('attention.output.dense', w, w), ...norm('attention.output.LayerNorm'),
      ...linear('intermediate.dense', this.inner, w), ...linear('output.dense', w, this.inner), ...norm('output.LayerNorm')];
  }

  buildLayer(tensors, layer, own) {
    const p = `${this.root}encoder.layer.${layer}.`;
    const linear = (name) => own(linearFrom(this.attn, tensors, `${p}${name}`));
    const norm = (name) => ({ w: tensors.get(`${p}${name}.weight`).data, b: tensors.get(`${p}${name}.bias`).data });
    return {
      query: linear('attention.self.query'), key: linear('attention.self.key'), value: linear('attention.self.value'),
      output: linear('attention.output.dense'), attentionNorm: norm('attention.output.LayerNorm'),
      intermediate: linear('intermediate.dense'), ffnOutput: linear('output.dense'), ffnNorm: norm('output.LayerNorm'),
    };
  }

  /** LayerNorm(word + position + token type 0) rows: one segment. */
  async embed(checkpoint, ids, positions, globals) {
    const x = addInto(await checkpoint.rows(this.embedding, ids), await checkpoint.rows(this.positionRows, positions));
    addInto(x, await checkpoint.rows(this.typeRows, new Int32Array(ids.length)));
    const e = `${this.root}embeddings.LayerNorm.`;
    return layerNorm(x, globals.get(`${e}weight`).data, globals.get(`${e}bias`).data, this.width, this.eps);
  }

  qkv(block, x, rows) {
    return [block.query, block.key, block.value].map((linear) => ({ data: linear.forward({ data: x, shape: [rows, this.width] }).data, rowWidth: this.width, offset: 0 }));
  }

  project(block, x, { n, t }) {
    const [query, key, value] = this.qkv(block, x, n * t).map((part) => splitHeads(part.data, n, t, this.heads, this.headDim));
    return { query, key, value, scale: 1 / Math.sqrt(this.headDim), softcap: null, window: null, causal: false };
  }

  // Post-norm: x is replaced, not added to; the new rows are written back into x.
  runLayer(block, x, ctx) {
    const { n, t } = ctx, width = this.width, rows = n * t;
    const shaped = (data, cols = width) => ({ data, shape: [rows, cols] });
    const [q, k, v] = this.qkv(block, x, rows);
    const { output, weights } = rowAttention(this.attn, q, k, v, { n, t, heads: this.heads, d: this.headDim, causal: false, ctx });
    const attended = layerNorm(addInto(block.output.forward(shaped(output)).data, x), block.attentionNorm.w, block.attentionNorm.b, width, this.eps);
    const ffn = this.attn.feedForward(shaped(attended), { up: block.intermediate, down: block.ffnOutput }, { activation: this.act }).data;
    x.set(layerNorm(addInto(ffn, attended), block.ffnNorm.w, block.ffnNorm.b, width, this.eps));
    return weights;
  }

  final(x) {
    return x;
  }

  headTensors() {
    if (!this.hasHead) return [];
    const p = 'cls.predictions.', w = this.width;
    return [
      { name: `${p}transform.dense.weight`, shape: [w, w], matrix: true }, { name: `${p}transform.dense.bias`, shape: [w], matrix: false },
      { name: `${p}transform.LayerNorm.weight`, shape: [w], matrix: false }, { name: `${p}transform.LayerNorm.bias`, shape: [w], matrix: false },
      // The decoder's bias is cls.predictions.bias.
      { name: this.decoderName, shape: [this.vocabSize, w], matrix: true }, { name: `${p}bias`, shape: [this.vocabSize], matrix: false },
    ];
  }

  buildHead(tensors, own) {
    const p = 'cls.predictions.';
    const transform = own(linearFrom(this.attn, tensors, `${p}transform.dense`));
    const norm = { w: tensors.get(`${p}transform.LayerNorm.weight`).data, b: tensors.get(`${p}transform.LayerNorm.bias`).data };
    const decoder = own(linearFrom(this.attn, new Map([['decoder.weight', tensors.get(this.decoderName)], ['decoder.bias', tensors.get(`${p}bias`)]]), 'decoder'));
    const head = linearHead(decoder);
    return {
      forward: (x, rows) => {
        const transformed = activate(transform.forward({ data: x, shape: [rows, this.width] }).data, this.act);
        return head.forward(layerNorm(transformed, norm.w, norm.b, this.width, this.eps), rows);
      },
    };
  }
}

// One convention across the Embind boundary: every entry point takes the core's structs, an
// option left out takes the core's default (stated once, in its struct), and a module exposes its
// configuration as the core resolved it. The values below pin that contract from the outside.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { assertAttentionError } from './helpers.js';

let attn;
before(async () => {
  attn = await init();
});
after(() => attn.dispose());

// The enumerable properties a module exposes.
const exposed = (module, keys) => Object.fromEntries(keys.map((key) => [key, module[key]]));

describe('a module exposes its configuration as the core resolved it', () => {
  test('MultiheadAttention: the defaults of torch.nn.MultiheadAttention, kdim and vdim from embedDim', () => {
    const mha = new attn.MultiheadAttention(8, 2);
    assert.deepEqual(exposed(mha, ['embedDim', 'numHeads', 'bias', 'addBiasKV', 'addZeroAttn', 'kdim', 'vdim', 'batchFirst', 'dropout']), {
      embedDim: 8, numHeads: 2, bias: true, addBiasKV: false, addZeroAttn: false, kdim: 8, vdim: 8, batchFirst: false, dropout: 0,
    });
    // Given values come back as given (dropout is a float32 in the core).
    const given = new attn.MultiheadAttention(8, 2, { bias: false, kdim: 5, dropout: 0.1 });
    assert.deepEqual(exposed(given, ['bias', 'kdim', 'vdim', 'dropout']), { bias: false, kdim: 5, vdim: 8, dropout: 0.1 });
    mha.dispose();
    given.dispose();
  });

  test('SelfAttention, AdditiveAttention and RelativeMultiHeadAttention', () => {
    const self = new attn.SelfAttention(8, 4, 6);
    const additive = new attn.AdditiveAttention(6, 5, 4);
    const relative = new attn.RelativeMultiHeadAttention(2, 8);
    assert.equal(self.dropout, 0);
    assert.equal(additive.dropout, 0);
    assert.deepEqual(exposed(relative, ['heads', 'dModel', 'P', 'dropout']), { heads: 2, dModel: 8, P: 4096, dropout: 0 });
    for (const module of [self, additive, relative]) module.dispose();
  });

  test('GroupedQueryAttention: headDim and rotaryDim derived, the rest its defaults', () => {
    const block = new attn.GroupedQueryAttention(16, 4, 2);
    assert.deepEqual(
      exposed(block, ['headDim', 'rotaryDim', 'qkvBias', 'outputBias', 'ropeBase', 'ropeInterleaved', 'slidingWindow', 'softcap', 'scale', 'dtype', 'qkNorm', 'ropeScaling', 'maxPositionEmbeddings']),
      {
        headDim: 4, rotaryDim: 4, qkvBias: false, outputBias: false, ropeBase: 10000, ropeInterleaved: false, slidingWindow: null, softcap: null,
        scale: null, dtype: 'f32', qkNorm: null, ropeScaling: null, maxPositionEmbeddings: null,
      },
    );
    const normed = new attn.GroupedQueryAttention(16, 4, 2, { headDim: 8, qkNorm: { scope: 'head' }, dtype: 'f16', softcap: 50, rotaryDim: 4 });
    assert.deepEqual(exposed(normed, ['headDim', 'rotaryDim', 'dtype', 'softcap', 'qkNorm']), {
      headDim: 8, rotaryDim: 4, dtype: 'f16', softcap: 50, qkNorm: { scope: 'head', eps: 1e-6, unitOffset: false },
    });
    const given = new attn.GroupedQueryAttention(16, 4, 2, { qkNorm: { scope: 'all', eps: 1e-5, unitOffset: true } });
    assert.deepEqual(given.qkNorm, { scope: 'all', eps: 1e-5, unitOffset: true });
    for (const module of [block, normed, given]) module.dispose();
  });

  test('Linear', () => {
    const linear = new attn.Linear(4, 3);
    assert.deepEqual(exposed(linear, ['inFeatures', 'outFeatures', 'bias', 'dtype']), { inFeatures: 4, outFeatures: 3, bias: true, dtype: 'f32' });
    linear.dispose();
  });

  test('fromConfig: config.json without rms_norm_eps or rope_theta gets the block defaults, which are Hugging Face\'s', () => {
    const block = attn.GroupedQueryAttention.fromConfig({ model_type: 'qwen3', hidden_size: 16, num_attention_heads: 4, head_dim: 4 });
    assert.equal(block.ropeBase, 10000);
    assert.deepEqual(block.qkNorm, { scope: 'head', eps: 1e-6, unitOffset: false });
    block.dispose();
  });
});

describe('the core checks what values mean, and fromConfig names its findings by config.json', () => {
  const base = { model_type: 'qwen3', hidden_size: 16, num_attention_heads: 4, head_dim: 4 };
  const CASES = [
    ['a negative rms_norm_eps', { ...base, rms_norm_eps: -1 }, 'config.rms_norm_eps', ['at least 0', 'got -1']],
    ['a rope_theta of 0', { ...base, rope_theta: 0 }, 'config.rope_theta', ['positive', 'got 0']],
    ['linear scaling without its factor', { ...base, rope_scaling: { rope_type: 'linear' } }, 'config.rope_scaling.factor', ["rope_type 'linear' needs it"]],
    ['v5 rope_parameters without the factor', { ...base, rope_parameters: { rope_type: 'linear', rope_theta: 1e4 } }, 'config.rope_parameters.factor', ["rope_type 'linear' needs it"]],
    ['a zero max_position_embeddings', { ...base, max_position_embeddings: 0 }, 'config.max_position_embeddings', ['positive integer', 'got 0']],
    ['a negative softcap', { model_type: 'gemma2', hidden_size: 16, num_attention_heads: 4, head_dim: 4, attn_logit_softcapping: -1 }, 'config.attn_logit_softcapping', ['positive', 'got -1']],
    ['key/value heads that do not divide the heads', { ...base, num_key_value_heads: 3 }, 'config.num_key_value_heads', ['divisor of numHeads (4)', 'got 3']],
  ];
  for (const [what, config, argument, message] of CASES) {
    test(what, () => {
      assertAttentionError(() => attn.GroupedQueryAttention.fromConfig(config), AttentionError, argument, message);
      assert.equal(attn.stats().liveObjects, 0);
    });
  }

  test('dropout, qkNorm.eps, ropeBase and softcap: their ranges are the core\'s', () => {
    assertAttentionError(() => new attn.MultiheadAttention(8, 2, { dropout: 1 }), AttentionError, 'dropout', ['[0, 1)', 'got 1']);
    assertAttentionError(() => new attn.GroupedQueryAttention(16, 4, 2, { qkNorm: { scope: 'head', eps: -1 } }), AttentionError, 'qkNorm.eps', ['at least 0']);
    assertAttentionError(() => new attn.GroupedQueryAttention(16, 4, 2, { ropeBase: -5 }), AttentionError, 'ropeBase', ['positive', 'got -5']);
    assertAttentionError(() => new attn.GroupedQueryAttention(16, 4, 2, { softcap: 0 }), AttentionError, 'softcap', ['positive', 'got 0']);
    assertAttentionError(() => new attn.GroupedQueryAttention(16, 4, 2, { qkNorm: { scope: 'none' } }), AttentionError, 'qkNorm.scope', ['"head", "all"', 'got "none"']);
    assert.equal(attn.stats().liveObjects, 0);
  });
});

// Bad input: every kind throws an AttentionError naming the argument (and the shapes, where
// shapes are involved), never harms the instance, and never grows wasm memory.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { TOLERANCE, bitIdentical, fixture, fixtureOptions, maxRelativeError } from './helpers.js';

const f32 = (shape) => ({ shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)).map((_, i) => Math.cos(i)) });

// A valid problem to spoil one piece at a time: scores [2, 3, 5].
const query = f32([2, 3, 4]);
const key = f32([2, 5, 4]);
const value = f32([2, 5, 6]);

// A known-good case, computed before and after every bad call.
const good = fixture('batch_heads_no_mask');
const goodOpts = fixtureOptions(good, { needWeights: true });

/**
 * Each bad call: `call(attn)` must throw an AttentionError whose `argument` matches `argument`,
 * whose message names the argument, and which contains every string / matches every RegExp in
 * `message` (the given and the expected shapes, where shapes are involved).
 */
const BAD_CALLS = {
  'query of rank 1': {
    call: (attn) => attn.scaledDotProductAttention(f32([4]), key, value),
    argument: /^query/,
    message: ['[4]', /n, d\]/],
  },
  'query of rank 9': {
    call: (attn) => attn.scaledDotProductAttention(f32([1, 1, 1, 1, 1, 1, 1, 3, 4]), key, value),
    argument: /^query/,
    message: ['[1, 1, 1, 1, 1, 1, 1, 3, 4]', /n, d\]/],
  },
  'd differs between query and key': {
    call: (attn) => attn.scaledDotProductAttention(query, f32([2, 5, 3]), value),
    argument: /^key/,
    message: ['[2, 5, 3]', /\[2, \w+, 4\]/],
  },
  'm differs between key and value': {
    call: (attn) => attn.scaledDotProductAttention(query, key, f32([2, 4, 6])),
    argument: /^value/,
    message: ['[2, 4, 6]', /\[2, 5, \w+\]/],
  },
  'leading dims differ': {
    call: (attn) => attn.scaledDotProductAttention(query, f32([3, 5, 4]), f32([3, 5, 6])),
    argument: /^key/,
    message: ['[3, 5, 4]', /\[2, \w+, 4\]/],
  },
  'a mask that does not broadcast': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { attnMask: { shape: [3, 4], data: new Uint8Array(12) } }),
    argument: /^attnMask/,
    message: ['[3, 4]', '[2, 3, 5]'],
  },
  'an Int32Array mask': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { attnMask: { shape: [3, 5], data: new Int32Array(15) } }),
    argument: /^attnMask/,
    message: ['Int32Array', 'Uint8Array', 'Float32Array'],
  },
  'Float64Array data': {
    call: (attn) => attn.scaledDotProductAttention({ shape: [2, 3, 4], data: new Float64Array(24) }, key, value),
    argument: /^query/,
    message: ['Float64Array', 'Float32Array'],
  },
  'a plain Array as a tensor': {
    call: (attn) => attn.scaledDotProductAttention(query, key, [1, 2, 3]),
    argument: /^value/,
    message: [],
  },
  'a plain Array as tensor data': {
    call: (attn) => attn.scaledDotProductAttention(query, { shape: [2, 5, 4], data: Array(40).fill(0) }, value),
    argument: /^key/,
    message: ['Float32Array'],
  },
  'a null tensor': {
    call: (attn) => attn.scaledDotProductAttention(null, key, value),
    argument: /^query/,
    message: ['null'],
  },
  'an undefined tensor': {
    call: (attn) => attn.scaledDotProductAttention(query, undefined, value),
    argument: /^key/,
    message: ['undefined'],
  },
  'a data length that does not match the shape': {
    call: (attn) => attn.scaledDotProductAttention({ shape: [2, 3, 4], data: new Float32Array(23) }, key, value),
    argument: /^query/,
    message: ['[2, 3, 4]', '23', '24'],
  },
  'a negative shape entry': {
    call: (attn) => attn.scaledDotProductAttention({ shape: [2, -3, 4], data: new Float32Array(0) }, key, value),
    argument: /^query/,
    message: ['[2, -3, 4]'],
  },
  'a fractional shape entry': {
    call: (attn) => attn.scaledDotProductAttention(query, { shape: [2, 2.5, 4], data: new Float32Array(20) }, value),
    argument: /^key/,
    message: ['[2, 2.5, 4]'],
  },
  'a NaN shape entry': {
    call: (attn) => attn.scaledDotProductAttention(query, key, { shape: [2, NaN, 6], data: new Float32Array(0) }),
    argument: /^value/,
    message: ['NaN'],
  },
  'a string shape entry': {
    call: (attn) => attn.scaledDotProductAttention({ shape: [2, '3', 4], data: new Float32Array(24) }, key, value),
    argument: /^query/,
    message: ['"3"'],
  },
  'scale Infinity': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { scale: Infinity }),
    argument: /scale/,
    message: ['Infinity'],
  },
  'scale NaN': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { scale: NaN }),
    argument: /scale/,
    message: ['NaN'],
  },
  'scale a string': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { scale: '0.5' }),
    argument: /scale/,
    message: ['0.5'],
  },
  'dropoutP -0.1': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { dropoutP: -0.1 }),
    argument: /dropoutP/,
    message: ['-0.1'],
  },
  'dropoutP 1': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { dropoutP: 1 }),
    argument: /dropoutP/,
    message: ['1'],
  },
  'dropoutP 1.5': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { dropoutP: 1.5 }),
    argument: /dropoutP/,
    message: ['1.5'],
  },
  'a non-integer seed': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { dropoutP: 0.1, seed: 2.5 }),
    argument: /seed/,
    message: ['2.5'],
  },
  'a negative seed': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { dropoutP: 0.1, seed: -3 }),
    argument: /seed/,
    message: ['-3'],
  },
  'an unknown option (isCasual)': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { isCasual: true }),
    argument: /isCasual/,
    message: [],
  },
  'a non-boolean isCausal': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { isCausal: 1 }),
    argument: /isCausal/,
    message: [],
  },
  'a non-boolean needWeights': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { needWeights: 'yes' }),
    argument: /needWeights/,
    message: [],
  },
  // v2 options. Heads are dim -3: q [1, 8, 3, 4] against k/v of 3 heads, which do not divide 8.
  'an unknown isCausal alignment': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { isCausal: 'lowerLeft' }),
    argument: /^isCausal$/,
    message: ['"lowerLeft"', "'lowerRight'"],
  },
  'key/value heads that do not divide the query heads': {
    call: (attn) => attn.scaledDotProductAttention(f32([1, 8, 3, 4]), f32([1, 3, 5, 4]), f32([1, 3, 5, 6]), { enableGqa: true }),
    argument: /^key$/,
    message: ['[1, 3, 5, 4]', 'Hkv', '8 heads'],
  },
  'fewer key/value heads without enableGqa': {
    call: (attn) => attn.scaledDotProductAttention(f32([1, 8, 3, 4]), f32([1, 2, 5, 4]), f32([1, 2, 5, 6])),
    argument: /^key$/,
    message: ['[1, 2, 5, 4]', '[1, 8, m, 4]', 'enableGqa'],
  },
  'enableGqa on rank-2 inputs': {
    call: (attn) => attn.scaledDotProductAttention(f32([3, 4]), f32([5, 4]), f32([5, 6]), { enableGqa: true }),
    argument: /^enableGqa$/,
    message: ['[3, 4]', 'rank 3'],
  },
  'window 0': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { window: 0 }),
    argument: /^window$/,
    message: ['got 0', 'integer'],
  },
  'a negative window': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { window: -4 }),
    argument: /^window$/,
    message: ['-4'],
  },
  'a fractional window': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { window: 2.5 }),
    argument: /^window$/,
    message: ['2.5'],
  },
  'softcap 0': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { softcap: 0 }),
    argument: /^softcap$/,
    message: ['positive finite', 'got 0'],
  },
  'a NaN softcap': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { softcap: NaN }),
    argument: /^softcap$/,
    message: ['NaN'],
  },
  'a softcap past float32': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { softcap: 1e300 }),
    argument: /^softcap$/,
    message: ['1e+300'],
  },
  'ALiBi slopes of the wrong length': {
    call: (attn) => attn.scaledDotProductAttention(f32([1, 4, 3, 4]), f32([1, 4, 5, 4]), f32([1, 4, 5, 6]), { alibi: new Float32Array(3) }),
    argument: /^alibi$/,
    message: ['4 slopes', 'got 3 slopes'],
  },
  'ALiBi slopes as a Float64Array': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { alibi: new Float64Array(2) }),
    argument: /^alibi$/,
    message: ['Float64Array', 'Float32Array'],
  },
  'ALiBi on rank-2 inputs': {
    call: (attn) => attn.scaledDotProductAttention(f32([3, 4]), f32([5, 4]), f32([5, 6]), { alibi: true }),
    argument: /^alibi$/,
    message: ['[3, 4]', 'rank 3'],
  },
  'documentIds with n != m': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { documentIds: { shape: [3], data: new Int32Array(3) } }),
    argument: /^documentIds$/,
    message: ['n = 3, m = 5', 'queryDocumentIds'],
  },
  'queryDocumentIds that do not broadcast': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, {
      queryDocumentIds: { shape: [4], data: new Int32Array(4) }, keyDocumentIds: { shape: [5], data: new Int32Array(5) },
    }),
    argument: /^queryDocumentIds$/,
    message: ['[4]', '[2, 3]'],
  },
  'keyDocumentIds that do not broadcast': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, {
      queryDocumentIds: { shape: [3], data: new Int32Array(3) }, keyDocumentIds: { shape: [3, 5], data: new Int32Array(15) },
    }),
    argument: /^keyDocumentIds$/,
    message: ['[3, 5]', '[2, 5]'],
  },
  'queryDocumentIds without keyDocumentIds': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, { queryDocumentIds: { shape: [3], data: new Int32Array(3) } }),
    argument: /^keyDocumentIds$/,
    message: ['queryDocumentIds', 'none'],
  },
  'document ids as a Float32Array': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, {
      queryDocumentIds: { shape: [3], data: new Float32Array(3) }, keyDocumentIds: { shape: [5], data: new Int32Array(5) },
    }),
    argument: /^queryDocumentIds\.data$/,
    message: ['Int32Array', 'Float32Array'],
  },
  'documentIds with queryDocumentIds': {
    call: (attn) => attn.scaledDotProductAttention(query, key, value, {
      documentIds: { shape: [3], data: new Int32Array(3) }, queryDocumentIds: { shape: [3], data: new Int32Array(3) },
    }),
    argument: /^documentIds$/,
    message: ['keyDocumentIds'],
  },
  'an odd rotaryDim': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { rotaryDim: 5 }),
    argument: /^rotaryDim$/,
    message: ['even', 'got 5'],
  },
  'a rotaryDim past the head dim': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { rotaryDim: 10 }),
    argument: /^rotaryDim$/,
    message: ['[0, 8]', 'got 10'],
  },
  'an odd head dim without rotaryDim': {
    call: (attn) => attn.rope(f32([2, 3, 7])),
    argument: /^x$/,
    message: ['[2, 3, 7]', 'even'],
  },
  'positions of the wrong length': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { positions: [0, 1] }),
    argument: /^positions$/,
    message: ['[3] (L, one per row of x) or [2, 3] (N, L)', 'got [2]'],
  },
  'positions that are not integers': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { positions: [0, 1.5, 2] }),
    argument: /^positions$/,
    message: ['Int32Array'],
  },
  'positions with an offset': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { positions: [0, 1, 2], offset: 4 }),
    argument: /^offset$/,
    message: ['positions'],
  },
  'a RoPE base of 0': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { base: 0 }),
    argument: /^base$/,
    message: ['positive'],
  },
  'RoPE of a rank-1 tensor': {
    call: (attn) => attn.rope(f32([8])),
    argument: /^x$/,
    message: ['[8]', 'L, d'],
  },
  // KVCache and GroupedQueryAttention: one cache (2 heads of 4, 3 of 5 positions held) and one
  // block (hidden 16, 4 heads over 2) per instance, so failing calls allocate nothing new.
  'a KVCache without heads': {
    call: (attn) => new attn.KVCache({ headDim: 4, maxLength: 8 }),
    argument: /^heads$/,
    message: ['an integer in [1, ', 'got undefined'],
  },
  'a KVCache of dtype bf16': {
    call: (attn) => new attn.KVCache({ heads: 2, headDim: 4, maxLength: 8, dtype: 'bf16' }),
    argument: /^dtype$/,
    message: ['"f16"', '"q8"', '"bf16"'],
  },
  'a KVCache window of 0': {
    call: (attn) => new attn.KVCache({ heads: 2, headDim: 4, maxLength: 8, window: 0 }),
    argument: /^window$/,
    message: ['got 0'],
  },
  'an append past maxLength': {
    call: (attn) => decoding(attn).cache.append(f32([1, 2, 3, 4]), f32([1, 2, 3, 4])),
    argument: /^key$/,
    message: ['[1, 2, 3, 4]', 't ≤ 2', 'maxLength 5, 3 held; to hold more, truncate() or reset() the cache, or create it with a larger maxLength'],
  },
  'an append whose value has fewer positions': {
    call: (attn) => decoding(attn).cache.append(f32([1, 2, 1, 4]), f32([1, 2, 2, 4])),
    argument: /^value$/,
    message: ['[1, 2, 2, 4]', '[1, 2, 1, 4]'],
  },
  'an append of heads the cache does not have': {
    call: (attn) => decoding(attn).cache.append(f32([1, 3, 1, 4]), f32([1, 3, 1, 4])),
    argument: /^key$/,
    message: ['[1, 3, 1, 4]', '[1, 2, t, 4]'],
  },
  'an attend of query heads that are no multiple of the cache heads': {
    call: (attn) => decoding(attn).cache.attend(f32([1, 3, 1, 4])),
    argument: /^query$/,
    message: ['[1, 3, 1, 4]', 'a multiple of 2'],
  },
  'an attend of more queries than positions held': {
    call: (attn) => decoding(attn).cache.attend(f32([1, 2, 4, 4])),
    argument: /^query$/,
    message: ['[1, 2, 4, 4]', 'n ≤ 3'],
  },
  'an attend mask that does not broadcast': {
    call: (attn) => decoding(attn).cache.attend(f32([1, 2, 1, 4]), { attnMask: { shape: [1, 1, 1, 4], data: new Uint8Array(4) } }),
    argument: /^attnMask$/,
    message: ['[1, 1, 1, 4]', '[1, 2, 1, 3]'],
  },
  'an attend with ALiBi slopes of the wrong length': {
    call: (attn) => decoding(attn).cache.attend(f32([1, 4, 1, 4]), { alibi: new Float32Array(2) }),
    argument: /^alibi$/,
    message: ['4 slopes', 'got 2 slopes'],
  },
  'an attend of a misspelt option': {
    call: (attn) => decoding(attn).cache.attend(f32([1, 2, 1, 4]), { is_causal: false }),
    argument: /^is_causal$/,
    message: ['isCausal'],
  },
  'a truncate past the positions held': {
    call: (attn) => decoding(attn).cache.truncate(4),
    argument: /^length$/,
    message: ['[0, 3]', 'got 4'],
  },
  'a negative truncate': {
    call: (attn) => decoding(attn).cache.truncate(-1),
    argument: /^length$/,
    message: ['-1'],
  },
  'a truncate of a ring that has dropped positions, below window − 1': {
    call: (attn) => refusing(attn).ring.truncate(1),
    argument: /^length$/,
    message: ['[2, 3]', 'window 3: the ring no longer holds the positions before 3', 'reset() and append again', 'got 1'],
  },
  "an f16 append of a finite value past binary16's range": {
    call: (attn) => refusing(attn).half.append(f32([1, 2, 1, 4]), { shape: [1, 2, 1, 4], data: Float32Array.of(0, 0, 0, 0, 0, 7e4, 0, 0) }),
    argument: /^value$/,
    message: ["|x| < 65520 (this cache of dtype 'f16' would store the value as ±Infinity", 'got 70000 at batch 0, head 1, position 3, dim 1'],
  },
  'a q8 append of NaN': {
    call: (attn) => refusing(attn).q8.append({ shape: [1, 2, 1, 4], data: Float32Array.of(0, 0, 0, 0, 0, 0, NaN, 0) }, f32([1, 2, 1, 4])),
    argument: /^key$/,
    message: ["finite values, |x| < 8321040 (127 · 65520: this cache of dtype 'q8' stores each block of 32", 'got NaN at batch 0, head 1, position 3, dim 2'],
  },
  "a q8 append of a value whose block scale binary16 cannot hold": {
    call: (attn) => refusing(attn).q8.append(f32([1, 2, 1, 4]), { shape: [1, 2, 1, 4], data: Float32Array.of(-9e6, 0, 0, 0, 0, 0, 0, 0) }),
    argument: /^value$/,
    message: ["dtype 'q8'", 'got -9000000 at batch 0, head 0, position 3, dim 0'],
  },
  'GroupedQueryAttention with key/value heads that do not divide the heads': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 3),
    argument: /^numKeyValueHeads$/,
    message: ['divisor of numHeads (4)', 'got 3'],
  },
  'GroupedQueryAttention with a hidden size the heads do not divide': {
    call: (attn) => new attn.GroupedQueryAttention(18, 4, 2),
    argument: /^hiddenSize$/,
    message: ['multiple of numHeads', '18'],
  },
  'GroupedQueryAttention with an odd rotaryDim': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2, { rotaryDim: 3 }),
    argument: /^rotaryDim$/,
    message: ['even', 'got 3'],
  },
  'a GroupedQueryAttention input of the wrong width': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 3, 12])),
    argument: /^x$/,
    message: ['[1, 3, 12]', '[N, t, 16]'],
  },
  'GroupedQueryAttention positions of the wrong length': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 3, 16]), { positions: [0, 1] }),
    argument: /^positions$/,
    message: ['[2]', '[3] or [1, 3]'],
  },
  'a GroupedQueryAttention.project input of the wrong width': {
    call: (attn) => decoding(attn).gqa.project(f32([1, 3, 12])),
    argument: /^x$/,
    message: ['[1, 3, 12]', '[N, t, 16]'],
  },
  'GroupedQueryAttention.project with forward()\'s attnMask': {
    call: (attn) => decoding(attn).gqa.project(f32([1, 3, 16]), { attnMask: { data: new Uint8Array(9), shape: [3, 3] } }),
    argument: /^attnMask$/,
    message: ['one of the options cache, positions, attentionMask', 'an unknown option'],
  },
  'GroupedQueryAttention.project positions of the wrong length': {
    call: (attn) => decoding(attn).gqa.project(f32([1, 3, 16]), { positions: [0, 1] }),
    argument: /^positions$/,
    message: ['[2]', '[3] or [1, 3]'],
  },
  'GroupedQueryAttention with a cache of other heads': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 1, 16]), { cache: decoding(attn).cache }),
    argument: /^cache$/,
    message: ['2 heads of 2 (createCache gives one)', 'got batch 1, 2 heads of 4'],
  },
  'GroupedQueryAttention with a cache that is not a KVCache': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 1, 16]), { cache: { append() {} } }),
    argument: /^cache$/,
    message: ['KVCache'],
  },
  'GroupedQueryAttention input past its cache': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 5, 16]), { cache: decoding(attn).gqaCache }),
    argument: /^x$/,
    message: ['[1, 5, 16]', 't ≤ 4', 'maxLength 4'],
  },
  'a GroupedQueryAttention state dict without k_proj.weight': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2).loadStateDict({
      'q_proj.weight': f32([16, 16]), 'v_proj.weight': f32([8, 16]), 'o_proj.weight': f32([16, 16]),
    }),
    argument: /k_proj\.weight/,
    message: ['[8, 16]'],
  },
  'a GroupedQueryAttention weight of binary16 bits without dtype f16': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2, { dtype: 'f16' }).loadStateDict({
      'q_proj.weight': f32([16, 16]), 'k_proj.weight': { data: new Uint16Array(128), shape: [8, 16] }, 'v_proj.weight': f32([8, 16]), 'o_proj.weight': f32([16, 16]),
    }),
    argument: /^stateDict\['k_proj\.weight'\]\.data$/,
    message: ["a Float32Array, or 16-bit words in a Uint16Array with dtype: 'f16' (binary16) or 'bf16' (bfloat16)", 'got Uint16Array(128) without a dtype'],
  },
  'a bfloat16 GroupedQueryAttention weight in a Float32Array': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2, { dtype: 'bf16' }).loadStateDict({
      'q_proj.weight': f32([16, 16]), 'k_proj.weight': { ...f32([8, 16]), dtype: 'bf16' }, 'v_proj.weight': f32([8, 16]), 'o_proj.weight': f32([16, 16]),
    }),
    argument: /^stateDict\['k_proj\.weight'\]\.data$/,
    message: ["'bf16' (bfloat16)", 'got Float32Array(128) with dtype "bf16"'],
  },
  'a Linear of dtype f64': {
    call: (attn) => new attn.Linear(4, 3, { dtype: 'f64' }),
    argument: /^dtype$/,
    message: ['"f32", "f16", "bf16"', 'got "f64"'],
  },
  'a bfloat16 Linear weight of the wrong length': {
    call: (attn) => new attn.Linear(4, 3, { dtype: 'bf16', bias: false }).loadStateDict({ weight: { data: new Uint16Array(11), shape: [3, 4], dtype: 'bf16' } }),
    argument: /^stateDict\['weight'\]\.data$/,
    message: ['length 12 for shape [3, 4]', 'got length 11'],
  },
  'a GroupedQueryAttention head mask of the wrong length': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 3, 16]), { headMask: [1, 0, 0.5] }),
    argument: /^headMask$/,
    message: ['[4] (numHeads)', 'got [3]'],
  },
  // Checked before the cache is touched: nothing is appended (the memory test repeats it).
  'a GroupedQueryAttention head mask of the wrong length with a cache': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 1, 16]), { cache: decoding(attn).gqaCache, headMask: new Float32Array(5) }),
    argument: /^headMask$/,
    message: ['[4] (numHeads)', 'got [5]'],
  },
  'a GroupedQueryAttention head mask of strings': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 3, 16]), { headMask: ['1', '1', '1', '1'] }),
    argument: /^headMask$/,
    message: ['a Float32Array or an array of numbers', 'got ["1", "1", "1", "1"]'],
  },
  'GroupedQueryAttention.project with forward()\'s headMask': {
    call: (attn) => decoding(attn).gqa.project(f32([1, 3, 16]), { headMask: [1, 1, 1, 1] }),
    argument: /^headMask$/,
    message: ['an unknown option'],
  },
  'a binary16 GroupedQueryAttention weight of the wrong shape': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2, { dtype: 'f16' }).loadStateDict({
      'q_proj.weight': f32([16, 16]), 'k_proj.weight': f32([8, 16]), 'v_proj.weight': { data: new Uint16Array(256), shape: [16, 16], dtype: 'f16' }, 'o_proj.weight': f32([16, 16]),
    }),
    argument: /^stateDict\['v_proj\.weight'\]$/,
    message: ['[8, 16]', 'got [16, 16]'],
  },
  'a prefix without its trailing dot': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2).loadStateDict(wholeModelNames(), { prefix: 'model.layers.1.self_attn' }),
    argument: /^prefix$/,
    message: ["a prefix ending in '.' ('model.layers.1.self_attn.'", "got 'model.layers.1.self_attn'"],
  },
  "a whole model's names without a prefix": {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2).loadStateDict(wholeModelNames()),
    argument: /^stateDict\['model\.layers\.0\.self_attn\.q_proj\.weight'\]$/,
    message: ["no such entry (this module has q_proj.weight, k_proj.weight, v_proj.weight, o_proj.weight; for one layer of a whole model's names, load with prefix 'model.layers.0.self_attn.')"],
  },
  'a prefix that stops short of the layer': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2).loadStateDict(wholeModelNames(), { prefix: 'model.' }),
    argument: /^stateDict\['model\.layers\.0\.self_attn\.q_proj\.weight'\]$/,
    message: ["load with prefix 'model.layers.0.self_attn.'"],
  },
  'GroupedQueryAttention input past its cache, which says how to make room': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 5, 16]), { cache: decoding(attn).gqaCache }),
    argument: /^x$/,
    message: ['opts.cache holds 0 of maxLength 4', 'truncate() or reset() it, or createCache() a larger one'],
  },
  'positions [N, L] of another N': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { positions: { data: new Int32Array(9), shape: [3, 3] } }),
    argument: /^positions$/,
    message: ['[2, 3] (N, L)', 'got [3, 3]'],
  },
  'an unknown rope_type': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { rope_type: 'ntk', factor: 2 } }),
    argument: /^ropeScaling\.rope_type$/,
    message: ["one of 'default', 'linear', 'dynamic', 'yarn', 'longrope', 'llama3'", 'got "ntk"'],
  },
  'linear RoPE scaling without its factor': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { type: 'linear' } }),
    argument: /^ropeScaling\.factor$/,
    message: ["rope_type 'linear' needs it", 'got none'],
  },
  "a RoPE scaling key of another rope_type": {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { rope_type: 'linear', factor: 2, low_freq_factor: 1 } }),
    argument: /^ropeScaling\.low_freq_factor$/,
    message: ["only rope_type, factor for rope_type 'linear'"],
  },
  "rope_theta inside ropeScaling (v5's rope_parameters)": {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2, { ropeScaling: { rope_type: 'default', rope_theta: 1e6 } }),
    argument: /^ropeScaling\.rope_theta$/,
    message: ['ropeBase'],
  },
  'dynamic RoPE scaling without maxPositionEmbeddings': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { rope_type: 'dynamic', factor: 2 } }),
    argument: /^maxPositionEmbeddings$/,
    message: ["rope_type 'dynamic' needs it"],
  },
  'longrope factors of the wrong length': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { rope_type: 'longrope', short_factor: [1, 1], long_factor: [2, 2], original_max_position_embeddings: 4 }, maxPositionEmbeddings: 16 }),
    argument: /^ropeScaling\.short_factor$/,
    message: ['4 numbers (rotaryDim / 2)', 'got 2 numbers'],
  },
  'a negative longrope factor': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { rope_type: 'longrope', short_factor: [1, 1, 1, 1], long_factor: [2, -2, 2, 2], original_max_position_embeddings: 4 }, maxPositionEmbeddings: 16 }),
    argument: /^ropeScaling\.long_factor$/,
    message: ['positive finite numbers', 'got -2 at 1'],
  },
  'llama3 RoPE scaling with high_freq_factor below low_freq_factor': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { ropeScaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 4, high_freq_factor: 1, original_max_position_embeddings: 8192 } }),
    argument: /^ropeScaling\.high_freq_factor$/,
    message: ['more than low_freq_factor (4)', 'got 1'],
  },
  'invFreq of the wrong length': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { invFreq: new Float64Array(3) }),
    argument: /^invFreq$/,
    message: ['4 inverse frequencies (rotaryDim / 2)', 'got 3'],
  },
  'invFreq and ropeScaling together': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { invFreq: new Float64Array(4), ropeScaling: { rope_type: 'linear', factor: 2 } }),
    argument: /^invFreq$/,
    message: ['either invFreq or ropeScaling'],
  },
  'attentionScaling without invFreq': {
    call: (attn) => attn.rope(f32([2, 3, 8]), { attentionScaling: 1.2 }),
    argument: /^attentionScaling$/,
    message: ['only with invFreq'],
  },
  'a qkNorm without its scope': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2, { qkNorm: { eps: 1e-6 } }),
    argument: /^qkNorm\.scope$/,
    message: ["'head' or 'all'", 'got none'],
  },
  'an attentionMask of the wrong shape': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 3, 16]), { attentionMask: { data: [1, 1], shape: [1, 2] } }),
    argument: /^attentionMask$/,
    message: ['[1, 3] (N, t', 'got [1, 2]'],
  },
  'an attentionMask holding 2': {
    call: (attn) => decoding(attn).gqa.forward(f32([1, 3, 16]), { attentionMask: { data: [1, 2, 1], shape: [1, 3] } }),
    argument: /^attentionMask\.data$/,
    message: ['1 (a token) and 0 (padding) only', 'got 2 at index 1'],
  },
  'a KVCache append mask of the wrong shape': {
    call: (attn) => new attn.KVCache({ heads: 2, headDim: 4, maxLength: 5 }).append(f32([1, 2, 3, 4]), f32([1, 2, 3, 4]), { mask: { data: [1, 1], shape: [2, 1] } }),
    argument: /^mask$/,
    message: ['[1, 3] (batch, t', 'got [2, 1]'],
  },
  'a fused qkv_proj.weight of the wrong shape': {
    call: (attn) => new attn.GroupedQueryAttention(16, 4, 2).loadStateDict({ 'qkv_proj.weight': f32([24, 16]), 'o_proj.weight': f32([16, 16]) }),
    argument: /^stateDict\['qkv_proj\.weight'\]$/,
    message: ['[32, 16] (the rows of q_proj, k_proj and v_proj)', 'got [24, 16]'],
  },
  'fromConfig of an unsupported model_type': {
    call: (attn) => attn.GroupedQueryAttention.fromConfig({ model_type: 'gpt_neox', hidden_size: 16, num_attention_heads: 4 }),
    argument: /^config\.model_type$/,
    message: ["'llama', 'mistral', 'qwen2', 'qwen3', 'gemma', 'gemma2', 'gemma3_text', 'phi3', 'olmo2'", 'got "gpt_neox"'],
  },
  'fromConfig of a layer the model does not have': {
    call: (attn) => attn.GroupedQueryAttention.fromConfig({ model_type: 'llama', hidden_size: 16, num_attention_heads: 4, num_hidden_layers: 2 }, { layer: 2 }),
    argument: /^layer$/,
    message: ['[0, 1]', 'got 2'],
  },
  'fromConfig of a bidirectional Gemma': {
    call: (attn) => attn.GroupedQueryAttention.fromConfig({ model_type: 'gemma3_text', hidden_size: 16, num_attention_heads: 4, use_bidirectional_attention: true }),
    argument: /^config\.use_bidirectional_attention$/,
    message: ['false (GroupedQueryAttention is causal)'],
  },
  "fromConfig of a rope_type it does not know": {
    call: (attn) => attn.GroupedQueryAttention.fromConfig({ model_type: 'llama', hidden_size: 16, num_attention_heads: 4, rope_scaling: { rope_type: 'proportional' } }),
    argument: /^config\.rope_scaling\.rope_type$/,
    message: ['got "proportional"'],
  },
};

// Two layers of a GroupedQueryAttention(16, 4, 2) under Hugging Face's names, as a model's file holds them.
function wholeModelNames() {
  const names = {};
  for (const layer of [0, 1])
    for (const [name, shape] of [['q_proj', [16, 16]], ['k_proj', [8, 16]], ['v_proj', [8, 16]], ['o_proj', [16, 16]]])
      names[`model.layers.${layer}.self_attn.${name}.weight`] = f32(shape);
  return names;
}

// The cache and block the bad calls above use, one of each per instance.
const decodingObjects = new WeakMap();
function decoding(attn) {
  if (!decodingObjects.has(attn)) {
    const cache = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 5 }).append(f32([1, 2, 3, 4]), f32([1, 2, 3, 4]));
    const gqa = new attn.GroupedQueryAttention(16, 4, 2, { headDim: 2 });
    gqa.loadStateDict({ 'q_proj.weight': f32([8, 16]), 'k_proj.weight': f32([4, 16]), 'v_proj.weight': f32([4, 16]), 'o_proj.weight': f32([16, 8]) });
    decodingObjects.set(attn, { cache, gqa, gqaCache: gqa.createCache(4) });
  }
  return decodingObjects.get(attn);
}

// Caches whose refusals issue #35 added: a window-3 ring that has dropped 3 positions (3 held), and
// an f16 cache holding 3; and a q8 cache holding 3.
const refusingObjects = new WeakMap();
function refusing(attn) {
  if (!refusingObjects.has(attn)) {
    const ring = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 3, window: 3 });
    for (let p = 0; p < 6; p++) ring.append(f32([1, 2, 1, 4]), f32([1, 2, 1, 4]));
    const half = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 5, dtype: 'f16' }).append(f32([1, 2, 3, 4]), f32([1, 2, 3, 4]));
    const q8 = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 5, dtype: 'q8' }).append(f32([1, 2, 3, 4]), f32([1, 2, 3, 4]));
    refusingObjects.set(attn, { ring, half, q8 });
  }
  return refusingObjects.get(attn);
}

function assertAttentionError(fn, { argument, message }) {
  assert.throws(fn, (err) => {
    assert.ok(err instanceof AttentionError, `an AttentionError, got ${err}`);
    assert.ok(err instanceof Error);
    assert.equal(err.code, 'INVALID_ARGUMENT');
    for (const field of ['argument', 'expected', 'got']) {
      assert.equal(typeof err[field], 'string', field);
      assert.notEqual(err[field], '', field);
    }
    assert.match(err.argument, argument);
    assert.ok(err.message.includes(err.argument), `message names the argument: ${err.message}`);
    for (const part of message) {
      if (part instanceof RegExp) assert.match(err.message, part);
      else assert.ok(err.message.includes(part), `message ${JSON.stringify(err.message)} includes ${part}`);
    }
    return true;
  });
}

let attn;
let baseline;

function assertStillGood() {
  const result = attn.scaledDotProductAttention(good.query, good.key, good.value, goodOpts);
  assert.ok(bitIdentical(result.output.data, baseline.output.data), 'output bit-identical to before');
  assert.ok(bitIdentical(result.weights.data, baseline.weights.data), 'weights bit-identical to before');
}

before(async () => {
  attn = await init();
  baseline = attn.scaledDotProductAttention(good.query, good.key, good.value, goodOpts);
  assert.ok(maxRelativeError(baseline.output.data, good.output.data) <= TOLERANCE);
});

describe('bad input throws AttentionError and leaves the instance working', () => {
  for (const [name, bad] of Object.entries(BAD_CALLS)) {
    test(name, () => {
      assertAttentionError(() => bad.call(attn), bad);
      assertStillGood();
    });
  }
});

test('a KVCache of another instance is named as such', async () => {
  const other = await init();
  try {
    const foreign = new other.KVCache({ heads: 2, headDim: 2, maxLength: 4 });
    assertAttentionError(() => decoding(attn).gqa.forward(f32([1, 1, 16]), { cache: foreign }), {
      argument: /^cache$/,
      message: ["a KVCache of this instance (make it with this instance's KVCache or createCache())", 'got a KVCache of another init() instance'],
    });
    assertStillGood();
  } finally {
    other.dispose();
  }
});

describe('init rejects bad options', () => {
  for (const threads of [0, 1.5, 'x']) {
    test(`threads ${JSON.stringify(threads)}`, async () => {
      await assert.rejects(init({ threads }), (err) => {
        assert.ok(err instanceof AttentionError);
        assert.match(err.argument, /threads/);
        assert.ok(err.message.includes('threads'));
        return true;
      });
    });
  }
});

describe('out of memory', () => {
  test('a 40 GB weights request throws OUT_OF_MEMORY and the instance keeps working', () => {
    const long = { shape: [100000, 1], data: new Float32Array(100000).fill(0.5) };
    assert.throws(
      () => attn.scaledDotProductAttention(long, long, long, { needWeights: true }),
      (err) => {
        assert.ok(err instanceof AttentionError);
        assert.equal(err.code, 'OUT_OF_MEMORY');
        assert.equal(typeof err.argument, 'string');
        assert.ok(err.message.includes(err.argument));
        return true;
      },
    );
    assertStillGood();
  });
});

describe('failing calls do not grow wasm memory', () => {
  test('2,000 failing calls of mixed kinds', () => {
    // Kinds caught in JS, caught by the core's checks, and failing only after the inputs
    // (1.2 MB each time) have been copied into wasm memory: the out-of-memory request.
    const long = { shape: [100000, 1], data: new Float32Array(100000) };
    const kinds = [
      ...Object.values(BAD_CALLS).map((bad) => bad.call),
      (a) => a.scaledDotProductAttention(long, long, long, { needWeights: true }),
    ];
    const runAll = (count) => {
      for (let i = 0; i < count; i++) {
        assert.throws(() => kinds[i % kinds.length](attn), AttentionError);
      }
    };
    runAll(kinds.length); // one of each first, so one-time allocations are already made
    const heap = attn.stats().wasmHeapBytes;
    runAll(2000);
    assert.equal(attn.stats().wasmHeapBytes, heap);
    assertStillGood();
  });
});

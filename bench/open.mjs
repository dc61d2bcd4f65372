// Opening a whole model: `openModel` (attention-wasm/models) on checkpoint folders of published
// models' real shapes, and one forward of 256 tokens, on 1 and 2 threads, each (model, threads)
// in its own child process so that its peak RSS is its own; then onnxruntime-web running the
// same weights as an ONNX graph, beside our forward on the same weights in f32.
//
//   node --experimental-wasm-relaxed-simd bench/open.mjs [--json FILE] [--big] [--quick] [--models A,B]
//   (npm run bench -- --open [...] also builds first; BENCH_NO_BUILD=1 skips that)
//
// The checkpoints (written to a folder under os.tmpdir(), removed at the end): config.json with
// the values of the published config.json, and model.safetensors holding random BF16 weights in
// Hugging Face's names, tensors in name order as safetensors writes them, written through one
// 16 MiB buffer (never the whole file in memory), then synced to disk. Matrices draw magnitudes
// around 1/sqrt(fan_in) (exponent of 1/sqrt(in) or one below, random sign and mantissa), the
// embedding around config.initializer_range, biases around 0.02; norm weights are 1.
//
//   model            layers hidden inner heads kv head vocab   tied  rope
//   SmolLM2-135M     30     576    1536  9     3  64   49152   yes   theta 1e5, eps 1e-5
//   Qwen2.5-0.5B     24     896    4864  14    2  64   151936  yes   theta 1e6, eps 1e-6, q/k/v bias
//   Llama-3.2-1B     16     2048   8192  32    8  64   128256  yes   theta 5e5, llama3 scaling (factor 32)
//   Llama-3.1-8B     32     4096   14336 32    8  128  128256  no    theta 5e5, llama3 scaling (factor 8)
//   (from HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B, meta-llama/Llama-3.2-1B and
//   meta-llama/Llama-3.1-8B's config.json; 8B only with --big: 16 GB, the free disk is checked
//   first.) --quick: SmolLM2-135M's shapes with 2 layers, 32 tokens, a single timed run.
//
// Rows `model-open` (per model and thread count): open_ms (openModel until it resolves), forward_ms
// (the first forward after it: 256 tokens, the last position's logits, what generation needs;
// forward2_ms is a second one), peak_rss_mib (the child's process.resourceUsage().maxRSS after
// the forwards), streamed (the model is larger than residentBytes, default 1 GiB: every forward
// reads its layers by byte range), and, measured in the same run:
//   read_gbps      this machine's read rate of the checkpoint file: one plain read loop through a
//                  64 MiB buffer right after it was written (so from wherever the page cache holds
//                  it, as the model's own reads find it);
//   linear_gflops  our Linear's rate on the model's MLP (gate, up and down, in the dtype the
//                  model holds, 256 rows) in the same child, after the model is disposed;
//   fault_us       what a page of fresh memory costs here (µs per 4 KiB touched the first time),
//                  against the child's open_faults and forward_faults (minor page faults during
//                  the open and the first forward, process.resourceUsage());
//   roofline_ms    Σ over the parts p (each layer, and the head) of
//                  max(bytes_p ÷ read rate, flops_p ÷ Linear rate), where bytes_p are the part's
//                  bytes in the file and flops_p = 2·tokens·(its matrices' parameters) plus, for
//                  a layer, causal attention's 2·heads·head_dim·tokens·(tokens + 1); the head's
//                  flops are one row's (2·vocab·hidden). Reading overlaps computing in the ideal,
//                  so open + forward of a resident model and a streamed forward have one roofline.
// Rows `model-forward-f32` and `ort-web-model-forward`: the same bf16 checkpoint opened with
// dtype 'f32' (weights widened exactly; the default residentBytes, so a model whose f32 weights
// pass 1 GiB streams: our wasm memory ends at 2 GiB) against onnxruntime-web's wasm backend
// running an ONNX graph the bench writes from that checkpoint (f32 weights as external data:
// Gather, per layer SimplifiedLayerNormalization, MatMul, com.microsoft GroupQueryAttention with
// its rotary embedding from cos/sin caches of the model's RoPE, Sigmoid·Mul, Add; the head a Gemm
// on the last position), forward_ms the median of warm runs after one warm-up (each in its own
// child); the last position's logits are compared between the two (max_abs_err).
// onnxruntime-web's wasm32 memory ends at 4 GiB: a model whose f32 weights do not fit is said so
// and not run.
// Goals: open + forward ≤ 1.5 × roofline; Llama-3.2-1B streamed with a peak RSS under 768 MiB;
// Llama-3.1-8B runs (our wasm memory ends at 2 GiB); our f32 forward ≤ 0.7 × onnxruntime-web's.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, open, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { encodeModel, FLOAT, INT32, INT64 } from './onnx-model.mjs';
import { columnTable, report } from './report.mjs';

const SELF = fileURLToPath(import.meta.url);
const GIB = 2 ** 30;

const llama3 = (factor) => ({ factor, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' });

/** The published config.json values (HF), as the checkpoints' config.json. */
export const CONFIGS = {
  'SmolLM2-135M': {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 576, intermediate_size: 1536, num_hidden_layers: 30,
    num_attention_heads: 9, num_key_value_heads: 3, head_dim: 64, hidden_act: 'silu', max_position_embeddings: 8192,
    rms_norm_eps: 1e-5, rope_theta: 100000, rope_scaling: null, tie_word_embeddings: true, vocab_size: 49152,
    attention_bias: false, mlp_bias: false, initializer_range: 0.041666666666666664, bos_token_id: 0, eos_token_id: 0, torch_dtype: 'bfloat16',
  },
  'Qwen2.5-0.5B': {
    architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', hidden_size: 896, intermediate_size: 4864, num_hidden_layers: 24,
    num_attention_heads: 14, num_key_value_heads: 2, hidden_act: 'silu', max_position_embeddings: 32768, max_window_layers: 24,
    sliding_window: 32768, use_sliding_window: false, use_mrope: false, rms_norm_eps: 1e-6, rope_theta: 1000000.0,
    tie_word_embeddings: true, vocab_size: 151936, initializer_range: 0.02, bos_token_id: 151643, eos_token_id: 151643, torch_dtype: 'bfloat16',
  },
  'Llama-3.2-1B': {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 2048, intermediate_size: 8192, num_hidden_layers: 16,
    num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64, hidden_act: 'silu', max_position_embeddings: 131072,
    rms_norm_eps: 1e-5, rope_theta: 500000.0, rope_scaling: llama3(32.0), tie_word_embeddings: true, vocab_size: 128256,
    attention_bias: false, mlp_bias: false, initializer_range: 0.02, bos_token_id: 128000, eos_token_id: 128001, torch_dtype: 'bfloat16',
  },
  'Llama-3.1-8B': {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 4096, intermediate_size: 14336, num_hidden_layers: 32,
    num_attention_heads: 32, num_key_value_heads: 8, hidden_act: 'silu', max_position_embeddings: 131072,
    rms_norm_eps: 1e-5, rope_theta: 500000.0, rope_scaling: llama3(8.0), tie_word_embeddings: false, vocab_size: 128256,
    attention_bias: false, mlp_bias: false, initializer_range: 0.02, bos_token_id: 128000, eos_token_id: 128001, torch_dtype: 'bfloat16',
  },
};

// ---------------------------------------------------------------------------------------------
// Checkpoints.

/** A config's sizes: { hidden, inner, layers, heads, kvHeads, headDim, vocab, tied, qkvBias }. */
export function sizesOf(config) {
  const hidden = config.hidden_size, heads = config.num_attention_heads;
  return {
    hidden, inner: config.intermediate_size, layers: config.num_hidden_layers, heads, kvHeads: config.num_key_value_heads ?? heads,
    headDim: config.head_dim ?? hidden / heads, vocab: config.vocab_size, tied: config.tie_word_embeddings !== false,
    qkvBias: config.model_type === 'qwen2' || config.attention_bias === true,
  };
}

/**
 * The checkpoint's tensors in Hugging Face's names: [{ name, shape, kind ('embedding' | 'matrix' |
 * 'bias' | 'norm'), layer (or null), scale }], in name order (safetensors' order in the file).
 */
export function tensorSpecs(config) {
  const { hidden, inner, layers, heads, kvHeads, headDim, vocab, tied, qkvBias } = sizesOf(config);
  const q = heads * headDim, kv = kvHeads * headDim;
  const specs = [{ name: 'model.embed_tokens.weight', shape: [vocab, hidden], kind: 'embedding', layer: null, scale: config.initializer_range ?? 0.02 }];
  const matrix = (name, shape, layer) => ({ name, shape, kind: 'matrix', layer, scale: 1 / Math.sqrt(shape[1]) });
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}.`;
    specs.push(matrix(`${p}self_attn.q_proj.weight`, [q, hidden], l), matrix(`${p}self_attn.k_proj.weight`, [kv, hidden], l),
      matrix(`${p}self_attn.v_proj.weight`, [kv, hidden], l), matrix(`${p}self_attn.o_proj.weight`, [hidden, q], l),
      matrix(`${p}mlp.gate_proj.weight`, [inner, hidden], l), matrix(`${p}mlp.up_proj.weight`, [inner, hidden], l),
      matrix(`${p}mlp.down_proj.weight`, [hidden, inner], l),
      { name: `${p}input_layernorm.weight`, shape: [hidden], kind: 'norm', layer: l, scale: 1 },
      { name: `${p}post_attention_layernorm.weight`, shape: [hidden], kind: 'norm', layer: l, scale: 1 });
    if (qkvBias)
      for (const [name, size] of [['q_proj', q], ['k_proj', kv], ['v_proj', kv]])
        specs.push({ name: `${p}self_attn.${name}.bias`, shape: [size], kind: 'bias', layer: l, scale: 0.02 });
  }
  specs.push({ name: 'model.norm.weight', shape: [hidden], kind: 'norm', layer: null, scale: 1 });
  if (!tied) specs.push(matrix('lm_head.weight', [vocab, hidden], null));
  return specs.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

const elementsOf = (shape) => shape.reduce((a, b) => a * b, 1);

/** Parameters of a config (every tensor's elements). */
export const paramsOf = (config) => tensorSpecs(config).reduce((sum, spec) => sum + elementsOf(spec.shape), 0);

// 16-bit words: [sign | exponent | mantissa] of bf16 (8 exponent bits) and binary16 (5).
const FORMATS = {
  bf16: { safetensors: 'BF16', bias: 127, shift: 7, keep: 0x807f807f, one: 0x3f80 },
  f16: { safetensors: 'F16', bias: 15, shift: 10, keep: 0x83ff83ff, one: 0x3c00 },
};
const CHUNK_WORDS = 4 * 2 ** 20; // 32-bit words: 16 MiB, two 16-bit values each

// Fills `words` with pairs of 16-bit values of magnitude 2^e or 2^(e-1) (a random bit each) times
// 1.mantissa, random signs and mantissas; `state` is the xorshift32 state, returned advanced.
function fillRandom(words, count, format, e, state) {
  const { keep, shift, bias } = format;
  const exponent = bias + e;
  const lowBit = 1 << shift, highBit = 1 << (shift + 16);
  for (let i = 0; i < count; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    const r = state >>> 0;
    // The exponent's lowest bit is masked out of `keep`: it says which of the two exponents.
    words[i] = ((r & keep) | ((exponent - ((r & lowBit) ? 1 : 0)) << shift) | ((exponent - ((r & highBit) ? 1 : 0)) << (shift + 16))) >>> 0;
  }
  return state;
}

function seedOf(name, seed) {
  let h = (2166136261 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
  return h || 1;
}

/**
 * Writes config.json and model.safetensors of `config` into `folder`, weights random in `dtype`
 * ('bf16' | 'f16'), through one 16 MiB buffer. → { file, bytes, ms, headerBytes, tensors: Map name
 * → { shape, kind, layer, begin, end } (byte offsets in the file) }.
 */
export async function writeCheckpoint(folder, config, { dtype = 'bf16', seed = 1 } = {}) {
  const start = performance.now();
  const format = FORMATS[dtype];
  await mkdir(folder, { recursive: true });
  await writeFile(path.join(folder, 'config.json'), `${JSON.stringify({ ...config, torch_dtype: dtype === 'bf16' ? 'bfloat16' : 'float16' }, null, 2)}\n`);
  const specs = tensorSpecs(config);
  const header = { __metadata__: { format: 'pt' } };
  let offset = 0;
  for (const spec of specs) {
    const bytes = elementsOf(spec.shape) * 2;
    header[spec.name] = { dtype: format.safetensors, shape: spec.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + json.length) % 8)) % 8);
  const headerBytes = 8 + json.length;
  const file = path.join(folder, 'model.safetensors');
  const handle = await open(file, 'w');
  const tensors = new Map();
  try {
    const prefix = Buffer.alloc(headerBytes);
    prefix.writeBigUInt64LE(BigInt(json.length), 0);
    prefix.write(json, 8, 'latin1');
    await handle.write(prefix, 0, headerBytes, 0);
    const words = new Uint32Array(CHUNK_WORDS);
    const bytes = new Uint8Array(words.buffer);
    let position = headerBytes;
    for (const spec of specs) {
      const elements = elementsOf(spec.shape);
      const { data_offsets: [begin, end] } = header[spec.name];
      tensors.set(spec.name, { shape: spec.shape, kind: spec.kind, layer: spec.layer, begin: headerBytes + begin, end: headerBytes + end });
      let state = seedOf(spec.name, seed);
      for (let done = 0; done < elements;) {
        const pairs = Math.min(CHUNK_WORDS, Math.ceil((elements - done) / 2));
        if (spec.kind === 'norm') words.fill(((format.one << 16) | format.one) >>> 0, 0, pairs);
        else state = fillRandom(words, pairs, format, Math.round(Math.log2(spec.scale)), state);
        const length = Math.min(2 * pairs, elements - done) * 2;
        await handle.write(bytes, 0, length, position);
        position += length;
        done += length / 2;
      }
    }
    // On disk before it is read: the read rate is not measured against the write-back.
    await handle.sync();
  } finally {
    await handle.close();
  }
  return { file, bytes: headerBytes + offset, headerBytes, tensors, ms: performance.now() - start };
}

/** µs per 4 KiB page of memory touched for the first time (a fresh buffer's page faults), over 64 MiB. */
export function pageFaultUs() {
  const bytes = new Uint8Array(64 * 2 ** 20);
  const start = performance.now();
  for (let i = 0; i < bytes.length; i += 4096) bytes[i] = 1;
  return ((performance.now() - start) * 1000) / (bytes.length / 4096);
}

/** GB/s of one plain read of `file` through a 64 MiB buffer. */
export async function readRate(file) {
  const handle = await open(file, 'r');
  const buffer = Buffer.allocUnsafe(64 * 2 ** 20);
  let total = 0;
  const start = performance.now();
  try {
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, total);
      if (bytesRead === 0) break;
      total += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return total / ((performance.now() - start) * 1e6);
}

// ---------------------------------------------------------------------------------------------
// The roofline.

/** Per part (each layer, then the head): { bytes (in the file), flops } of a forward of `tokens` tokens, last logits. */
export function partsOf(config, tensors, tokens) {
  const { layers, heads, headDim, hidden, vocab, tied } = sizesOf(config);
  const parts = Array.from({ length: layers }, () => ({ bytes: 0, flops: 2 * heads * headDim * tokens * (tokens + 1) }));
  for (const { shape, kind, layer, begin, end } of tensors.values()) {
    if (layer === null) continue;
    parts[layer].bytes += end - begin;
    if (kind === 'matrix') parts[layer].flops += 2 * tokens * elementsOf(shape);
    else if (kind === 'bias') parts[layer].flops += tokens * shape[0];
  }
  const head = tensors.get(tied ? 'model.embed_tokens.weight' : 'lm_head.weight');
  parts.push({ bytes: head.end - head.begin, flops: 2 * vocab * hidden });
  return parts;
}

/** Σ max(bytes ÷ read rate, flops ÷ Linear rate), in ms. */
export const rooflineMs = (parts, gbps, gflops) => parts.reduce((sum, { bytes, flops }) => sum + Math.max(bytes / (gbps * 1e6), flops / (gflops * 1e6)), 0);

// ---------------------------------------------------------------------------------------------
// The ONNX graph of the same weights, f32, for onnxruntime-web.

// RoPE's inverse frequencies, as transformers' ROPE_INIT_FUNCTIONS ('default' and 'llama3'), in float64.
function inverseFrequencies(config) {
  const { headDim } = sizesOf(config);
  const base = config.rope_theta ?? 10000;
  let inv = Array.from({ length: headDim / 2 }, (_, i) => 1 / base ** ((2 * i) / headDim));
  const scaling = config.rope_scaling;
  if (scaling?.rope_type === 'llama3') {
    const { factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: old } = scaling;
    const lowWavelen = old / low, highWavelen = old / high;
    inv = inv.map((f) => {
      const wavelen = (2 * Math.PI) / f;
      if (wavelen < highWavelen) return f;
      if (wavelen > lowWavelen) return f / factor;
      const smooth = (old / wavelen - low) / (high - low);
      return (1 - smooth) * (f / factor) + smooth * f;
    });
  }
  return inv;
}

const f32Of = (bytes, dtype) => {
  const words = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  const out = new Float32Array(words.length);
  if (dtype === 'BF16') {
    const bits = new Uint32Array(out.buffer);
    for (let i = 0; i < words.length; i++) bits[i] = words[i] << 16;
  } else {
    for (let i = 0; i < words.length; i++) {
      const w = words[i], sign = w & 0x8000 ? -1 : 1, e = (w >> 10) & 31, m = w & 1023;
      out[i] = sign * (e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15));
    }
  }
  return out;
};

/**
 * Writes `folder`/model.onnx and model.onnx.data: the checkpoint `checkpoint` (writeCheckpoint's
 * result) as an f32 ONNX graph over `tokens` ids → last position's logits [1, vocab].
 */
export async function writeOnnx(folder, config, checkpoint, tokens) {
  const { layers, heads, kvHeads, headDim, hidden, tied, qkvBias, vocab } = sizesOf(config);
  await mkdir(folder, { recursive: true });
  const dtype = JSON.parse((await readFile(path.join(path.dirname(checkpoint.file), 'config.json'), 'utf8'))).torch_dtype === 'bfloat16' ? 'BF16' : 'F16';
  const source = await open(checkpoint.file, 'r');
  const data = await open(path.join(folder, 'model.onnx.data'), 'w');
  const initializers = {};
  let offset = 0;
  // Matrices [out, in] become MatMul's [in, out]; the embedding stays [vocab, hidden] (Gather, and Gemm with transB for a tied head).
  const add = async (name, transpose) => {
    const { shape, begin, end } = checkpoint.tensors.get(name);
    const bytes = new Uint8Array(end - begin);
    await source.read(bytes, 0, bytes.length, begin);
    let values = f32Of(bytes, dtype);
    let dims = shape;
    if (transpose) {
      const [rows, cols] = shape, t = new Float32Array(values.length);
      for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = values[r * cols + c];
      values = t;
      dims = [cols, rows];
    }
    await data.write(new Uint8Array(values.buffer), 0, values.byteLength, offset);
    initializers[name] = { type: FLOAT, dims, external: { location: 'model.onnx.data', offset, length: values.byteLength } };
    offset += values.byteLength;
  };
  const nodes = [];
  const node = (op, inputs, outputs, attrs = {}, domain = '') => nodes.push({ op, inputs, outputs, attrs, domain });
  const int64s = (values) => ({ type: INT64, dims: [values.length], data: BigInt64Array.from(values, BigInt) });
  const eps = config.rms_norm_eps ?? 1e-6;
  try {
    // RoPE as GroupQueryAttention's cos/sin caches [tokens, headDim / 2].
    const inv = inverseFrequencies(config);
    const cos = new Float32Array(tokens * inv.length), sin = new Float32Array(tokens * inv.length);
    for (let p = 0; p < tokens; p++) inv.forEach((f, i) => { cos[p * inv.length + i] = Math.cos(p * f); sin[p * inv.length + i] = Math.sin(p * f); });
    Object.assign(initializers, {
      cos_cache: { type: FLOAT, dims: [tokens, inv.length], data: cos },
      sin_cache: { type: FLOAT, dims: [tokens, inv.length], data: sin },
      seqlens_k: { type: INT32, dims: [1], data: Int32Array.of(tokens - 1) },
      total_sequence_length: { type: INT32, dims: [1], data: Int32Array.of(tokens) },
      last_start: int64s([tokens - 1]), last_end: int64s([tokens]), axis1: int64s([1]), row_shape: int64s([1, hidden]),
    });
    await add('model.embed_tokens.weight', false);
    node('Gather', ['model.embed_tokens.weight', 'input_ids'], ['h0'], { axis: 0 });
    let h = 'h0';
    for (let l = 0; l < layers; l++) {
      const p = `model.layers.${l}.`, n = `L${l}_`;
      for (const name of ['input_layernorm', 'post_attention_layernorm']) await add(`${p}${name}.weight`, false);
      for (const name of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) await add(`${p}self_attn.${name}.weight`, true);
      if (qkvBias) for (const name of ['q_proj', 'k_proj', 'v_proj']) await add(`${p}self_attn.${name}.bias`, false);
      for (const name of ['gate_proj', 'up_proj', 'down_proj']) await add(`${p}mlp.${name}.weight`, true);
      node('SimplifiedLayerNormalization', [h, `${p}input_layernorm.weight`], [`${n}x`], { axis: -1, epsilon: eps });
      for (const name of ['q', 'k', 'v']) {
        node('MatMul', [`${n}x`, `${p}self_attn.${name}_proj.weight`], [qkvBias ? `${n}${name}0` : `${n}${name}`]);
        if (qkvBias) node('Add', [`${n}${name}0`, `${p}self_attn.${name}_proj.bias`], [`${n}${name}`]);
      }
      node('GroupQueryAttention', [`${n}q`, `${n}k`, `${n}v`, '', '', 'seqlens_k', 'total_sequence_length', 'cos_cache', 'sin_cache'],
        [`${n}a`, `${n}present_k`, `${n}present_v`], { num_heads: heads, kv_num_heads: kvHeads, do_rotary: 1, rotary_interleaved: 0 }, 'com.microsoft');
      node('MatMul', [`${n}a`, `${p}self_attn.o_proj.weight`], [`${n}o`]);
      node('Add', [h, `${n}o`], [`${n}h1`]);
      node('SimplifiedLayerNormalization', [`${n}h1`, `${p}post_attention_layernorm.weight`], [`${n}y`], { axis: -1, epsilon: eps });
      node('MatMul', [`${n}y`, `${p}mlp.gate_proj.weight`], [`${n}gate`]);
      node('MatMul', [`${n}y`, `${p}mlp.up_proj.weight`], [`${n}up`]);
      node('Sigmoid', [`${n}gate`], [`${n}sig`]);
      node('Mul', [`${n}gate`, `${n}sig`], [`${n}silu`]);
      node('Mul', [`${n}silu`, `${n}up`], [`${n}m`]);
      node('MatMul', [`${n}m`, `${p}mlp.down_proj.weight`], [`${n}d`]);
      node('Add', [`${n}h1`, `${n}d`], [`${n}h`]);
      h = `${n}h`;
    }
    await add('model.norm.weight', false);
    const headName = tied ? 'model.embed_tokens.weight' : 'lm_head.weight';
    if (!tied) await add(headName, false);
    node('SimplifiedLayerNormalization', [h, 'model.norm.weight'], ['final'], { axis: -1, epsilon: eps });
    node('Slice', ['final', 'last_start', 'last_end', 'axis1'], ['last3']);
    node('Reshape', ['last3', 'row_shape'], ['last']);
    node('Gemm', ['last', headName], ['logits'], { transB: 1 });
  } finally {
    await source.close();
    await data.close();
  }
  const model = encodeModel({
    nodes, initializers,
    inputs: [{ name: 'input_ids', dims: [1, tokens], type: INT64 }],
    outputs: [{ name: 'logits', dims: [1, vocab] }],
    opsets: { '': 21, 'com.microsoft': 1 },
  });
  await writeFile(path.join(folder, 'model.onnx'), model);
  return { model: path.join(folder, 'model.onnx'), data: path.join(folder, 'model.onnx.data'), dataBytes: offset };
}

// ---------------------------------------------------------------------------------------------
// The children: one process per (model, threads) for ours, one for onnxruntime-web.

const idsOf = (tokens, vocab) => Int32Array.from({ length: tokens }, (_, i) => (i * 7919 + 11) % vocab);
const peakRssMib = () => process.resourceUsage().maxRSS / 1024;
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/**
 * Our Linear's rate (GFLOP/s) on a model's MLP: gate, up and down ([hidden, inner] and back), in
 * `dtype`, over `tokens` rows; the median of a few rounds after a warm-up (longer with runs > 1).
 */
export function linearGflops(attn, { hidden, inner, dtype, tokens, runs }) {
  const linears = [[hidden, inner], [hidden, inner], [inner, hidden]].map(([i, o]) => {
    const linear = new attn.Linear(i, o, { bias: false, dtype });
    const weight = new Float32Array(i * o);
    for (let k = 0; k < weight.length; k++) weight[k] = (((k * 2654435761) >>> 0) / 2 ** 32 - 0.5) / Math.sqrt(i);
    linear.loadStateDict({ weight: { data: weight, shape: [o, i] } });
    return linear;
  });
  const x = { data: Float32Array.from({ length: tokens * hidden }, (_, k) => Math.sin(k)), shape: [tokens, hidden] };
  const mid = { data: Float32Array.from({ length: tokens * inner }, (_, k) => Math.cos(k)), shape: [tokens, inner] };
  const outs = [new Float32Array(tokens * inner), new Float32Array(tokens * inner), new Float32Array(tokens * hidden)];
  const round = () => {
    const t0 = performance.now();
    linears[0].forward(x, { out: outs[0] });
    linears[1].forward(x, { out: outs[1] });
    linears[2].forward(mid, { out: outs[2] });
    return performance.now() - t0;
  };
  for (const t0 = performance.now(); performance.now() - t0 < (runs > 1 ? 500 : 50);) round();
  const rounds = Array.from({ length: Math.max(3, runs + 2) }, round);
  linears.forEach((linear) => linear.dispose());
  return (2 * tokens * 3 * hidden * inner) / (median(rounds) * 1e6);
}

async function oursChild({ folder, threads, tokens, vocab, hidden, inner, runs, secondForward, f32, logitsFile }) {
  const { init } = await import('../dist/index.mjs');
  const { openModel } = await import('../dist/models.mjs');
  const attn = await init({ threads });
  const ids = idsOf(tokens, vocab);
  const result = { build: attn.build };
  // 'auto' holds BF16 as bf16; a build whose Linear has no bf16 yet gets the f16 copy (exact for these weights).
  let faults = process.resourceUsage().minorPageFault;
  let start = performance.now(), model, dtypeNote = null;
  try {
    model = await openModel(attn, folder, {});
  } catch (error) {
    if (!/bf16/.test(String(error?.message))) throw error;
    dtypeNote = `bf16 unsupported by this build (${String(error.message).split('\n')[0].slice(0, 80)}): opened as f16`;
    faults = process.resourceUsage().minorPageFault;
    start = performance.now();
    model = await openModel(attn, folder, { dtype: 'f16' });
  }
  result.open_ms = performance.now() - start;
  result.open_faults = process.resourceUsage().minorPageFault - faults;
  Object.assign(result, { dtype: model.dtype, streamed: model.streamed, weight_bytes: model.weightBytes, dtype_note: dtypeNote });
  faults = process.resourceUsage().minorPageFault;
  start = performance.now();
  await model.forward(ids, { logits: 'last' });
  result.forward_ms = performance.now() - start;
  result.forward_faults = process.resourceUsage().minorPageFault - faults;
  if (secondForward) {
    start = performance.now();
    await model.forward(ids, { logits: 'last' });
    result.forward2_ms = performance.now() - start;
  }
  result.peak_rss_mib = peakRssMib();
  await model.dispose();

  result.linear_gflops = linearGflops(attn, { hidden, inner, dtype: result.dtype, tokens, runs });

  // The same checkpoint widened to f32: warm runs, against onnxruntime-web's.
  if (f32) {
    const model32 = await openModel(attn, folder, { dtype: 'f32' });
    await model32.forward(ids, { logits: 'last' });
    const times = [];
    let logits;
    for (let r = 0; r < runs; r++) {
      start = performance.now();
      ({ logits } = await model32.forward(ids, { logits: 'last' }));
      times.push(performance.now() - start);
    }
    result.f32 = { forward_ms: median(times), runs: times.length, streamed: model32.streamed };
    await writeFile(logitsFile, new Uint8Array(logits.data.buffer, logits.data.byteOffset, logits.data.byteLength));
    await model32.dispose();
  }
  attn.dispose();
  return result;
}

async function ortChild({ model, data, threads, tokens, vocab, runs, logitsFile }) {
  const ort = await import('onnxruntime-web');
  ort.env.wasm.numThreads = threads;
  const ids = idsOf(tokens, vocab);
  let start = performance.now();
  const session = await ort.InferenceSession.create(await readFile(model), {
    executionProviders: ['wasm'], graphOptimizationLevel: 'all', logSeverityLevel: 3,
    externalData: [{ path: 'model.onnx.data', data }],
  });
  const result = { version: ort.env.versions.web, session_ms: performance.now() - start };
  const feeds = { input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, tokens]) };
  start = performance.now();
  await session.run(feeds);
  result.first_run_ms = performance.now() - start;
  const times = [];
  let logits;
  for (let r = 0; r < runs; r++) {
    start = performance.now();
    ({ logits } = await session.run(feeds));
    times.push(performance.now() - start);
  }
  Object.assign(result, { forward_ms: median(times), runs: times.length, peak_rss_mib: peakRssMib() });
  await writeFile(logitsFile, new Uint8Array(logits.data.buffer, logits.data.byteOffset, logits.data.byteLength));
  await session.release();
  return result;
}

const MARK = '@@open-bench-result ';

/** Runs `spec` in a child process → its result, or { error } (the child's last stderr lines). */
function runChild(spec) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, SELF, '--child', JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.on('data', (chunk) => { stdout += chunk; });
    child.stderr.on('data', (chunk) => { stderr += chunk; });
    child.on('close', (code, signal) => {
      const line = stdout.split('\n').find((l) => l.startsWith(MARK));
      if (line) return resolve(JSON.parse(line.slice(MARK.length)));
      const why = stderr.trim().split('\n').filter((l) => l.trim() && !/^\s+at /.test(l)).slice(-2).join(' / ').slice(0, 300);
      resolve({ error: `child ${signal ? `killed by ${signal}` : `exited with code ${code}`}${why ? `: ${why}` : ''}` });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The run.

async function main() {
  const { values: args } = parseArgs({
    options: {
      json: { type: 'string' }, big: { type: 'boolean', default: false }, quick: { type: 'boolean', default: false },
      models: { type: 'string' }, child: { type: 'string' },
    },
  });
  if (args.child) {
    const spec = JSON.parse(args.child);
    try {
      const result = spec.role === 'ort' ? await ortChild(spec) : await oursChild(spec);
      process.stdout.write(`${MARK}${JSON.stringify(result)}\n`);
    } catch (error) {
      process.stdout.write(`${MARK}${JSON.stringify({ error: String(error?.stack ?? error).split('\n').slice(0, 2).join(' ').slice(0, 300) })}\n`);
    }
    process.exit(0); // onnxruntime's and our pthreads would keep the process alive
  }

  const quick = args.quick;
  const tokens = quick ? 32 : 256;
  const runs = quick ? 1 : 3;
  const threadCounts = [1, 2];
  let names = Object.keys(CONFIGS).filter((name) => name !== 'Llama-3.1-8B' || args.big);
  if (args.models) names = args.models.split(',');
  const models = quick ? [['SmolLM2-135M', { ...CONFIGS['SmolLM2-135M'], num_hidden_layers: 2 }]] : names.map((name) => [name, CONFIGS[name]]);
  const label = (name, config) => (config.num_hidden_layers === CONFIGS[name].num_hidden_layers ? name : `${name} (${config.num_hidden_layers} layers)`);

  const load = () => os.loadavg().map((x) => x.toFixed(2)).join(', ');
  const cpus = os.cpus();
  console.log(`attention-wasm bench: openModel on checkpoints of published shapes (bf16), ${tokens} tokens, threads ${threadCounts.join(' and ')}`);
  console.log(`machine: ${cpus[0].model}, ${cpus.length} cores, ${(os.totalmem() / GIB).toFixed(0)} GiB; node ${process.version}; load average ${load()} at the start`);
  const root = await mkdtemp(path.join(os.tmpdir(), 'attention-wasm-open-'));
  const cleanUp = () => rm(root, { recursive: true, force: true });
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => cleanUp().finally(() => process.exit(130)));
  console.log(`checkpoints in ${root} (removed at the end)\n`);

  const rows = [];
  const goals = [];
  const notes = [];
  const table = columnTable([
    ['model', 24, (r) => r.model, 'left'], ['params', 7, (r) => `${(r.params / 1e6).toFixed(0)}M`], ['thr', 3, (r) => r.threads],
    ['dtype', 5, (r) => r.dtype], ['streamed', 8, (r) => (r.streamed ? 'yes' : 'no')],
    ['open ms', 8, (r) => r.open_ms.toFixed(0)], ['fwd ms', 8, (r) => r.forward_ms.toFixed(0)], ['fwd2 ms', 8, (r) => r.forward2_ms?.toFixed(0)],
    ['read GB/s', 9, (r) => r.read_gbps.toFixed(2)], ['Linear GF/s', 11, (r) => r.linear_gflops.toFixed(1)],
    ['roofline', 8, (r) => r.roofline_ms.toFixed(0)], ['÷ roof', 6, (r) => ((r.open_ms + r.forward_ms) / r.roofline_ms).toFixed(2)],
    ['peak RSS MiB', 12, (r) => r.peak_rss_mib.toFixed(0)],
    ['faults', 7, (r) => `${((r.open_faults + r.forward_faults) / 1000).toFixed(0)}k`], ['× µs', 6, (r) => ((r.open_faults + r.forward_faults) * r.fault_us / 1000).toFixed(0)],
  ]);
  const versus = columnTable([
    ['model', 24, (r) => r.model, 'left'], ['thr', 3, (r) => r.threads], ['ours f32 ms', 11, (r) => r.ours_ms.toFixed(0)],
    ['streamed', 8, (r) => (r.streamed ? 'yes' : 'no')], ['ORT ms', 8, (r) => r.ort_ms.toFixed(0)], ['ours ÷ ORT', 10, (r) => (r.ours_ms / r.ort_ms).toFixed(2)],
    ['max abs err', 11, (r) => r.max_abs_err.toExponential(1)], ['ORT session ms', 14, (r) => r.session_ms.toFixed(0)], ['ORT RSS MiB', 11, (r) => r.ort_rss_mib.toFixed(0)],
  ]);
  const openRows = [], versusRows = [];
  try {
    for (const [name, config] of models) {
      const model = label(name, config);
      const sizes = sizesOf(config);
      const params = paramsOf(config);
      const checkpointBytes = 2 * params;
      const f32Bytes = 4 * params;
      // onnxruntime-web's wasm32 memory ends at 4 GiB: the f32 weights and their model file's bytes must fit with room to run.
      const ortFits = f32Bytes < 3 * GIB;
      const need = checkpointBytes + (ortFits ? f32Bytes : 0) + GIB;
      const { bavail, bsize } = await statfs(root);
      const free = bavail * bsize;
      if (free < need) {
        const note = `${model}: skipped: its checkpoint${ortFits ? ' and ONNX copy' : ''} need ${(need / 1e9).toFixed(1)} GB with a margin, ${os.tmpdir()} has ${(free / 1e9).toFixed(1)} GB free`;
        console.log(note);
        notes.push(note);
        continue;
      }
      const folder = path.join(root, name);
      const checkpoint = await writeCheckpoint(folder, config);
      const gbps = await readRate(checkpoint.file);
      const faultUs = pageFaultUs();
      console.log(`${model}: ${(params / 1e6).toFixed(0)}M parameters, model.safetensors ${(checkpoint.bytes / 1e9).toFixed(2)} GB written in ${(checkpoint.ms / 1000).toFixed(1)} s; read back at ${gbps.toFixed(2)} GB/s (disk ${(free / 1e9).toFixed(0)} GB free before); a fresh page costs ${faultUs.toFixed(1)} µs`);
      let onnx = null;
      if (ortFits) {
        onnx = await writeOnnx(path.join(root, `${name}-onnx`), config, checkpoint, tokens);
        console.log(`  ONNX graph with ${(onnx.dataBytes / 1e9).toFixed(2)} GB of f32 external data written`);
      } else {
        const note = `${model}: onnxruntime-web not run: its f32 weights are ${(f32Bytes / 1e9).toFixed(1)} GB and onnxruntime-web's wasm32 memory ends at 4 GiB`;
        console.log(`  ${note}`);
        notes.push(note);
      }
      const parts = partsOf(config, checkpoint.tensors, tokens);
      for (const threads of threadCounts) {
        const logits = { ours: path.join(root, `${name}-${threads}-ours.f32`), ort: path.join(root, `${name}-${threads}-ort.f32`) };
        const ort = onnx ? await runChild({ role: 'ort', model: onnx.model, data: onnx.data, threads, tokens, vocab: sizes.vocab, runs, logitsFile: logits.ort }) : null;
        if (ort?.error) {
          const note = `${model}, ${threads} thread(s): onnxruntime-web failed: ${ort.error}`;
          console.log(`  ${note}`);
          notes.push(note);
        }
        const ours = await runChild({
          role: 'ours', folder, threads, tokens, vocab: sizes.vocab, hidden: sizes.hidden, inner: sizes.inner, runs,
          secondForward: params < 4e9 || quick, f32: Boolean(ort && !ort.error), logitsFile: logits.ours,
        });
        if (ours.error) {
          const note = `${model}, ${threads} thread(s): ours failed: ${ours.error}`;
          console.log(`  ${note}`);
          notes.push(note);
          rows.push({ impl: 'model-open', model, params, tokens, threads, error: ours.error });
          continue;
        }
        if (ours.dtype_note && !notes.includes(ours.dtype_note)) notes.push(ours.dtype_note);
        const row = {
          impl: 'model-open', model, params, tokens, threads, open_ms: ours.open_ms, forward_ms: ours.forward_ms, read_gbps: gbps,
          linear_gflops: ours.linear_gflops, roofline_ms: rooflineMs(parts, gbps, ours.linear_gflops), peak_rss_mib: ours.peak_rss_mib,
          streamed: ours.streamed, forward2_ms: ours.forward2_ms, dtype: ours.dtype, weight_bytes: ours.weight_bytes, build: ours.build,
          open_faults: ours.open_faults, forward_faults: ours.forward_faults, fault_us: faultUs,
        };
        rows.push(row);
        openRows.push(row);
        console.log(`  ${threads} thread(s): open ${row.open_ms.toFixed(0)} ms, forward ${row.forward_ms.toFixed(0)} ms, peak RSS ${row.peak_rss_mib.toFixed(0)} MiB${row.streamed ? ' (streamed)' : ''}`);
        if (ort && !ort.error && ours.f32) {
          const [a, b] = await Promise.all([readFile(logits.ours), readFile(logits.ort)]);
          const x = new Float32Array(a.buffer, a.byteOffset, a.byteLength / 4), y = new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
          const maxAbsErr = x.length === y.length ? x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i])), 0) : Infinity;
          const largest = y.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
          rows.push({ impl: 'model-forward-f32', model, tokens, threads, forward_ms: ours.f32.forward_ms, runs: ours.f32.runs, streamed: ours.f32.streamed, max_abs_err: maxAbsErr });
          rows.push({ impl: 'ort-web-model-forward', model, tokens, threads, forward_ms: ort.forward_ms, runs: ort.runs, session_ms: ort.session_ms,
            first_run_ms: ort.first_run_ms, peak_rss_mib: ort.peak_rss_mib, version: ort.version });
          versusRows.push({ model, threads, ours_ms: ours.f32.forward_ms, streamed: ours.f32.streamed, ort_ms: ort.forward_ms, max_abs_err: maxAbsErr, session_ms: ort.session_ms, ort_rss_mib: ort.peak_rss_mib });
          if (!(maxAbsErr <= 1e-3 * (1 + largest))) notes.push(`${model}, ${threads} thread(s): OUTPUT MISMATCH between ours and onnxruntime-web: max abs err ${maxAbsErr.toExponential(1)} (largest logit ${largest.toFixed(2)})`);
        }
      }
      await rm(folder, { recursive: true, force: true });
      if (onnx) await rm(path.dirname(onnx.model), { recursive: true, force: true });
    }
  } finally {
    await cleanUp();
  }

  console.log(`\nopen + forward of ${tokens} tokens (last position's logits), each row its own process; fwd2: a second forward;`);
  console.log('roofline = Σ over layers and head of max(bytes ÷ read rate, flops ÷ Linear rate); ÷ roof = (open + fwd) ÷ roofline;');
  console.log('faults: page faults (fresh memory) during open + fwd, × µs: their count times the cost of one, in ms');
  console.log(table.header());
  for (const row of openRows) console.log(table.row(row));
  if (versusRows.length) {
    console.log(`\nthe same checkpoint in f32: ours (dtype 'f32') against onnxruntime-web ${rows.find((r) => r.version)?.version ?? ''}, median of ${runs} warm run(s)`);
    console.log(versus.header());
    for (const row of versusRows) console.log(versus.row(row));
  }
  for (const row of openRows) {
    const ratio = (row.open_ms + row.forward_ms) / row.roofline_ms;
    goals.push(`${row.model}, ${row.threads} thread(s): open + forward ${(row.open_ms + row.forward_ms).toFixed(0)} ms = ${ratio.toFixed(2)} × roofline (goal <= 1.5): ${ratio <= 1.5 ? 'met' : 'missed'}`);
    if (row.model === 'Llama-3.2-1B')
      goals.push(`Llama-3.2-1B, ${row.threads} thread(s): ${row.streamed ? 'streamed' : 'NOT streamed'}, peak RSS ${row.peak_rss_mib.toFixed(0)} MiB (goal: streamed, < 768 MiB): ${row.streamed && row.peak_rss_mib < 768 ? 'met' : 'missed'}`);
    if (row.model === 'Llama-3.1-8B') goals.push(`Llama-3.1-8B, ${row.threads} thread(s): runs on a 2 GiB wasm memory, peak RSS ${row.peak_rss_mib.toFixed(0)} MiB: met`);
  }
  for (const row of rows.filter((r) => r.error)) if (row.model === 'Llama-3.1-8B') goals.push(`Llama-3.1-8B, ${row.threads} thread(s): failed (${row.error}): missed`);
  for (const row of versusRows) {
    const ratio = row.ours_ms / row.ort_ms;
    goals.push(`${row.model}, ${row.threads} thread(s), f32: ours ${row.ours_ms.toFixed(0)} ms = ${ratio.toFixed(2)} × onnxruntime-web's ${row.ort_ms.toFixed(0)} ms (goal <= 0.7): ${ratio <= 0.7 ? 'met' : 'missed'}`);
  }
  goals.push(...notes.map((note) => `note: ${note}`));
  goals.push(`load average ${load()} at the end`);
  await report(goals, rows, args.json);
}

if (process.argv[1] && path.resolve(process.argv[1]) === SELF) await main();

// Every public API, called as a strict TypeScript user would. This file is type-checked, never run:
// `npx tsc -p tests/types` (tests/js/types.test.js). Wrong calls live in errors.ts.
import {
  AttentionError,
  init,
  type AdditiveAttention,
  type Attention,
  type AttentionErrorCode,
  type AttentionResult,
  type Bfloat16Tensor,
  type BoolMask,
  type BuildName,
  type Features,
  type GroupedQueryAttention,
  type KVCache,
  type Linear,
  type KVCacheAttendOptions,
  type FloatMask,
  type IdsTensor,
  type InitOptions,
  type LoadStateDictOptions,
  type Mask,
  type MultiheadAttention,
  type MultiheadAttentionForwardOptions,
  type RelativeMultiHeadAttention,
  type ResultTensor,
  type QkNorm,
  type RopeOptions,
  type RopeScaling,
  type SdpaOptions,
  type SelfAttention,
  type StateDict,
  type Stats,
  type Tensor,
  type TokenMask,
  type WeightDtype,
} from 'attention-wasm';

const tensor = (shape: readonly number[], fill = 0.5): Tensor => ({
  shape,
  data: new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(fill),
});

// ---- init and its options -------------------------------------------------------------------
const attn: Attention = await init();
await init({});
await init({ threads: 2 });
await init({ simd: false });
await init({ wasmBaseUrl: '/static/wasm/' });
await init({ wasmBaseUrl: new URL('https://cdn.example.com/attention-wasm/') });
const bytes = new Uint8Array(8);
await init({ wasmBinary: bytes });
await init({ wasmBinary: bytes.buffer });
await init({ wasmBinary: { simd: bytes, scalar: bytes.buffer, threads: bytes } });
await init({ wasmBinary: { scalar: bytes } });
const options: InitOptions = { threads: 4, simd: true, wasmBaseUrl: 'https://cdn.example.com/', wasmBinary: { simd: bytes } };
await init(options);
const build: BuildName = attn.features.threads > 1 ? 'threads' : attn.features.simd ? 'simd' : 'scalar';

const features: Readonly<Features> = attn.features;
const simd: boolean = features.simd;
const threads: number = features.threads;
const version: string = features.version;

const stats: Stats = attn.stats();
const heapBytes: number = stats.wasmHeapBytes;
const live: number = stats.liveObjects;

// ---- scaledDotProductAttention --------------------------------------------------------------
const q = tensor([2, 4, 8]);
const k = tensor([2, 6, 8]);
const v = tensor([2, 6, 16]);

// Without needWeights, weights are null (typed so); with needWeights: true, a tensor.
const streaming: AttentionResult<null> = attn.scaledDotProductAttention(q, k, v);
const out: ResultTensor = streaming.output;
const outShape: number[] = out.shape;
const nothing: null = streaming.weights;
const withWeights = attn.scaledDotProductAttention(q, k, v, { needWeights: true });
const weightsShape: number[] = withWeights.weights.shape;
const weightsData: Float32Array = withWeights.weights.data;

const boolMask: Mask = { data: new Uint8Array(4 * 6).fill(1), shape: [4, 6] }; // 1 = may attend
const floatMask: Mask = { data: new Float32Array(2 * 4 * 6), shape: [2, 4, 6] }; // additive
attn.scaledDotProductAttention(q, k, v, {
  attnMask: boolMask,
  isCausal: true,
  scale: 0.125,
  dropoutP: 0.1,
  seed: 42,
  needWeights: false,
});
attn.scaledDotProductAttention(q, k, v, { attnMask: floatMask });
attn.scaledDotProductAttention(q, k, v, { attnMask: null });
// Options held in a variable: weights may be null, so they are checked.
const sdpaOptions: SdpaOptions = { needWeights: Math.random() > 0.5 };
const maybe = attn.scaledDotProductAttention(q, k, v, sdpaOptions);
if (maybe.weights !== null) console.log(maybe.weights.shape);
const maybeShape: number[] | undefined = maybe.weights?.shape;
// The v2 options: grouped heads, alignments, window, soft cap, ALiBi, documents; and RoPE.
const ids: IdsTensor = { data: Int32Array.of(0, 0, 1, 1), shape: [4] };
attn.scaledDotProductAttention(q, k, v, { enableGqa: true, isCausal: 'lowerRight', window: 4, softcap: 50, alibi: true });
attn.scaledDotProductAttention(q, k, v, { isCausal: 'upperLeft', alibi: new Float32Array(2), documentIds: ids });
attn.scaledDotProductAttention(q, k, v, { queryDocumentIds: ids, keyDocumentIds: null });
const ropeOptions: RopeOptions = { positions: [3, 4], base: 500000, rotaryDim: 4, interleaved: true };
const rotated: ResultTensor = attn.rope(q, ropeOptions);
attn.rope(q, { positions: Int32Array.of(0, 1), offset: 2 });
const rotatedShape: number[] = rotated.shape;
const llama3: RopeScaling = { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
attn.rope(q, { ropeScaling: llama3, positions: { data: new Int32Array(4), shape: [2, 2] } });
attn.rope(q, { ropeScaling: { type: 'dynamic', factor: 2 }, maxPositionEmbeddings: 2048 });
attn.rope(q, { invFreq: new Float64Array(2), attentionScaling: 1.2 });

// ---- KV cache and GroupedQueryAttention ----------------------------------------------------
const kvCache: KVCache = new attn.KVCache({ heads: 2, headDim: 4, maxLength: 16, dtype: 'f16', window: 8 });
new attn.KVCache({ batch: 2, heads: 2, headDim: 4, valueDim: 6, maxLength: 16 }).dispose();
kvCache.append(k, v).append(k, v);
const attendOptions: KVCacheAttendOptions = { isCausal: false, softcap: 30, alibi: true, window: 4, attnMask: null };
const attended: AttentionResult<ResultTensor> = kvCache.attend(q, { ...attendOptions, needWeights: true });
const decoded: ResultTensor = kvCache.attend(q).output;
const heldLength: number = kvCache.length + kvCache.position;
const heldKeys: ResultTensor = kvCache.truncate(1).reset().keys();
const heldValues: ResultTensor = kvCache.values();
const cacheDtype: 'f32' | 'f16' | 'q8' = kvCache.dtype;
const q8Cache: KVCache = new attn.KVCache({ heads: 2, headDim: 32, maxLength: 16, dtype: 'q8' });
const cacheWindow: number | null = kvCache.window;
kvCache[Symbol.dispose]();
const gqa: GroupedQueryAttention = new attn.GroupedQueryAttention(64, 8, 2, {
  headDim: 8, qkvBias: true, outputBias: false, ropeBase: 500000, ropeInterleaved: false, rotaryDim: 8,
  slidingWindow: 4096, softcap: 50, scale: 0.0625,
});
gqa.loadStateDict(new Map<string, ResultTensor>(), { prefix: 'model.layers.0.self_attn.' });
const gqaCache: KVCache = gqa.createCache(128, { batch: 1, dtype: 'f16' });
const prefill: AttentionResult<null> = gqa.forward(tensor([1, 5, 64]), { cache: gqaCache, positions: [0, 1, 2, 3, 4] });
const step: AttentionResult<ResultTensor> = gqa.forward(tensor([1, 1, 64]), { cache: gqaCache, needWeights: true });
gqa.forward(tensor([1, 1, 64]), { needWeights: true, out: { output: new Float32Array(64), weights: new Float32Array(8) } });
gqa.forward(tensor([2, 3, 64]), { positions: { data: new Int32Array(6), shape: [2, 3] }, attnMask: { data: new Uint8Array(6), shape: [2, 1, 1, 3] } });
const { query: rotatedQuery, key: rotatedKey }: { query: ResultTensor; key: ResultTensor } = gqa.project(tensor([1, 5, 64]), { positions: [0, 1, 2, 3, 4] });
const gqaHeads: number = gqa.numHeads + gqa.numKeyValueHeads + gqa.headDim + gqa.rotaryDim;
const qwen3: GroupedQueryAttention = attn.GroupedQueryAttention.fromConfig({ model_type: 'qwen3', hidden_size: 64, num_attention_heads: 8 }, { layer: 0 });
const norm: QkNorm | null = qwen3.qkNorm;
const scaling: RopeScaling | null = new attn.GroupedQueryAttention(64, 8, 2, { ropeScaling: llama3, qkNorm: { scope: 'all', unitOffset: true } }).ropeScaling;
qwen3.loadStateDict({ 'qkv_proj.weight': tensor([96, 64]) });
const halfBlock: GroupedQueryAttention = attn.GroupedQueryAttention.fromConfig({ model_type: 'llama', hidden_size: 64, num_attention_heads: 8 }, { layer: 0, dtype: 'f16' });
halfBlock.loadStateDict(attn.loadSafetensors(new Uint8Array(8), { dtype: 'f16' }), { prefix: 'model.layers.0.self_attn.' });
const halfDtype: WeightDtype = new attn.GroupedQueryAttention(64, 8, 2, { dtype: 'f16' }).dtype;
const bf16Block: GroupedQueryAttention = attn.GroupedQueryAttention.fromConfig({ model_type: 'llama', hidden_size: 64, num_attention_heads: 8 }, { dtype: 'bf16' });
const maskedHeads: AttentionResult<ResultTensor> = bf16Block.forward(tensor([1, 5, 64]), { headMask: [1, 0, 0.5, 1, 1, 1, 1, 1], needWeights: true });
bf16Block.forward(tensor([1, 5, 64]), { headMask: new Float32Array(8) });
const paddedCache: KVCache = qwen3.createCache(16, { batch: 2 });
const attentionMask: TokenMask = { data: new BigInt64Array(6), shape: [2, 3] };
qwen3.forward(tensor([2, 3, 64]), { cache: paddedCache, attentionMask });
paddedCache.append(tensor([2, 8, 1, 8]), tensor([2, 8, 1, 8]), { mask: { data: [1, 1], shape: [2, 1] } });
const heldMask: BoolMask = paddedCache.mask();
const proj: Linear = new attn.Linear(64, 128, { bias: false, dtype: 'f16' });
proj.loadStateDict(attn.loadSafetensors(new Uint8Array(8), { dtype: 'f16' }), { prefix: 'model.layers.0.mlp.up_proj.' });
const projected: ResultTensor = proj.forward(tensor([2, 64]));
const reused: ResultTensor = proj.forward(tensor([2, 64]), { out: new Float32Array(2 * 128) });
const projDtype: WeightDtype = proj.dtype;
const bfloat16Weight: Bfloat16Tensor = { data: new Uint16Array(64 * 128), shape: [128, 64], dtype: 'bf16' };
new attn.Linear(64, 128, { dtype: 'bf16' }).loadStateDict({ weight: bfloat16Weight, bias: tensor([128]) });
const mlpUp = new attn.Linear(64, 256), mlpDown = new attn.Linear(256, 64);
const mlpOut: ResultTensor = attn.feedForward(tensor([3, 64]), { gate: mlpUp, up: mlpUp, down: mlpDown }, { activation: 'silu' });
attn.feedForward(tensor([3, 64]), { up: mlpUp, down: mlpDown }, { activation: 'gelu_new', out: new Float32Array(3 * 64) });
attn.feedForward(tensor([3, 64]), { gateUp: new attn.Linear(64, 512), down: mlpDown }, { activation: 'gelu_pytorch_tanh' });
console.log(mlpOut.shape);
// A shape written `as const` is accepted.
attn.scaledDotProductAttention({ data: new Float32Array(8), shape: [1, 8] as const }, k, v);

// ---- masks ------------------------------------------------------------------------------------
const causal: BoolMask = attn.masks.causal(4);
const causalRect: BoolMask = attn.masks.causal(4, 6);
const causalBytes: Uint8Array = causal.data;
const padding: BoolMask = attn.masks.keyPadding([6, 3], 6);
attn.masks.keyPadding(new Int32Array([6, 3]), 6);
const padding2d: BoolMask = attn.masks.padding2d([4, 2], 4);
const merged: FloatMask = attn.masks.merge(causalRect, padding, 2);
const mergedNoAttn: FloatMask = attn.masks.merge(null, padding, 2);
const mergedData: Float32Array = merged.data;

// ---- MultiheadAttention ---------------------------------------------------------------------
const mha: MultiheadAttention = new attn.MultiheadAttention(8, 2);
new attn.MultiheadAttention(8, 2, {
  bias: false,
  addBiasKV: true,
  addZeroAttn: true,
  kdim: 4,
  vdim: 6,
  batchFirst: true,
  dropout: 0.1,
  seed: 7,
}).dispose();
const E = mha.embedDim;
const stateDict: StateDict = {
  in_proj_weight: tensor([3 * E, E]),
  in_proj_bias: tensor([3 * E]),
  'out_proj.weight': tensor([E, E]),
  'out_proj.bias': tensor([E]),
};
const asMap: StateDict = new Map(Object.entries(stateDict));
const loaded: MultiheadAttention = mha.loadStateDict(stateDict).loadStateDict(asMap);
// A whole model's tensors, of which one layer's attention is read.
const file: Map<string, ResultTensor> = attn.loadSafetensors(new Uint8Array(8));
attn.loadSafetensors(new ArrayBuffer(8));
// A model in shards, its metadata, and binary16 tensors.
const shards = attn.loadSafetensors([new Uint8Array(8), new ArrayBuffer(8)], { dtype: 'f32' });
const format: string | undefined = shards.metadata.format;
const halves = attn.loadSafetensors(new Uint8Array(8), { dtype: 'f16' });
const bfloats: Uint16Array | undefined = attn.loadSafetensors(new Uint8Array(8), { dtype: 'bf16' }).get('w')?.data;
console.log(bfloats);
const halfBits: Uint16Array | undefined = halves.get('q_proj.weight')?.data;
const fileShape: number[] | undefined = file.get('layers.0.attn.in_proj_weight')?.shape;
mha.loadStateDict(file, { prefix: 'layers.0.attn.' }).loadStateDict(stateDict, {});
const loadOptions: LoadStateDictOptions = { prefix: '' };
mha.loadStateDict(asMap, loadOptions);
const x = tensor([4, 2, 8]); // (L, N, E)
const self = mha.forward(x); // key = value = query; weights by default
const avgShape: number[] = self.weights.shape; // [N, n, m]
mha.forward(x, x);
mha.forward(x, null, null, { averageAttnWeights: false });
mha.forward(x, x, x, {
  keyPaddingMask: attn.masks.keyPadding([4, 2], 4), // 1 = padding
  attnMask: attn.masks.causal(4), // 1 = not allowed
  needWeights: true,
  averageAttnWeights: true,
  isCausal: true,
  seed: 3,
});
const noWeights: AttentionResult<null> = mha.forward(x, x, x, { needWeights: false });
const mhaOptions: MultiheadAttentionForwardOptions = { isCausal: true };
const mhaMaybe: AttentionResult = mha.forward(x, undefined, undefined, mhaOptions);
mhaMaybe.weights?.data.at(0);
const readOnly: [number, number, boolean, boolean, boolean, number, number, boolean, number] = [
  mha.embedDim, mha.numHeads, mha.bias, mha.addBiasKV, mha.addZeroAttn, mha.kdim, mha.vdim, mha.batchFirst, mha.dropout,
];
const training: boolean = mha.train().training;
mha.train(false).eval();
mha.dispose();
mha[Symbol.dispose]();

// `using` frees the module at the end of the block.
{
  using scoped = new attn.MultiheadAttention(8, 2);
  scoped.eval();
}

// ---- SelfAttention, AdditiveAttention, RelativeMultiHeadAttention ------------------------------
const sa: SelfAttention = new attn.SelfAttention(8, 4, 6, { dropout: 0, seed: 1 });
sa.loadStateDict({ 'W_q.weight': tensor([4, 8]), 'W_k.weight': tensor([4, 8]), 'W_v.weight': tensor([6, 8]) });
const saResult = sa.forward(tensor([2, 5, 8]), { attnMask: attn.masks.padding2d([5, 3], 5), seed: 2 }); // 1 = masked out
const saWeights: number[] = saResult.weights.shape; // always returned: [N, L, L]
sa.forward(tensor([2, 5, 8]));
const saSizes: number[] = [sa.embedDim, sa.keySize, sa.valueSize, sa.dropout];

const add: AdditiveAttention = new attn.AdditiveAttention(8, 6, 10);
add.loadStateDict({ 'W_q.weight': tensor([10, 8]), 'W_k.weight': tensor([10, 6]), 'W_v.weight': tensor([1, 10]) });
const addResult = add.forward(tensor([2, 3, 8]), tensor([2, 5, 6]), tensor([2, 5, 4]), {
  attnMask: { data: new Uint8Array(5), shape: [1, 1, 5] }, // 1 = masked out
});
addResult.weights.data.fill(0);
const addSizes: number[] = [add.querySize, add.keySize, add.hiddenSize, add.dropout];

const rel: RelativeMultiHeadAttention = new attn.RelativeMultiHeadAttention(2, 8, { P: 16, dropout: 0.1, seed: 5 });
new attn.RelativeMultiHeadAttention(2, 8).dispose();
rel.loadStateDict(new Map<string, Tensor>([['output.bias', tensor([8])]]));
const relResult = rel.forward(tensor([3, 2, 8]), tensor([5, 2, 8]), tensor([5, 2, 8]), {
  mask: { data: new Uint8Array(3 * 5).fill(1), shape: [3, 5, 1] }, // 0 = masked out
  seed: 9,
});
const relWeights: number[] = relResult.weights.shape; // [n, m, B, heads]
const relPlanes: number[] = rel.forward(tensor([3, 2, 8]), tensor([5, 2, 8]), tensor([5, 2, 8]), { weightsLayout: 'BHnm' }).weights.shape; // [B, heads, n, m]
const relSizes: number[] = [rel.heads, rel.dModel, rel.P, rel.dropout];
for (const module of [sa, add, rel]) module.dispose();

// ---- AttentionError ---------------------------------------------------------------------------
try {
  attn.scaledDotProductAttention(q, tensor([2, 7, 32]), v);
} catch (error) {
  if (error instanceof AttentionError) {
    const name: 'AttentionError' = error.name;
    const argument: string = error.argument;
    const expected: string = error.expected;
    const got: string = error.got;
    const code: AttentionErrorCode = error.code;
    const message: string = error.message;
    const isError: Error = error;
    console.log(name, argument, expected, got, code, message, isError);
  }
}
const custom = new AttentionError('query', '[n, d]', '[n]', { code: 'INVALID_ARGUMENT' });
if (custom.code === 'OUT_OF_MEMORY') console.log('out of memory');

// ---- ending an instance -----------------------------------------------------------------------
const ended: void = (await init({ threads: 2 })).dispose();
(await init())[Symbol.dispose]();
{
  // `using` ends the instance at the end of the block.
  using scopedAttn = await init();
  scopedAttn.masks.causal(2);
}
try {
  attn.stats();
} catch (error) {
  if (error instanceof AttentionError && error.code === 'DISPOSED') console.log('disposed:', error.message);
}

console.log(build, simd, threads, version, heapBytes, live, outShape, nothing, weightsShape, weightsData, maybeShape,
  causalBytes, padding2d, mergedNoAttn, mergedData, loaded, avgShape, noWeights, readOnly, training, saWeights, saSizes,
  addSizes, relWeights, relPlanes, relSizes, ended);

// Wrong calls: each line below `// @ts-expect-error` must fail to type-check, so `tsc` reports an
// unused directive (and the test fails) if the types ever start accepting one of them.
import { AttentionError, init, type FloatMask, type SdpaOptions, type Tensor } from 'attention-wasm';

const tensor = (shape: number[]): Tensor => ({ shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) });
const bytes = new Uint8Array(8);

// ---- init ---------------------------------------------------------------------------------------
// @ts-expect-error threads is a number
await init({ threads: '2' });
// @ts-expect-error misspelt option name
await init({ thread: 2 });
// @ts-expect-error unknown option
await init({ debug: true });
// @ts-expect-error simd is a boolean
await init({ simd: 'yes' });
// @ts-expect-error wasmBaseUrl is a string or URL
await init({ wasmBaseUrl: 42 });
// @ts-expect-error wasmBinary holds bytes, not a Float32Array
await init({ wasmBinary: new Float32Array(2) });
// @ts-expect-error wasmBinary is not a URL
await init({ wasmBinary: 'attention-simd.wasm' });
// @ts-expect-error no such build
await init({ wasmBinary: { simdd: bytes } });
// @ts-expect-error options object, not a number
await init(2);

const attn = await init();
const q = tensor([2, 4, 8]);

// ---- scaledDotProductAttention ------------------------------------------------------------------
// @ts-expect-error key and value are required
attn.scaledDotProductAttention(q);
// @ts-expect-error a tensor is { data, shape }, not a bare Float32Array
attn.scaledDotProductAttention(new Float32Array(8), q, q);
// @ts-expect-error data must be a Float32Array
attn.scaledDotProductAttention({ data: [1, 2], shape: [1, 2] }, q, q);
// @ts-expect-error Float64Array is not accepted
attn.scaledDotProductAttention({ data: new Float64Array(2), shape: [1, 2] }, q, q);
// @ts-expect-error shape is a number array
attn.scaledDotProductAttention({ data: new Float32Array(2), shape: '1,2' }, q, q);
// @ts-expect-error misspelt option name (isCausal)
attn.scaledDotProductAttention(q, q, q, { iscausal: true });
// @ts-expect-error misspelt option name (needWeights)
attn.scaledDotProductAttention(q, q, q, { needweights: true });
// @ts-expect-error PyTorch's snake_case is not the JS name
attn.scaledDotProductAttention(q, q, q, { is_causal: true });
// @ts-expect-error scale is a number
attn.scaledDotProductAttention(q, q, q, { scale: '0.5' });
// @ts-expect-error dropoutP is a number
attn.scaledDotProductAttention(q, q, q, { dropoutP: true });
// @ts-expect-error a mask's data is a Uint8Array or Float32Array, not an Int32Array
attn.scaledDotProductAttention(q, q, q, { attnMask: { data: new Int32Array(16), shape: [4, 4] } });
// @ts-expect-error a mask's data is a typed array, not a plain array
attn.scaledDotProductAttention(q, q, q, { attnMask: { data: [1, 0, 1, 1], shape: [2, 2] } });
// @ts-expect-error a mask is { data, shape }, not a bare Uint8Array
attn.scaledDotProductAttention(q, q, q, { attnMask: new Uint8Array(16) });
// @ts-expect-error isCausal names an alignment, not any string
attn.scaledDotProductAttention(q, q, q, { isCausal: 'lowerLeft' });
// @ts-expect-error document ids are an Int32Array
attn.scaledDotProductAttention(q, q, q, { documentIds: { data: new Float32Array(4), shape: [4] } });
// @ts-expect-error ALiBi slopes are a Float32Array
attn.scaledDotProductAttention(q, q, q, { alibi: [0.5, 0.25] });
// @ts-expect-error rope's positions are integers, not strings
attn.rope(q, { positions: ['0', '1'] });
// @ts-expect-error without needWeights the weights are null
attn.scaledDotProductAttention(q, q, q).weights.shape;
// @ts-expect-error needWeights: false gives null weights
attn.scaledDotProductAttention(q, q, q, { needWeights: false }).weights.data;
const sdpaOptions: SdpaOptions = { needWeights: true };
// @ts-expect-error options in a variable: the weights may be null, check first
attn.scaledDotProductAttention(q, q, q, sdpaOptions).weights.data;

// ---- masks --------------------------------------------------------------------------------------
// @ts-expect-error n is a number
attn.masks.causal('4');
// @ts-expect-error lengths are numbers
attn.masks.keyPadding(['3', '2'], 4);
// @ts-expect-error maxLen is required
attn.masks.keyPadding([3, 2]);
// @ts-expect-error merge needs a key padding mask
attn.masks.merge(attn.masks.causal(4), null, 2);
// @ts-expect-error causal() is boolean (Uint8Array), not an additive FloatMask
const wrongKind: FloatMask = attn.masks.causal(4);

// ---- MultiheadAttention -------------------------------------------------------------------------
// @ts-expect-error numHeads is required
new attn.MultiheadAttention(8);
// @ts-expect-error embedDim is a number
new attn.MultiheadAttention('8', 2);
// @ts-expect-error misspelt option (batchFirst)
new attn.MultiheadAttention(8, 2, { batch_first: true });
// @ts-expect-error misspelt option (kdim)
new attn.MultiheadAttention(8, 2, { kDim: 4 });
// @ts-expect-error bias is a boolean
new attn.MultiheadAttention(8, 2, { bias: 1 });
// @ts-expect-error a class, called with new
attn.MultiheadAttention(8, 2);
const mha = new attn.MultiheadAttention(8, 2);
// @ts-expect-error the query is required
mha.forward();
// @ts-expect-error keyPaddingMask is { data, shape }
mha.forward(q, q, q, { keyPaddingMask: new Uint8Array(8) });
// @ts-expect-error misspelt option (averageAttnWeights)
mha.forward(q, q, q, { average_attn_weights: false });
// @ts-expect-error SDPA's option name, not MultiheadAttention's
mha.forward(q, q, q, { dropoutP: 0.1 });
// @ts-expect-error needWeights: false gives null weights
mha.forward(q, q, q, { needWeights: false }).weights.shape;
// @ts-expect-error state dict tensors need Float32Array data
mha.loadStateDict({ in_proj_weight: { data: [0, 1], shape: [2] } });
// @ts-expect-error a state dict is an object or Map of tensors, not an array
mha.loadStateDict([tensor([24, 8])]);
// @ts-expect-error the prefix is a string
mha.loadStateDict({}, { prefix: 0 });
// @ts-expect-error misspelt option (prefix)
mha.loadStateDict({}, { prefx: 'layers.0.' });
// @ts-expect-error a KVCache needs heads, headDim and maxLength
new attn.KVCache({ heads: 2 });
// @ts-expect-error the cache's dtype is 'f32', 'f16' or 'q8'
new attn.KVCache({ heads: 2, headDim: 4, maxLength: 8, dtype: 'bf16' });
// @ts-expect-error needWeights: false gives null weights
new attn.KVCache({ heads: 2, headDim: 4, maxLength: 8 }).attend(q, { needWeights: false }).weights.shape;
// @ts-expect-error a cache's length is read-only (truncate() changes it)
new attn.KVCache({ heads: 2, headDim: 4, maxLength: 8 }).length = 0;
// @ts-expect-error GroupedQueryAttention needs the key/value head count
new attn.GroupedQueryAttention(64, 8);
// @ts-expect-error the cache option is a KVCache
new attn.GroupedQueryAttention(64, 8, 2).forward(q, { cache: {} });
// @ts-expect-error project() takes no attnMask: it stops before attention
new attn.GroupedQueryAttention(64, 8, 2).project(q, { attnMask: { data: new Uint8Array(1), shape: [1, 1] } });
// @ts-expect-error a block's projections are held as 'f32', 'f16' or 'bf16'
new attn.GroupedQueryAttention(64, 8, 2, { dtype: 'f64' });
// @ts-expect-error a head mask holds numbers, one per query head
new attn.GroupedQueryAttention(64, 8, 2).forward(q, { headMask: new Uint8Array(8) });
// @ts-expect-error bfloat16 words are tagged dtype: 'bf16'
new attn.Linear(4, 4).loadStateDict({ weight: { data: new Uint16Array(16), shape: [4, 4], dtype: 'bfloat16' } });
// @ts-expect-error binary16 tensors load into GroupedQueryAttention and Linear only
new attn.MultiheadAttention(64, 8).loadStateDict(attn.loadSafetensors(new Uint8Array(8), { dtype: 'f16' }));
// @ts-expect-error loadSafetensors takes the file's bytes, not its name
attn.loadSafetensors('model.safetensors');
// @ts-expect-error binary16 tensors hold Uint16Array bits, not floats
const notFloats: Float32Array | undefined = attn.loadSafetensors(new Uint8Array(8), { dtype: 'f16' }).get('w')?.data;
// @ts-expect-error dtype is 'f32', 'f16' or 'bf16'
attn.loadSafetensors(new Uint8Array(8), { dtype: 'f64' });
// @ts-expect-error bfloat16 tensors hold Uint16Array words, not floats
const notBfloats: Float32Array | undefined = attn.loadSafetensors(new Uint8Array(8), { dtype: 'bf16' }).get('w')?.data;
// @ts-expect-error constructor arguments are read-only
mha.embedDim = 16;
// @ts-expect-error training is switched with train() / eval()
mha.training = true;
// @ts-expect-error train() takes a boolean
mha.train('yes');

// ---- the other modules --------------------------------------------------------------------------
const sa = new attn.SelfAttention(8, 4, 4);
// @ts-expect-error SelfAttention takes one input
sa.forward(q, q);
// @ts-expect-error RelativeMultiHeadAttention's option name, not SelfAttention's
sa.forward(q, { mask: attn.masks.padding2d([4, 2], 4) });
const add = new attn.AdditiveAttention(8, 8, 16);
// @ts-expect-error value is required
add.forward(q, q);
// @ts-expect-error P belongs to RelativeMultiHeadAttention
new attn.AdditiveAttention(8, 8, 16, { P: 16 });
const rel = new attn.RelativeMultiHeadAttention(2, 8, { P: 16 });
// @ts-expect-error RelativeMultiHeadAttention's mask is called mask
rel.forward(q, q, q, { attnMask: attn.masks.causal(4) });
// @ts-expect-error weightsLayout is 'nmBH' or 'BHnm'
rel.forward(q, q, q, { weightsLayout: 'NHnm' });
// @ts-expect-error P is read-only
rel.P = 32;

// ---- instance and errors ------------------------------------------------------------------------
// @ts-expect-error features are read-only
attn.features.threads = 4;
// @ts-expect-error no such stat
attn.stats().heapBytes;
// @ts-expect-error the classes cannot be replaced
attn.MultiheadAttention = attn.SelfAttention;
// @ts-expect-error dispose() takes no arguments
attn.dispose(true);
// @ts-expect-error dispose() returns nothing to wait for
await attn.dispose().then(() => {});
// @ts-expect-error AttentionError needs argument, expected and got
new AttentionError('query');
try {
  mha.forward(q);
} catch (error) {
  // @ts-expect-error a caught value is unknown until narrowed
  error.argument;
  if (error instanceof AttentionError) {
    // @ts-expect-error no such code
    if (error.code === 'OOM') console.log('never');
    // @ts-expect-error argument is read-only
    error.argument = 'key';
  }
}
console.log(wrongKind);
// @ts-expect-error Linear writes into a Float32Array only
new attn.Linear(4, 4).forward({ data: new Float32Array(4), shape: [1, 4] }, { out: new Float64Array(4) });
// @ts-expect-error feedForward needs its activation
attn.feedForward({ data: new Float32Array(4), shape: [1, 4] }, { up: new attn.Linear(4, 4), down: new attn.Linear(4, 4) }, {});
// @ts-expect-error relu is not an activation feedForward knows
attn.feedForward({ data: new Float32Array(4), shape: [1, 4] }, { up: new attn.Linear(4, 4), down: new attn.Linear(4, 4) }, { activation: 'relu' });
// @ts-expect-error a gated block needs its down projection
attn.feedForward({ data: new Float32Array(4), shape: [1, 4] }, { gate: new attn.Linear(4, 4), up: new attn.Linear(4, 4) }, { activation: 'silu' });

// ---- attention-wasm/models ----------------------------------------------------------------------
import { openModel } from 'attention-wasm/models';
const opened = await openModel(await init(), './folder');
// @ts-expect-error dtype is one of 'auto', 'f32', 'f16', 'bf16'
await openModel(await init(), './folder', { dtype: 'q8' });
// @ts-expect-error a source is a path, Files or a Map
await openModel(await init(), 42);
// @ts-expect-error logits is 'last', 'all' or 'none'
await opened.forward([1], { logits: 'first' });
// @ts-expect-error misspelt option
await opened.forward([1], { outputAttention: true });
// @ts-expect-error project needs the layer
await opened.project({ data: new Float32Array(4), shape: [1, 1, 4] }, {});
// @ts-expect-error generate takes one sequence of ids
await opened.generate('hello');

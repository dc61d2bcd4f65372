// Types for attention-wasm. These are the documentation most users read: every option states its
// default, the shapes use the API's letters, and every mask states its polarity.
// tests/types/ holds the type tests: usage.ts (every API, strict) and errors.ts (wrong calls).

/// <reference lib="esnext.disposable" />

/**
 * A dense, row-major, contiguous float32 tensor. `data.length` must equal the product of `shape`;
 * shape entries are non-negative integers. Inputs are read, never kept or changed.
 */
export interface Tensor {
  data: Float32Array;
  shape: readonly number[];
}

/** A tensor this package returns: a fresh JS-owned copy, never a view of wasm memory. */
export interface ResultTensor extends Tensor {
  shape: number[];
}

/**
 * A mask. `Uint8Array` data is boolean (0/1) and its polarity depends on the function (stated on
 * each option: compare the README's table); `Float32Array` data is additive: added to the scaled
 * scores, `-Infinity` hides a key. A query with every key hidden gets zero weights and a zero output.
 */
export interface Mask {
  data: Uint8Array | Float32Array;
  shape: readonly number[];
}

/** A boolean mask (`Uint8Array` of 0/1). What 1 means depends on where it is used. */
export interface BoolMask extends Mask {
  data: Uint8Array;
  shape: number[];
}

/** An additive mask (`Float32Array`), added to the scores; `-Infinity` hides a key. */
export interface FloatMask extends Mask {
  data: Float32Array;
  shape: number[];
}

/** The bytes of one of the package's `.wasm` files. */
export type WasmBytes = ArrayBuffer | Uint8Array;

/**
 * The five wasm builds: `simd` (SIMD128), `relaxed` (SIMD128 whose multiply-adds are relaxed
 * SIMD's fused `f32x4.relaxed_madd`, about 1.3x faster matrix products where the engine has it:
 * Chrome and Edge >= 114, Node >= 22), `scalar` (engines without SIMD), and `threads` and
 * `threads-relaxed` (the pthreads builds of `simd` and `relaxed`).
 */
export type BuildName = 'simd' | 'relaxed' | 'scalar' | 'threads' | 'threads-relaxed';

export interface InitOptions {
  /**
   * Threads to run on: an integer in [1, 64], default 1. Above 1 the pthreads build is loaded
   * where `SharedArrayBuffer` exists (always in Node; in browsers only when the page is
   * cross-origin isolated) and one thread is used otherwise: `features.threads` says which. If the
   * pthreads build cannot start (its worker file missing or not served, or a worker failing to
   * start), init() logs one warning and uses the one-thread SIMD build.
   */
  threads?: number;
  /** `false` forces the scalar (no SIMD) build. Default `true`: SIMD when the engine supports it. */
  simd?: boolean;
  /**
   * `false` keeps to the plain SIMD builds. `true` takes a `relaxed` build, but only where the
   * engine supports relaxed SIMD (elsewhere the plain one). Default `true`, unless `wasmBinary` is
   * given without a `relaxed` or `threads-relaxed` entry. Relaxed multiply-adds are
   * fused on CPUs with FMA and not on others, so results may differ between machines in the last
   * bits (both stay within PyTorch's tolerance); `false` makes them the same everywhere.
   */
  relaxedSimd?: boolean;
  /**
   * The folder the `.wasm` files are served from, for hosts that move them (a CDN, a static
   * folder). A relative string is resolved against the page (or worker) URL; a missing trailing
   * `/` is added. Default: beside this module, found through `import.meta.url`, which bundlers
   * rewrite. The pthread worker and the glue it imports always stay beside this module.
   */
  wasmBaseUrl?: string | URL;
  /**
   * The wasm bytes themselves, so no `.wasm` file is fetched: the bytes of the build init picks
   * (`attention-simd.wasm` unless `simd: false`, `relaxedSimd: true`, threads or a missing SIMD say
   * otherwise), or one entry per build. A build without an entry is fetched as usual. Bytes that are not WebAssembly,
   * or belong to another build (each build's file names its build), throw an `AttentionError`
   * naming `wasmBinary` and both builds. Default: none.
   */
  wasmBinary?: WasmBytes | { [build in BuildName]?: WasmBytes };
}

export interface Features {
  /** Whether a wasm SIMD128 build is running (any build but `scalar`). */
  simd: boolean;
  /** Threads in use: 1 unless the pthreads build loaded, else the `threads` init() was given. */
  threads: number;
  /** The package version, e.g. `0.1.0`. */
  version: string;
}

export interface Stats {
  /** Current size of this instance's wasm linear memory, in bytes (it grows, never shrinks). */
  wasmHeapBytes: number;
  /** Modules created and not yet disposed (nor collected). */
  liveObjects: number;
}

export interface SdpaOptions {
  /**
   * Broadcastable to `[..., n, m]`. Boolean: **1 = may attend**, 0 = masked (as PyTorch's SDPA;
   * the opposite of `MultiheadAttention`). Float: added to the scaled scores. Default: none.
   */
  attnMask?: Mask | null;
  /**
   * `true` or `'upperLeft'`: query i attends to keys j <= i (top-left aligned, PyTorch's
   * `is_causal`). `'lowerRight'`: the n queries are the last n of the m key positions,
   * p_i = i + m − n, and attend to keys j <= p_i (`causal_lower_right`; what a decode step needs).
   * Combines with `attnMask` (PyTorch refuses both; here both apply). Default `false`.
   */
  isCausal?: boolean | 'upperLeft' | 'lowerRight';
  /** Score scale, a finite number. Default `1 / sqrt(d)`. */
  scale?: number;
  /** Dropout probability on the weights, in [0, 1). Default 0. */
  dropoutP?: number;
  /** Dropout seed, a non-negative integer. Default: a per-instance counter, so calls differ. */
  seed?: number;
  /**
   * Return the weights `[..., n, m]`. Default `false`: `weights` is null and the streaming
   * (online-softmax) path runs, which allocates no `n x m` buffer.
   */
  needWeights?: boolean;
  /**
   * Arrays to write the results into, each with room for its result (the result's `data` is its
   * start), as `KVCache.attend`'s. `weights` needs `needWeights: true`.
   */
  out?: { output?: Float32Array; weights?: Float32Array };
  /**
   * Grouped-query attention (PyTorch 2.5's `enable_gqa`): `query [..., Hq, n, d]` with
   * `key`/`value [..., Hkv, m, d]`, `Hq % Hkv == 0`; query head h reads key/value head
   * `floor(h / (Hq / Hkv))`. Default `false` (head counts must be equal).
   */
  enableGqa?: boolean;
  /**
   * Sliding window: a positive integer W; key j is visible iff `|p_i − j| < W`. With causal, the
   * W latest keys including the query's own position (Mistral's and Gemma 2's `sliding_window`).
   * Key tiles outside the window are skipped, so time grows with W, not m. Default: none.
   */
  window?: number;
  /** Soft cap c > 0 (Gemma 2): each scaled score s becomes `c · tanh(s / c)`, before ALiBi and `attnMask`. */
  softcap?: number;
  /**
   * ALiBi: adds `slope_h · (j − p_i)` to the scores of query head h (dim −3; rank ≥ 3). `true`
   * gives Press et al.'s slopes for any head count; or one slope per query head.
   */
  alibi?: boolean | Float32Array;
  /**
   * Packed sequences: ids broadcastable to `[..., n]` (n == m); key j is visible to query i iff
   * their ids are equal. For n != m give `queryDocumentIds` and `keyDocumentIds` instead.
   */
  documentIds?: IdsTensor | null;
  /** Document ids of the queries, broadcastable to `[..., n]`; with `keyDocumentIds`. */
  queryDocumentIds?: IdsTensor | null;
  /** Document ids of the keys, broadcastable to `[..., m]`; with `queryDocumentIds`. */
  keyDocumentIds?: IdsTensor | null;
}

/** Integer ids (document ids of packed sequences), row-major. */
export interface IdsTensor {
  data: Int32Array;
  shape: readonly number[];
}

/**
 * Hugging Face's `rope_scaling` as it stands in `config.json` (snake_case keys). The inverse
 * frequencies and the attention factor (which multiplies cos and sin) are transformers'
 * `ROPE_INIT_FUNCTIONS`, in double precision. `'dynamic'` and `'longrope'` depend on the length a
 * call covers (its largest position + 1, over the whole batch), as Hugging Face's do while
 * positions grow: keys already in a cache keep their rotation, so when a longrope model crosses
 * `original_max_position_embeddings` mid-generation, re-run the prefill (as Phi-3's `generate` does).
 */
export interface RopeScaling {
  /** Default `'default'`; `type` is the older name of the key (Phi-3's `'su'` is `fromConfig`'s to rename). */
  rope_type?: 'default' | 'linear' | 'dynamic' | 'yarn' | 'longrope' | 'llama3';
  type?: 'default' | 'linear' | 'dynamic' | 'yarn' | 'longrope' | 'llama3';
  /** linear, dynamic and llama3 need it; yarn and longrope default to maxPositionEmbeddings / original_max_position_embeddings. */
  factor?: number;
  /** yarn (default `0.1·ln(factor) + 1`, or from mscale / mscale_all_dim), longrope (default `sqrt(1 + ln(factor) / ln(original))`). */
  attention_factor?: number;
  /** yarn: default 32 and 1. */
  beta_fast?: number;
  beta_slow?: number;
  /** yarn. */
  mscale?: number;
  mscale_all_dim?: number;
  /** yarn: round the correction range outwards. Default true. */
  truncate?: boolean;
  /** llama3 (required). */
  low_freq_factor?: number;
  high_freq_factor?: number;
  /** yarn, longrope, llama3. Default `maxPositionEmbeddings`. */
  original_max_position_embeddings?: number;
  /** longrope: `rotaryDim / 2` factors each; long ones once the length passes the original. */
  short_factor?: readonly number[];
  long_factor?: readonly number[];
}

/** The RoPE scheme options `attn.rope` and `GroupedQueryAttention` share. */
export interface RopeSchemeOptions {
  /** Hugging Face's `config.rope_scaling`. Default: plain RoPE. */
  ropeScaling?: RopeScaling | null;
  /** Hugging Face's `max_position_embeddings`, for the types that read it (dynamic; the defaults above). */
  maxPositionEmbeddings?: number | null;
  /** Any other scheme: `rotaryDim / 2` inverse frequencies, given directly (not with `ropeScaling`). */
  invFreq?: Float64Array | Float32Array | null;
  /** With `invFreq`: the factor that multiplies cos and sin. Default 1. */
  attentionScaling?: number;
}

export interface RopeOptions extends RopeSchemeOptions {
  /**
   * Positions `[L]` (numbers or an Int32Array), or `[N, L]` for x `[N, ..., L, d]` (one row of
   * positions per batch entry, as Hugging Face's `position_ids`). Default `offset … offset + L − 1`.
   */
  positions?: Int32Array | readonly number[] | IdsTensor;
  /** The first position when `positions` is not given. Default 0. */
  offset?: number;
  /** Default 10000 (Llama 3 uses 500000). */
  base?: number;
  /** Dims rotated: even, at most d; the rest pass through (partial rotary, as in Phi). Default d. */
  rotaryDim?: number;
  /**
   * Pairs (2k, 2k+1) as GPT-J and ONNX `rotary_interleaved`. Default `false`: rotate-half pairs
   * (k, k + r/2), as GPT-NeoX and Hugging Face Llama.
   */
  interleaved?: boolean;
}

/** What every forward returns. `W` is `ResultTensor` when weights are certain to be returned. */
export interface AttentionResult<W extends ResultTensor | null = ResultTensor | null> {
  /** The attention output; its shape is stated on each function. */
  output: ResultTensor;
  /** The attention weights, or null when they were not asked for. */
  weights: W;
}

/** A PyTorch `state_dict()`: names to tensors, as an object or a Map. */
export type StateDict = Readonly<Record<string, Tensor>> | ReadonlyMap<string, Tensor>;

export interface LoadStateDictOptions {
  /**
   * Read only the entries whose names start with this (e.g. `'layers.0.self_attn.'`), as the names
   * that follow it; the rest of the state dict is ignored, so a whole model's tensors (as
   * `loadSafetensors` returns them) can be given. Errors name the full key, prefix included.
   * Default `''`: every entry is read, and any entry the module does not have is an error.
   */
  prefix?: string;
}

/** What every module shares. Modules start in eval mode (an inference library). */
export interface AttentionModule {
  /** Whether dropout is active: false until `train()`. */
  readonly training: boolean;
  /**
   * Copies the parameters from a `state_dict()` with PyTorch's names (listed on each module).
   * Missing, extra or mis-shaped entries throw an `AttentionError` naming the entry; nothing
   * changes then. Must be called before `forward`. Returns this.
   */
  loadStateDict(stateDict: StateDict, opts?: LoadStateDictOptions): this;
  /** Training mode (dropout on) when `mode` is true (the default), else eval mode. Returns this. */
  train(mode?: boolean): this;
  /** Eval mode: dropout off. Returns this. */
  eval(): this;
  /**
   * Frees the module's wasm memory now. Safe to call twice, and after its instance's `dispose()`
   * (which freed it already); any later use throws.
   */
  dispose(): void;
  /** `dispose()`, for `using` declarations. */
  [Symbol.dispose](): void;
}

export interface MultiheadAttentionOptions {
  /** Add biases to the input and output projections (`in_proj_bias`, `out_proj.bias`). Default `true`. */
  bias?: boolean;
  /** Append learned `bias_k` / `bias_v` rows to key and value. Default `false`. */
  addBiasKV?: boolean;
  /** Append a zero row to key and value. Default `false`. */
  addZeroAttn?: boolean;
  /** Key features. Default `embedDim`. kdim or vdim != embedDim uses `q/k/v_proj_weight`, not `in_proj_weight`. */
  kdim?: number;
  /** Value features. Default `embedDim`. */
  vdim?: number;
  /** Inputs and output are `(N, L, E)` instead of `(L, N, E)`. Default `false`. */
  batchFirst?: boolean;
  /** Dropout on the attention weights in training mode, in [0, 1). Default 0. */
  dropout?: number;
  /** Seed of the dropout draws; each forward advances it unless given its own. Default 0. */
  seed?: number;
}

export interface MultiheadAttentionForwardOptions {
  /**
   * `[N, m]` (`[m]` unbatched). Boolean: **1 = padding, ignored** (as `nn.MultiheadAttention`).
   * Float: added to the scores. Default: none.
   */
  keyPaddingMask?: Mask | null;
  /**
   * `[n, m]` or `[N*numHeads, n, m]` (`[numHeads, n, m]` unbatched; `[N*numHeads, 1, m]`, as
   * `masks.merge` returns without an attention mask, also works). Boolean: **1 = not allowed**
   * (as `nn.MultiheadAttention`; the opposite of SDPA). Float: added to the scores. Merged with
   * `keyPaddingMask` as `masks.merge` shows. Default: none.
   */
  attnMask?: Mask | null;
  /** Return the weights. Default `true`. False takes the streaming path: no `n x m` buffer, `weights` null. */
  needWeights?: boolean;
  /** Average the weights over heads (`[N, n, m]`), else return them per head (`[N, numHeads, n, m]`). Default `true`. */
  averageAttnWeights?: boolean;
  /**
   * Add a causal mask (query i sees keys j <= i), combined with the other masks. Default `false`.
   * Unlike PyTorch, where `is_causal` is only a hint, this applies the mask.
   */
  isCausal?: boolean;
  /** Dropout seed for this call (training mode only). Default: the module's seed, advanced per call. */
  seed?: number;
}

/**
 * `torch.nn.MultiheadAttention`. `loadStateDict` takes exactly: `in_proj_weight [3E, E]` when
 * kdim == vdim == embedDim, otherwise `q_proj_weight [E, E]`, `k_proj_weight [E, kdim]`,
 * `v_proj_weight [E, vdim]`; `in_proj_bias [3E]` and `out_proj.bias [E]` when `bias`;
 * `bias_k [1, 1, E]` and `bias_v [1, 1, E]` when `addBiasKV`; always `out_proj.weight [E, E]`.
 */
export interface MultiheadAttention extends AttentionModule {
  readonly embedDim: number;
  readonly numHeads: number;
  readonly bias: boolean;
  readonly addBiasKV: boolean;
  readonly addZeroAttn: boolean;
  readonly kdim: number;
  readonly vdim: number;
  readonly batchFirst: boolean;
  readonly dropout: number;
  /**
   * query `(L, N, E)`, or `(N, L, E)` with batchFirst, or unbatched `(L, E)`; key `(S, N, kdim)`
   * and value `(S, N, vdim)` default to the query (self-attention), then to the key. The output
   * keeps the query's layout; weights are `[N, n, m']` averaged or `[N, numHeads, n, m']` (N
   * dropped when unbatched), where m' counts the `bias_k` / zero columns. Weights are returned
   * unless `needWeights: false`.
   */
  forward(
    query: Tensor,
    key?: Tensor | null,
    value?: Tensor | null,
    opts?: MultiheadAttentionForwardOptions & { needWeights?: true },
  ): AttentionResult<ResultTensor>;
  forward(query: Tensor, key: Tensor | null | undefined, value: Tensor | null | undefined, opts: MultiheadAttentionForwardOptions & { needWeights: false }): AttentionResult<null>;
  forward(query: Tensor, key?: Tensor | null, value?: Tensor | null, opts?: MultiheadAttentionForwardOptions): AttentionResult;
}

export interface ModuleOptions {
  /** Dropout on the attention weights in training mode, in [0, 1). Default 0. */
  dropout?: number;
  /** Seed of the dropout draws; each forward advances it unless given its own. Default 0. */
  seed?: number;
}

export interface RelativeMultiHeadAttentionOptions extends ModuleOptions {
  /** Relative positions each side; every forward needs n <= P and m <= P. Default 4096. */
  P?: number;
}

export interface SelfAttentionForwardOptions {
  /** Broadcastable to `[N, L, L]`. Boolean: **1 = masked out**. Float: added to the scores. Default: none. */
  attnMask?: Mask | null;
  /** Dropout seed for this call (training mode only). Default: the module's seed, advanced per call. */
  seed?: number;
}

export interface AdditiveAttentionForwardOptions {
  /** Broadcastable to `[N, n, m]`. Boolean: **1 = masked out**. Float: added to the scores. Default: none. */
  attnMask?: Mask | null;
  /** Dropout seed for this call (training mode only). Default: the module's seed, advanced per call. */
  seed?: number;
}

export interface RelativeMultiHeadAttentionForwardOptions {
  /**
   * `[n or 1, m, B or 1]`. **0 = masked out**, nonzero = keep (the labml.ai polarity; a
   * `Float32Array` is read the same way, not added). Default: none.
   */
  mask?: Mask | null;
  /**
   * How the weights are laid out: `'nmBH'` is labml's `[n, m, B, heads]` (the default);
   * `'BHnm'` gives `[B, heads, n, m]`, one `n × m` plane per head, as MultiheadAttention's
   * per-head weights (the form heatmaps and per-head views read without a transpose).
   */
  weightsLayout?: 'nmBH' | 'BHnm';
  /** Dropout seed for this call (training mode only). Default: the module's seed, advanced per call. */
  seed?: number;
}

/**
 * Single-head self-attention: `Q = X W_qᵀ`, `K = X W_kᵀ`, `V = X W_vᵀ` (no bias), scale
 * `1/sqrt(keySize)`. `loadStateDict` takes `W_q.weight [keySize, embedDim]`,
 * `W_k.weight [keySize, embedDim]`, `W_v.weight [valueSize, embedDim]`.
 */
export interface SelfAttention extends AttentionModule {
  readonly embedDim: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly dropout: number;
  /** x `[N, L, embedDim]` -> output `[N, L, valueSize]`, weights `[N, L, L]`. */
  forward(x: Tensor, opts?: SelfAttentionForwardOptions): AttentionResult<ResultTensor>;
}

/**
 * Additive (Bahdanau) attention: `scores = w_v · tanh(W_q q + W_k k)`. `loadStateDict` takes
 * `W_q.weight [hiddenSize, querySize]`, `W_k.weight [hiddenSize, keySize]`, `W_v.weight [1, hiddenSize]`.
 */
export interface AdditiveAttention extends AttentionModule {
  readonly querySize: number;
  readonly keySize: number;
  readonly hiddenSize: number;
  readonly dropout: number;
  /** query `[N, n, querySize]`, key `[N, m, keySize]`, value `[N, m, dv]` -> output `[N, n, dv]`, weights `[N, n, m]`. */
  forward(query: Tensor, key: Tensor, value: Tensor, opts?: AdditiveAttentionForwardOptions): AttentionResult<ResultTensor>;
}

/**
 * Transformer-XL relative multi-head attention, in the labml.ai annotated formulation.
 * `loadStateDict` takes `query.linear.weight`, `key.linear.weight`, `value.linear.weight`
 * `[heads*d_k, dModel]`, `value.linear.bias [heads*d_k]`, `output.weight [dModel, heads*d_k]`,
 * `output.bias [dModel]`, `key_pos_embeddings [2P, heads, d_k]`, `key_pos_bias [2P, heads]`,
 * `query_pos_bias [heads, d_k]`, with `d_k = dModel / heads`.
 */
export interface RelativeMultiHeadAttention extends AttentionModule {
  readonly heads: number;
  readonly dModel: number;
  /** Relative positions each side; n <= P and m <= P. */
  readonly P: number;
  readonly dropout: number;
  /**
   * query `[n, B, dModel]`, key and value `[m, B, dModel]` -> output `[n, B, dModel]`, weights
   * `[n, m, B, heads]` (or `[B, heads, n, m]` with `weightsLayout: 'BHnm'`).
   */
  forward(query: Tensor, key: Tensor, value: Tensor, opts?: RelativeMultiHeadAttentionForwardOptions): AttentionResult<ResultTensor>;
}

/** How a `KVCache` holds its keys and values: float32, binary16 or 8-bit blocks (q8_0). */
export type KVCacheDtype = 'f32' | 'f16' | 'q8';

/** `new attn.KVCache(opts)`. */
export interface KVCacheOptions {
  /** Default 1. */
  batch?: number;
  /** Key/value heads. */
  heads: number;
  headDim: number;
  /** Default `headDim`. */
  valueDim?: number;
  /**
   * Positions it can hold (memory is reserved up front). With a `window` it is only the first
   * reservation: the cache is then a ring of the latest positions with no length limit.
   */
  maxLength: number;
  /**
   * `'f16'` stores IEEE binary16 (round to nearest even): half the memory. An append of a finite
   * value past its range (`|x| ≥ 65520`, which would be stored as ±Inf) throws an `AttentionError`
   * naming the batch, head, position and dim, and keeps what the cache held; ±Infinity and NaN
   * given are kept as such. `'q8'` stores llama.cpp's q8_0: each row cut into blocks of 32 values
   * (the last block shorter when 32 does not divide `headDim` or `valueDim`), each block as bytes
   * `q = round(x / d)` with one binary16 scale `d = max|x| / 127`: about a quarter of f32's
   * memory (34 bytes a block against 128). A step scores with its queries quantised per block the
   * same way, in integers. An append holding ±Infinity, NaN or `|x| ≥ 8321040` (whose scale
   * binary16 cannot hold) throws, as above. Default `'f32'`.
   */
  dtype?: KVCacheDtype;
  /**
   * Sliding window `W`: a ring buffer holding the latest `W` positions (after an append of `t`
   * at once, the latest `W − 1 + t`, so each new query sees its whole window).
   */
  window?: number | null;
}

/** `cache.attend(query, opts)`. */
export interface KVCacheAttendOptions {
  /** Default `true`: lower-right causal (the `n` queries are the latest `n` positions). `false` sees every held key. */
  isCausal?: boolean;
  /** Default `1/sqrt(headDim)`. */
  scale?: number;
  /** Gemma 2's soft cap: `s → c·tanh(s / c)`. */
  softcap?: number;
  /** ALiBi: `true` (Press et al.'s slopes) or one slope per query head. */
  alibi?: boolean | Float32Array;
  /** Key `j` visible iff `|p_i − j| < window`. Default the cache's; at most the cache's. */
  window?: number;
  /**
   * Broadcastable to `[batch, Hq, n, length]`: boolean 1 = may attend, or additive. PyTorch's
   * broadcasting: a rank-2 mask is `[n, length]`; a padding mask per row (Hugging Face's
   * `attention_mask [batch, length]`) goes as `[batch, 1, 1, length]`.
   */
  attnMask?: Mask | null;
  /** Default false. Weight columns are the held positions, oldest first. */
  needWeights?: boolean;
  /**
   * Arrays to write the results into, each with room for its result (the result's `data` is its
   * start): a loop that reuses them allocates no fresh memory a call. `weights` needs
   * `needWeights: true`.
   */
  out?: { output?: Float32Array; weights?: Float32Array };
}

/**
 * Keys and values held in wasm memory between decode steps, so that a step copies only its new
 * positions. Counted by `stats().liveObjects` until `dispose()`.
 */
export interface KVCache {
  readonly batch: number;
  readonly heads: number;
  readonly headDim: number;
  readonly valueDim: number;
  readonly maxLength: number;
  readonly dtype: KVCacheDtype;
  readonly window: number | null;
  /** Positions held. */
  readonly length: number;
  /** Positions appended since creation or `reset()`, minus those truncated: the next position. */
  readonly position: number;
  /**
   * Appends key `[batch, heads, t, headDim]` and value `[batch, heads, t, valueDim]`. Past
   * `maxLength` (no window), with a finite value past binary16's range in an `'f16'` cache, or
   * with a value a `'q8'` block cannot hold, it throws and keeps what it held.
   */
  append(key: Tensor, value: Tensor, opts?: KVCacheAppendOptions): this;
  /**
   * Attention of query `[batch, Hq, n, headDim]` (the latest `n` positions; `Hq` a multiple of
   * `heads`) over the held positions: output `[batch, Hq, n, valueDim]`, weights
   * `[batch, Hq, n, length]`. One query per head takes the decode path.
   */
  attend(query: Tensor, opts: KVCacheAttendOptions & { needWeights: true }): AttentionResult<ResultTensor>;
  attend(query: Tensor, opts?: KVCacheAttendOptions & { needWeights?: false }): AttentionResult<null>;
  attend(query: Tensor, opts?: KVCacheAttendOptions): AttentionResult;
  /**
   * Keeps the oldest `length` held positions (rollback of the latest): the next step then equals a
   * cache given only the positions kept. A window-`W` ring that has dropped its oldest positions
   * keeps at least `W − 1` (what the next position sees): a shorter `length` throws an
   * `AttentionError` naming the window and changes nothing (`reset()` and append again instead).
   */
  truncate(length: number): this;
  /** Empties the cache, keeping its memory. */
  reset(): this;
  /** The held keys as float32 `[batch, heads, length, headDim]`, oldest first. */
  keys(): ResultTensor;
  /** The held values as float32 `[batch, heads, length, valueDim]`, oldest first. */
  values(): ResultTensor;
  /** The held attention mask `[batch, length]` (1 a token, 0 padding; all 1 where none was given), oldest first. */
  mask(): BoolMask;
  /** Frees its wasm memory now; later use throws (`DISPOSED`). */
  dispose(): void;
  [Symbol.dispose](): void;
}

/**
 * Hugging Face's `attention_mask`: `[N, t]`, **1 = a token, 0 = padding** (left padding in a
 * batch), in any integer typed array (`BigInt64Array` as transformers.js gives it), or numbers or
 * booleans.
 */
export interface TokenMask {
  data: Uint8Array | Int8Array | Int32Array | Uint32Array | BigInt64Array | Float32Array | readonly (number | boolean)[];
  shape: readonly number[];
}

export interface KVCacheAppendOptions {
  /** The appended positions' attention mask `[batch, t]`, kept with them: `attend` hides padded keys. */
  mask?: TokenMask | null;
}

/** QK-norm: RMSNorm of q and of k after the projections, before RoPE, computed in f32. */
export interface QkNorm {
  /**
   * `'head'`: over each head's `headDim` (Qwen3, Gemma 3; `q_norm.weight`, `k_norm.weight` of
   * `[headDim]`); `'all'`: over the whole projection (OLMo 2; `[numHeads·headDim]` and
   * `[numKeyValueHeads·headDim]`).
   */
  scope: 'head' | 'all';
  /** Default 1e-6 (`rms_norm_eps`). */
  eps?: number;
  /** Scale by `1 + weight` (Gemma's RMSNorm). Default false. */
  unitOffset?: boolean;
}

/** `new attn.GroupedQueryAttention(hiddenSize, numHeads, numKeyValueHeads, opts)`. */
export interface GroupedQueryAttentionOptions extends RopeSchemeOptions {
  /** Default `hiddenSize / numHeads`. */
  headDim?: number;
  /** q/k/v projection biases (Qwen2). Default false. */
  qkvBias?: boolean;
  /** o_proj bias. Default false. */
  outputBias?: boolean;
  /** RoPE base (`rope_theta`). Default 10000. */
  ropeBase?: number;
  /** GPT-J-style interleaved RoPE instead of rotate-half. Default false. */
  ropeInterleaved?: boolean;
  /** Rotated dims (even). Default `headDim`. */
  rotaryDim?: number;
  /** QK-norm (Qwen3, Gemma 3, OLMo 2). Default none. */
  qkNorm?: QkNorm | null;
  /** Mistral / Gemma 2 `sliding_window`. */
  slidingWindow?: number | null;
  /** Gemma 2 `attn_logit_softcapping`. */
  softcap?: number | null;
  /** Default `1/sqrt(headDim)` (Gemma 2: `query_pre_attn_scalar ** -0.5`). */
  scale?: number | null;
  /**
   * `'f16'` / `'bf16'`: the q/k/v/o projection weights held as binary16 / bfloat16, as `Linear`'s
   * (half the memory; arithmetic stays f32). Default `'f32'`. Every dtype loads float32, binary16
   * and bfloat16 tensors.
   */
  dtype?: WeightDtype;
}

export interface GroupedQueryAttentionForwardOptions {
  /** k and v are appended to it, and attention covers everything it holds. */
  cache?: KVCache | null;
  /**
   * Hugging Face's `attention_mask` of the new tokens, `[N, t]` (1 a token, 0 padding): padded
   * keys are hidden, and a cache keeps the mask, so later steps need none. A padded row's tokens
   * equal the row run alone.
   */
  attentionMask?: TokenMask | null;
  /**
   * RoPE positions `[t]` (numbers or an Int32Array) or `[N, t]`. Default Hugging Face
   * `generate()`'s: each row's tokens counted (`cumsum(attentionMask) − 1`, padding at 0), on from
   * those the cache holds; without padding, `cache.position + 0 … t−1`, or `0 … t−1`.
   */
  positions?: readonly number[] | Int32Array | IdsTensor;
  /**
   * Broadcastable to `[N, numHeads, t, m]`: boolean 1 = may attend (left padding), or additive.
   * PyTorch's broadcasting: a rank-2 mask is `[t, m]`, not Hugging Face's `attention_mask [N, m]`,
   * which goes as `[N, 1, 1, m]`.
   */
  attnMask?: Mask | null;
  /**
   * Hugging Face's `head_mask`, one factor per query head (`[numHeads]`): each head's softmax
   * weights are multiplied by it before the values are summed (0 removes the head's contribution
   * to `o_proj`'s input); the weights returned are the scaled ones.
   */
  headMask?: Float32Array | readonly number[] | null;
  /** Default false. */
  needWeights?: boolean;
  /**
   * Arrays to write the results into, each with room for its result (the result's `data` is its
   * start), as `KVCache.attend`'s. `weights` needs `needWeights: true`.
   */
  out?: { output?: Float32Array; weights?: Float32Array };
}

/**
 * The attention block of Hugging Face `LlamaAttention` / `MistralAttention` / `Qwen2Attention` /
 * `Qwen3Attention` / `Gemma2Attention` / `Gemma3Attention` / `Phi3Attention` / `Olmo2Attention`.
 * `loadStateDict` takes `q_proj.weight [numHeads·headDim, hiddenSize]`, `k_proj.weight` and
 * `v_proj.weight [numKeyValueHeads·headDim, hiddenSize]` (or Phi-3's fused `qkv_proj.weight`, their
 * rows in that order), `o_proj.weight [hiddenSize, numHeads·headDim]`, the q/k/v biases with
 * `qkvBias`, `o_proj.bias` with `outputBias`, `q_norm.weight` / `k_norm.weight` with `qkNorm`
 * (`{ prefix: 'model.layers.0.self_attn.' }` reads one layer). Any entry may be float32, binary16
 * or bfloat16 (`loadSafetensors(…, { dtype })`): the projections are held as `dtype`, the biases
 * and norms as float32.
 */
export interface GroupedQueryAttention extends AttentionModule {
  readonly hiddenSize: number;
  readonly numHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly qkvBias: boolean;
  readonly outputBias: boolean;
  readonly ropeBase: number;
  readonly ropeInterleaved: boolean;
  readonly rotaryDim: number;
  readonly slidingWindow: number | null;
  readonly softcap: number | null;
  readonly scale: number | null;
  readonly ropeScaling: RopeScaling | null;
  readonly maxPositionEmbeddings: number | null;
  readonly qkNorm: Required<QkNorm> | null;
  readonly dtype: WeightDtype;
  loadStateDict(stateDict: StateDict | ReadonlyMap<string, WeightTensor> | Readonly<Record<string, WeightTensor>>, opts?: LoadStateDictOptions): this;
  /** A `KVCache` shaped for the block (`numKeyValueHeads` heads of `headDim`, window `slidingWindow`). */
  createCache(maxLength: number, opts?: { batch?: number; dtype?: KVCacheDtype }): KVCache;
  /**
   * x `[N, t, hiddenSize]` → output `[N, t, hiddenSize]`, weights `[N, numHeads, t, m]` (`m`: the
   * positions attended, those the cache holds after the append, or `t`). Prefill (t > 1) runs
   * the streaming path, decode (t = 1 with a cache) the decode path.
   */
  forward(x: Tensor, opts: GroupedQueryAttentionForwardOptions & { needWeights: true }): AttentionResult<ResultTensor>;
  forward(x: Tensor, opts?: GroupedQueryAttentionForwardOptions & { needWeights?: false }): AttentionResult<null>;
  forward(x: Tensor, opts?: GroupedQueryAttentionForwardOptions): AttentionResult;
  /**
   * What `forward()`'s attention reads, for looking inside the block: x `[N, t, hiddenSize]` →
   * `query [N, numHeads, t, headDim]`, `key` and `value [N, numKeyValueHeads, t, headDim]`,
   * projected, QK-normed and rotated at the positions `forward()` would use now (a cache only
   * sets those positions, its next ones: call it before the `forward()` that appends them; nothing
   * is appended, and a full cache is no error).
   */
  project(x: Tensor, opts?: Pick<GroupedQueryAttentionForwardOptions, 'cache' | 'attentionMask' | 'positions'>): { query: ResultTensor; key: ResultTensor; value: ResultTensor };
}

/** Sequence lengths: integers in [0, maxLen], as an array or a typed array. */
export type Lengths = readonly number[] | Uint8Array | Uint16Array | Uint32Array | Int8Array | Int16Array | Int32Array | Float32Array | Float64Array;

/** Mask builders. Boolean results use `MultiheadAttention`'s polarity: **1 = masked**. */
export interface Masks {
  /** `[n, m]` boolean, 1 where key j > query i (not allowed). `m` defaults to `n`. */
  causal(n: number, m?: number): BoolMask;
  /** `[N, maxLen]` boolean, 1 where j >= lengths[b] (padding): a `keyPaddingMask`. */
  keyPadding(lengths: Lengths, maxLen: number): BoolMask;
  /** `[N, maxLen, maxLen]` boolean, 1 where query i or key j is padding (for `SelfAttention`). */
  padding2d(lengths: Lengths, maxLen: number): BoolMask;
  /**
   * The single additive mask `MultiheadAttention` applies: float `[N*numHeads, n, m]`, or
   * `[N*numHeads, 1, m]` when `attnMask` is null; masked entries are `-Infinity`. `attnMask` is
   * `[n, m]` or `[N*numHeads, n, m]` (boolean 1 = not allowed, or float); `keyPaddingMask` is
   * `[N, m]` (boolean 1 = padding, or float).
   */
  merge(attnMask: Mask | null, keyPaddingMask: Mask, numHeads: number): FloatMask;
}

/**
 * One loaded wasm instance: the functions, the module classes bound to it, and its masks. It holds
 * its wasm memory (and, on the threads builds, its pthread workers) until `dispose()`.
 */
/** The bytes of a `.safetensors` file (a Node `Buffer` is a `Uint8Array`). */
export type SafetensorsBytes = ArrayBuffer | Uint8Array;

/** A tensor of binary16 values: the bits of each, as `loadSafetensors(…, { dtype: 'f16' })` gives them. */
export interface HalfTensor {
  data: Uint16Array;
  shape: number[];
  dtype: 'f16';
}

/** A tensor of bfloat16 values: the bits of each, the upper 16 bits of a float32 (`torch.bfloat16`'s). */
export interface Bfloat16Tensor {
  data: Uint16Array;
  shape: number[];
  dtype: 'bf16';
}

/** What a weight may be given as: float32, binary16 or bfloat16. */
export type WeightTensor = Tensor | HalfTensor | Bfloat16Tensor;

/**
 * How `Linear` and `GroupedQueryAttention` hold their weights: float32, or IEEE binary16 or
 * bfloat16 (round to nearest even; half the memory, arithmetic stays f32).
 */
export type WeightDtype = 'f32' | 'f16' | 'bf16';

/** `new attn.Linear(inFeatures, outFeatures, opts)`. */
export interface LinearOptions {
  /** Default true. */
  bias?: boolean;
  /** `'f16'` / `'bf16'`: the weight held as binary16 / bfloat16 (half the memory; arithmetic stays f32). Default `'f32'`. */
  dtype?: WeightDtype;
}

/**
 * `torch.nn.Linear`: `y = x·Wᵀ + b` over `x [..., inFeatures]`. `loadStateDict` takes
 * `weight [outFeatures, inFeatures]` (float32, binary16 or bfloat16: a Linear whose `dtype` it is
 * keeps it bit for bit, others widen it or round it to nearest even) and `bias [outFeatures]`
 * (float32). The weight lives in wasm memory, packed once; the package's GEMM kernels and threads
 * do the work.
 */
export interface Linear {
  readonly inFeatures: number;
  readonly outFeatures: number;
  readonly bias: boolean;
  readonly dtype: WeightDtype;
  loadStateDict(stateDict: Map<string, WeightTensor> | Record<string, WeightTensor>, opts?: LoadStateDictOptions): this;
  /**
   * `x [..., inFeatures]` → `[..., outFeatures]`. `out`: a `Float32Array` with room for the output
   * to write it into (the result's `data` is `out`, or its start): a buffer reused call after call
   * needs no fresh memory.
   */
  forward(x: Tensor, opts?: { out?: Float32Array }): ResultTensor;
  /** Frees its wasm memory now; later use throws (`DISPOSED`). */
  dispose(): void;
  [Symbol.dispose](): void;
}

/** config.json's `hidden_act` (transformers' ACT2FN names); `'gelu'` is the erf form, the other two the tanh form. */
export type Activation = 'silu' | 'gelu' | 'gelu_new' | 'gelu_pytorch_tanh';

/**
 * `attn.feedForward`'s Linear modules (of the same instance, loaded): `{ gate, up, down }` for
 * `down(act(gate(x)) · up(x))` (Llama's MLP), `{ up, down }` for `down(act(up(x)))` (GPT-2's,
 * BERT's), `{ gateUp, down }` for one projection whose rows hold the gate's half and then the up's
 * (Phi-3's `gate_up_proj`).
 */
export type FeedForwardParts =
  | { gate: Linear; up: Linear; down: Linear }
  | { up: Linear; down: Linear }
  | { gateUp: Linear; down: Linear };

/** `loadSafetensors`' map: names to tensors, with the files' `__metadata__`. */
export interface SafetensorsMap<T> extends Map<string, T> {
  readonly metadata: Readonly<Record<string, string>>;
}

export interface Attention {
  /** Which build runs: SIMD or not, threads in use, package version. */
  readonly features: Readonly<Features>;
  /** The wasm build init() loaded (`attention-<build>.wasm`). */
  readonly build: BuildName;
  readonly masks: Masks;
  /** `new attn.MultiheadAttention(embedDim, numHeads, opts?)`; embedDim divisible by numHeads. */
  readonly MultiheadAttention: new (embedDim: number, numHeads: number, opts?: MultiheadAttentionOptions) => MultiheadAttention;
  /** `new attn.SelfAttention(embedDim, keySize, valueSize, opts?)`. */
  readonly SelfAttention: new (embedDim: number, keySize: number, valueSize: number, opts?: ModuleOptions) => SelfAttention;
  /** `new attn.AdditiveAttention(querySize, keySize, hiddenSize, opts?)`. */
  readonly AdditiveAttention: new (querySize: number, keySize: number, hiddenSize: number, opts?: ModuleOptions) => AdditiveAttention;
  /** `new attn.RelativeMultiHeadAttention(heads, dModel, opts?)`; dModel divisible by heads. */
  readonly RelativeMultiHeadAttention: new (heads: number, dModel: number, opts?: RelativeMultiHeadAttentionOptions) => RelativeMultiHeadAttention;
  /**
   * `new attn.GroupedQueryAttention(hiddenSize, numHeads, numKeyValueHeads, opts?)`;
   * numKeyValueHeads divides numHeads. `GroupedQueryAttention.fromConfig(config, { layer, dtype })`: the
   * block of layer `layer` (default 0) of the model a parsed Hugging Face `config.json` describes
   * (`model_type` llama, mistral, qwen2, qwen3, gemma2, gemma3_text or gemma3's `text_config`, phi3,
   * olmo2), every field that changes its attention honoured or refused by name.
   */
  readonly GroupedQueryAttention: {
    new (hiddenSize: number, numHeads: number, numKeyValueHeads: number, opts?: GroupedQueryAttentionOptions): GroupedQueryAttention;
    fromConfig(config: Record<string, unknown>, opts?: { layer?: number; dtype?: WeightDtype }): GroupedQueryAttention;
  };
  /** `new attn.KVCache({ batch, heads, headDim, valueDim, maxLength, dtype, window })`. */
  readonly KVCache: new (opts: KVCacheOptions) => KVCache;
  /** `new attn.Linear(inFeatures, outFeatures, { bias, dtype })`: `torch.nn.Linear`, its weight in wasm memory as f32, f16 or bf16. */
  readonly Linear: new (inFeatures: number, outFeatures: number, opts?: LinearOptions) => Linear;
  /**
   * The tensors of a `.safetensors` file (Hugging Face's format) as float32, in the order its
   * header lists them: names to `{ data, shape }` (a scalar's shape is `[]`), ready for any
   * module's `loadStateDict(sd, { prefix })`. `F32`, `F16` (IEEE half, subnormals, ±Inf and NaN
   * included) and `BF16` are read; `__metadata__` is not a tensor. `bytes` is the whole file: an
   * `ArrayBuffer`, a `Uint8Array` at any offset, or a Node `Buffer`. A malformed file (header
   * size, JSON, a tensor's dtype, shape or data offsets, tensors that overlap or leave gaps in
   * the data, as the reference implementation checks) throws an `AttentionError` naming what is
   * wrong (`bytes`, or `bytes: tensor 'name'…`); nothing past `bytes` is read.
   *
   * A model in shards (`model-00001-of-00002.safetensors`, …) is read from an array of them: one
   * map, shard after shard; a name in two shards throws (`bytes[1]: tensor 'name'`). The map's
   * `metadata` is the files' `__metadata__` (`{}` without one; a shard's keys do not replace an
   * earlier shard's).
   */
  loadSafetensors(bytes: SafetensorsBytes | SafetensorsBytes[], opts?: { dtype?: 'f32' }): SafetensorsMap<ResultTensor>;
  /**
   * With `dtype: 'f16'` the tensors stay binary16, for modules that store f16 weights: `F16` as
   * read, `F32` and `BF16` rounded to nearest even (±Inf past ±65504).
   */
  loadSafetensors(bytes: SafetensorsBytes | SafetensorsBytes[], opts: { dtype: 'f16' }): SafetensorsMap<HalfTensor>;
  /**
   * With `dtype: 'bf16'` the tensors are bfloat16 words (the upper half of each float32), for
   * modules that store bf16 weights: `BF16` as read, `F32` and `F16` rounded to nearest even.
   */
  loadSafetensors(bytes: SafetensorsBytes | SafetensorsBytes[], opts: { dtype: 'bf16' }): SafetensorsMap<Bfloat16Tensor>;
  /** Heap size of this instance and the number of modules not yet disposed. */
  stats(): Stats;
  /**
   * Ends the instance: frees its modules, terminates its pthread workers and releases its wasm
   * memory, even while `attn` or its modules are still referenced. Every later call, on the
   * instance, its `masks` and classes or modules made earlier, throws an `AttentionError` with
   * code `DISPOSED` naming the instance (`features` and `build` stay readable); the modules'
   * own `dispose()` does nothing. Calling it again does nothing. Pages and servers that re-create
   * instances call it, or nothing frees a threaded instance's workers.
   */
  dispose(): void;
  /** `dispose()` itself, for `using attn = await init()`. */
  [Symbol.dispose](): void;
  /**
   * `torch.nn.functional.scaled_dot_product_attention`. `query [..., n, d]`, `key [..., m, d]`,
   * `value [..., m, dv]` with the same leading dims -> `output [..., n, dv]`, and
   * `weights [..., n, m]` when `needWeights: true` (else null). A query that may attend to no key
   * gets zero weights and a zero output (PyTorch gives NaN).
   */
  scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, opts: SdpaOptions & { needWeights: true }): AttentionResult<ResultTensor>;
  scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, opts?: SdpaOptions & { needWeights?: false }): AttentionResult<null>;
  scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, opts?: SdpaOptions): AttentionResult;
  /**
   * Rotary position embedding of `x [..., L, d]`, a new tensor of the same shape. With
   * r = `rotaryDim` and k < r/2 the angle is `pos · base^(−2k/r)`, computed in double precision.
   */
  rope(x: Tensor, opts?: RopeOptions): ResultTensor;
  /**
   * A transformer layer's feed-forward block in one call (`FeedForwardParts`), `x [..., inFeatures]`
   * → `[..., down.outFeatures]`: the hidden activations stay in wasm memory, a few hundred rows at a
   * time, and the activation (required: no default to fall back on silently) runs as a SIMD kernel.
   * `out` as `Linear.forward`'s.
   */
  feedForward(x: Tensor, parts: FeedForwardParts, opts: { activation: Activation; out?: Float32Array }): ResultTensor;
}

/**
 * Loads the fastest build this engine runs (see `InitOptions`) and returns an independent instance.
 * Rejects with an `AttentionError` for bad options, or an `Error` when the wasm cannot be loaded.
 */
export function init(opts?: InitOptions): Promise<Attention>;

/**
 * `INVALID_ARGUMENT` for bad input; `OUT_OF_MEMORY` when a call needs more than the 2 GiB wasm
 * heap; `DISPOSED` when the module, or the instance it belongs to, was disposed.
 */
export type AttentionErrorCode = 'INVALID_ARGUMENT' | 'OUT_OF_MEMORY' | 'DISPOSED';

/**
 * Thrown for every bad input, for out-of-memory and for use after `dispose()`. The message names
 * the argument, the expected and the given shape or value (`key: expected [2, m, 64], got
 * [2, 7, 32]`); the instance keeps working afterwards. After `attn.dispose()` the argument is the
 * call (`scaledDotProductAttention: expected an instance that is not disposed, got attn (disposed
 * instance of build 'threads')`).
 */
export class AttentionError extends Error {
  constructor(argument: string, expected: string, got: string, details?: { code?: AttentionErrorCode });
  readonly name: 'AttentionError';
  /** The argument at fault, e.g. `key.shape`, `attnMask.data`, `scale`, `stateDict['out_proj.bias']`. */
  readonly argument: string;
  /** What it should have been, shapes written as `[2, m, 64]`. */
  readonly expected: string;
  /** What it was. */
  readonly got: string;
  readonly code: AttentionErrorCode;
}

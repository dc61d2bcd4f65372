// Types for attention-wasm. These are the documentation most users read: every option states its
// default, the shapes use the API's letters, and every mask states its polarity.

/** A dense, row-major, contiguous float32 tensor. `data.length` must equal the product of `shape`. */
export interface Tensor {
  data: Float32Array;
  shape: number[];
}

/**
 * A mask. `Uint8Array` data is boolean (0/1) and its polarity depends on the function (stated on
 * each option); `Float32Array` data is additive: added to the scaled scores, `-Infinity` hides a key.
 */
export interface Mask {
  data: Uint8Array | Float32Array;
  shape: number[];
}

export interface InitOptions {
  /**
   * Threads to run on (default 1). Above 1 the pthreads build is loaded where `SharedArrayBuffer`
   * exists (always in Node; in browsers only when cross-origin isolated) and one thread is used
   * otherwise: `features.threads` says which.
   */
  threads?: number;
  /** `false` forces the scalar (no SIMD) build. Default: SIMD when the engine supports it. */
  simd?: boolean;
  /** Where the `.wasm` files are served from, for hosts that move them. Default: beside this module. */
  wasmBaseUrl?: string | URL;
}

export interface Features {
  /** Whether the wasm SIMD128 build is running. */
  simd: boolean;
  /** Threads in use (1 unless the pthreads build loaded). */
  threads: number;
  /** The package version. */
  version: string;
}

export interface Stats {
  /** Current size of this instance's wasm linear memory, in bytes. */
  wasmHeapBytes: number;
  /** Modules created and not yet disposed. */
  liveObjects: number;
}

export interface SdpaOptions {
  /**
   * Broadcastable to `[..., n, m]`. Boolean: **1 = may attend**, 0 = masked (as PyTorch's SDPA).
   * Float: added to the scaled scores.
   */
  attnMask?: Mask | null;
  /** Query i attends to keys j <= i (top-left aligned). Combines with `attnMask`. Default false. */
  isCausal?: boolean;
  /** Score scale. Default `1 / sqrt(d)`. Must be finite. */
  scale?: number;
  /** Dropout probability on the weights, in [0, 1). Default 0. */
  dropoutP?: number;
  /** Dropout seed (a non-negative integer). Default: a per-instance counter, so calls differ. */
  seed?: number;
  /**
   * Return the weights (default false). When false, `weights` is null and the streaming
   * (online-softmax) path runs, which allocates no `n x m` buffer.
   */
  needWeights?: boolean;
}

export interface AttentionResult {
  /** `[..., n, dv]` */
  output: Tensor;
  /** `[..., n, m]`, or null when weights were not asked for. */
  weights: Tensor | null;
}

/** A PyTorch `state_dict()`: names to tensors, as an object or a Map. */
export type StateDict = Record<string, Tensor> | Map<string, Tensor>;

/** What every module shares. Modules start in eval mode (an inference library). */
export interface AttentionModule {
  /** Whether dropout is active. */
  readonly training: boolean;
  /**
   * Copies the parameters from a `state_dict()` with PyTorch's names. Missing, extra or
   * mis-shaped entries throw an `AttentionError` naming the entry; nothing changes then.
   */
  loadStateDict(stateDict: StateDict): this;
  /** Training mode (dropout on) when `mode` is true (the default), else eval mode. */
  train(mode?: boolean): this;
  /** Eval mode: dropout off. */
  eval(): this;
  /** Frees the module's wasm memory now. Safe to call twice; any later use throws. */
  dispose(): void;
  [Symbol.dispose](): void;
}

export interface MultiheadAttentionOptions {
  /** Add biases to the input and output projections (default true). */
  bias?: boolean;
  /** Append learned `bias_k` / `bias_v` rows to key and value (default false). */
  addBiasKV?: boolean;
  /** Append a zero row to key and value (default false). */
  addZeroAttn?: boolean;
  /** Key features (default embedDim). kdim or vdim != embedDim uses q/k/v_proj_weight. */
  kdim?: number;
  /** Value features (default embedDim). */
  vdim?: number;
  /** Inputs and output are (N, L, E) instead of (L, N, E) (default false). */
  batchFirst?: boolean;
  /** Dropout on the attention weights in training mode, in [0, 1) (default 0). */
  dropout?: number;
  /** Seed of the dropout draws; each forward advances it unless given its own (default 0). */
  seed?: number;
}

export interface MultiheadAttentionForwardOptions {
  /** [N, m] ([m] unbatched). Boolean: **1 = padding, ignored**. Float: added to the scores. */
  keyPaddingMask?: Mask | null;
  /**
   * [n, m] or [N*numHeads, n, m] ([numHeads, n, m] unbatched; [N*numHeads, 1, m], as `masks.merge`
   * returns without an attention mask, also works). Boolean: **1 = not allowed**.
   * Float: added to the scores. Merged with keyPaddingMask as `masks.merge` shows.
   */
  attnMask?: Mask | null;
  /** Return the weights (default true). False takes the streaming path: no n x m buffer. */
  needWeights?: boolean;
  /** Average the weights over heads (default true), else return them per head. */
  averageAttnWeights?: boolean;
  /**
   * Add a causal mask (query i sees keys j <= i), combined with the other masks (default false).
   * Unlike PyTorch, where is_causal is only a hint, this applies the mask.
   */
  isCausal?: boolean;
  /** Dropout seed for this call (training mode only). */
  seed?: number;
}

/** `torch.nn.MultiheadAttention`. */
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
   * query (L, N, E), or (N, L, E) with batchFirst, or unbatched (L, E); key and value default to
   * the query (self-attention). Output keeps the query's layout; weights are [N, n, m'] averaged or
   * [N, numHeads, n, m'] (N dropped when unbatched), where m' counts the bias_k / zero columns.
   */
  forward(query: Tensor, key?: Tensor | null, value?: Tensor | null, opts?: MultiheadAttentionForwardOptions): AttentionResult;
}

export interface ModuleOptions {
  /** Dropout on the attention weights in training mode, in [0, 1) (default 0). */
  dropout?: number;
  /** Seed of the dropout draws (default 0). */
  seed?: number;
}

/** Single-head self-attention: Q = X W_qᵀ, K = X W_kᵀ, V = X W_vᵀ (no bias), scale 1/sqrt(keySize). */
export interface SelfAttention extends AttentionModule {
  readonly embedDim: number;
  readonly keySize: number;
  readonly valueSize: number;
  readonly dropout: number;
  /**
   * x [N, L, embedDim] -> output [N, L, valueSize], weights [N, L, L]. `attnMask` broadcastable
   * to [N, L, L]: boolean **1 = masked out**, or float additive.
   */
  forward(x: Tensor, opts?: { attnMask?: Mask | null; seed?: number }): { output: Tensor; weights: Tensor };
}

/** Additive (Bahdanau) attention: scores = w_v · tanh(W_q q + W_k k). */
export interface AdditiveAttention extends AttentionModule {
  readonly querySize: number;
  readonly keySize: number;
  readonly hiddenSize: number;
  readonly dropout: number;
  /**
   * query [N, n, dq], key [N, m, dk], value [N, m, dv] -> output [N, n, dv], weights [N, n, m].
   * `attnMask` broadcastable to [N, n, m]: boolean **1 = masked out**, or float additive.
   */
  forward(query: Tensor, key: Tensor, value: Tensor, opts?: { attnMask?: Mask | null; seed?: number }): { output: Tensor; weights: Tensor };
}

/** Transformer-XL relative multi-head attention, in the labml.ai annotated formulation. */
export interface RelativeMultiHeadAttention extends AttentionModule {
  readonly heads: number;
  readonly dModel: number;
  /** Relative positions each side; n <= P and m <= P. */
  readonly P: number;
  readonly dropout: number;
  /**
   * query [n, B, dModel], key and value [m, B, dModel] -> output [n, B, dModel], weights
   * [n, m, B, heads]. `mask` [n or 1, m, B or 1]: **0 = masked out**, nonzero = keep (a
   * Float32Array is read the same way).
   */
  forward(query: Tensor, key: Tensor, value: Tensor, opts?: { mask?: Mask | null; seed?: number }): { output: Tensor; weights: Tensor };
}

export interface Masks {
  /** [n, m] boolean, 1 where key j > query i (not allowed): MultiheadAttention's attnMask polarity. */
  causal(n: number, m?: number): Mask & { data: Uint8Array };
  /** [N, maxLen] boolean, 1 where j >= lengths[b] (padding). */
  keyPadding(lengths: ArrayLike<number>, maxLen: number): Mask & { data: Uint8Array };
  /** [N, maxLen, maxLen] boolean, 1 where query i or key j is padding. */
  padding2d(lengths: ArrayLike<number>, maxLen: number): Mask & { data: Uint8Array };
  /**
   * The single additive mask MultiheadAttention applies: float [N*numHeads, n, m], or
   * [N*numHeads, 1, m] when attnMask is null; masked entries are -Infinity.
   */
  merge(attnMask: Mask | null, keyPaddingMask: Mask, numHeads: number): Mask & { data: Float32Array };
}

export interface Attention {
  readonly features: Readonly<Features>;
  readonly masks: Masks;
  readonly MultiheadAttention: new (embedDim: number, numHeads: number, opts?: MultiheadAttentionOptions) => MultiheadAttention;
  readonly SelfAttention: new (embedDim: number, keySize: number, valueSize: number, opts?: ModuleOptions) => SelfAttention;
  readonly AdditiveAttention: new (querySize: number, keySize: number, hiddenSize: number, opts?: ModuleOptions) => AdditiveAttention;
  readonly RelativeMultiHeadAttention: new (heads: number, dModel: number, opts?: ModuleOptions & { P?: number }) => RelativeMultiHeadAttention;
  stats(): Stats;
  /**
   * `torch.nn.functional.scaled_dot_product_attention`. `query [..., n, d]`, `key [..., m, d]`,
   * `value [..., m, dv]` with the same leading dims. A query that may attend to no key gets zero
   * weights and a zero output (PyTorch gives NaN).
   */
  scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, opts?: SdpaOptions): AttentionResult;
}

/** Loads the fastest build this engine runs. Each call returns an independent instance. */
export function init(opts?: InitOptions): Promise<Attention>;

/**
 * Thrown for every bad input and for out-of-memory. The message names the argument, the expected
 * and the given shape or value; the instance keeps working afterwards.
 */
export class AttentionError extends Error {
  readonly name: 'AttentionError';
  /** The argument at fault, e.g. `key`, `attnMask.data`, `scale`. */
  readonly argument: string;
  readonly expected: string;
  readonly got: string;
  readonly code: 'INVALID_ARGUMENT' | 'OUT_OF_MEMORY';
}

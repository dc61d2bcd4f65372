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

export interface Attention {
  readonly features: Readonly<Features>;
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

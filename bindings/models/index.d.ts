// attention-wasm/models: a Hugging Face checkpoint folder of any size as a model in Node or a page,
// with Hugging Face's `attentions`, `hidden_states` and `logits` exactly.
import type { Attention, KVCacheDtype, ResultTensor, Tensor } from './index.mjs';

/** The `model_type`s `openModel` runs (config.json's, or its `text_config`'s). */
export declare const MODEL_TYPES: readonly [
  'llama', 'mistral', 'qwen2', 'qwen3', 'gemma', 'gemma2', 'gemma3_text', 'phi3', 'olmo2', 'gpt_neox', 'gpt2', 'bert',
];

/** `residentBytes`' default: 1 GiB of packed layers kept between calls. */
export declare const DEFAULT_RESIDENT_BYTES: number;

/**
 * A checkpoint folder: its path (Node: a string or a file URL), the Files of a folder input or a
 * drop (matched by name), or a Map of file name → Blob | Uint8Array | ArrayBuffer. It holds
 * config.json and model.safetensors, or shards with model.safetensors.index.json.
 */
export type ModelSource = string | URL | Iterable<Blob> | ArrayLike<Blob> | Map<string, Blob | Uint8Array | ArrayBuffer>;

export interface ModelProgress {
  /** 'reading' (the headers), 'loading' (a resident layer packed), 'forward' (a layer run). */
  phase: 'reading' | 'loading' | 'forward';
  /** Layers done in this phase. */
  layer: number;
  layers: number;
  bytesRead: number;
  bytesTotal: number;
}

export interface OpenModelOptions {
  /**
   * `'auto'` (default): matrices held as the file stores them (F32 as f32, F16 as f16, BF16 as
   * bf16, widened exactly); arithmetic is f32. `'f32' | 'f16' | 'bf16'` convert.
   */
  dtype?: 'auto' | 'f32' | 'f16' | 'bf16';
  /**
   * Packed layers (and the output head) kept in wasm memory between calls, up to this many bytes
   * (default `DEFAULT_RESIDENT_BYTES`). A model larger than this is streamed: each call reads its
   * layers by byte ranges, packs, runs and frees them one after another.
   */
  residentBytes?: number;
  onProgress?: (progress: ModelProgress) => void;
  /** An aborted open rejects with the signal's reason (an `AbortError`) and leaves memory as it was. */
  signal?: AbortSignal;
}

/** One sequence of token ids, or a batch of equal-length rows (left-padded, with `attentionMask`). */
export type TokenIds = readonly number[] | Int32Array | Uint32Array | ReadonlyArray<readonly number[] | Int32Array | Uint32Array>;

export interface ForwardOptions {
  /** HF's `output_attentions`: per layer the softmax weights `[N, heads, t, t]`. Default false. */
  outputAttentions?: boolean;
  /** HF's `output_hidden_states`: layers + 1 of `[N, t, hidden]`, the last after the final norm. Default false. */
  outputHiddenStates?: boolean;
  /** `'last'` (default): `[N, 1, vocab]` at each row's last token; `'all'`: `[N, t, vocab]`; `'none'`. */
  logits?: 'last' | 'all' | 'none';
  /** HF's `attention_mask [N, t]`: 1 a token, 0 padding (left padding). Positions count the tokens (generate()'s rule). */
  attentionMask?: { data: ArrayLike<number | bigint | boolean>; shape: readonly number[] } | null;
  /**
   * HF's `head_mask`: `[layers, heads]` or `[heads]` (every layer): each head's weights times its
   * value before the values are summed (0 removes the head). The attentions returned are the masked ones.
   */
  headMask?: readonly number[] | readonly (readonly number[])[] | Float32Array | { data: ArrayLike<number>; shape: readonly number[] } | null;
  /** `attentions`: a Float32Array of at least `layers · N · heads · t · t` to write the attentions into (they are views of it). */
  out?: { attentions?: Float32Array };
  onProgress?: (progress: ModelProgress) => void;
  /**
   * Called as each layer finishes, with that layer's attentions `[N, heads, t, t]` (as
   * `outputAttentions` gives them, head mask applied), and awaited before the next layer runs.
   * Without `outputAttentions` the data is valid until the callback returns (or its promise
   * settles): it is a view of the instance's wasm memory, where the attention wrote it, freed
   * after the call, so only one layer's weights are ever held, once. Copy or pool what you keep,
   * and read it before calling the instance again (memory that grows may detach the view). A
   * throw (or a rejection) rejects the forward.
   */
  onLayer?: (layer: number, output: { attentions: ResultTensor }) => void | Promise<void>;
  /**
   * An abort rejects with an `AbortError` between layers. With a signal the forward lets the
   * event loop run between layers, so an abort sent by an event lands mid-forward.
   */
  signal?: AbortSignal;
}

export interface ModelOutput {
  /** null for `logits: 'none'`, or for a checkpoint without a head (BertModel's names). */
  logits: ResultTensor | null;
  attentions: ResultTensor[] | null;
  hiddenStates: ResultTensor[] | null;
}

export interface GenerateOptions {
  /** Default 20. */
  maxNewTokens?: number;
  /** Default false (greedy: HF's greedy generate). */
  doSample?: boolean;
  /** Default 1. */
  temperature?: number;
  /** Default 50 (HF's); 0 turns it off. */
  topK?: number;
  /** Default 1. */
  topP?: number;
  /** A seed makes sampling repeatable; without one it draws from Math.random. */
  seed?: number;
  /** Default config.json's eos_token_id (one id or several). */
  eosTokenId?: number | readonly number[];
  onToken?: (id: number) => void;
  signal?: AbortSignal;
  /** The per-layer KV cache's dtype (`KVCacheOptions.dtype`). Default 'f32'. */
  cacheDtype?: KVCacheDtype;
}

/** `model.project`'s result. */
export interface AttentionParts {
  /** `[N, heads, t, headDim]` */
  query: ResultTensor;
  /** `[N, kvHeads, t, headDim]` */
  key: ResultTensor;
  /** `[N, kvHeads, t, headDim]` */
  value: ResultTensor;
  scale: number;
  /** Gemma 2's `s → c·tanh(s / c)`, or null. */
  softcap: number | null;
  /** Key `j` is seen by query `i` when `i − window < j`; null for none. */
  window: number | null;
  causal: boolean;
}

export interface Model {
  /** config.json as parsed. */
  readonly config: Record<string, unknown>;
  readonly modelType: (typeof MODEL_TYPES)[number];
  readonly layers: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** max_position_embeddings (Infinity where the config sets none). */
  readonly maxPositions: number;
  /** The dtype the matrices are held in. */
  readonly dtype: 'f32' | 'f16' | 'bf16';
  /** True when the model is larger than `residentBytes`: its layers are read for every call. */
  readonly streamed: boolean;
  /** Bytes of the layers and the head as held. */
  readonly weightBytes: number;
  forward(ids: TokenIds, opts?: ForwardOptions): Promise<ModelOutput>;
  /**
   * What layer `layer`'s attention reads from `hiddenState` `[N, t, hidden]` (that layer's input:
   * `forward`'s `hiddenStates[layer]`), and how it scores: q and k as the scores read them (after
   * QK-norm and RoPE at `positions`, default each row's 0 … t − 1), the scale, soft cap, sliding
   * window and whether it is causal. The softmax of `scale · q kᵀ` (capped, masked) is the layer's
   * attentions.
   */
  project(hiddenState: Tensor, opts: { layer: number; positions?: readonly number[] | Int32Array; signal?: AbortSignal }): Promise<AttentionParts>;
  /** The ids given, then the new ones (one sequence). */
  generate(ids: readonly number[] | Int32Array | Uint32Array, opts?: GenerateOptions): Promise<number[]>;
  /** Frees the packed layers and closes the files. */
  dispose(): Promise<void>;
}

/** Opens a checkpoint folder on `attn` (the package's `await init()`). */
export declare function openModel(attn: Attention, source: ModelSource, opts?: OpenModelOptions): Promise<Model>;

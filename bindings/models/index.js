// attention-wasm/models: a Hugging Face checkpoint folder of any size as a model, HF's
// `model(ids, output_attentions=True)` exactly. The families, by config.json's model_type: the
// Llama-layout decoders (decoder.js), GPT-NeoX (Pythia), GPT-2 and BERT.
import { AttentionError, describe } from '../errors.js';
import { checkChoice, checkNumber, checkOptions } from '../validate.js';
import { BertFamily } from './bert.js';
import { Checkpoint } from './checkpoint.js';
import { DECODER_TYPES, DecoderFamily } from './decoder.js';
import { Gpt2Family } from './gpt2.js';
import { GptNeoxFamily } from './gpt_neox.js';
import { Model } from './model.js';

const FAMILIES = {
  ...Object.fromEntries(DECODER_TYPES.map((type) => [type, DecoderFamily])),
  gpt_neox: GptNeoxFamily,
  gpt2: Gpt2Family,
  bert: BertFamily,
};
export const MODEL_TYPES = Object.freeze(Object.keys(FAMILIES));

// Packed layers kept in wasm memory between calls: 1 GiB leaves a 2 GiB wasm memory room for a
// call's activations and attentions. A larger model streams.
export const DEFAULT_RESIDENT_BYTES = 2 ** 30;

// The text model's part of a multimodal config (Gemma 3's text_config).
function textConfig(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new AttentionError('config.json', 'a JSON object', describe(config));
  return config.text_config && typeof config.text_config === 'object' ? { ...config.text_config, model_type: config.text_config.model_type ?? 'gemma3_text' } : config;
}

/**
 * Opens the checkpoint folder `source` (a folder path in Node, a page's Files, or a Map of file
 * name → Blob | Uint8Array | ArrayBuffer) on the package instance `attn` → a Model. opts: dtype
 * ('auto' | 'f32' | 'f16' | 'bf16'), residentBytes, onProgress, signal.
 */
export async function openModel(attn, source, opts) {
  if (!attn || typeof attn.GroupedQueryAttention !== 'function') throw new AttentionError('attn', "the package instance (await init() of 'attention-wasm')", describe(attn));
  opts = checkOptions(opts, ['dtype', 'residentBytes', 'onProgress', 'signal']);
  const dtype = checkChoice(opts.dtype, 'dtype', ['auto', 'f32', 'f16', 'bf16'], 'auto');
  const residentBytes = checkNumber(opts.residentBytes ?? DEFAULT_RESIDENT_BYTES, 'residentBytes', { min: 0 });
  if (opts.onProgress !== undefined && typeof opts.onProgress !== 'function') throw new AttentionError('onProgress', 'a function', describe(opts.onProgress));
  const onProgress = opts.onProgress ?? (() => {});
  const { signal } = opts;
  signal?.throwIfAborted();
  const checkpoint = await Checkpoint.open(source, { onProgress, signal });
  let model;
  try {
    const config = textConfig(checkpoint.config);
    const Family = FAMILIES[config.model_type];
    if (!Family) throw new AttentionError('config.json: model_type', `one of ${MODEL_TYPES.join(', ')}`, describe(config.model_type));
    model = new Model(attn, checkpoint, new Family(attn, config, checkpoint), { dtype, residentBytes, onProgress });
    await model.load(signal);
    return model;
  } catch (error) {
    await checkpoint.close();
    throw error;
  }
}

// A Hugging Face model folder, as the viewer receives it (an <input webkitdirectory>, dropped files)
// or as Node reads it: config.json, tokenizer.json (+ tokenizer_config.json) and model.safetensors
// or its shards with model.safetensors.index.json, made into a running model and its tokenizer.
// Every file the folder lacks, and anything the viewer cannot run, is an error that says which and
// why. No DOM: `files` are File objects or anything with `name` and `arrayBuffer()`.
import { Tokenizer } from '../../node_modules/@huggingface/tokenizers/dist/tokenizers.mjs';

import { createModel } from './index.js';

// wasm32 memory ends at 2 GiB; the weights, their packed copies and the activations must fit.
const MAX_WEIGHT_BYTES = 1.5 * 2 ** 30;

/** The model folder's problem, for the page to show as it is. */
export class ModelFolderError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ModelFolderError';
  }
}

// A file's name without the folder path the browser may prefix (webkitRelativePath).
const baseName = (file) => (file.webkitRelativePath || file.name).split('/').pop();

async function readJson(file) {
  try {
    return JSON.parse(new TextDecoder().decode(await file.arrayBuffer()));
  } catch (error) {
    throw new ModelFolderError(`${baseName(file)} is not valid JSON (${error.message})`);
  }
}

// The weight files, in order: model.safetensors, or the shards its index names.
async function weightFiles(byName) {
  const index = byName.get('model.safetensors.index.json');
  if (index) {
    const shards = [...new Set(Object.values((await readJson(index)).weight_map ?? {}))];
    const missing = shards.filter((name) => !byName.has(name));
    if (missing.length) throw new ModelFolderError(`model.safetensors.index.json names shards the folder lacks: ${missing.join(', ')}`);
    return shards.map((name) => byName.get(name));
  }
  if (byName.has('model.safetensors')) return [byName.get('model.safetensors')];
  const shards = [...byName.keys()].filter((name) => name.endsWith('.safetensors')).sort();
  if (shards.length) return shards.map((name) => byName.get(name));
  if ([...byName.keys()].some((name) => name.endsWith('.bin') || name.endsWith('.pt')))
    throw new ModelFolderError('the weights are PyTorch .bin files; the viewer reads .safetensors (the Hub offers them for most models)');
  throw new ModelFolderError('the folder has no model.safetensors (or its shards and model.safetensors.index.json)');
}

/**
 * Opens a model folder on `attn`. onProgress({ phase: 'reading' | 'loading', done, total }) reports
 * bytes read, then the model being built. → { name, config, tokenizer, model, dtype, dispose() }.
 */
export async function openModelFolder(attn, files, { onProgress = () => {} } = {}) {
  const byName = new Map(Array.from(files, (file) => [baseName(file), file]));
  const configFile = byName.get('config.json');
  if (!configFile) throw new ModelFolderError("the folder has no config.json (the model's Hugging Face configuration)");
  const tokenizerFile = byName.get('tokenizer.json');
  if (!tokenizerFile) throw new ModelFolderError('the folder has no tokenizer.json (the fast tokenizer file the Hub serves with the model)');
  const config = await readJson(configFile);
  const textConfig = config.text_config && typeof config.text_config === 'object' ? { ...config.text_config } : config;
  const shards = await weightFiles(byName);
  const total = shards.reduce((sum, file) => sum + file.size, 0);
  // f16 and bf16 checkpoints stay binary16 in memory; f32 ones are computed in f32 end to end.
  const dtype = ['float16', 'bfloat16'].includes(config.torch_dtype ?? config.dtype) ? 'f16' : 'f32';
  if (total > MAX_WEIGHT_BYTES)
    throw new ModelFolderError(`the weights are ${(total / 2 ** 30).toFixed(1)} GiB; a page's wasm memory holds at most 2 GiB, weights and work together`);
  const tokenizer = new Tokenizer(await readJson(tokenizerFile), byName.has('tokenizer_config.json') ? await readJson(byName.get('tokenizer_config.json')) : {});
  const bytes = [];
  let done = 0;
  for (const file of shards) {
    bytes.push(new Uint8Array(await file.arrayBuffer()));
    done += file.size;
    onProgress({ phase: 'reading', done, total });
  }
  onProgress({ phase: 'loading', done: 0, total: 1 });
  let model;
  try {
    model = createModel(attn, textConfig, attn.loadSafetensors(bytes.length === 1 ? bytes[0] : bytes, { dtype }));
  } catch (error) {
    throw new ModelFolderError(error.message);
  }
  onProgress({ phase: 'loading', done: 1, total: 1 });
  const name = config._name_or_path || configFile.webkitRelativePath?.split('/')[0] || textConfig.model_type;
  return { name, config: textConfig, tokenizer, model, dtype, dispose: () => model.dispose() };
}

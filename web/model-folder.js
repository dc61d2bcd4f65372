// A Hugging Face model folder as the viewer receives it (an <input webkitdirectory>, dropped
// files): the package's openModel runs the weights (streamed where they do not fit), and
// tokenizer.json (+ tokenizer_config.json) becomes its tokenizer, as the Hub's fast tokenizer
// encodes. Every file the folder lacks is an error that says which and why. No DOM: `files` are
// File objects (the tests give Node's).
import { Tokenizer } from '../node_modules/@huggingface/tokenizers/dist/tokenizers.mjs';

import { openModel } from '../dist/models.mjs';

// A file's name without the folder path the browser may prefix (webkitRelativePath).
const baseName = (file) => (file.webkitRelativePath || file.name).split('/').pop();

async function readJson(file) {
  try {
    return JSON.parse(await file.text());
  } catch (error) {
    throw new Error(`${baseName(file)} is not valid JSON (${error.message})`);
  }
}

/**
 * Opens a model folder on `attn`: onProgress hears openModel's progress. → { name, tokenizer,
 * model (the package's Model), dispose() }.
 */
export async function openModelFolder(attn, files, { onProgress = () => {} } = {}) {
  files = Array.from(files);
  const byName = new Map(files.map((file) => [baseName(file), file]));
  const tokenizerFile = byName.get('tokenizer.json');
  if (!tokenizerFile) throw new Error('the folder has no tokenizer.json (the fast tokenizer file the Hub serves with the model)');
  const tokenizer = new Tokenizer(await readJson(tokenizerFile), byName.has('tokenizer_config.json') ? await readJson(byName.get('tokenizer_config.json')) : {});
  const model = await openModel(attn, files, { onProgress });
  const folderName = files[0]?.webkitRelativePath?.split('/')[0];
  const name = model.config._name_or_path || folderName || model.modelType;
  return { name, tokenizer, model, dispose: () => model.dispose() };
}

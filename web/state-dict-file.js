// Reads a MultiheadAttention exported by examples/export_pytorch.py:
//   { "module": "MultiheadAttention", "config": { embedDim, numHeads, bias, addBiasKV, addZeroAttn,
//     kdim, vdim, batchFirst }, "stateDict": { name: { shape, data } }, "example": ... }
// ("module" may be missing, as in the README's shorter snippet; "example" is not needed.)
// Checks the document's form here, with messages that say where it is wrong; the names and shapes
// of the entries are checked by MultiheadAttention.loadStateDict itself, in the worker.
// No DOM here.

export const MAX_FILE_BYTES = 64 * 1024 * 1024;
const MAX_EMBED_DIM = 2048;
const MAX_HEADS = 64;
const CONFIG_OPTIONS = ['bias', 'addBiasKV', 'addZeroAttn', 'kdim', 'vdim', 'batchFirst'];

export class StateDictFileError extends Error {
  constructor(message) {
    super(message);
    this.name = 'StateDictFileError';
  }
}

const fail = (message) => {
  throw new StateDictFileError(message);
};
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
const isSize = (value) => Number.isInteger(value) && value > 0;

/**
 * @param {string} text  the file's contents
 * @returns {{ config: { embedDim: number, numHeads: number, [option: string]: unknown },
 *             stateDict: Record<string, { data: Float32Array, shape: number[] }> }}
 */
export function parseStateDictFile(text) {
  let document;
  try {
    document = JSON.parse(text);
  } catch (error) {
    fail(`The file is not JSON (${error.message}).`);
  }
  if (!isObject(document)) fail('Expected a JSON object with "config" and "stateDict", as examples/export_pytorch.py writes.');
  if (document.module !== undefined && document.module !== 'MultiheadAttention')
    fail(`This page loads MultiheadAttention exports; the file holds "module": ${JSON.stringify(document.module)}.`);
  const { config, stateDict } = document;
  if (!isObject(config)) fail('"config" is missing or not an object (it should hold embedDim and numHeads).');
  if (!isSize(config.embedDim) || config.embedDim > MAX_EMBED_DIM)
    fail(`"config.embedDim" must be an integer in [1, ${MAX_EMBED_DIM}], got ${JSON.stringify(config.embedDim)}.`);
  if (!isSize(config.numHeads) || config.numHeads > MAX_HEADS)
    fail(`"config.numHeads" must be an integer in [1, ${MAX_HEADS}], got ${JSON.stringify(config.numHeads)}.`);
  for (const dim of ['kdim', 'vdim']) {
    if (config[dim] !== undefined && (!isSize(config[dim]) || config[dim] > MAX_EMBED_DIM))
      fail(`"config.${dim}" must be an integer in [1, ${MAX_EMBED_DIM}], got ${JSON.stringify(config[dim])}.`);
  }
  if (!isObject(stateDict) || Object.keys(stateDict).length === 0)
    fail('"stateDict" is missing or empty (it maps state_dict() names to { shape, data }).');

  const tensors = {};
  for (const [name, entry] of Object.entries(stateDict)) {
    const where = `stateDict[${JSON.stringify(name)}]`;
    if (!isObject(entry) || !Array.isArray(entry.shape) || !Array.isArray(entry.data))
      fail(`${where} must be { "shape": [...], "data": [...] }.`);
    if (!entry.shape.every((d) => Number.isInteger(d) && d >= 0))
      fail(`${where}.shape must hold non-negative integers, got ${JSON.stringify(entry.shape)}.`);
    const size = entry.shape.reduce((a, b) => a * b, 1);
    if (entry.data.length !== size)
      fail(`${where}.data has ${entry.data.length} values; shape [${entry.shape.join(', ')}] needs ${size}.`);
    if (!entry.data.every((x) => typeof x === 'number'))
      fail(`${where}.data must hold numbers only.`);
    tensors[name] = { data: Float32Array.from(entry.data), shape: [...entry.shape] };
  }

  const options = Object.fromEntries(CONFIG_OPTIONS.filter((k) => config[k] !== undefined).map((k) => [k, config[k]]));
  return { config: { embedDim: config.embedDim, numHeads: config.numHeads, ...options }, stateDict: tensors };
}

// What the page's views share: its elements (el), its state (ui), the page's published state for
// tests (setState, showError) and how tokens, numbers and kinds are written. Each view owns its
// own part of the DOM (controls-view, heatmap-view, neuron-view, generation-view, export-view,
// engine-view); main.js wires them to the worker (compute.js).

export const $ = (selector) => document.querySelector(selector);

export const el = {
  form: $('#controls'),
  text: $('#text'),
  length: $('#length'),
  kind: $('#kind'),
  embedDim: $('#embed-dim'),
  softcap: $('#softcap'),
  hiddenSize: $('#hidden-size'),
  heads: $('#heads-count'),
  headsValue: $('#heads-value'),
  headDim: $('#head-dim'),
  modelDim: $('#model-dim'),
  seed: $('#seed'),
  reroll: $('#reroll'),
  seedNote: $('#seed-note'),
  file: $('#file'),
  fileInfo: $('#file-info'),
  fileError: $('#file-error'),
  useSeeded: $('#use-seeded'),
  mask: $('#mask'),
  custom: $('#custom'),
  clearCustom: $('#clear-custom'),
  sentenceChoice: $('#sentence-choice'),
  scale: $('#scale'),
  headsGrid: $('#heads'),
  viewTitle: $('#view-title'),
  canvas: $('#heatmap'),
  legend: $('#legend'),
  lines: $('#lines'),
  readout: $('#readout'),
  fullyMasked: $('#fully-masked'),
  error: $('#error'),
  dims: $('#dims'),
  result: $('#attention-result'),
  simd: $('#feature-simd'),
  threads: $('#feature-threads'),
  version: $('#feature-version'),
  isolated: $('#feature-isolated'),
  forwardTime: $('#forward-time'),
  updateTime: $('#update-time'),
  apiCall: $('#api-call'),
  exportPng: $('#export-png'),
  exportSvg: $('#export-svg'),
  exportHtml: $('#export-html'),
  exportJson: $('#export-json'),
  repeatText: $('#repeat-text'),
  generate: $('#generate'),
  modelNext: $('#model-next'),
  decodeTime: $('#decode-time'),
  zoomIn: $('#zoom-in'),
  zoomOut: $('#zoom-out'),
  zoomFit: $('#zoom-fit'),
  zoomNote: $('#zoom-note'),
  pngLink: $('#png-link'),
  svgLink: $('#svg-link'),
  htmlLink: $('#html-link'),
  jsonLink: $('#json-link'),
  guide: $('#guide'),
  modelScores: $('#model-scores'),
  textQuery: $('#text-query'),
  textView: $('#text-view'),
  generated: $('#generated'),
  openedOption: $('#opened-option'),
};

export const KIND_NAMES = {
  model: 'GroupedQueryAttention',
  opened: 'your model',
  sdpa: 'scaledDotProductAttention',
  mha: 'MultiheadAttention',
  additive: 'AdditiveAttention',
  relative: 'RelativeMultiHeadAttention',
};

export const MASK_NAMES = { none: 'no mask', causal: 'causal mask', padding: 'key padding mask', both: 'causal + key padding mask' };

export const ui = {
  features: null,
  build: null,
  crossOriginIsolated: false,
  shown: null, // the result on screen: the worker's result plus { request, id, updateMs }
  sentence: 0,
  scale: 'absolute',
  lockedHead: null, // 'avg' | head index | null
  hoverHead: null,
  hoverCell: null, // { row, col } under the pointer
  cursor: null, // { row, col } of the keyboard cursor
  lockedQuery: null,
  linesHover: null,
  custom: null, // Uint8Array [L * L], 1 = masked by the user
  customSize: 0,
  painting: null, // { value } while dragging on the heatmap
  file: null, // { id, name, config } when weights come from a file
  inputError: null, // what is wrong with the controls, until they are fixed
  views: new Map(), // head key -> view of the shown result
  viewMask: null, // the mask those views share
  viewVersion: 0,
  layout: null,
  linesLayout: null,
  generating: 0, // characters still to generate
  generatedFrom: null, // where the last generation's characters start in the text
  neuronQuery: null, // the token of the query the neuron view shows: the last one pointed at
  zoom: null, // { row, col, size } in tokens: the window the views show; null = the whole map
  opened: null, // { name, modelType, layers, heads, dtype } of the model folder opened
  guided: true, // the first run: the trained model's induction head locked, a line saying what it shows
};

export class InputError extends Error {}

export function setState(state) {
  document.body.dataset.state = state;
}

export function showError(error) {
  const message = error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
  el.error.textContent = message;
  el.error.hidden = false;
  $('.view-body').classList.add('stale');
  if (!ui.shown) el.readout.textContent = '';
  setState('error');
}

/** A flat head index of the trained model's [layers · heads] as its (0-based) layer and head. */
export const modelHead = (index, heads) => ({ layer: Math.floor(index / heads), head: index % heads });

/**
 * A token with spaces and line breaks made visible: the trained model's characters, and the marks
 * tokenizers write for them (byte-level BPE's Ġ and Ċ: GPT-2, Llama 3, Qwen; SentencePiece's ▁).
 */
export const visible = (token) => token.replace(/[ Ġ▁]/g, '␣').replace(/[\nĊ]/g, '↵');

/** A token as the text it stands for, in running text (WordPiece's ## joins the word before). */
export const asText = (token) => token.replace(/[Ġ▁]/g, ' ').replaceAll('Ċ', '\n').replace(/^##/, '');

/** Labels on the canvases stay short; the readout shows the whole token. */
export const shortLabel = (token) => (token.length > 14 ? `${token.slice(0, 13)}…` : visible(token));

export const formatNumber = (x) => (x === 0 ? '0' : Math.abs(x) >= 0.001 ? x.toFixed(4) : x.toExponential(2));

export function customCells(custom, L) {
  const cells = [];
  if (custom) for (let k = 0; k < custom.length; k++) if (custom[k]) cells.push([Math.floor(k / L), k % L]);
  return cells;
}

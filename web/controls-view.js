// The controls panel (#controls): reads the form into a request for the worker, shows only the
// controls that apply to the chosen kind and weight source, and loads a state_dict file. It owns
// the text, the custom mask the heatmap paints (setCustomCell) and the weights chosen: a file for
// MultiheadAttention, the model folder opened (setOpenedModel).
import { requestUpdate, sendFile } from './compute.js';
import { EXAMPLE_TEXT, MAX_TOKENS, MODEL_MAX_TOKENS, OPENED_MAX_TOKENS, VERSE_TEXT, lengthen, sentencesOf } from './embeddings.js';
import { MAX_GRID } from './grid.js';
import { maskParts } from './masks.js';
import { GAIN } from './parameters.js';
import { InputError, $ } from './page.js';
import { MAX_FILE_BYTES, parseStateDictFile } from './state-dict-file.js';

const dom = {
  form: $('#controls'),
  text: $('#text'),
  length: $('#length'),
  kind: $('#kind'),
  openedOption: $('#opened-option'),
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
};

let custom = null; // Uint8Array [L * L], 1 = masked by the user
let customSize = 0;
let file = null; // { id, name, config } when MultiheadAttention's weights come from a file
let opened = null; // { name, modelType, layers, heads, dtype } of the model folder opened

function kindConfig(kind) {
  const heads = Number(dom.heads.value);
  const headDim = Number(dom.headDim.value);
  if (kind === 'sdpa') return { d: Number(dom.embedDim.value), softcap: readSoftcap() };
  if (kind === 'additive') return { d: Number(dom.embedDim.value), hiddenSize: Number(dom.hiddenSize.value) };
  if (kind === 'mha') return { embedDim: heads * headDim, numHeads: heads };
  return { heads, dModel: heads * headDim };
}

/** The soft cap, or null for none (0 or empty). */
function readSoftcap() {
  const value = dom.softcap.value.trim() === '' ? 0 : Number(dom.softcap.value);
  if (!Number.isFinite(value) || value < 0) throw new InputError('The soft cap must be a positive number, or 0 for none.');
  return value === 0 ? null : value;
}

function readSeed() {
  const seed = dom.seed.value.trim() === '' ? NaN : Number(dom.seed.value);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new InputError('The weight seed must be an integer from 0 to 4294967295.');
  return seed;
}

/** Resizes the custom mask to L x L, keeping the cells that still exist. */
function fitCustom(L) {
  if (customSize === L && custom) return;
  const next = new Uint8Array(L * L);
  const keep = Math.min(L, customSize);
  for (let i = 0; i < keep; i++) for (let j = 0; j < keep; j++) next[i * L + j] = custom[i * customSize + j];
  custom = next;
  customSize = L;
}

/** Whether the heatmap paints the custom mask (its checkbox). */
export const customEditing = () => dom.custom.checked;

/** Whether the user masked query `row`, key `col` (token indices). */
export const isCustomCell = (row, col) => row < customSize && col < customSize && custom[row * customSize + col] === 1;

/** Sets one custom-mask cell (tokens of the current text) → whether it changed. */
export function setCustomCell(row, col, value) {
  if (row >= customSize || col >= customSize || custom[row * customSize + col] === value) return false;
  custom[row * customSize + col] = value;
  dom.clearCustom.disabled = !custom.includes(1);
  return true;
}

/** The text being looked at. */
export const textValue = () => dom.text.value;

/**
 * Writes the text (generation, "Repeat this text") and scrolls to its end, where the new part is.
 * The cursor (or selection) stays where the user put it: setting the value alone moves it to the
 * end, and an edit during a generation would land there.
 */
export function writeText(value) {
  const { selectionStart, selectionEnd, selectionDirection } = dom.text;
  dom.text.value = value;
  dom.text.setSelectionRange(selectionStart, selectionEnd, selectionDirection);
  dom.text.scrollTop = dom.text.scrollHeight;
}

/** The most characters the text box takes. */
export const textLimit = () => dom.text.maxLength;

/** The kind chosen: 'model', 'opened' or a toy kind. */
export const kindValue = () => dom.kind.value;

/** The file a MultiheadAttention's weights came from, or null. */
export const fileName = () => file?.name ?? null;

/**
 * The model folder opened ({ name, modelType, layers, heads, dtype }), chosen as the kind; or
 * null: none (the trained model again if it was chosen).
 */
export function setOpenedModel(info) {
  opened = info;
  dom.openedOption.disabled = !info;
  dom.openedOption.textContent = info ? `Your model: ${info.name} (${info.modelType}, ${info.layers} layers × ${info.heads} heads)` : 'Your model (open a folder below)';
  if (info) dom.kind.value = 'opened';
  else if (dom.kind.value === 'opened') dom.kind.value = 'model';
  syncControls();
}

/** The request for the worker; `zoom` is the window the heatmap shows (zoomWindow()). */
export function currentRequest(zoom) {
  if (dom.kind.value === 'model') return modelRequest(zoom);
  if (dom.kind.value === 'opened') return openedRequest(zoom);
  let sentences = sentencesOf(dom.text.value);
  if (sentences.length === 0) throw new InputError('Type at least one word.');
  if (dom.length.value !== 'typed') sentences = lengthen(sentences, Number(dom.length.value));
  const L = Math.max(...sentences.map((s) => s.length));
  fitCustom(L);
  const kind = dom.kind.value;
  const fromFile = kind === 'mha' && file !== null;
  const { causal, padding } = maskParts(dom.mask.value);
  const painted = dom.custom.checked && custom.includes(1) ? custom.slice() : null;
  return {
    kind,
    sentences,
    config: fromFile ? file.config : kindConfig(kind),
    seed: kind === 'sdpa' || fromFile ? null : readSeed(),
    fileId: fromFile ? file.id : null,
    causal,
    padding,
    custom: painted,
    maskKind: dom.mask.value,
  };
}

/**
 * The trained model reads the text's characters, as one sequence under its causal mask. A text
 * longer than a picture's cells is computed for the zoomed window only.
 */
function modelRequest(zoom) {
  let characters = Array.from(dom.text.value);
  if (characters.length === 0) throw new InputError('Type at least one character.');
  if (characters.length > MODEL_MAX_TOKENS) throw new InputError(`The model reads at most ${MODEL_MAX_TOKENS} characters; the text has ${characters.length}.`);
  if (dom.length.value !== 'typed') [characters] = lengthen([characters], Number(dom.length.value), MODEL_MAX_TOKENS);
  const window = characters.length > MAX_GRID ? zoom : null;
  return {
    kind: 'model', sentences: [characters], window, config: null, seed: null, fileId: null, causal: true, padding: false, custom: null, maskKind: 'causal',
  };
}

/**
 * The opened model reads the text as its tokenizer splits it (runner.js computeOpened); past a
 * picture's cells it is computed for the zoomed window only.
 */
function openedRequest(zoom) {
  if (!opened) throw new InputError('Open a model folder first.');
  if (dom.text.value.trim() === '') throw new InputError('Type some text.');
  const causal = opened.modelType !== 'bert';
  return {
    kind: 'opened', text: dom.text.value, sentences: null, window: zoom, config: null, seed: null, fileId: null, causal, padding: false, custom: null, maskKind: causal ? 'causal' : 'none',
  };
}

/** Shows only the controls that apply to the chosen kind and weight source. */
export function syncControls() {
  const kind = dom.kind.value;
  const fromFile = kind === 'mha' && file !== null;
  for (const node of document.querySelectorAll('[data-kinds]')) node.hidden = !node.dataset.kinds.split(' ').includes(kind);
  for (const node of document.querySelectorAll('[data-source]')) {
    if (node.closest('[data-kinds]')?.hidden) continue;
    node.hidden = node.dataset.source === 'file' ? !fromFile : fromFile;
  }
  // The longer lengths are the model's; another kind takes its longest.
  if (dom.length.selectedOptions[0].hidden) dom.length.value = String(MAX_TOKENS);
  dom.headsValue.value = dom.heads.value;
  dom.modelDim.value = String(Number(dom.heads.value) * Number(dom.headDim.value));
  dom.seedNote.textContent = `Weights uniform in ±${GAIN}× PyTorch's default bound, drawn from this seed.`;
  dom.clearCustom.disabled = !custom?.includes(1);
}

async function loadFile(chosen) {
  dom.fileError.hidden = true;
  try {
    if (chosen.size > MAX_FILE_BYTES) throw new Error(`The file is ${(chosen.size / 1048576).toFixed(1)} MB; the page reads at most ${MAX_FILE_BYTES / 1048576} MB.`);
    const { config, stateDict } = parseStateDictFile(await chosen.text());
    const reply = await sendFile(config, stateDict);
    if (!reply.ok) throw new Error(`MultiheadAttention rejected the file: ${reply.message}`);
    file = { id: reply.id, name: chosen.name, config };
    const extras = ['kdim', 'vdim'].filter((k) => config[k] !== undefined && config[k] !== config.embedDim).map((k) => `${k} ${config[k]}`);
    dom.fileInfo.textContent = `Weights from ${file.name}: embedding ${config.embedDim}, ${config.numHeads} heads` +
      `${extras.length ? `, ${extras.join(', ')}` : ''}. Token embeddings are generated at that size.`;
    dom.kind.value = 'mha';
    syncControls();
    requestUpdate();
  } catch (error) {
    dom.fileError.textContent = `Could not load ${chosen.name}: ${error.message}`;
    dom.fileError.hidden = false;
  } finally {
    dom.file.value = '';
  }
}

// Edits of the text made at once, which need not wait for a pause in typing.
const WHOLE_EDITS = new Set(['insertFromPaste', 'insertFromDrop']);

/**
 * Fills the form (?kind= picks the kind; the trained model opens on the guided first run's verse,
 * the other kinds on the example) and follows its changes: onEdit('text' | 'kind') runs when the
 * user types or picks another kind, before the update is asked for. → whether the page opens
 * on the guided first run.
 */
export function bindControls(params, { onEdit }) {
  $('#max-tokens').textContent = String(MAX_TOKENS);
  $('#model-max-tokens').textContent = String(MODEL_MAX_TOKENS);
  $('#generation-max-tokens').textContent = String(MAX_TOKENS);
  $('#opened-max-tokens').textContent = String(OPENED_MAX_TOKENS);
  // ?kind=mha (or any other kind's value) opens that kind: links can point at a view.
  if ([...dom.kind.options].some((option) => option.value === params.get('kind') && !option.disabled)) dom.kind.value = params.get('kind');
  const guided = dom.kind.value === 'model';
  dom.text.value = guided ? VERSE_TEXT : EXAMPLE_TEXT;
  syncControls();

  dom.form.addEventListener('submit', (event) => event.preventDefault());
  for (const control of [dom.text, dom.length, dom.kind, dom.embedDim, dom.softcap, dom.hiddenSize, dom.heads, dom.headDim, dom.seed, dom.mask, dom.custom]) {
    const typed = [dom.text, dom.heads, dom.seed, dom.softcap].includes(control);
    control.addEventListener(typed ? 'input' : 'change', (event) => {
      if (control === dom.text || control === dom.kind) onEdit(control === dom.text ? 'text' : 'kind');
      syncControls();
      requestUpdate(false, { whole: WHOLE_EDITS.has(event.inputType) });
    });
  }
  dom.reroll.addEventListener('click', () => {
    dom.seed.value = String(crypto.getRandomValues(new Uint32Array(1))[0]);
    requestUpdate();
  });
  dom.useSeeded.addEventListener('click', () => {
    file = null;
    syncControls();
    requestUpdate();
  });
  dom.file.addEventListener('change', () => {
    if (dom.file.files[0]) loadFile(dom.file.files[0]);
  });
  dom.clearCustom.addEventListener('click', () => {
    custom?.fill(0);
    syncControls();
    requestUpdate();
  });
  return guided;
}

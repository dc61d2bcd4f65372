// The controls panel (#controls): reads the form into a request for the worker, shows only the
// controls that apply to the chosen kind and weight source, and loads a state_dict file.
import { requestUpdate, sendFile } from './compute.js';
import { EXAMPLE_TEXT, MAX_TOKENS, MODEL_MAX_TOKENS, VERSE_TEXT, lengthen, sentencesOf } from './embeddings.js';
import { MAX_GRID } from './grid.js';
import { maskParts } from './masks.js';
import { GAIN } from './parameters.js';
import { InputError, $, el, ui } from './page.js';
import { MAX_FILE_BYTES, parseStateDictFile } from './state-dict-file.js';

function kindConfig(kind) {
  const heads = Number(el.heads.value);
  const headDim = Number(el.headDim.value);
  if (kind === 'sdpa') return { d: Number(el.embedDim.value), softcap: readSoftcap() };
  if (kind === 'additive') return { d: Number(el.embedDim.value), hiddenSize: Number(el.hiddenSize.value) };
  if (kind === 'mha') return { embedDim: heads * headDim, numHeads: heads };
  return { heads, dModel: heads * headDim };
}

/** The soft cap, or null for none (0 or empty). */
function readSoftcap() {
  const value = el.softcap.value.trim() === '' ? 0 : Number(el.softcap.value);
  if (!Number.isFinite(value) || value < 0) throw new InputError('The soft cap must be a positive number, or 0 for none.');
  return value === 0 ? null : value;
}

function readSeed() {
  const seed = el.seed.value.trim() === '' ? NaN : Number(el.seed.value);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new InputError('The weight seed must be an integer from 0 to 4294967295.');
  return seed;
}

/** Resizes the custom mask to L x L, keeping the cells that still exist. */
function fitCustom(L) {
  if (ui.customSize === L && ui.custom) return;
  const next = new Uint8Array(L * L);
  const keep = Math.min(L, ui.customSize);
  for (let i = 0; i < keep; i++) for (let j = 0; j < keep; j++) next[i * L + j] = ui.custom[i * ui.customSize + j];
  ui.custom = next;
  ui.customSize = L;
}

export function currentRequest() {
  if (el.kind.value === 'model') return modelRequest();
  if (el.kind.value === 'opened') return openedRequest();
  let sentences = sentencesOf(el.text.value);
  if (sentences.length === 0) throw new InputError('Type at least one word.');
  if (el.length.value !== 'typed') sentences = lengthen(sentences, Number(el.length.value));
  const L = Math.max(...sentences.map((s) => s.length));
  fitCustom(L);
  const kind = el.kind.value;
  const fromFile = kind === 'mha' && ui.file !== null;
  const { causal, padding } = maskParts(el.mask.value);
  const custom = el.custom.checked && ui.custom.includes(1) ? ui.custom.slice() : null;
  return {
    kind,
    sentences,
    config: fromFile ? ui.file.config : kindConfig(kind),
    seed: kind === 'sdpa' || fromFile ? null : readSeed(),
    fileId: fromFile ? ui.file.id : null,
    causal,
    padding,
    custom,
    maskKind: el.mask.value,
  };
}

/**
 * The trained model reads the text's characters, as one sequence under its causal mask. A text
 * longer than a picture's cells is computed for the zoomed window only (ui.zoom).
 */
function modelRequest() {
  let characters = Array.from(el.text.value);
  if (characters.length === 0) throw new InputError('Type at least one character.');
  if (characters.length > MODEL_MAX_TOKENS) throw new InputError(`The model reads at most ${MODEL_MAX_TOKENS} characters; the text has ${characters.length}.`);
  if (el.length.value !== 'typed') [characters] = lengthen([characters], Number(el.length.value), MODEL_MAX_TOKENS);
  const window = characters.length > MAX_GRID ? ui.zoom : null;
  return {
    kind: 'model', sentences: [characters], window, config: null, seed: null, fileId: null, causal: true, padding: false, custom: null, maskKind: 'causal',
  };
}

/** The opened model reads the text as its tokenizer splits it (runner.js computeOpened). */
function openedRequest() {
  if (!ui.opened) throw new InputError('Open a model folder first.');
  if (el.text.value.trim() === '') throw new InputError('Type some text.');
  const causal = ui.opened.modelType !== 'bert';
  return {
    kind: 'opened', text: el.text.value, sentences: null, window: null, config: null, seed: null, fileId: null, causal, padding: false, custom: null, maskKind: causal ? 'causal' : 'none',
  };
}

/** Shows only the controls that apply to the chosen kind and weight source. */
export function syncControls() {
  const kind = el.kind.value;
  const fromFile = kind === 'mha' && ui.file !== null;
  for (const node of document.querySelectorAll('[data-kinds]')) node.hidden = !node.dataset.kinds.split(' ').includes(kind);
  for (const node of document.querySelectorAll('[data-source]')) {
    if (node.closest('[data-kinds]')?.hidden) continue;
    node.hidden = node.dataset.source === 'file' ? !fromFile : fromFile;
  }
  // The longer lengths are the model's; another kind takes its longest.
  if (el.length.selectedOptions[0].hidden) el.length.value = String(MAX_TOKENS);
  el.headsValue.value = el.heads.value;
  el.modelDim.value = String(Number(el.heads.value) * Number(el.headDim.value));
  el.seedNote.textContent = `Weights uniform in ±${GAIN}× PyTorch's default bound, drawn from this seed.`;
  el.clearCustom.disabled = !ui.custom?.includes(1);
  el.canvas.classList.toggle('editable', el.custom.checked);
}

async function loadFile(file) {
  el.fileError.hidden = true;
  try {
    if (file.size > MAX_FILE_BYTES) throw new Error(`The file is ${(file.size / 1048576).toFixed(1)} MB; the page reads at most ${MAX_FILE_BYTES / 1048576} MB.`);
    const { config, stateDict } = parseStateDictFile(await file.text());
    const reply = await sendFile(config, stateDict);
    if (!reply.ok) throw new Error(`MultiheadAttention rejected the file: ${reply.message}`);
    ui.file = { id: reply.id, name: file.name, config };
    const extras = ['kdim', 'vdim'].filter((k) => config[k] !== undefined && config[k] !== config.embedDim).map((k) => `${k} ${config[k]}`);
    el.fileInfo.textContent = `Weights from ${file.name}: embedding ${config.embedDim}, ${config.numHeads} heads` +
      `${extras.length ? `, ${extras.join(', ')}` : ''}. Token embeddings are generated at that size.`;
    el.kind.value = 'mha';
    syncControls();
    requestUpdate();
  } catch (error) {
    el.fileError.textContent = `Could not load ${file.name}: ${error.message}`;
    el.fileError.hidden = false;
  } finally {
    el.file.value = '';
  }
}

/** Fills the form (the example text; ?kind= picks the kind) and follows its changes. */
export function bindControls(params) {
  $('#max-tokens').textContent = String(MAX_TOKENS);
  $('#model-max-tokens').textContent = String(MODEL_MAX_TOKENS);
  $('#generation-max-tokens').textContent = String(MAX_TOKENS);
  // ?kind=mha (or any other kind's value) opens that kind: links can point at a view.
  if ([...el.kind.options].some((option) => option.value === params.get('kind') && !option.disabled)) el.kind.value = params.get('kind');
  // The first run: the trained model on a verse written twice, its induction head locked (main.js).
  ui.guided = el.kind.value === 'model';
  el.text.value = ui.guided ? VERSE_TEXT : EXAMPLE_TEXT;
  syncControls();

  el.form.addEventListener('submit', (event) => event.preventDefault());
  // A zoom names positions of one kind's tokens (words, or the model's characters).
  el.kind.addEventListener('change', () => {
    ui.zoom = null;
  });
  for (const control of [el.text, el.length, el.kind, el.embedDim, el.softcap, el.hiddenSize, el.heads, el.headDim, el.seed, el.mask, el.custom]) {
    const typed = [el.text, el.heads, el.seed, el.softcap].includes(control);
    control.addEventListener(typed ? 'input' : 'change', () => {
      if (control === el.text || control === el.kind) ui.guided = false;
      syncControls();
      requestUpdate();
    });
  }
  el.reroll.addEventListener('click', () => {
    el.seed.value = String(crypto.getRandomValues(new Uint32Array(1))[0]);
    requestUpdate();
  });
  el.useSeeded.addEventListener('click', () => {
    ui.file = null;
    syncControls();
    requestUpdate();
  });
  el.file.addEventListener('change', () => {
    if (el.file.files[0]) loadFile(el.file.files[0]);
  });
  el.clearCustom.addEventListener('click', () => {
    ui.custom?.fill(0);
    syncControls();
    requestUpdate();
  });
}

// The demo page: reads the controls, asks the worker (worker.js, which imports the package's public
// entry exactly as a user would) for attention weights, and draws them on canvases.
//
// Requests are coalesced: one is computed at a time and only the latest change waits behind it, so
// dragging a slider or a mask never queues stale work.
//
// For tests the page publishes its last result on the DOM: after every update
// `document.body.dataset.state` is 'ready' (or 'busy' while work is outstanding, 'error' on
// failure) and the JSON data block <script type="application/json" id="attention-result"> holds
//   { seq, kind, maskKind, customCells, tokens: [N][n], lengths, heads, shape: [N, H, n, m],
//     weights: [N*H*n*m] | null, masked: [N*n*m] (1 = masked) | null, outputMaxAbs: [N*n] | null,
//     fullyMasked: [[b, i]], checks, view, features, build, forwardMs, workerMs, updateMs,
//     requests: { requested, computed }, ... }
// (weights, masked and outputMaxAbs are null above 65536 weights, to keep long updates fast; the
// checks are computed over everything, always). The heatmap's geometry is in its data-grid
// attribute: { left, top, cell } in CSS px. A JSON data block is never executed, so the CSP
// (no inline scripts) allows it.
import { EXAMPLE_TEXT, MAX_TOKENS, PAD, lengthen, sentencesOf } from './embeddings.js';
import { composePng, offerDownload } from './export.js';
import { drawHeatmap, drawLegend, drawThumbnail } from './heatmap.js';
import { drawLines } from './lines.js';
import { maskParts } from './masks.js';
import { GAIN } from './parameters.js';
import { checkResult, headAverage } from './runner.js';
import { MAX_FILE_BYTES, parseStateDictFile } from './state-dict-file.js';

const PUBLISH_LIMIT = 65536;
const ALL_LINES_LIMIT = 4096; // below this many cells the lines view shows every query at once

const $ = (selector) => document.querySelector(selector);
const el = {
  form: $('#controls'),
  text: $('#text'),
  length: $('#length'),
  kind: $('#kind'),
  embedDim: $('#embed-dim'),
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
  exportJson: $('#export-json'),
  pngLink: $('#png-link'),
  jsonLink: $('#json-link'),
};

const KIND_NAMES = {
  sdpa: 'scaledDotProductAttention',
  mha: 'MultiheadAttention',
  additive: 'AdditiveAttention',
  relative: 'RelativeMultiHeadAttention',
};

const MASK_NAMES = { none: 'no mask', causal: 'causal mask', padding: 'key padding mask', both: 'causal + key padding mask' };

const ui = {
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
  viewVersion: 0,
  layout: null,
  linesLayout: null,
};

// ---------------------------------------------------------------------------------------------
// The worker and the request queue

const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
let nextId = 1;
let inFlight = null; // { id, request, requestedAt }
let pending = null;
const counts = { requested: 0, computed: 0 }; // published: shows the coalescing at work
const fileReplies = new Map();

function setState(state) {
  document.body.dataset.state = state;
}

function showError(error) {
  const message = error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
  el.error.textContent = message;
  el.error.hidden = false;
  $('.view-body').classList.add('stale');
  if (!ui.shown) el.readout.textContent = '';
  setState('error');
}

class InputError extends Error {}

function send(job) {
  inFlight = job;
  worker.postMessage({ type: 'compute', id: job.id, request: job.request });
}

/** Reads the controls into a request and sends it, or parks it behind the one in flight. */
function requestUpdate() {
  if (!ui.features) return;
  let request;
  try {
    request = currentRequest();
  } catch (error) {
    // Nothing valid to compute: drop the waiting request; a result still in flight is drawn, but
    // the error stays up until the controls are fixed.
    pending = null;
    ui.inputError = error;
    showError(error);
    return;
  }
  ui.inputError = null;
  const job = { id: nextId++, request, requestedAt: performance.now() };
  counts.requested++;
  setState('busy');
  if (inFlight) pending = job;
  else send(job);
}

function afterJob() {
  inFlight = null;
  if (pending) {
    const next = pending;
    pending = null;
    send(next);
  }
}

worker.addEventListener('message', ({ data: message }) => {
  if (message.type === 'ready') {
    ui.features = message.features;
    ui.build = message.build;
    ui.crossOriginIsolated = message.crossOriginIsolated;
    showFeatures();
    requestUpdate();
  } else if (message.type === 'fatal') {
    showError(new Error(`The package could not start: ${message.message}`));
  } else if (message.type === 'file') {
    fileReplies.get(message.id)?.(message);
    fileReplies.delete(message.id);
  } else if (message.type === 'result' || message.type === 'error') {
    const job = inFlight;
    counts.computed++;
    afterJob();
    if (!job || job.id !== message.id) return;
    if (message.type === 'error') {
      if (!inFlight) showError(new Error(message.message));
      return;
    }
    accept(job, message.result);
  }
});
worker.addEventListener('error', (event) => {
  event.preventDefault();
  showError(new Error(`The worker failed: ${event.message || 'it could not be loaded'}`));
});

// ---------------------------------------------------------------------------------------------
// Controls -> request

function kindConfig(kind) {
  const heads = Number(el.heads.value);
  const headDim = Number(el.headDim.value);
  if (kind === 'sdpa') return { d: Number(el.embedDim.value) };
  if (kind === 'additive') return { d: Number(el.embedDim.value), hiddenSize: Number(el.hiddenSize.value) };
  if (kind === 'mha') return { embedDim: heads * headDim, numHeads: heads };
  return { heads, dModel: heads * headDim };
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

function currentRequest() {
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

/** Shows only the controls that apply to the chosen kind and weight source. */
function syncControls() {
  const kind = el.kind.value;
  const fromFile = kind === 'mha' && ui.file !== null;
  for (const node of document.querySelectorAll('[data-kinds]')) node.hidden = !node.dataset.kinds.split(' ').includes(kind);
  for (const node of document.querySelectorAll('[data-source]')) {
    if (node.closest('[data-kinds]')?.hidden) continue;
    node.hidden = node.dataset.source === 'file' ? !fromFile : fromFile;
  }
  el.headsValue.value = el.heads.value;
  el.modelDim.value = String(Number(el.heads.value) * Number(el.headDim.value));
  el.seedNote.textContent = `Weights uniform in ±${GAIN}× PyTorch's default bound, drawn from this seed.`;
  el.clearCustom.disabled = !ui.custom?.includes(1);
  el.canvas.classList.toggle('editable', el.custom.checked);
}

// ---------------------------------------------------------------------------------------------
// Result -> views

function accept(job, result) {
  const shown = { ...result, request: job.request, id: job.id };
  const sizeChanged = !ui.shown || ui.shown.n !== shown.n || ui.shown.N !== shown.N;
  const headsChanged = !ui.shown || ui.shown.H !== shown.H || ui.shown.kind !== shown.kind;
  ui.shown = shown;
  if (ui.sentence >= shown.N) ui.sentence = 0;
  if (headsChanged) {
    ui.lockedHead = null;
    ui.hoverHead = null;
    buildThumbnails();
  }
  if (sizeChanged) {
    ui.cursor = null;
    ui.hoverCell = null;
    ui.lockedQuery = null;
  }
  resetViews();
  renderThumbnails();
  render();
  syncSentenceChoice();
  shown.updateMs = performance.now() - job.requestedAt;
  showTimes();
  if (ui.inputError) {
    showError(ui.inputError);
  } else {
    el.error.hidden = true;
    $('.view-body').classList.remove('stale');
  }
  // The checks read every weight (33 MB at 512 tokens and 16 heads): they run once the picture has
  // been painted (the task after the next frame), then the result is published and the page is ready.
  requestAnimationFrame(() => setTimeout(() => {
    if (ui.shown !== shown) return; // a newer result replaced this one
    shown.checks = checkResult(shown);
    publish();
    if (!ui.inputError && !inFlight) setState('ready');
  }, 0));
}

function resetViews() {
  ui.views.clear();
}

/** The head shown in the large view: hovered, else locked, else the average (or the only head). */
function shownHead() {
  const H = ui.shown.H;
  const head = ui.hoverHead ?? ui.lockedHead;
  if (head !== null) return head;
  return H > 1 ? 'avg' : 0;
}

function viewOf(head) {
  if (ui.views.has(head)) return ui.views.get(head);
  const r = ui.shown;
  const b = ui.sentence;
  const size = r.n * r.m;
  const weights = head === 'avg'
    ? headAverage(r.weights, b, r.H, size)
    : r.weights.subarray((b * r.H + head) * size, (b * r.H + head + 1) * size);
  const masked = r.masked.subarray(b * size, (b + 1) * size);
  // Which masked cells the user clicked, in the result's own [n, m] (extra key columns never are).
  const L = r.n;
  let custom = null;
  if (r.request.custom) {
    custom = new Uint8Array(size);
    for (let i = 0; i < r.n; i++) for (let j = 0; j < L; j++) custom[i * r.m + j] = r.request.custom[i * L + j];
  }
  const { top, vmax } = scaleOf(weights, masked, r.n, r.m);
  const view = {
    version: ++ui.viewVersion,
    head,
    rowTokens: r.tokens[b],
    colTokens: [...r.tokens[b], ...r.extraKeys],
    rowLabels: r.tokens[b].map(shortLabel),
    colLabels: [...r.tokens[b], ...r.extraKeys].map(shortLabel),
    weights,
    masked,
    custom,
    fullyMasked: r.fullyMasked.filter(([s]) => s === b).map(([, i]) => i),
    top,
    vmax,
  };
  ui.views.set(head, view);
  return view;
}

/**
 * The top of the colour scale for each row, top[i] > 0: 1 ('absolute'), the view's largest
 * visible weight ('view'), or each row's own largest weight ('row'; vmax is null then).
 */
function scaleOf(weights, masked, n, m) {
  const top = new Float32Array(n).fill(1);
  if (ui.scale === 'absolute') return { top, vmax: 1 };
  let all = 0;
  for (let i = 0; i < n; i++) {
    let max = 0;
    for (let k = i * m; k < (i + 1) * m; k++) if (!masked[k] && weights[k] > max) max = weights[k];
    if (max > 0) top[i] = max;
    if (max > all) all = max;
  }
  if (ui.scale === 'row') return { top, vmax: null };
  return { top: top.fill(all > 0 ? all : 1), vmax: all > 0 ? all : 1 };
}

/** Labels on the canvases stay short; the readout shows the whole token. */
const shortLabel = (token) => (token.length > 14 ? `${token.slice(0, 13)}…` : token);

function headName(head, H = ui.shown.H) {
  if (head === 'avg') return `Average of ${H} heads`;
  return H > 1 ? `Head ${head + 1} of ${H}` : 'The only head';
}

function buildThumbnails() {
  const { H } = ui.shown;
  el.headsGrid.replaceChildren();
  if (H === 1) {
    el.headsGrid.hidden = true;
    return;
  }
  el.headsGrid.hidden = false;
  el.headsGrid.classList.toggle('many', H > 8);
  for (const head of ['avg', ...Array.from({ length: H }, (_, h) => h)]) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'thumb';
    button.dataset.head = String(head);
    button.setAttribute('aria-pressed', 'false');
    button.setAttribute('aria-label', `${headName(head, H)}: hover to view, click to lock`);
    const canvas = document.createElement('canvas');
    canvas.setAttribute('aria-hidden', 'true');
    const caption = document.createElement('span');
    caption.textContent = head === 'avg' ? 'average' : `head ${head + 1}`;
    button.append(canvas, caption);
    button.addEventListener('pointerenter', () => setHoverHead(head));
    button.addEventListener('pointerleave', () => setHoverHead(null));
    button.addEventListener('click', () => {
      ui.lockedHead = ui.lockedHead === head ? null : head;
      syncThumbnailState();
      render();
    });
    el.headsGrid.append(button);
  }
  syncThumbnailState();
}

function syncThumbnailState() {
  for (const button of el.headsGrid.querySelectorAll('.thumb')) {
    const head = button.dataset.head === 'avg' ? 'avg' : Number(button.dataset.head);
    button.setAttribute('aria-pressed', String(ui.lockedHead === head));
    button.classList.toggle('viewing', shownHead() === head);
  }
}

function renderThumbnails() {
  if (!ui.shown || ui.shown.H === 1) return;
  const { n, m } = ui.shown;
  for (const button of el.headsGrid.querySelectorAll('.thumb')) {
    const head = button.dataset.head === 'avg' ? 'avg' : Number(button.dataset.head);
    const view = viewOf(head);
    drawThumbnail(button.querySelector('canvas'), { weights: view.weights, masked: view.masked, n, m, top: view.top });
  }
}

function setHoverHead(head) {
  if (ui.hoverHead === head) return;
  ui.hoverHead = head;
  syncThumbnailState();
  render();
}

function maskReasons(row, col) {
  const r = ui.shown;
  const { causal, padding, custom } = r.request;
  const reasons = [];
  if (col >= r.n) return reasons; // bias_k / zero-attention keys are always attendable
  if (causal && col > row) reasons.push('causal');
  if (padding && col >= r.lengths[ui.sentence]) reasons.push('padding');
  if (custom && custom[row * r.n + col]) reasons.push('custom');
  return reasons;
}

function describeCell({ row, col }, view) {
  const k = row * ui.shown.m + col;
  const reasons = maskReasons(row, col);
  const state = view.masked[k] ? `masked (${reasons.join(', ')})` : 'not masked';
  return `Query “${view.rowTokens[row]}” (${row}) → key “${view.colTokens[col]}” (${col}): ` +
    `weight ${view.weights[k].toFixed(4)}, ${state}`;
}

function activeQuery() {
  return ui.linesHover ?? ui.hoverCell?.row ?? ui.cursor?.row ?? ui.lockedQuery;
}

let frame = 0;
/** Redraws on the next animation frame; pointer moves call this many times per frame. */
function scheduleRender() {
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

function render() {
  if (!ui.shown) return;
  if (frame) {
    cancelAnimationFrame(frame);
    frame = 0;
  }
  const r = ui.shown;
  const head = shownHead();
  const view = viewOf(head);
  const cell = ui.hoverCell ?? ui.cursor;
  const query = activeQuery();
  ui.layout = drawHeatmap(el.canvas, view, { cell, row: query });
  const { left, top, cell: size } = ui.layout;
  el.canvas.dataset.grid = JSON.stringify({ left, top, cell: size });
  drawLegend(el.legend, {
    vmax: view.vmax ?? 1, perRow: view.vmax === null, custom: view.custom !== null, fullyMasked: view.fullyMasked.length > 0,
  });

  const all = query === null && r.n * r.m <= ALL_LINES_LIMIT;
  const queries = query !== null ? [query] : all ? Array.from({ length: r.n }, (_, i) => i) : [0];
  ui.linesLayout = drawLines(el.lines, {
    queryLabels: view.rowLabels,
    keyLabels: view.colLabels,
    weights: view.weights,
    masked: view.masked,
    queries,
    selected: query ?? (all ? null : 0),
    top: view.top,
  });

  const locked = ui.hoverHead === null && ui.lockedHead !== null ? ' (locked)' : '';
  el.viewTitle.textContent = `${headName(head)}${locked} · sentence ${ui.sentence + 1} · ${KIND_NAMES[r.kind]}`;
  el.readout.textContent = cell
    ? `${describeCell(cell, view)}. Output of this query: max |o| = ${formatNumber(r.outputMaxAbs[ui.sentence * r.n + cell.row])}.`
    : 'Hover over a cell, or focus the heatmap and use the arrow keys.';
  if (view.fullyMasked.length) {
    const names = view.fullyMasked.slice(0, 8).map((i) => `“${view.rowTokens[i]}” (${i})`).join(', ');
    const more = view.fullyMasked.length > 8 ? ` and ${view.fullyMasked.length - 8} more` : '';
    const maxOut = Math.max(...view.fullyMasked.map((i) => r.outputMaxAbs[ui.sentence * r.n + i]));
    el.fullyMasked.textContent = `Fully masked queries: ${names}${more}. Their weights are all 0 and their ` +
      `output is the zero vector (max |o| = ${formatNumber(maxOut)}), where PyTorch would give NaN.`;
    el.fullyMasked.hidden = false;
  } else {
    el.fullyMasked.hidden = true;
  }
  el.dims.textContent = `n = ${r.n}, m = ${r.m}, E = ${r.embedDim}` + (r.N > 1 ? `, lengths ${r.lengths.join(' and ')}` : '');
  el.canvas.setAttribute('aria-label', `Attention weights, ${r.n} queries by ${r.m} keys, ${headName(head)}`);
}

const formatNumber = (x) => (x === 0 ? '0' : Math.abs(x) >= 0.001 ? x.toFixed(4) : x.toExponential(2));

function syncSentenceChoice() {
  const r = ui.shown;
  el.sentenceChoice.hidden = r.N < 2;
  for (let b = 0; b < 2; b++) {
    const label = $(`#sentence-${b}-label`);
    if (b < r.N) {
      label.textContent = `${b + 1} (${r.lengths[b]} tokens)`;
      label.title = r.tokens[b].slice(0, 12).filter((t) => t !== PAD).join(' ');
    }
    $(`#sentence-${b}`).checked = b === ui.sentence;
  }
}

function showFeatures() {
  const { simd, threads, version } = ui.features;
  // Relaxed builds fuse their multiply-adds (relaxed SIMD): the engine's fastest.
  el.simd.textContent = !simd ? 'no' : ui.build.endsWith('relaxed') ? 'yes, relaxed (FMA)' : 'yes';
  el.threads.textContent = String(threads);
  el.version.textContent = version;
  el.isolated.textContent = `${globalThis.crossOriginIsolated ? 'yes' : 'no'} (page), ${ui.crossOriginIsolated ? 'yes' : 'no'} (worker)`;
}

function showTimes() {
  const r = ui.shown;
  const { simd, threads } = ui.features;
  $('#speed').textContent = `forward ${r.forwardMs.toFixed(1)} ms in wasm (${simd ? 'SIMD' : 'scalar'}, ` +
    `${threads} thread${threads > 1 ? 's' : ''}) · update ${r.updateMs.toFixed(0)} ms`;
  el.forwardTime.textContent = `${r.forwardMs.toFixed(2)} ms`;
  el.updateTime.textContent = `${r.updateMs.toFixed(1)} ms (worker ${r.workerMs.toFixed(1)} ms)`;
  el.apiCall.textContent = r.call;
}

function customCells(custom, L) {
  const cells = [];
  if (custom) for (let k = 0; k < custom.length; k++) if (custom[k]) cells.push([Math.floor(k / L), k % L]);
  return cells;
}

function publish() {
  const r = ui.shown;
  const small = r.weights.length <= PUBLISH_LIMIT;
  el.result.textContent = JSON.stringify({
    seq: r.id,
    kind: r.kind,
    maskKind: r.request.maskKind,
    causal: r.request.causal,
    padding: r.request.padding,
    customCells: customCells(r.request.custom, r.n),
    tokens: r.tokens,
    lengths: r.lengths,
    extraKeys: r.extraKeys,
    heads: r.H,
    embedDim: r.embedDim,
    shape: [r.N, r.H, r.n, r.m],
    weights: small ? Array.from(r.weights) : null,
    masked: small ? Array.from(r.masked) : null,
    outputMaxAbs: small ? Array.from(r.outputMaxAbs) : null,
    fullyMasked: r.fullyMasked,
    checks: r.checks ?? null, // null until the checks after drawing have run
    weightsShape: r.weightsShape,
    outputShape: r.outputShape,
    call: r.call,
    config: r.request.config,
    seed: r.request.seed,
    weightsSource: r.request.fileId !== null ? `file ${ui.file?.name ?? ''}`.trim() : r.kind === 'sdpa' ? 'none' : 'seeded',
    view: { sentence: ui.sentence, head: shownHead() },
    features: ui.features,
    build: ui.build,
    crossOriginIsolated: ui.crossOriginIsolated,
    forwardMs: r.forwardMs,
    workerMs: r.workerMs,
    workerPhases: r.phases,
    updateMs: r.updateMs,
    requests: { ...counts },
  });
}

// ---------------------------------------------------------------------------------------------
// Heatmap and lines interaction

function pointerCell(event) {
  const box = el.canvas.getBoundingClientRect();
  return ui.layout?.cellAt(event.clientX - box.left, event.clientY - box.top) ?? null;
}

const sameCell = (a, b) => (a === b) || (a && b && a.row === b.row && a.col === b.col);

/** Sets one custom-mask cell (token keys only) and asks for an update if it changed. */
function paintCell(cell, value) {
  if (!ui.shown || cell.col >= ui.shown.n || cell.row >= ui.customSize || cell.col >= ui.customSize) return;
  const k = cell.row * ui.customSize + cell.col;
  if (ui.custom[k] === value) return;
  ui.custom[k] = value;
  el.clearCustom.disabled = !ui.custom.includes(1);
  requestUpdate();
}

function onHeatmapPointerDown(event) {
  const cell = pointerCell(event);
  if (!cell || event.button !== 0) return;
  if (el.custom.checked) {
    event.preventDefault();
    el.canvas.setPointerCapture(event.pointerId);
    const k = cell.row * ui.customSize + cell.col;
    ui.painting = { value: ui.custom[k] ? 0 : 1 };
    paintCell(cell, ui.painting.value);
  } else {
    ui.lockedQuery = ui.lockedQuery === cell.row ? null : cell.row;
    scheduleRender();
  }
}

function onHeatmapPointerMove(event) {
  const cell = pointerCell(event);
  if (ui.painting && cell) paintCell(cell, ui.painting.value);
  if (!sameCell(cell, ui.hoverCell)) {
    ui.hoverCell = cell;
    scheduleRender();
  }
}

function endPainting() {
  ui.painting = null;
}

const KEY_MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

function onHeatmapKey(event) {
  if (!ui.shown) return;
  const { n, m } = ui.shown;
  const move = KEY_MOVES[event.key];
  if (move) {
    event.preventDefault();
    const step = event.shiftKey ? 10 : 1;
    const clamp = (v, max) => Math.min(max - 1, Math.max(0, v));
    ui.hoverCell = null; // the latest input wins until the pointer moves again
    ui.cursor = ui.cursor
      ? { row: clamp(ui.cursor.row + move[0] * step, n), col: clamp(ui.cursor.col + move[1] * step, m) }
      : { row: 0, col: 0 };
    render();
  } else if ((event.key === 'Enter' || event.key === ' ') && ui.cursor) {
    event.preventDefault();
    if (el.custom.checked) {
      const k = ui.cursor.row * ui.customSize + ui.cursor.col;
      paintCell(ui.cursor, ui.custom[k] ? 0 : 1);
    } else {
      ui.lockedQuery = ui.lockedQuery === ui.cursor.row ? null : ui.cursor.row;
      render();
    }
  } else if (event.key === 'Escape') {
    ui.cursor = null;
    ui.lockedQuery = null;
    render();
  }
}

function linesQuery(event) {
  const box = el.lines.getBoundingClientRect();
  return ui.linesLayout?.queryAt(event.clientX - box.left, event.clientY - box.top) ?? null;
}

function onLinesKey(event) {
  if (!ui.shown) return;
  const delta = event.key === 'ArrowUp' ? -1 : event.key === 'ArrowDown' ? 1 : 0;
  if (delta) {
    event.preventDefault();
    const current = ui.lockedQuery ?? (delta > 0 ? -1 : ui.shown.n);
    ui.lockedQuery = Math.min(ui.shown.n - 1, Math.max(0, current + delta));
    render();
  } else if (event.key === 'Escape') {
    ui.lockedQuery = null;
    render();
  }
}

// ---------------------------------------------------------------------------------------------
// File loading and export

async function loadFile(file) {
  el.fileError.hidden = true;
  try {
    if (file.size > MAX_FILE_BYTES) throw new Error(`The file is ${(file.size / 1048576).toFixed(1)} MB; the page reads at most ${MAX_FILE_BYTES / 1048576} MB.`);
    const { config, stateDict } = parseStateDictFile(await file.text());
    const id = nextId++;
    const reply = await new Promise((resolve) => {
      fileReplies.set(id, resolve);
      const transfer = Object.values(stateDict).map((t) => t.data.buffer);
      worker.postMessage({ type: 'file', id, config, stateDict }, transfer);
    });
    if (!reply.ok) throw new Error(`MultiheadAttention rejected the file: ${reply.message}`);
    ui.file = { id, name: file.name, config };
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

function fileStem() {
  const r = ui.shown;
  const head = shownHead();
  return `attention-${r.kind}-s${ui.sentence + 1}-${head === 'avg' ? 'average' : `head${head + 1}`}`;
}

async function exportPng() {
  if (!ui.shown) return;
  const view = viewOf(shownHead());
  // The picture without the hover highlight.
  drawHeatmap(el.canvas, view, {});
  const { maskKind, custom } = ui.shown.request;
  const masks = `${MASK_NAMES[maskKind]}${custom ? ' + custom cells' : ''}`;
  const blob = await composePng(`${el.viewTitle.textContent} · ${masks}`, [el.canvas, el.legend]);
  render();
  offerDownload(blob, `${fileStem()}.png`, el.pngLink);
}

function exportJson() {
  if (!ui.shown) return;
  const r = ui.shown;
  const b = ui.sentence;
  const size = r.n * r.m;
  const head = shownHead();
  const view = viewOf(head);
  const document_ = {
    kind: r.kind,
    module: KIND_NAMES[r.kind],
    sentence: b,
    tokens: r.tokens[b],
    keys: view.colTokens,
    length: r.lengths[b],
    heads: r.H,
    shape: [r.H, r.n, r.m],
    weights: Array.from(r.weights.subarray(b * r.H * size, (b + 1) * r.H * size)),
    average: r.H > 1 ? Array.from(viewOf('avg').weights) : null,
    masked: Array.from(view.masked),
    maskKind: r.request.maskKind,
    customCells: customCells(r.request.custom, r.n),
    fullyMaskedRows: view.fullyMasked,
    outputMaxAbs: Array.from(r.outputMaxAbs.subarray(b * r.n, (b + 1) * r.n)),
    view: { head },
    config: r.request.config,
    seed: r.request.seed,
    call: r.call,
    features: ui.features,
    build: ui.build,
    forwardMs: r.forwardMs,
  };
  const blob = new Blob([JSON.stringify(document_)], { type: 'application/json' });
  offerDownload(blob, `${fileStem()}.json`, el.jsonLink);
}

// ---------------------------------------------------------------------------------------------

function main() {
  el.text.value = EXAMPLE_TEXT;
  $('#max-tokens').textContent = String(MAX_TOKENS);
  syncControls();

  el.form.addEventListener('submit', (event) => event.preventDefault());
  for (const control of [el.text, el.length, el.kind, el.embedDim, el.hiddenSize, el.heads, el.headDim, el.seed, el.mask, el.custom]) {
    control.addEventListener(control === el.text || control === el.heads || control === el.seed ? 'input' : 'change', () => {
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
  el.sentenceChoice.addEventListener('change', (event) => {
    ui.sentence = Number(event.target.value);
    resetViews();
    renderThumbnails();
    render();
    publish();
  });
  el.scale.addEventListener('change', () => {
    ui.scale = el.scale.value;
    if (!ui.shown) return;
    resetViews();
    renderThumbnails();
    render();
  });

  el.canvas.addEventListener('pointerdown', onHeatmapPointerDown);
  el.canvas.addEventListener('pointermove', onHeatmapPointerMove);
  el.canvas.addEventListener('pointerup', endPainting);
  el.canvas.addEventListener('pointercancel', endPainting);
  el.canvas.addEventListener('pointerleave', () => {
    if (ui.hoverCell) {
      ui.hoverCell = null;
      scheduleRender();
    }
  });
  el.canvas.addEventListener('keydown', onHeatmapKey);
  el.canvas.addEventListener('blur', () => {
    if (ui.cursor) {
      ui.cursor = null;
      scheduleRender();
    }
  });
  el.lines.addEventListener('pointermove', (event) => {
    const query = linesQuery(event);
    if (query !== ui.linesHover) {
      ui.linesHover = query;
      scheduleRender();
    }
  });
  el.lines.addEventListener('pointerleave', () => {
    ui.linesHover = null;
    scheduleRender();
  });
  el.lines.addEventListener('click', (event) => {
    const query = linesQuery(event);
    if (query === null) return;
    ui.lockedQuery = ui.lockedQuery === query ? null : query;
    scheduleRender();
  });
  el.lines.addEventListener('keydown', onLinesKey);
  el.exportPng.addEventListener('click', () => exportPng().catch(showError));
  el.exportJson.addEventListener('click', () => {
    try {
      exportJson();
    } catch (error) {
      showError(error);
    }
  });

  // The canvases follow their CSS width; redraw at the new size rather than stretching pixels.
  let lastWidth = 0;
  new ResizeObserver(() => {
    if (el.canvas.clientWidth !== lastWidth) {
      lastWidth = el.canvas.clientWidth;
      render();
    }
  }).observe(el.canvas);

  // ?threads=1 compares against the single-threaded build.
  const threads = Number(new URLSearchParams(location.search).get('threads') ?? 2);
  worker.postMessage({ type: 'init', threads: Number.isInteger(threads) && threads >= 1 ? threads : 2 });
}

window.addEventListener('unhandledrejection', (event) => showError(event.reason));
main();

// The weights view (.view-body): the heads' thumbnails (the trained model's layers × heads, each
// with its scores), the large heatmap and its readout, the lines view, and the query the neuron
// view follows; pointer and keyboard on them, the zoom, and the custom mask painted on the heatmap.
// Every view shows one window of the [n, m] map (grid.js): the zoomed part of a result that holds
// every weight, or the picture the worker computed for a long text (several tokens a cell).
// This view owns its state (below) and its part of the DOM; main.js gives it each result (show()).
import { computeNeuron, requestUpdate } from './compute.js';
import { PAD } from './embeddings.js';
import { MIN_WINDOW, cellSpan, gridOf, isWhole } from './grid.js';
import { colourOf, drawHeatmap, drawLegend, drawPicture, drawThumbnail, ratioOf } from './heatmap.js';
import { drawLines, headColour } from './lines.js';
import { MIN_SPAN } from './scores.js';
import { NeuronView } from './neuron-view.js';
import { headAverage } from './checks.js';
import { customEditing, isCustomCell, setCustomCell } from './controls-view.js';
import { KIND_NAMES, $, formatNumber, modelHead, shortLabel, tokensAsText, visible } from './page.js';

const ALL_LINES_LIMIT = 4096; // below this many cells the lines view shows every query at once

const neuronView = new NeuronView($('#neuron'), computeNeuron);

const dom = {
  headsGrid: $('#heads'),
  headsLegend: $('#heads-legend'),
  viewTitle: $('#view-title'),
  canvas: $('#heatmap'),
  legend: $('#legend'),
  lines: $('#lines'),
  readout: $('#readout'),
  fullyMasked: $('#fully-masked'),
  dims: $('#dims'),
  sentenceChoice: $('#sentence-choice'),
  scale: $('#scale'),
  zoomIn: $('#zoom-in'),
  zoomOut: $('#zoom-out'),
  zoomFit: $('#zoom-fit'),
  zoomNote: $('#zoom-note'),
  guide: $('#guide'),
  modelScores: $('#model-scores'),
  textQuery: $('#text-query'),
  textView: $('#text-view'),
  linesHeads: $('#lines-heads'),
  linesLegend: $('#lines-legend'),
};

const state = {
  shown: null, // the result on screen: the worker's result plus { request, id, updateMs }
  sentence: 0,
  scale: 'absolute',
  lockedHead: null, // 'avg' | head index | null
  hoverHead: null,
  hoverCell: null, // { row, col } under the pointer
  cursor: null, // { row, col } of the keyboard cursor (or the cell last tapped)
  lockedQuery: null,
  linesHover: null,
  painting: null, // { value } while dragging on the heatmap
  views: new Map(), // head key -> view of the shown result
  viewMask: null, // the mask those views share
  viewVersion: 0,
  layout: null,
  linesLayout: null,
  neuronQuery: null, // the token of the query the neuron view shows: the last one pointed at
  zoom: null, // { row, col, size } in tokens: the window the views show; null = the whole map
  guided: false, // the first run: the trained model's induction head locked, a line saying what it shows
  generatedFrom: null, // where the last generation's characters start in the text
};

function resetViews() {
  state.views.clear();
  state.viewMask = null;
}

/**
 * Shows a result (the worker's, with { request, id }): what the user pointed at stays where it
 * still names the same tokens; a model shows one head at a time (on the first run its induction
 * head, else its first).
 */
export function show(shown) {
  const before = state.shown;
  const headsChanged = !before || before.H !== shown.H || before.kind !== shown.kind || before.model?.name !== shown.model?.name;
  // Cells pointed at are positions on the grid drawn: another grid puts other tokens under them.
  const sameGrid = before && ['row', 'col', 'step', 'rows', 'cols'].every((key) => before.grid[key] === shown.grid[key]);
  const sizeChanged = headsChanged || !sameGrid || before.N !== shown.N;
  state.shown = shown;
  if (state.sentence >= shown.N) state.sentence = 0;
  if (headsChanged) {
    // An opened model starts on its strongest induction head; the trained model on it in the guided run.
    state.lockedHead = !shown.model ? null : shown.kind === 'opened' || (state.guided && shown.kind === 'model') ? inductionHead(shown.model) : 0;
    state.hoverHead = null;
    state.zoom = null;
  }
  // A model's grid showLayer laid out for this result's run is kept (its cells hold the layers'
  // pictures already); one of another model (a run that did not finish) is rebuilt.
  const gridOfModel = dom.headsGrid.dataset.model === (shown.model ? gridKey(shown.kind, shown.model) : '');
  if (!gridOfModel || (headsChanged && !shown.model)) buildThumbnails();
  else syncThumbnailState();
  if (sizeChanged) {
    state.cursor = null;
    state.hoverCell = null;
    state.lockedQuery = null;
    state.linesHover = null;
    state.neuronQuery = null;
  }
  // Every layer of the grid is now this result's.
  for (const cell of dom.headsGrid.querySelectorAll('.pending')) cell.classList.remove('pending');
  dom.headsGrid.inert = false;
  dom.headsGrid.dataset.layersDone = shown.model ? String(shown.model.layers) : '';
  resetViews();
  updateModelTitles();
  render();
  syncSentenceChoice();
  // The thumbnails in a task of their own: with the heatmap in this one, no task runs long.
  const drawn = shown;
  setTimeout(() => {
    if (state.shown === drawn) renderThumbnails();
  }, 0);
}

/** The zoom asked for ({ row, col, size } in tokens, or null): the trained model's long texts are computed for it. */
export const zoomWindow = () => state.zoom;

/** The token whose query the neuron view follows (the last one pointed at), or null. */
export const selectedQuery = () => state.neuronQuery;

/** Forgets the zoom: its positions name another kind's tokens. */
export function resetZoom() {
  state.zoom = null;
}

/** Starts (page load) or ends (the user takes over) the guided first run. */
export function guide(on) {
  state.guided = on;
  if (!on) dom.guide.hidden = true;
}

/** Underlines the text from character `from` on in the coloured text (null: nothing generated). */
export function markGenerated(from) {
  state.generatedFrom = from;
}

/** What the page publishes of the view: the sentence and head shown, and the zoom. */
export const viewState = () => ({ sentence: state.sentence, head: shownHead(), zoom: state.zoom });

/** The view as the exports take it: the result, the head and its view, and the title above. */
export function exportedView() {
  if (!state.shown) return null;
  const head = shownHead();
  return { result: state.shown, head, view: viewOf(head), sentence: state.sentence, zoom: state.zoom, title: dom.viewTitle.textContent };
}

/**
 * The heatmap and legend canvases without the pointer's highlight, drawn at `ratio` device pixels
 * a CSS pixel (render() puts the screen's picture back).
 */
export function plainCanvases(ratio) {
  const view = viewOf(shownHead());
  drawHeatmap(dom.canvas, view, {}, ratio);
  drawLegend(dom.legend, legendOf(view), ratio);
  return [dom.canvas, dom.legend];
}

/** What the legend shows for `view`: its scale and the masks that apply. */
const legendOf = (view) => ({ vmax: view.vmax ?? 1, perRow: view.vmax === null, custom: view.custom !== null, fullyMasked: view.fullyMasked.length > 0 });

/**
 * The head shown in the large view: hovered, else locked, else the average (or the only head).
 * A model's heads have no average (what would it mean across layers?): its first head instead.
 */
function shownHead() {
  const { H, model } = state.shown;
  const head = state.hoverHead ?? state.lockedHead;
  if (head !== null) return head;
  return H > 1 && !model ? 'avg' : 0;
}

/** The head whose `key` score is largest ({ head (flat index), value }), or null: no head has one. */
const strongest = (scores, key) => scores.reduce((top, s, head) => (s[key] !== null && (!top || s[key] > top.value) ? { head, value: s[key] } : top), null);

/** The head with the largest induction score on the standard sequence (flat index). */
const inductionHead = ({ scores }) => strongest(scores, 'induction').head;

/** The window the views show: the zoom, within a result that holds every weight; else the worker's picture. */
function viewGrid() {
  const r = state.shown;
  return isWhole(r.grid, r.n, r.m) ? gridOf(r.n, r.m, state.zoom, Infinity) : r.grid;
}

/** Labels of a window's cells: its tokens at one token a cell, else the ranges of token indices. */
function cellLabels(tokens, start, end, step) {
  if (step === 1) return tokens.slice(start, end).map(shortLabel);
  return Array.from({ length: Math.ceil((end - start) / step) }, (_, k) => cellSpan(start, end, step, k).join('–'));
}

function viewOf(head) {
  if (state.views.has(head)) return state.views.get(head);
  const r = state.shown;
  const b = state.sentence;
  const { rows, cols } = r.grid;
  const size = rows * cols;
  const grid = viewGrid();
  // A zoomed window of a whole result is cut out of its planes (one token a cell there).
  const cut = isWhole(r.grid, r.n, r.m) && !isWhole(grid, r.n, r.m);
  const crop = (plane) => {
    if (!cut) return plane;
    const out = new plane.constructor(grid.rows * grid.cols);
    for (let i = 0; i < grid.rows; i++) out.set(plane.subarray((grid.row + i) * cols + grid.col, (grid.row + i) * cols + grid.colEnd), i * grid.cols);
    return out;
  };
  const weights = crop(head === 'avg'
    ? headAverage(r.weights, b, r.H, size)
    : r.weights.subarray((b * r.H + head) * size, (b * r.H + head + 1) * size));
  // One mask array for every head's view of the window (heatmap.js pools it once for them all).
  state.viewMask ??= crop(r.masked.subarray(b * size, (b + 1) * size));
  const masked = state.viewMask;
  // Which masked cells the user clicked, laid out as the result's [n, m] (extra key columns never
  // are), then cut to the window as the weights are.
  let custom = null;
  if (r.request.custom) {
    const L = r.n;
    custom = new Uint8Array(size);
    for (let i = 0; i < r.n; i++) for (let j = 0; j < L; j++) custom[i * r.m + j] = r.request.custom[i * L + j];
    custom = crop(custom);
  }
  const { top, vmax } = scaleOf(weights, masked, grid.rows, grid.cols);
  const keys = [...r.tokens[b], ...r.extraKeys];
  const view = {
    version: ++state.viewVersion,
    head,
    grid,
    rowTokens: r.tokens[b],
    colTokens: keys,
    rowLabels: cellLabels(r.tokens[b], grid.row, grid.rowEnd, grid.step),
    colLabels: cellLabels(keys, grid.col, grid.colEnd, grid.step),
    weights,
    masked,
    custom,
    fullyMasked: r.fullyMasked.filter(([s, i]) => s === b && i >= grid.row && i < grid.rowEnd).map(([, i]) => i - grid.row),
    top,
    vmax,
  };
  state.views.set(head, view);
  return view;
}

/**
 * The top of the colour scale for each row, top[i] > 0: 1 ('absolute'), the view's largest
 * visible weight ('view'), or each row's own largest weight ('row'; vmax is null then).
 */
function scaleOf(weights, masked, n, m) {
  const top = new Float32Array(n).fill(1);
  if (state.scale === 'absolute') return { top, vmax: 1 };
  let all = 0;
  for (let i = 0; i < n; i++) {
    let max = 0;
    for (let k = i * m; k < (i + 1) * m; k++) if (!masked[k] && weights[k] > max) max = weights[k];
    if (max > 0) top[i] = max;
    if (max > all) all = max;
  }
  if (state.scale === 'row') return { top, vmax: null };
  return { top: top.fill(all > 0 ? all : 1), vmax: all > 0 ? all : 1 };
}

function headName(head, H = state.shown.H) {
  if (head === 'avg') return `Average of ${H} heads`;
  const model = state.shown.model;
  if (model) {
    const where = modelHead(head, model.heads);
    return `Layer ${where.layer + 1}, head ${where.head + 1}`;
  }
  return H > 1 ? `Head ${head + 1} of ${H}` : 'The only head';
}

const score = (x) => (x === null ? '–' : x.toFixed(2));

// The number under a model head's cell: its induction score on the standard sequence, which a
// newly opened model has only after its first grid (runner.js openFolder).
const cellCaption = (model, head) => score(model.scores?.[head].induction ?? null);

/** A model head's title: where it sits, and its scores on the standard sequence and on the text. */
function modelHeadTitle(head, model = state.shown.model) {
  const { heads, scores, textScores } = model;
  const where = modelHead(head, heads);
  const none = { induction: null, previousToken: null };
  // The standard scores come after a newly opened model's first grid (runner.js openFolder).
  const standard = scores?.[head] ?? none;
  const own = textScores?.[head] ?? none;
  return `Layer ${where.layer + 1}, head ${where.head + 1}: induction ${score(standard.induction)} on the repeated random tokens, ` +
    `${score(own.induction)} on your text; previous token ${score(standard.previousToken)}, ${score(own.previousToken)}`;
}

/** The strongest induction and previous-token heads, on the standard sequence and on the text. */
function showScores() {
  const { model } = state.shown;
  if (!model) return;
  const where = (head) => {
    const { layer, head: h } = modelHead(head, model.heads);
    return `L${layer + 1} H${h + 1}`;
  };
  const line = (key, what) => {
    const standard = strongest(model.scores, key);
    const own = model.textScores && strongest(model.textScores, key);
    const ownText = !model.textScores ? '; zoom out to the whole text to score it'
      : own ? `; on your text ${where(own.head)} (${own.value.toFixed(2)})` : `; your text repeats no span of ${MIN_SPAN} tokens, so it has none`;
    return `${what}: ${where(standard.head)} (${standard.value.toFixed(2)} on ${model.standardLength} random tokens repeated)${ownText}.`;
  };
  dom.modelScores.textContent = `${line('induction', 'Strongest induction head')} ${line('previousToken', 'Strongest previous-token head')}`;
}

/** Which model a grid shows: its kind, name, shape and (an opened model) which folder opened. */
const gridKey = (kind, model) => `${kind}:${model.name}:${model.openId ?? ''}:${model.layers}×${model.heads}`;

/** A model's layers × heads grid with its legend, empty (buildModelGrid), for the model `key` names. */
function layOutModelGrid(model, key) {
  dom.headsGrid.dataset.model = key;
  dom.headsGrid.classList.add('model-grid');
  dom.headsGrid.hidden = false;
  // What the number under each head is.
  dom.headsLegend.hidden = false;
  dom.headsLegend.textContent = `The number under each head is its induction score on ${model.standardLength} random tokens repeated: `
    + 'the mean weight a token of the second copy gives the token after its first occurrence (0 to 1). Hover a head for both scores, there and on your text.';
  buildModelGrid(model);
}

/**
 * One layer's heads of the opened model's run under way (worker.js's 'layer' message: pictures
 * [heads, rows, cols] of at most 64 cells a side): drawn into their cells of the grid, the layers
 * still to come dimmed (class "pending"), so the grid fills as the layers finish. Before the
 * model's first result the grid is laid out from the message, inert until that result arrives.
 * The grid's data-layers-done counts the layers drawn.
 */
export function showLayer({ model, layer, weights, masked, rows, cols }) {
  const key = gridKey('opened', model);
  if (dom.headsGrid.dataset.model !== key) {
    layOutModelGrid(model, key);
    dom.headsGrid.inert = true;
  }
  if (layer === 0) {
    for (const [index, cell] of modelGrid.cells.entries()) {
      if (cell.classList.contains('pending')) continue;
      cell.classList.add('pending');
      veilCell(index);
    }
  }
  for (let h = 0; h < model.heads; h++) {
    const index = layer * model.heads + h;
    const plane = weights.subarray(h * rows * cols, (h + 1) * rows * cols);
    modelGrid.cells[index].classList.remove('pending');
    drawCell(index, { weights: plane, masked, n: rows, m: cols, top: scaleOf(plane, masked, rows, cols).top });
  }
  dom.headsGrid.dataset.layersDone = String(layer + 1);
}

// A model's grid draws its heads' pictures on one canvas a layer (.layer-pictures, laid over that
// layer's row; each cell keeps an empty .picture box where its picture goes) rather than on a
// canvas a head: Chromium composites each canvas as a layer of its own and every frame's commit
// walks them all, which for a 336-head grid cost more of the 2 cores than the frames' changes did.
const modelGrid = {
  cells: [], // the .grid-cell buttons, by head index
  canvases: [], // a .layer-pictures canvas a layer
  drawn: new Uint8Array(0), // 1 where a cell's picture is on its canvas
  geometry: null, // modelGridGeometry()
  missed: false, // a picture was not drawn: the grid was not laid out
  resized: new ResizeObserver(() => {
    const box = modelGrid.geometry?.box;
    const now = modelGrid.canvases[0]?.getBoundingClientRect();
    if (box ? now.width === box.width && now.height === box.height : !modelGrid.missed) return;
    modelGrid.geometry = null;
    modelGrid.missed = false;
    // A grid of a whole result is drawn again at its new size; one under way is by its result.
    if (!dom.headsGrid.inert && !dom.headsGrid.querySelector('.pending')) renderThumbnails();
  }),
};

const headsALayer = () => modelGrid.cells.length / modelGrid.canvases.length;

// A cell's picture while its head is pending or ablated: the panel's colour over it at this alpha.
const VEIL = { pending: 0.7, ablated: 0.55 };

/**
 * Where each head's picture goes on its layer's canvas, in device pixels (every layer's row is
 * laid out alike), with the canvases sized to their rows: measured once, and again after the
 * grid's size changed (which clears the canvases). Null while the grid is not laid out.
 */
function modelGridGeometry() {
  if (modelGrid.geometry) return modelGrid.geometry;
  const box = modelGrid.canvases[0]?.getBoundingClientRect();
  if (!box || box.width === 0) return null;
  const ratio = ratioOf();
  const spots = modelGrid.cells.slice(0, headsALayer()).map((cell) => {
    const picture = cell.querySelector('.picture').getBoundingClientRect();
    return { x: Math.round((picture.left - box.left) * ratio), y: Math.round((picture.top - box.top) * ratio), size: Math.round(picture.width * ratio) };
  });
  for (const canvas of modelGrid.canvases) {
    canvas.width = Math.round(box.width * ratio);
    canvas.height = Math.round(box.height * ratio);
  }
  modelGrid.drawn.fill(0);
  modelGrid.geometry = { box, spots, veil: getComputedStyle(dom.headsGrid).getPropertyValue('--panel') };
  return modelGrid.geometry;
}

/** Head `index`'s place on its layer's canvas: { ctx, x, y, size } in device pixels. */
function spotOf(index, { spots }) {
  const ctx = modelGrid.canvases[Math.floor(index / spots.length)].getContext('2d');
  return { ctx, ...spots[index % spots.length] };
}

/** Head `index`'s picture of `view` on its layer's canvas, veiled as its cell's state says. */
function drawCell(index, view) {
  const geometry = modelGridGeometry();
  if (!geometry) {
    modelGrid.missed = true;
    return;
  }
  const { ctx, x, y, size } = spotOf(index, geometry);
  drawPicture(ctx, view, x, y, size);
  modelGrid.drawn[index] = 1;
  veilCell(index);
}

function veilCell(index) {
  const { geometry } = modelGrid;
  const { classList } = modelGrid.cells[index];
  const alpha = classList.contains('pending') ? VEIL.pending : classList.contains('ablated') ? VEIL.ablated : 0;
  if (!geometry || !modelGrid.drawn[index] || alpha === 0) return;
  const { ctx, x, y, size } = spotOf(index, geometry);
  ctx.globalAlpha = alpha;
  ctx.fillStyle = geometry.veil;
  ctx.fillRect(x, y, size, size);
  ctx.globalAlpha = 1;
}

/** Marks the grid's cells of the heads removed ([layer, head] pairs, 0-based), their pictures veiled. */
export function markAblated(heads) {
  const ablated = new Set(heads.map(([layer, head]) => layer * headsALayer() + head));
  for (const [index, cell] of modelGrid.cells.entries()) {
    if (cell.classList.contains('ablated') === ablated.has(index)) continue;
    cell.classList.toggle('ablated');
    if (state.shown?.model) drawCell(index, pictureOf(index));
  }
}

function buildThumbnails() {
  const { H, model, kind } = state.shown;
  dom.headsGrid.replaceChildren();
  forgetModelGrid();
  dom.headsGrid.dataset.model = '';
  dom.headsGrid.classList.toggle('model-grid', Boolean(model));
  dom.headsLegend.hidden = true;
  if (H === 1) {
    dom.headsGrid.hidden = true;
    return;
  }
  dom.headsGrid.hidden = false;
  if (model) {
    layOutModelGrid(model, gridKey(kind, model));
  } else {
    dom.headsGrid.classList.toggle('many', H > 8);
    for (const head of ['avg', ...Array.from({ length: H }, (_, h) => h)]) {
      const button = thumbnail(head, `${headName(head, H)}: hover to view, click to lock`);
      button.dataset.head = String(head);
      button.querySelector('span').textContent = head === 'avg' ? 'average' : `head ${head + 1}`;
      dom.headsGrid.append(button);
    }
  }
  syncThumbnailState();
}

/**
 * A thumbnail button for `head` (flat index, or 'avg'): its picture (a canvas, or in a model's grid
 * the box its layer's canvas draws it over) and a caption, hover and click.
 */
function thumbnail(head, label, picture = document.createElement('canvas')) {
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'thumb';
  button.dataset.index = String(head);
  button.setAttribute('aria-pressed', 'false');
  button.setAttribute('aria-label', label);
  picture.setAttribute('aria-hidden', 'true');
  button.append(picture, document.createElement('span'));
  button.addEventListener('pointerenter', () => setHoverHead(head));
  button.addEventListener('pointerleave', () => setHoverHead(null));
  button.addEventListener('click', () => {
    // A model always shows one head: a click locks it (the average's button toggles).
    state.lockedHead = state.lockedHead === head && !state.shown.model ? null : head;
    state.guided = false;
    syncThumbnailState();
    render();
  });
  return button;
}

/**
 * A model's heads as a layers × heads grid (bertviz's model view): a row a layer, the heads' labels
 * above; each cell (data-layer, data-head, 1-based) captioned with its standard induction score.
 */
function buildModelGrid(model) {
  dom.headsGrid.style.setProperty('--heads', model.heads);
  const label = (text, className) => {
    const span = document.createElement('span');
    span.className = className;
    span.textContent = text;
    return span;
  };
  forgetModelGrid();
  const children = [document.createElement('span')];
  for (let head = 1; head <= model.heads; head++) children.push(label(`H${head}`, 'grid-label head-label'));
  for (let layer = 0; layer < model.layers; layer++) {
    children.push(label(`L${layer + 1}`, 'grid-label'));
    for (let head = 0; head < model.heads; head++) {
      const index = layer * model.heads + head;
      const picture = document.createElement('span');
      picture.className = 'picture';
      const button = thumbnail(index, modelHeadTitle(index, model), picture);
      button.classList.add('grid-cell');
      button.dataset.layer = String(layer + 1);
      button.dataset.head = String(head + 1);
      button.title = modelHeadTitle(index, model);
      const caption = button.lastElementChild;
      caption.className = 'scores';
      caption.textContent = cellCaption(model, index);
      modelGrid.cells.push(button);
    }
    children.push(...modelGrid.cells.slice(layer * model.heads));
    const pictures = document.createElement('canvas');
    pictures.className = 'layer-pictures';
    pictures.dataset.layer = String(layer + 1);
    pictures.setAttribute('aria-hidden', 'true');
    // Its row alone, below the heads' labels: an absolutely placed grid item's missing end line
    // would be the grid's edge.
    pictures.style.gridRow = `${layer + 2} / ${layer + 3}`;
    modelGrid.canvases.push(pictures);
    children.push(pictures);
  }
  modelGrid.drawn = new Uint8Array(modelGrid.cells.length);
  dom.headsGrid.replaceChildren(...children);
  modelGrid.resized.observe(modelGrid.canvases[0]);
}

function forgetModelGrid() {
  modelGrid.resized.disconnect();
  modelGrid.cells = [];
  modelGrid.canvases = [];
  modelGrid.drawn = new Uint8Array(0);
  modelGrid.geometry = null;
  modelGrid.missed = false;
}

/**
 * The cells' titles follow the scores on the text, which change with every text, and their
 * captions the standard scores, which a grid drawn layer by layer may not have had yet.
 */
function updateModelTitles() {
  if (!state.shown?.model) return;
  for (const button of dom.headsGrid.querySelectorAll('.grid-cell')) {
    const index = Number(button.dataset.index);
    button.querySelector('.scores').textContent = cellCaption(state.shown.model, index);
    button.title = modelHeadTitle(index);
    button.setAttribute('aria-label', button.title);
  }
  showScores();
}

const headOf = (button) => (button.dataset.index === 'avg' ? 'avg' : Number(button.dataset.index));

function syncThumbnailState() {
  for (const button of dom.headsGrid.querySelectorAll('.thumb')) {
    const head = headOf(button);
    button.setAttribute('aria-pressed', String(state.lockedHead === head));
    button.classList.toggle('viewing', shownHead() === head);
  }
}

// The CSS width every thumbnail's canvas shares, read before a loop draws any: a read after a
// canvas was resized forces a layout of the page, once a thumbnail.
const thumbnailWidth = () => dom.headsGrid.querySelector('canvas')?.clientWidth;

function renderThumbnails() {
  if (!state.shown || state.shown.H === 1) return;
  if (modelGrid.cells.length) {
    for (let index = 0; index < modelGrid.cells.length; index++) drawCell(index, pictureOf(index));
    return;
  }
  const width = thumbnailWidth();
  for (const button of dom.headsGrid.querySelectorAll('.thumb')) drawThumbnail(button.querySelector('canvas'), pictureOf(headOf(button)), width);
}

/** What drawPicture draws of `head`'s view. */
function pictureOf(head) {
  const { weights, masked, grid, top } = viewOf(head);
  return { weights, masked, n: grid.rows, m: grid.cols, top };
}

function setHoverHead(head) {
  if (state.hoverHead === head) return;
  state.hoverHead = head;
  syncThumbnailState();
  render();
}

/** Why token query `row` may not see token key `col`. */
function maskReasons(row, col) {
  const r = state.shown;
  const { causal, padding, custom } = r.request;
  const reasons = [];
  if (col >= r.n) return reasons; // bias_k / zero-attention keys are always attendable
  if (causal && col > row) reasons.push('causal');
  if (padding && col >= r.lengths[state.sentence]) reasons.push('padding');
  if (custom && custom[row * r.n + col]) reasons.push('custom');
  return reasons;
}

/** The token indices a view cell covers: [first query, last query, first key, last key]. */
function cellTokens({ row, col }, { grid }) {
  return [...cellSpan(grid.row, grid.rowEnd, grid.step, row), ...cellSpan(grid.col, grid.colEnd, grid.step, col)];
}

function describeCell(cell, view) {
  const k = cell.row * view.grid.cols + cell.col;
  const [i, iLast, j, jLast] = cellTokens(cell, view);
  if (view.grid.step > 1) {
    const state = view.masked[k] ? `all masked (${maskReasons(iLast, j).join(', ')})` : `largest weight ${view.weights[k].toFixed(4)}`;
    return `Queries ${i}–${iLast} → keys ${j}–${jLast} (${view.grid.step} × ${view.grid.step} tokens a cell): ${state}`;
  }
  const state = view.masked[k] ? `masked (${maskReasons(i, j).join(', ')})` : 'not masked';
  return `Query “${visible(view.rowTokens[i])}” (${i}) → key “${visible(view.colTokens[j])}” (${j}): ` +
    `weight ${view.weights[k].toFixed(4)}, ${state}`;
}

function activeQuery() {
  return state.linesHover ?? state.hoverCell?.row ?? state.cursor?.row ?? state.lockedQuery;
}

/** What the neuron view computes for `head` and `query` of the result shown (see runner.js). */
function neuronSelection(r, head, query) {
  const tokens = r.tokens[state.sentence];
  const common = { seq: r.id, tokens, query };
  // The trained model reads characters: its tokens are its text.
  if (r.model) return { ...common, kind: r.kind, text: r.model.text ?? tokens.join(''), ...modelHead(head, r.model.heads) };
  return { ...common, kind: r.kind, request: r.request, sentence: state.sentence, head };
}

/**
 * A model's text coloured by one query's weights over it (CircuitsVis' coloured tokens): the query
 * pointed at or locked, else the last; each token's background its weight on a scale from 0 to the
 * row's largest weight, whatever the heatmap's (over 40 tokens and more a row's weights are small:
 * on a scale to 1 they would all be one dark colour). Needs one token a cell: a picture of several
 * tokens a cell holds no single query's row.
 */
function drawText(view, query) {
  const r = state.shown;
  if (!r.model) return;
  const { grid } = view;
  if (grid.step > 1) {
    dom.textQuery.textContent = `The map shows ${grid.step} × ${grid.step} tokens a cell: zoom in to one token a cell to read a query's weights over the text.`;
    dom.textView.replaceChildren();
    return;
  }
  const row = query ?? grid.rows - 1;
  const i = grid.row + row;
  const generatedFrom = r.kind === 'model' && state.generatedFrom !== null ? state.generatedFrom : r.n;
  let largest = 0;
  for (let k = row * grid.cols; k < (row + 1) * grid.cols; k++) if (!view.masked[k] && view.weights[k] > largest) largest = view.weights[k];
  const texts = tokensAsText(view.colTokens.slice(0, r.n), r.model.modelType === 'bert');
  const spans = texts.map((text, j) => {
    const span = document.createElement('span');
    span.className = 'text-token';
    span.textContent = text;
    span.dataset.token = String(j);
    const k = j - grid.col;
    if (k < 0 || k >= grid.cols) {
      span.classList.add('masked');
      span.title = 'outside the zoomed window';
    } else if (view.masked[row * grid.cols + k]) {
      span.classList.add('masked');
      span.title = 'masked: a later token';
    } else {
      const weight = view.weights[row * grid.cols + k];
      const [red, green, blue] = colourOf(largest > 0 ? weight / largest : 0);
      span.style.background = `rgb(${red}, ${green}, ${blue})`;
      span.style.color = 0.299 * red + 0.587 * green + 0.114 * blue < 140 ? '#fff' : '#111';
      span.dataset.weight = weight.toFixed(4);
      span.title = `weight ${weight.toFixed(4)}`;
    }
    if (j === i) span.classList.add('query');
    if (j >= generatedFrom) span.classList.add('generated');
    return span;
  });
  dom.textView.replaceChildren(...spans);
  dom.textQuery.textContent = `What token ${i} (“${visible(view.rowTokens[i])}”) reads in ${headName(view.head).toLowerCase()}, `
    + `coloured from 0 to its largest weight (${largest.toFixed(4)}): hover or click a row of the heatmap, or click a token.`;
}

let frame = 0;

/** Redraws on the next animation frame; pointer moves call this many times per frame. */
function scheduleRender() {
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

export function render() {
  if (!state.shown) return;
  if (frame) {
    cancelAnimationFrame(frame);
    frame = 0;
  }
  const r = state.shown;
  const head = shownHead();
  const view = viewOf(head);
  const cell = state.hoverCell ?? state.cursor;
  const query = activeQuery();
  state.layout = drawHeatmap(dom.canvas, view, { cell, row: query });
  const { left, top, cell: size, labelEvery, labelFont } = state.layout;
  dom.canvas.dataset.grid = JSON.stringify({ left, top, cell: size, labelEvery, labelFont });
  drawLegend(dom.legend, legendOf(view));

  const { grid } = view;
  const all = query === null && grid.rows * grid.cols <= ALL_LINES_LIMIT;
  // Too many for all: the last query, which sees every key under a causal mask.
  const last = grid.rows - 1;
  const queries = query !== null ? [query] : all ? Array.from({ length: grid.rows }, (_, i) => i) : [last];
  const heads = linesHeads(head);
  state.linesLayout = drawLines(dom.lines, {
    queryLabels: view.rowLabels,
    keyLabels: view.colLabels,
    heads: heads.map((h) => ({ weights: viewOf(h.head).weights, top: viewOf(h.head).top, colour: h.colour, emphasised: h.head === head })),
    masked: view.masked,
    queries,
    selected: query ?? (all ? null : last),
  });
  dom.lines.dataset.drawn = JSON.stringify({ ...state.linesLayout.drawn, heads: heads.map((h) => ({ ...h, emphasised: h.head === head })) });
  showLinesLegend(heads, head);

  const locked = state.hoverHead === null && state.lockedHead !== null ? ' (locked)' : '';
  const where = r.model ? r.model.name : `sentence ${state.sentence + 1} · ${KIND_NAMES[r.kind]}`;
  dom.viewTitle.textContent = `${headName(head)}${locked} · ${where}`;
  const output = cell && r.outputMaxAbs && grid.step === 1
    ? ` Output of this query: max |o| = ${formatNumber(r.outputMaxAbs[state.sentence * r.n + grid.row + cell.row])}.` : '';
  dom.readout.textContent = cell ? `${describeCell(cell, view)}.${output}` : 'Hover over a cell, or focus the heatmap and use the arrow keys.';
  // The neuron view keeps the last query pointed at, so that it can be read off the page; before
  // one is, the window's last query (the one the coloured text shows).
  if (query !== null) state.neuronQuery = grid.row + query * grid.step;
  neuronView.follow(head === 'avg' ? null : neuronSelection(r, head, state.neuronQuery ?? grid.rowEnd - 1));
  // The predictions follow a locked query only: each costs a forward, too much for every hover.
  hooks.onQuery(r, state.lockedQuery !== null ? grid.row + state.lockedQuery * grid.step : grid.rowEnd - 1);
  drawText(view, query);
  // Follows the locked head, not the hovered one: a line appearing and going above the grid would
  // move the grid under the pointer.
  dom.guide.hidden = !(state.guided && r.kind === 'model' && state.lockedHead === inductionHead(r.model));
  if (!dom.guide.hidden) {
    dom.guide.textContent = `${headName(state.lockedHead)} is an induction head. The verse is written twice: in the second copy, each ` +
      'character attends to the character that followed it in the first copy, the bright stripe below the diagonal. ' +
      'Hover the other heads to compare; type your own text, or open your own model.';
  }
  if (view.fullyMasked.length) {
    const rows = view.fullyMasked.map((i) => grid.row + i); // tokens (one a cell: the other kinds)
    const names = rows.slice(0, 8).map((i) => `“${view.rowTokens[i]}” (${i})`).join(', ');
    const more = rows.length > 8 ? ` and ${rows.length - 8} more` : '';
    const maxOut = Math.max(...rows.map((i) => r.outputMaxAbs[state.sentence * r.n + i]));
    dom.fullyMasked.textContent = `Fully masked queries: ${names}${more}. Their weights are all 0 and their ` +
      `output is the zero vector (max |o| = ${formatNumber(maxOut)}), where PyTorch would give NaN.`;
    dom.fullyMasked.hidden = false;
  } else {
    dom.fullyMasked.hidden = true;
  }
  dom.dims.textContent = `n = ${r.n}, m = ${r.m}, E = ${r.embedDim}` + (r.N > 1 ? `, lengths ${r.lengths.join(' and ')}` : '');
  syncZoom(view);
  dom.canvas.classList.toggle('editable', customEditing());
  dom.canvas.setAttribute('aria-label', `Attention weights, queries ${grid.row}–${grid.rowEnd - 1} by keys ${grid.col}–${grid.colEnd - 1}` +
    `${grid.step > 1 ? ` at ${grid.step} tokens a cell` : ''}, ${headName(head)}`);
}

/**
 * The heads the lines view draws with `head` shown: it alone, or with "every head of the layer"
 * on, its layer's heads (a model's) or every head (the other kinds'), each { head, colour }.
 */
function linesHeads(head) {
  const { H, model } = state.shown;
  if (!dom.linesHeads.checked || head === 'avg' || H === 1) return [{ head, colour: null }];
  const count = model ? model.heads : H;
  const first = model ? modelHead(head, model.heads).layer * model.heads : 0;
  return Array.from({ length: count }, (_, h) => ({ head: first + h, colour: headColour(h, count) }));
}

/** The lines view's key to its colours: a swatch a head, the one shown marked. */
function showLinesLegend(heads, shown) {
  dom.linesLegend.hidden = heads.length === 1;
  if (dom.linesLegend.hidden) return;
  const { model } = state.shown;
  dom.linesLegend.replaceChildren(...heads.map(({ head, colour }) => {
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.textContent = model ? `H${modelHead(head, model.heads).head + 1}` : `head ${head + 1}`;
    swatch.style.borderColor = `rgb(${colour.join(', ')})`;
    swatch.style.color = `rgb(${colour.join(', ')})`;
    swatch.classList.toggle('shown', head === shown);
    return swatch;
  }));
}

function syncSentenceChoice() {
  const r = state.shown;
  dom.sentenceChoice.hidden = r.N < 2;
  for (let b = 0; b < 2; b++) {
    const label = $(`#sentence-${b}-label`);
    if (b < r.N) {
      label.textContent = `${b + 1} (${r.lengths[b]} tokens)`;
      label.title = r.tokens[b].slice(0, 12).filter((t) => t !== PAD).join(' ');
    }
    $(`#sentence-${b}`).checked = b === state.sentence;
  }
}

function pointerCell(event) {
  const box = dom.canvas.getBoundingClientRect();
  return state.layout?.cellAt(event.clientX - box.left, event.clientY - box.top) ?? null;
}

const sameCell = (a, b) => (a === b) || (a && b && a.row === b.row && a.col === b.col);

/** Sets one custom-mask cell (token keys only) and asks for an update if it changed. */
function paintCell(cell, value) {
  if (!state.shown) return;
  const [row, , col] = cellTokens(cell, viewOf(shownHead()));
  if (col < state.shown.n && setCustomCell(row, col, value)) requestUpdate();
}

/** Whether the user masked the token cell under a view cell. */
function customAt(cell) {
  const [row, , col] = cellTokens(cell, viewOf(shownHead()));
  return isCustomCell(row, col);
}

function onHeatmapPointerDown(event) {
  const cell = pointerCell(event);
  if (!cell || event.button !== 0) return;
  // A tap has no hover: it puts the cursor on the cell, so that the readout stays.
  if (event.pointerType === 'touch') state.cursor = cell;
  if (customEditing()) {
    event.preventDefault();
    dom.canvas.setPointerCapture(event.pointerId);
    state.painting = { value: customAt(cell) ? 0 : 1 };
    paintCell(cell, state.painting.value);
  } else {
    state.lockedQuery = state.lockedQuery === cell.row ? null : cell.row;
    scheduleRender();
  }
}

function onHeatmapPointerMove(event) {
  const cell = pointerCell(event);
  if (state.painting && cell) paintCell(cell, state.painting.value);
  if (!sameCell(cell, state.hoverCell)) {
    state.hoverCell = cell;
    scheduleRender();
  }
}

function endPainting() {
  state.painting = null;
}

const KEY_MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

function onHeatmapKey(event) {
  if (!state.shown) return;
  const { rows: n, cols: m } = viewOf(shownHead()).grid;
  const move = KEY_MOVES[event.key];
  if (event.key === '+' || event.key === '=' || event.key === '-') {
    event.preventDefault();
    zoom(event.key === '-' ? 2 : 0.5);
    return;
  }
  if (move) {
    event.preventDefault();
    const step = event.shiftKey ? 10 : 1;
    const clamp = (v, max) => Math.min(max - 1, Math.max(0, v));
    state.hoverCell = null; // the latest input wins until the pointer moves again
    state.cursor = state.cursor
      ? { row: clamp(state.cursor.row + move[0] * step, n), col: clamp(state.cursor.col + move[1] * step, m) }
      : { row: 0, col: 0 };
    render();
  } else if ((event.key === 'Enter' || event.key === ' ') && state.cursor) {
    event.preventDefault();
    if (customEditing()) {
      paintCell(state.cursor, customAt(state.cursor) ? 0 : 1);
    } else {
      state.lockedQuery = state.lockedQuery === state.cursor.row ? null : state.cursor.row;
      render();
    }
  } else if (event.key === 'Escape') {
    state.cursor = null;
    state.lockedQuery = null;
    render();
  }
}

function linesQuery(event) {
  const box = dom.lines.getBoundingClientRect();
  return state.linesLayout?.queryAt(event.clientX - box.left, event.clientY - box.top) ?? null;
}

function onLinesKey(event) {
  if (!state.shown) return;
  const delta = event.key === 'ArrowUp' ? -1 : event.key === 'ArrowDown' ? 1 : 0;
  if (delta) {
    event.preventDefault();
    const { rows } = viewOf(shownHead()).grid;
    const current = state.lockedQuery ?? (delta > 0 ? -1 : rows);
    state.lockedQuery = Math.min(rows - 1, Math.max(0, current + delta));
    render();
  } else if (event.key === 'Escape') {
    state.lockedQuery = null;
    render();
  }
}

/**
 * Shows `window` ({ row, col, size } in tokens; null = the whole map): at once from the weights the
 * page holds, the cursor and the locked query kept on their tokens when the window still holds
 * them; or through the worker when the result is a picture (the model's texts longer than one).
 */
function setZoom(window) {
  const r = state.shown;
  const before = viewOf(shownHead()).grid;
  const moved = window && window.size < Math.max(r.n, r.m) ? gridOf(r.n, r.m, window, Infinity) : null;
  state.zoom = moved && { row: moved.row, col: moved.col, size: window.size }; // moved inside the map
  state.hoverCell = null;
  if (!isWhole(r.grid, r.n, r.m)) {
    state.cursor = null;
    state.lockedQuery = null;
    requestUpdate();
    return;
  }
  resetViews();
  const after = viewOf(shownHead()).grid; // one token a cell, before and after
  const inside = (index, start, end) => (index >= start && index < end ? index - start : null);
  if (state.cursor) {
    const row = inside(before.row + state.cursor.row, after.row, after.rowEnd);
    const col = inside(before.col + state.cursor.col, after.col, after.colEnd);
    state.cursor = row === null || col === null ? null : { row, col };
  }
  if (state.lockedQuery !== null) state.lockedQuery = inside(before.row + state.lockedQuery, after.row, after.rowEnd);
  renderThumbnails();
  render();
}

/**
 * Zooms by `factor` (½ in, 2 out) around the cell under the pointer or the cursor, else the
 * locked query on the diagonal, else the middle of the window. The size comes from the zoom asked
 * for, which may still be on its way from the worker.
 */
function zoom(factor) {
  const r = state.shown;
  if (!r) return;
  const { grid } = viewOf(shownHead());
  const asked = gridOf(r.n, r.m, state.zoom, Infinity);
  const before = Math.max(asked.rowEnd - asked.row, asked.colEnd - asked.col);
  const size = Math.min(Math.max(r.n, r.m), Math.max(MIN_WINDOW, Math.round(before * factor)));
  if (size === before) return;
  const cell = state.hoverCell ?? state.cursor;
  const query = state.lockedQuery === null ? null : grid.row + (state.lockedQuery + 0.5) * grid.step;
  const centre = cell ? [grid.row + (cell.row + 0.5) * grid.step, grid.col + (cell.col + 0.5) * grid.step]
    : query !== null ? [query, query]
      : [(asked.row + asked.rowEnd) / 2, (asked.col + asked.colEnd) / 2];
  setZoom({ row: Math.round(centre[0] - size / 2), col: Math.round(centre[1] - size / 2), size });
}

/** The zoom buttons and the note on what the window holds. */
function syncZoom({ grid }) {
  const r = state.shown;
  const whole = grid.row === 0 && grid.col === 0 && grid.rowEnd === r.n && grid.colEnd === r.m; // at any step
  dom.zoomIn.disabled = Math.max(grid.rowEnd - grid.row, grid.colEnd - grid.col) <= MIN_WINDOW;
  dom.zoomOut.disabled = whole;
  dom.zoomFit.disabled = whole;
  dom.zoomNote.value = `${whole ? 'whole map' : `queries ${grid.row}–${grid.rowEnd - 1} × keys ${grid.col}–${grid.colEnd - 1}`}` +
    `${grid.step > 1 ? `, ${grid.step} × ${grid.step} tokens a cell` : ''}`;
}

const hooks = { onQuery: () => {} };

/**
 * Follows the pointer and keys on the view; `onSentence()` runs when another sentence is chosen,
 * `onQuery(result, query)` at each redraw with the query locked (a token; none: the window's
 * last); `guided`: the page opens on the guided first run.
 */
export function bindHeatmap({ onSentence, onQuery, guided }) {
  state.guided = guided;
  hooks.onQuery = onQuery;
  dom.sentenceChoice.addEventListener('change', (event) => {
    state.sentence = Number(event.target.value);
    resetViews();
    renderThumbnails();
    render();
    onSentence();
  });
  dom.linesHeads.addEventListener('change', () => {
    if (state.shown) render();
  });
  dom.scale.addEventListener('change', () => {
    state.scale = dom.scale.value;
    if (!state.shown) return;
    resetViews();
    renderThumbnails();
    render();
  });

  dom.zoomIn.addEventListener('click', () => zoom(0.5));
  dom.zoomOut.addEventListener('click', () => zoom(2));
  dom.zoomFit.addEventListener('click', () => setZoom(null));
  dom.canvas.addEventListener('pointerdown', onHeatmapPointerDown);
  dom.canvas.addEventListener('pointermove', onHeatmapPointerMove);
  dom.canvas.addEventListener('pointerup', endPainting);
  dom.canvas.addEventListener('pointercancel', endPainting);
  dom.canvas.addEventListener('pointerleave', () => {
    if (state.hoverCell) {
      state.hoverCell = null;
      scheduleRender();
    }
  });
  dom.canvas.addEventListener('keydown', onHeatmapKey);
  dom.canvas.addEventListener('blur', () => {
    if (state.cursor) {
      state.cursor = null;
      scheduleRender();
    }
  });
  dom.lines.addEventListener('pointermove', (event) => {
    const query = linesQuery(event);
    if (query !== state.linesHover) {
      state.linesHover = query;
      scheduleRender();
    }
  });
  dom.lines.addEventListener('pointerleave', () => {
    state.linesHover = null;
    scheduleRender();
  });
  dom.lines.addEventListener('click', (event) => {
    const query = linesQuery(event);
    if (query === null) return;
    state.lockedQuery = state.lockedQuery === query ? null : query;
    scheduleRender();
  });
  dom.lines.addEventListener('keydown', onLinesKey);
  dom.textView.addEventListener('click', (event) => {
    const token = event.target.closest('.text-token');
    if (!token || !state.shown) return;
    const { grid } = viewOf(shownHead());
    const row = Number(token.dataset.token) - grid.row;
    if (row < 0 || row >= grid.rows) return;
    state.lockedQuery = row;
    render();
  });

  // The canvases follow their CSS width; redraw at the new size rather than stretching pixels.
  let lastWidth = 0;
  new ResizeObserver(() => {
    if (dom.canvas.clientWidth !== lastWidth) {
      lastWidth = dom.canvas.clientWidth;
      render();
    }
  }).observe(dom.canvas);
}

// Canvas rendering of attention weights: the large labelled [n, m] heatmap, per-head thumbnails and
// the colour legend. Knows nothing of the attention package; it draws numbers and a mask.
//
// Cost does not grow with DOM nodes: the cells are one ImageData of n x m pixels scaled up without
// smoothing (or max-pooled down to the pixels there are, so no peak is skipped), and the mask is
// drawn by scaling a second n x m image (masked = opaque) and filling it with a hatch pattern
// ('source-in'), so hatching works at any cell size. The finished picture is
// kept in an offscreen canvas and only the hover highlight is redrawn on pointer moves.

import { allPool, cellSpan, evenBins, maxPool } from './grid.js';

// Viridis (matplotlib), 9 evenly spaced stops: perceptually uniform and readable in greyscale,
// so a weight near 0 (dark purple) never looks like a masked cell (light grey, hatched).
const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

/** How masked cells look: by the chosen mask kind, or by the user's own clicks. */
export const MASK_STYLE = {
  structural: { fill: [226, 228, 232], hatch: '#7d8592', label: 'masked' },
  custom: { fill: [253, 226, 208], hatch: '#c2410c', label: 'masked by you' },
};
const FULLY_MASKED_COLOUR = '#a4161a';

/** Colour of a weight in [0, 1] as [r, g, b]. */
export function colourOf(t) {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
}

const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;
const packed = ([r, g, b]) => ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0; // little-endian RGBA

// 256 colours as packed RGBA for ImageData writes; weight w in row i maps to LUT[round(255 * w / top[i])],
// where top[i] is the top of the colour scale for that row (1, the view's largest weight, or the row's).
const LUT = Uint32Array.from({ length: 256 }, (_, k) => packed(colourOf(k / 255)));
const MASKED_PIXEL = packed(MASK_STYLE.structural.fill);
const CUSTOM_PIXEL = packed(MASK_STYLE.custom.fill);

// Relative luminance decides whether a label on a cell is drawn dark or light.
const isLight = ([r, g, b]) => 0.2126 * r + 0.7152 * g + 0.0722 * b > 140;

export const ratioOf = () => globalThis.devicePixelRatio || 1;

// Token labels are thinned to every 2nd, 3rd or 4th token before the axes fall back to index ticks.
const MAX_LABEL_EVERY = 4;
// The smallest label font, and the space a label needs along its axis (a line of it).
const MIN_LABEL_FONT = 9;
const LABEL_LINE = 1.2;

function makeCanvas(width, height) {
  const canvas = document.createElement('canvas');
  canvas.width = Math.max(1, Math.round(width));
  canvas.height = Math.max(1, Math.round(height));
  return canvas;
}

/**
 * Sizes the canvas' backing store to cssWidth x cssHeight times devicePixelRatio. Its CSS height
 * follows from the width attribute ratio (style.css: height auto), so no style attribute is set.
 */
function prepare(canvas, cssWidth, cssHeight, ratio = ratioOf()) {
  canvas.width = Math.max(1, Math.round(cssWidth * ratio));
  canvas.height = Math.max(1, Math.round(cssHeight * ratio));
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, cssWidth, cssHeight);
  return ctx;
}

function fontOf(canvas, size) {
  const style = getComputedStyle(canvas);
  return `${Math.round(size ?? parseFloat(style.fontSize))}px ${style.fontFamily}`;
}

const patterns = new Map();
/** A diagonal-line pattern of `colour`, `spacing` device pixels apart, for contexts without a transform. */
function hatchPattern(ctx, colour, spacing) {
  const key = `${colour}/${spacing}`;
  if (!patterns.has(key)) {
    const tile = makeCanvas(spacing, spacing);
    const t = tile.getContext('2d');
    t.strokeStyle = colour;
    t.lineWidth = Math.max(1, spacing / 6);
    t.beginPath();
    // One diagonal and the two corner pieces that make it continuous across tiles.
    t.moveTo(-1, spacing + 1);
    t.lineTo(spacing + 1, -1);
    t.moveTo(-1, 1);
    t.lineTo(1, -1);
    t.moveTo(spacing - 1, spacing + 1);
    t.lineTo(spacing + 1, spacing - 1);
    t.stroke();
    patterns.set(key, tile);
  }
  return ctx.createPattern(patterns.get(key), 'repeat');
}

/** The opaque pixels of `alpha` (an n x m image) scaled to w x h device px and hatched: a layer to draw. */
function hatchedLayer(alpha, w, h, colour, spacing) {
  const layer = makeCanvas(w, h);
  const ctx = layer.getContext('2d');
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(alpha, 0, 0, layer.width, layer.height);
  ctx.globalCompositeOperation = 'source-in';
  ctx.fillStyle = hatchPattern(ctx, colour, spacing);
  ctx.fillRect(0, 0, layer.width, layer.height);
  return layer;
}

// The hatched mask layers of the last heatmap drawn and what they were drawn from: the model's
// updates keep one mask (causal, of the same size) while the weights change, and hatching it again
// took a fifth of a draw.
let lastHatching = null; // { key, structural, custom }

/** The cells' masks hatched at w x h device px: { structural, custom } layers, null where none is masked. */
function hatching(cells, w, h, spacing) {
  // FNV-1a over both masks, with the sizes: a key that reads each byte once (under a millisecond).
  let hash = 0x811c9dc5;
  for (const mask of [cells.masked, cells.custom]) {
    if (!mask) continue;
    for (let k = 0; k < mask.length; k++) hash = Math.imul(hash ^ mask[k], 0x01000193);
  }
  const key = `${hash} ${cells.custom ? 'custom' : ''} ${cells.n} ${cells.m} ${w} ${h} ${spacing}`;
  if (lastHatching?.key !== key) {
    const masks = maskImages(cells);
    const layer = (alpha, style) => alpha && hatchedLayer(alpha, w, h, style.hatch, spacing);
    lastHatching = { key, structural: layer(masks.structural, MASK_STYLE.structural), custom: layer(masks.custom, MASK_STYLE.custom) };
  }
  return lastHatching;
}

/** A hatched swatch in CSS px on a context that has the devicePixelRatio transform. */
function hatchRect(ctx, x, y, w, h, style) {
  ctx.save();
  ctx.fillStyle = css(style.fill);
  ctx.fillRect(x, y, w, h);
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = style.hatch;
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let o = -h; o < w; o += 5) {
    ctx.moveTo(x + o, y + h);
    ctx.lineTo(x + o + h, y);
  }
  ctx.stroke();
  ctx.restore();
}

const pooledMasks = new WeakMap(); // a view's mask -> { key: its sizes, out: the pooled mask }

/**
 * The [n, m] cells of a view pooled to at most rows × cols pixels, for drawing: each pixel the
 * largest weight of its cells over their row's top of the scale (so a sharp peak is never skipped,
 * as scaling the image down would), masked (or masked by the user) where all of them are.
 * → { weights, masked, custom, top, n, m } of the pooled picture, or the view's own when it fits.
 */
function pooled({ weights, masked, custom, top }, n, m, rows, cols) {
  if (rows >= n && cols >= m) return { weights, masked, custom, top, n, m };
  const th = Math.max(1, Math.min(n, rows));
  const tw = Math.max(1, Math.min(m, cols));
  const rowBin = evenBins(n, th);
  const columns = { first: 0, bins: evenBins(m, tw) };
  const best = new Float32Array(tw * th);
  // One top for every row ('0 to 1', '0 to max shown') is applied after pooling, not to each weight.
  const uniform = top.every((t) => t === top[0]);
  maxPool(weights, n, m, rowBin, columns, tw, best, uniform ? null : top.map((t) => 1 / t));
  const all = (mask) => {
    if (!mask) return null;
    // Every head of a view shares its mask: pooled once for all of their thumbnails.
    const key = `${n} ${m} ${th} ${tw}`;
    const known = pooledMasks.get(mask);
    if (known?.key === key) return known.out;
    const out = new Uint8Array(tw * th).fill(1);
    allPool(mask, n, m, rowBin, columns, tw, out);
    pooledMasks.set(mask, { key, out });
    return out;
  };
  return { weights: best, masked: all(masked), custom: all(custom), top: new Float32Array(th).fill(uniform ? top[0] : 1), n: th, m: tw };
}

/** The cells' colours as an m × n image, masked cells in their mask's fill. */
function colourPixels({ weights, masked, custom, top, n, m }) {
  const image = new ImageData(m, n);
  const pixels = new Uint32Array(image.data.buffer);
  let scale = 0;
  for (let k = 0; k < n * m; k++) {
    if (k % m === 0) scale = 255 / top[k / m];
    if (masked[k]) {
      pixels[k] = custom && custom[k] ? CUSTOM_PIXEL : MASKED_PIXEL;
    } else {
      const w = weights[k];
      pixels[k] = LUT[w > 0 ? Math.min(255, Math.round(w * scale)) : 0];
    }
  }
  return image;
}

// colourImage's canvas, used again by every call: each caller draws it at once. A canvas a call
// cost more in getContext than the picture did (a model's grid draws hundreds).
let scratch = null;

/** The cells' colours (colourPixels) on a canvas of their size, to be drawn at once. */
function colourImage(cells) {
  const image = colourPixels(cells);
  scratch ??= makeCanvas(image.width, image.height);
  if (scratch.width !== image.width || scratch.height !== image.height) [scratch.width, scratch.height] = [image.width, image.height];
  scratch.getContext('2d').putImageData(image, 0, 0);
  return scratch;
}

/** One m × n alpha image per mask style (opaque = masked that way), null when no cell is. */
function maskImages({ masked, custom, n, m }) {
  const structural = new ImageData(m, n);
  const mine = new ImageData(m, n);
  const sAlpha = new Uint32Array(structural.data.buffer);
  const cAlpha = new Uint32Array(mine.data.buffer);
  let anyStructural = false;
  let anyCustom = false;
  for (let k = 0; k < n * m; k++) {
    if (!masked[k]) continue;
    if (custom && custom[k]) {
      cAlpha[k] = 0xff000000;
      anyCustom = true;
    } else {
      sAlpha[k] = 0xff000000;
      anyStructural = true;
    }
  }
  const toCanvas = (data, any) => {
    if (!any) return null;
    const canvas = makeCanvas(m, n);
    canvas.getContext('2d').putImageData(data, 0, 0);
    return canvas;
  };
  return { structural: toCanvas(structural, anyStructural), custom: toCanvas(mine, anyCustom) };
}

const TICK_STEPS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/**
 * Lays the grid out in `width` CSS px: token labels when cells are tall enough to read them, or on
 * every `step`-th token (up to MAX_LABEL_EVERY) when they are not; otherwise index ticks every
 * `step` tokens.
 */
function layOut(canvas, { rowLabels, colLabels, grid }, width) {
  const ctx = canvas.getContext('2d');
  const base = parseFloat(getComputedStyle(canvas).fontSize);
  const n = rowLabels.length;
  const m = colLabels.length;
  const pad = 8;
  const gutter = 7; // the fully-masked marker strip between the row labels and the grid
  const attempt = (fontSize, labels, every = 1) => {
    ctx.font = fontOf(canvas, fontSize);
    const widest = (list) => Math.ceil(Math.max(0, ...list.map((s) => ctx.measureText(s).width)));
    const rows = labels ? rowLabels : [String(grid.rowEnd - 1)];
    const cols = labels ? colLabels : [String(grid.colEnd - 1)];
    const left = widest(rows) + pad + gutter;
    const available = width - left - pad;
    let cell = available / Math.max(1, m);
    if (cell >= 1) cell = Math.floor(cell);
    const colWidth = widest(cols);
    const rotate = labels && colWidth > cell * every - 4;
    const top = (rotate ? colWidth : Math.ceil(fontSize * LABEL_LINE)) + 2 * pad;
    return { fontSize, labels, left, top, cell, rotate, pad, gutter, step: labels ? every : tickStep(cell) };
  };
  function tickStep(cell) {
    return TICK_STEPS.find((s) => s * cell >= 28) ?? 512;
  }
  // Cells of several tokens are labelled by token index.
  if (grid.step > 1) return attempt(11, false);
  let layout = attempt(base, true);
  if (layout.cell < base * LABEL_LINE) layout = attempt(Math.max(MIN_LABEL_FONT, Math.floor(layout.cell / LABEL_LINE)), true);
  if (layout.cell >= MIN_LABEL_FONT) return layout;
  // Too small for a label a cell: a label every few tokens still names them (at 64 tokens, every 2nd).
  const every = Math.ceil((MIN_LABEL_FONT * LABEL_LINE) / layout.cell);
  return every <= MAX_LABEL_EVERY ? attempt(MIN_LABEL_FONT, true, every) : attempt(11, false);
}

function drawBase(canvas, view, width, ratio) {
  const { rowLabels, colLabels, weights, masked, fullyMasked } = view;
  const n = rowLabels.length;
  const m = colLabels.length;
  const textColour = getComputedStyle(canvas).color;
  const { fontSize, labels, left, top, cell, rotate, pad, gutter, step } = layOut(canvas, view, width);
  // Index labels name each cell's first token.
  const { grid } = view;
  const rowIndex = (i) => String(cellSpan(grid.row, grid.rowEnd, grid.step, i)[0]);
  const colIndex = (j) => String(cellSpan(grid.col, grid.colEnd, grid.step, j)[0]);
  const gridW = cell * m;
  const gridH = cell * n;
  const height = Math.ceil(top + gridH + pad);
  const base = makeCanvas(width * ratio, height * ratio);
  const ctx = base.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.font = fontOf(canvas, fontSize);
  ctx.fillStyle = textColour;

  // Row labels (queries) right-aligned against the gutter; column labels (keys) above the grid.
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let i = 0; i < n; i += step) {
    ctx.fillText(labels ? rowLabels[i] : rowIndex(i), left - gutter - 2, top + (i + (labels ? 0.5 : 0)) * cell);
  }
  for (let j = 0; j < m; j += step) {
    const x = left + (j + (labels ? 0.5 : 0)) * cell;
    const text = labels ? colLabels[j] : colIndex(j);
    if (rotate) {
      ctx.save();
      ctx.translate(x, top - pad);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.textBaseline = 'middle';
      ctx.fillText(text, 0, 0);
      ctx.restore();
    } else {
      ctx.textAlign = labels ? 'center' : 'left';
      ctx.textBaseline = 'bottom';
      ctx.fillText(text, x, top - pad);
    }
  }
  if (!labels) {
    // Tick marks for the index labels.
    ctx.strokeStyle = textColour;
    ctx.beginPath();
    for (let i = 0; i < n; i += step) {
      ctx.moveTo(left - gutter, top + i * cell + 0.5);
      ctx.lineTo(left - 1, top + i * cell + 0.5);
    }
    for (let j = 0; j < m; j += step) {
      ctx.moveTo(left + j * cell + 0.5, top - pad + 2);
      ctx.lineTo(left + j * cell + 0.5, top - 1);
    }
    ctx.stroke();
  }

  // Cells and mask hatching, in device pixels.
  const gx = Math.round(left * ratio);
  const gy = Math.round(top * ratio);
  const gw = Math.round(gridW * ratio);
  const gh = Math.round(gridH * ratio);
  const cells = pooled(view, n, m, gh, gw);
  ctx.save();
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(colourImage(cells), gx, gy, gw, gh);
  const { structural, custom } = hatching(cells, gw, gh, Math.round(6 * ratio));
  for (const layer of [structural, custom]) if (layer) ctx.drawImage(layer, gx, gy);
  ctx.restore();

  // Values, when a cell can hold "0.00".
  ctx.font = fontOf(canvas, Math.min(15, Math.max(11, cell * 0.18)));
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  if (ctx.measureText('0.00').width < cell - 6) {
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        const k = i * m + j;
        if (masked[k]) continue;
        ctx.fillStyle = isLight(colourOf(weights[k] / view.top[i])) ? '#111' : '#fff';
        ctx.fillText(weights[k].toFixed(2), left + (j + 0.5) * cell, top + (i + 0.5) * cell);
      }
    }
  }

  // Thin grid lines keep neighbouring cells of similar colour apart.
  if (cell >= 10) {
    ctx.strokeStyle = 'rgba(255, 255, 255, 0.6)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 0; i <= n; i++) {
      ctx.moveTo(left, top + i * cell + 0.5);
      ctx.lineTo(left + gridW, top + i * cell + 0.5);
    }
    for (let j = 0; j <= m; j++) {
      ctx.moveTo(left + j * cell + 0.5, top);
      ctx.lineTo(left + j * cell + 0.5, top + gridH);
    }
    ctx.stroke();
  }

  // Fully masked rows: a red strip in the gutter, and a label on the row when it is tall enough.
  ctx.font = fontOf(canvas, Math.min(13, Math.max(10, cell * 0.5)));
  for (const i of fullyMasked) {
    ctx.fillStyle = FULLY_MASKED_COLOUR;
    ctx.fillRect(left - gutter + 1, top + i * cell, 4, Math.max(1, cell));
    if (cell >= 16) {
      const text = 'fully masked: weights 0, output 0';
      const textWidth = Math.min(gridW - 8, ctx.measureText(text).width + 12);
      const x = left + gridW / 2;
      const y = top + (i + 0.5) * cell;
      ctx.fillStyle = 'rgba(255, 255, 255, 0.92)';
      ctx.fillRect(x - textWidth / 2, y - Math.min(cell, 20) / 2 + 1, textWidth, Math.min(cell, 20) - 2);
      ctx.fillStyle = FULLY_MASKED_COLOUR;
      ctx.fillText(text, x, y, gridW - 16);
    }
  }

  return {
    base,
    // labelEvery: a token label every this many cells (null: index ticks); labelFont its px.
    layout: { left, top, cell, n, m, width, height, labelEvery: labels ? step : null, labelFont: fontSize },
  };
}

const caches = new WeakMap();

/**
 * Draws the heatmap of one view and returns its layout for hit-testing (CSS px, relative to the
 * canvas). `view.version` must change whenever the view's data does; hover-only redraws reuse the
 * picture.
 * @param {HTMLCanvasElement} canvas
 * @param {{ version: number, rowLabels: string[], colLabels: string[], weights: ArrayLike<number>,
 *           masked: ArrayLike<number>, custom: ArrayLike<number> | null, fullyMasked: number[],
 *           top: Float32Array, grid: object }} view  top[i]: the top of the colour scale in row i
 *   (> 0); grid: the window of tokens the cells show (grid.js), for the index labels
 * @param {{ cell?: { row: number, col: number } | null, row?: number | null }} [highlight]
 * @param {number} [ratio]  device pixels a CSS pixel (the screen's; an export draws at 2 or more)
 */
export function drawHeatmap(canvas, view, highlight = {}, ratio = ratioOf()) {
  const width = Math.max(120, canvas.clientWidth || 480);
  let cache = caches.get(canvas);
  if (!cache || cache.version !== view.version || cache.width !== width || cache.ratio !== ratio) {
    cache = { version: view.version, width, ratio, ...drawBase(canvas, view, width, ratio) };
    caches.set(canvas, cache);
  }
  const { base, layout } = cache;
  const ctx = prepare(canvas, layout.width, layout.height, ratio);
  ctx.save();
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.drawImage(base, 0, 0);
  ctx.restore();

  const { left, top, cell, n, m } = layout;
  const textColour = getComputedStyle(canvas).color;
  if (highlight.row !== null && highlight.row !== undefined && highlight.row < n) {
    ctx.strokeStyle = 'rgba(59, 81, 139, 0.9)';
    ctx.lineWidth = 1.5;
    ctx.strokeRect(left - 0.75, top + highlight.row * cell - 0.75, cell * m + 1.5, Math.max(cell, 1) + 1.5);
  }
  const c = highlight.cell;
  if (c && c.row < n && c.col < m) {
    const size = Math.max(cell, 6);
    const x = left + c.col * cell - (size - cell) / 2;
    const y = top + c.row * cell - (size - cell) / 2;
    ctx.lineWidth = 2;
    ctx.strokeStyle = '#fff';
    ctx.strokeRect(x - 1, y - 1, size + 2, size + 2);
    ctx.strokeStyle = textColour;
    ctx.strokeRect(x - 3, y - 3, size + 6, size + 6);
  }
  return {
    ...layout,
    cellAt(x, y) {
      const col = Math.floor((x - left) / cell);
      const row = Math.floor((y - top) / cell);
      return row >= 0 && row < n && col >= 0 && col < m ? { row, col } : null;
    },
  };
}

/**
 * A small picture of one head: every pixel shows the largest weight (over the top of its row's
 * scale) of the cells it covers, so sparse peaks survive at 512 cells, or the mask colour when all
 * of them are masked. Drawn `size` device pixels a side with its top left corner at (x, y).
 * @param {CanvasRenderingContext2D} ctx
 * @param {{ weights: ArrayLike<number>, masked: ArrayLike<number>, n: number, m: number, top: Float32Array }} view
 */
export function drawPicture(ctx, { weights, masked, n, m, top }, x, y, size) {
  const cells = pooled({ weights, masked, custom: null, top }, n, m, size, size);
  // A picture of a pixel a cell is put in place; one of fewer cells is scaled up.
  if (cells.n === size && cells.m === size) {
    ctx.putImageData(colourPixels(cells), x, y);
    return;
  }
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(colourImage(cells), x, y, size, size);
}

/**
 * A head's picture alone on its canvas (drawPicture).
 * @param {HTMLCanvasElement} canvas
 * @param {number} cssWidth  the canvas's CSS width, read by the caller once for all its thumbnails
 */
export function drawThumbnail(canvas, view, cssWidth) {
  const px = Math.round(Math.max(16, cssWidth || 72) * ratioOf());
  canvas.width = px;
  canvas.height = px;
  drawPicture(canvas.getContext('2d'), view, 0, 0, px);
}

/** Tick labels for a scale from 0 to vmax, or in percent of each row's largest weight. */
function tickText(value, vmax, perRow) {
  if (perRow) return `${value * 100}%`;
  if (vmax === 1) return String(value);
  if (value === 0) return '0';
  return value >= 0.01 ? value.toFixed(Math.max(2, 2 - Math.floor(Math.log10(vmax)))) : value.toExponential(1);
}

/**
 * The colour scale from 0 to vmax with ticks, then the mask swatches that apply, wrapped to the
 * canvas width.
 * @param {HTMLCanvasElement} canvas
 * @param {{ vmax: number, perRow: boolean, custom: boolean, fullyMasked: boolean }} what
 *   perRow: each row is scaled to its own largest weight (vmax is then ignored)
 * @param {number} [ratio]  device pixels a CSS pixel, as drawHeatmap's
 */
export function drawLegend(canvas, { vmax = 1, perRow = false, custom = false, fullyMasked = false } = {}, ratio = ratioOf()) {
  const width = Math.max(160, canvas.clientWidth || 320);
  const fontSize = parseFloat(getComputedStyle(canvas).fontSize);
  const textColour = getComputedStyle(canvas).color;
  const measure = canvas.getContext('2d');
  measure.font = fontOf(canvas);
  const barHeight = 14;
  const line = Math.ceil(fontSize * 1.5);
  const swatch = 26;
  const items = [];
  if (perRow) items.push({ label: "colour: percent of the row's largest weight", draw: () => {}, plain: true });
  items.push({ label: MASK_STYLE.structural.label, draw: (ctx, x, y) => hatchRect(ctx, x, y, swatch, barHeight, MASK_STYLE.structural) });
  if (custom) items.push({ label: MASK_STYLE.custom.label, draw: (ctx, x, y) => hatchRect(ctx, x, y, swatch, barHeight, MASK_STYLE.custom) });
  if (fullyMasked) {
    items.push({
      label: 'fully masked row (weights 0, output 0)',
      draw: (ctx, x, y) => {
        ctx.fillStyle = FULLY_MASKED_COLOUR;
        ctx.fillRect(x + swatch / 2 - 2, y, 4, barHeight);
      },
    });
  }
  // Flow the swatches into lines.
  const placed = [];
  let x = 8;
  let row = 0;
  for (const item of items) {
    const w = (item.plain ? 0 : swatch + 6) + Math.ceil(measure.measureText(item.label).width) + 18;
    if (x + w > width && x > 8) {
      x = 8;
      row++;
    }
    placed.push({ ...item, x, row });
    x += w;
  }
  const swatchTop = barHeight + line + 8;
  const height = swatchTop + (row + 1) * (barHeight + 8);
  const ctx = prepare(canvas, width, height, ratio);
  ctx.font = fontOf(canvas);

  const barLeft = 8;
  const barWidth = width - 24;
  const gradient = ctx.createLinearGradient(barLeft, 0, barLeft + barWidth, 0);
  VIRIDIS.forEach((colour, k) => gradient.addColorStop(k / (VIRIDIS.length - 1), css(colour)));
  ctx.fillStyle = gradient;
  ctx.fillRect(barLeft, 0, barWidth, barHeight);
  ctx.fillStyle = textColour;
  ctx.strokeStyle = textColour;
  ctx.textBaseline = 'top';
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    const tx = barLeft + tick * barWidth;
    ctx.beginPath();
    ctx.moveTo(tx + 0.5, barHeight);
    ctx.lineTo(tx + 0.5, barHeight + 4);
    ctx.stroke();
    ctx.textAlign = tick === 0 ? 'left' : tick === 1 ? 'right' : 'center';
    ctx.fillText(tickText(perRow ? tick : tick * vmax, vmax, perRow), tx, barHeight + 6);
  }
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  for (const item of placed) {
    const y = swatchTop + item.row * (barHeight + 8);
    item.draw(ctx, item.x, y);
    ctx.fillStyle = textColour;
    ctx.fillText(item.label, item.x + (item.plain ? 0 : swatch + 6), y + barHeight / 2);
  }
}

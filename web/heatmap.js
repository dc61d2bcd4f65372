// Canvas rendering of attention weights: a labelled [n, m] heatmap and its colour legend.
// Knows nothing of the attention package; it draws numbers in [0, 1] and a mask.

// Viridis (matplotlib), 9 evenly spaced stops: perceptually uniform and readable in greyscale,
// so a weight near 0 (dark purple) never looks like a masked cell (grey, hatched).
const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

const MASKED_FILL = '#e2e4e8';
const MASKED_HATCH = '#9aa0aa';

/** Colour of a weight in [0, 1] as [r, g, b]. */
export function colourOf(weight) {
  const t = Math.min(1, Math.max(0, Number.isFinite(weight) ? weight : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(t));
  const f = t - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + f * (VIRIDIS[i + 1][k] - c)));
}

const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;

// Relative luminance decides whether a label on a cell is drawn dark or light.
const isLight = ([r, g, b]) => 0.2126 * r + 0.7152 * g + 0.0722 * b > 140;

/** Sizes the canvas backing store to its CSS box times devicePixelRatio; returns a context in CSS px. */
function prepare(canvas, cssWidth, cssHeight) {
  const ratio = globalThis.devicePixelRatio || 1;
  canvas.width = Math.round(cssWidth * ratio);
  canvas.height = Math.round(cssHeight * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, cssWidth, cssHeight);
  return ctx;
}

function hatch(ctx, x, y, w, h) {
  ctx.fillStyle = MASKED_FILL;
  ctx.fillRect(x, y, w, h);
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, w, h);
  ctx.clip();
  ctx.strokeStyle = MASKED_HATCH;
  ctx.lineWidth = 1;
  ctx.beginPath();
  const step = 6;
  for (let o = -h; o < w; o += step) {
    ctx.moveTo(x + o, y + h);
    ctx.lineTo(x + o + h, y);
  }
  ctx.stroke();
  ctx.restore();
}

/** The canvas' CSS font, or the same family at `size` px. */
function fontOf(canvas, size) {
  const style = getComputedStyle(canvas);
  return `${Math.round(size ?? parseFloat(style.fontSize))}px ${style.fontFamily}`;
}

/**
 * Draws weights [n, m] (row-major) with row labels on the left and column labels on top.
 * The canvas takes its CSS width from the page; its height follows from the grid.
 * @param {HTMLCanvasElement} canvas
 * @param {{ rowLabels: string[], colLabels: string[], weights: ArrayLike<number>,
 *           masked: ArrayLike<number>, highlight?: { row: number, col: number } | null }} data
 * @returns {{ cellAt(x: number, y: number): { row: number, col: number } | null }}
 *   hit-testing in CSS pixels relative to the canvas
 */
export function drawHeatmap(canvas, { rowLabels, colLabels, weights, masked, highlight = null }) {
  const n = rowLabels.length;
  const m = colLabels.length;
  const width = canvas.clientWidth || 480;
  const textColour = getComputedStyle(canvas).color;

  // Lay out the labels first: the grid gets whatever width they leave. When cells end up shorter
  // than a line of text, the labels shrink to the cell (down to 8 px) and the layout is redone.
  const measure = canvas.getContext('2d');
  const pad = 8;
  const layOut = (fontSize) => {
    measure.font = fontOf(canvas, fontSize);
    const widest = (labels) => Math.ceil(Math.max(0, ...labels.map((s) => measure.measureText(s).width)));
    const left = widest(rowLabels) + 2 * pad;
    const cell = Math.max(4, Math.floor((width - left - pad) / Math.max(1, m)));
    // Column labels are horizontal when they fit in a cell, vertical otherwise.
    const colWidth = widest(colLabels);
    const rotate = colWidth > cell - 4;
    const top = (rotate ? colWidth : Math.ceil(fontSize * 1.2)) + 2 * pad;
    return { fontSize, left, cell, rotate, top };
  };
  const baseSize = parseFloat(getComputedStyle(canvas).fontSize);
  let grid = layOut(baseSize);
  if (grid.cell < baseSize * 1.2) grid = layOut(Math.max(8, Math.floor(grid.cell / 1.2)));
  const { fontSize, left, cell, rotate, top } = grid;
  const height = top + cell * n + pad;

  canvas.style.height = `${height}px`;
  const ctx = prepare(canvas, width, height);
  ctx.font = fontOf(canvas, fontSize);
  ctx.fillStyle = textColour;

  // Row labels (queries), right-aligned against the grid.
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  rowLabels.forEach((label, i) => ctx.fillText(label, left - pad, top + (i + 0.5) * cell));

  // Column labels (keys).
  colLabels.forEach((label, j) => {
    const x = left + (j + 0.5) * cell;
    if (rotate) {
      ctx.save();
      ctx.translate(x, top - pad);
      ctx.rotate(-Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.fillText(label, 0, 0);
      ctx.restore();
    } else {
      ctx.textAlign = 'center';
      ctx.textBaseline = 'bottom';
      ctx.fillText(label, x, top - pad);
    }
  });

  // Cells; their values are printed when a cell is wide enough to hold "0.00".
  ctx.font = fontOf(canvas, Math.min(15, Math.max(11, cell * 0.18)));
  ctx.textAlign = 'center';
  ctx.textBaseline = 'middle';
  const showValues = ctx.measureText('0.00').width < cell - 6;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      const x = left + j * cell;
      const y = top + i * cell;
      if (masked[i * m + j]) {
        hatch(ctx, x, y, cell, cell);
        continue;
      }
      const colour = colourOf(weights[i * m + j]);
      ctx.fillStyle = css(colour);
      ctx.fillRect(x, y, cell, cell);
      if (showValues) {
        ctx.fillStyle = isLight(colour) ? '#111' : '#fff';
        ctx.fillText(weights[i * m + j].toFixed(2), x + cell / 2, y + cell / 2);
      }
    }
  }

  // Thin grid lines keep neighbouring cells of similar colour apart.
  ctx.strokeStyle = 'rgba(255, 255, 255, 0.6)';
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (let i = 0; i <= n; i++) {
    ctx.moveTo(left, top + i * cell + 0.5);
    ctx.lineTo(left + m * cell, top + i * cell + 0.5);
  }
  for (let j = 0; j <= m; j++) {
    ctx.moveTo(left + j * cell + 0.5, top);
    ctx.lineTo(left + j * cell + 0.5, top + n * cell);
  }
  ctx.stroke();

  if (highlight) {
    ctx.strokeStyle = textColour;
    ctx.lineWidth = 2;
    ctx.strokeRect(left + highlight.col * cell + 1, top + highlight.row * cell + 1, cell - 2, cell - 2);
  }

  return {
    cellAt(x, y) {
      const col = Math.floor((x - left) / cell);
      const row = Math.floor((y - top) / cell);
      return row >= 0 && row < n && col >= 0 && col < m ? { row, col } : null;
    },
  };
}

/**
 * Draws the colour scale from 0 to 1 with ticks, and a swatch for masked cells.
 * @param {HTMLCanvasElement} canvas
 */
export function drawLegend(canvas) {
  const width = canvas.clientWidth || 320;
  const fontSize = parseFloat(getComputedStyle(canvas).fontSize);
  const barHeight = 14;
  const height = barHeight + fontSize * 1.6 + 6;
  canvas.style.height = `${height}px`;
  const ctx = prepare(canvas, width, height);
  ctx.font = fontOf(canvas);
  const textColour = getComputedStyle(canvas).color;

  const masked = 'masked';
  const swatch = barHeight * 1.6;
  const maskedWidth = swatch + 6 + ctx.measureText(masked).width;
  const barLeft = 8;
  const barWidth = Math.max(60, width - maskedWidth - 40);

  const gradient = ctx.createLinearGradient(barLeft, 0, barLeft + barWidth, 0);
  VIRIDIS.forEach((colour, k) => gradient.addColorStop(k / (VIRIDIS.length - 1), css(colour)));
  ctx.fillStyle = gradient;
  ctx.fillRect(barLeft, 0, barWidth, barHeight);

  ctx.fillStyle = textColour;
  ctx.strokeStyle = textColour;
  ctx.textBaseline = 'top';
  for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
    const x = barLeft + tick * barWidth;
    ctx.beginPath();
    ctx.moveTo(x + 0.5, barHeight);
    ctx.lineTo(x + 0.5, barHeight + 4);
    ctx.stroke();
    ctx.textAlign = tick === 0 ? 'left' : tick === 1 ? 'right' : 'center';
    ctx.fillText(String(tick), x, barHeight + 6);
  }

  const swatchLeft = barLeft + barWidth + 24;
  hatch(ctx, swatchLeft, 0, swatch, barHeight);
  ctx.fillStyle = textColour;
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  ctx.fillText(masked, swatchLeft + swatch + 6, barHeight / 2);
}

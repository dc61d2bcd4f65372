// The bertviz-style view: query tokens in a left column, key tokens in a right one, and a line from
// the selected query to every key it may attend to, its opacity the weight (on the same scale as
// the heatmap: weight / top[i]). With every head of a layer (bertviz's head view) each head's
// lines have a colour of their own, the selected head's drawn last and strongest. Masked keys get
// no line and a struck-through grey label. Knows nothing of the attention package.

const ACCENT = [59, 81, 139];
const MUTED = '#8a919c';
// Tokens too close together for a label each are labelled every few rows, the selected query and
// its strongest keys always.
const MIN_FONT = 9;
const STRONG_KEYS = 5;

function fontOf(canvas, size, weight = '') {
  const style = getComputedStyle(canvas);
  return `${weight} ${Math.round(size)}px ${style.fontFamily}`.trim();
}

/**
 * The colour of head `h` of `count` drawn together, as [r, g, b]: hues evenly around the wheel
 * (bertviz's head view gives each head its own), dark enough to read on white.
 */
export function headColour(h, count) {
  const hue = (h * 360) / count;
  // HSL (s 0.7, l 0.42) to RGB.
  const a = 0.7 * Math.min(0.42, 0.58);
  const channel = (n) => {
    const k = (n + hue / 30) % 12;
    return Math.round(255 * (0.42 - a * Math.max(-1, Math.min(k - 3, 9 - k, 1))));
  };
  return [channel(0), channel(8), channel(4)];
}

/**
 * @param {HTMLCanvasElement} canvas
 * @param {{ queryLabels: string[], keyLabels: string[], heads: { weights: ArrayLike<number>,
 *           top: Float32Array, colour: number[] | null, emphasised: boolean }[],
 *           masked: ArrayLike<number>, queries: number[], selected: number | null }} view
 *   `heads`: the heads whose lines are drawn (one, or every head of a layer), each with the top of
 *   its colour scale in each row and its colour (null: the page's accent); the emphasised one's
 *   weights label the keys. `queries`: the rows whose lines are drawn; `selected`: the row drawn
 *   as selected.
 * @returns {{ queryAt(x: number, y: number): number | null, rowTop(i: number): number,
 *             drawn: { labelFont: number, queries: number[], keys: number[], lines: number[] } }}
 *   drawn: the rows labelled and each head's number of lines, for the page's tests
 */
export function drawLines(canvas, { queryLabels, keyLabels, heads, masked, queries, selected }) {
  const n = queryLabels.length;
  const m = keyLabels.length;
  const width = Math.max(200, canvas.clientWidth || 400);
  const rows = Math.max(n, m);
  const rowH = rows <= 30 ? 20 : Math.max(3, Math.min(20, Math.floor(640 / rows)));
  const header = 22;
  const pad = 6;
  const height = header + rows * rowH + 2 * pad;
  const ratio = globalThis.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  const textColour = getComputedStyle(canvas).color;

  const xQuery = Math.round(width * 0.36);
  const xKey = Math.round(width * 0.64);
  const top = header + pad;
  const yOf = (i) => top + (i + 0.5) * rowH;
  const fontSize = Math.min(13, Math.max(MIN_FONT, rowH - 5));
  // A label every `every` rows: each row when they are tall enough, else as often as they fit.
  const every = Math.max(1, Math.ceil((fontSize + 1) / rowH));

  ctx.font = fontOf(canvas, 12, '600');
  ctx.fillStyle = MUTED;
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  ctx.fillText('queries', xQuery, header / 2);
  ctx.textAlign = 'left';
  ctx.fillText('keys', xKey, header / 2);

  // The lines: the other heads first, faded and thinner, then the emphasised one on top.
  const main = heads.find((head) => head.emphasised) ?? heads[0];
  const sel = selected ?? (queries.length === 1 ? queries[0] : null);
  const fullWidth = rowH >= 16 ? 3 : rowH >= 8 ? 2 : 1;
  const fade = queries.length > 1 ? 0.6 : 1;
  const lines = heads.map(() => 0);
  const order = heads.map((_, h) => h).sort((a, b) => Number(heads[a] === main) - Number(heads[b] === main));
  for (const h of order) {
    const { weights, top: scaleTop, colour } = heads[h];
    const strong = heads[h] === main;
    const rgb = (colour ?? ACCENT).join(', ');
    ctx.lineWidth = strong || heads.length === 1 ? fullWidth : Math.max(1, fullWidth - 1);
    const headFade = strong || heads.length === 1 ? fade : 0.5 * fade;
    for (const i of queries) {
      const row = i * m;
      for (let j = 0; j < m; j++) {
        if (masked[row + j]) continue;
        const alpha = Math.min(1, weights[row + j] / scaleTop[i]) * headFade;
        if (alpha < 0.01) continue;
        lines[h]++;
        ctx.strokeStyle = `rgba(${rgb}, ${alpha.toFixed(3)})`;
        ctx.beginPath();
        ctx.moveTo(xQuery + 6, yOf(i));
        ctx.lineTo(xKey - 6, yOf(j));
        ctx.stroke();
      }
    }
  }
  // Key weight bars behind the key labels, for the selected query in the emphasised head.
  if (sel !== null) {
    const row = sel * m;
    const rgb = (main.colour ?? ACCENT).join(', ');
    for (let j = 0; j < m; j++) {
      if (masked[row + j]) continue;
      const alpha = Math.min(1, main.weights[row + j] / main.top[sel]);
      ctx.fillStyle = `rgba(${rgb}, ${(0.35 * alpha).toFixed(3)})`;
      ctx.fillRect(xKey - 4, top + j * rowH + 1, width - xKey - 2, Math.max(1, rowH - 2));
    }
  }

  ctx.textBaseline = 'middle';
  const keyLabel = (j, strong) => {
    const isMasked = sel !== null && masked[sel * m + j];
    ctx.font = fontOf(canvas, fontSize, strong ? '600' : '');
    ctx.fillStyle = isMasked ? MUTED : textColour;
    ctx.textAlign = 'left';
    const text = strong && sel !== null && !isMasked ? `${keyLabels[j]}  ${main.weights[sel * m + j].toFixed(3)}` : keyLabels[j];
    ctx.fillText(text, xKey, yOf(j), width - xKey - 4);
    if (isMasked) {
      const w = Math.min(width - xKey - 4, ctx.measureText(keyLabels[j]).width);
      ctx.fillRect(xKey, Math.round(yOf(j)), w, 1);
    }
  };
  const queryLabel = (i) => {
    const isSelected = i === sel;
    ctx.font = fontOf(canvas, fontSize, isSelected ? '700' : '');
    ctx.textAlign = 'right';
    if (isSelected) {
      const w = Math.min(xQuery - 4, ctx.measureText(queryLabels[i]).width + 8);
      ctx.fillStyle = 'rgba(59, 81, 139, 0.15)';
      ctx.fillRect(xQuery - w + 4, top + i * rowH, w, rowH);
    }
    ctx.fillStyle = textColour;
    ctx.fillText(queryLabels[i], xQuery, yOf(i), xQuery - 4);
  };
  // Rows that keep a label clear of those already placed (a line of the font apart).
  const clear = (placed, i) => placed.every((k) => Math.abs(k - i) * rowH >= fontSize + 1);
  const strongKeys = [];
  if (every > 1 && sel !== null) {
    const open = [];
    for (let j = 0; j < m; j++) if (!masked[sel * m + j]) open.push(j);
    open.sort((a, b) => main.weights[sel * m + b] - main.weights[sel * m + a]);
    for (const j of open) {
      if (strongKeys.length === STRONG_KEYS) break;
      if (clear(strongKeys, j)) strongKeys.push(j);
    }
  }
  const labelled = (count, fixed) => {
    const placed = [...fixed];
    for (let i = 0; i < count; i += every) if (clear(placed, i)) placed.push(i);
    return placed.sort((a, b) => a - b);
  };
  const queryRows = labelled(n, sel !== null && sel < n ? [sel] : []);
  const keyRows = labelled(m, strongKeys);
  for (const i of queryRows) queryLabel(i);
  for (const j of keyRows) keyLabel(j, strongKeys.includes(j));
  // Masked keys of the selected query, as grey ticks when not every key is labelled.
  if (every > 1 && sel !== null) {
    ctx.fillStyle = MUTED;
    for (let j = 0; j < m; j++) if (masked[sel * m + j]) ctx.fillRect(xKey - 8, top + j * rowH, 4, Math.max(1, rowH - 1));
  }

  return {
    queryAt(x, y) {
      if (x > (xQuery + xKey) / 2) return null;
      const i = Math.floor((y - top) / rowH);
      return i >= 0 && i < n ? i : null;
    },
    rowTop: (i) => top + i * rowH,
    drawn: { labelFont: fontSize, rowHeight: rowH, queries: queryRows, keys: keyRows, lines },
  };
}

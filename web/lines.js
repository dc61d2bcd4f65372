// The bertviz-style view: query tokens in a left column, key tokens in a right one, and a line from
// the selected query to every key it may attend to, its opacity the weight (on the same scale as
// the heatmap: weight / top[i]). Masked keys get no line and a struck-through grey label.
// Knows nothing of the attention package.

const ACCENT = [59, 81, 139];
const MUTED = '#8a919c';

function fontOf(canvas, size, weight = '') {
  const style = getComputedStyle(canvas);
  return `${weight} ${Math.round(size)}px ${style.fontFamily}`.trim();
}

/**
 * @param {HTMLCanvasElement} canvas
 * @param {{ queryLabels: string[], keyLabels: string[], weights: ArrayLike<number>,
 *           masked: ArrayLike<number>, queries: number[], selected: number | null, top: Float32Array }} view
 *   `queries`: the rows whose lines are drawn; `selected`: the row drawn as selected
 * @returns {{ queryAt(x: number, y: number): number | null, rowTop(i: number): number }}
 */
export function drawLines(canvas, { queryLabels, keyLabels, weights, masked, queries, selected, top: scaleTop }) {
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
  const labels = rowH >= 10;
  const fontSize = Math.min(13, Math.max(9, rowH - 5));

  ctx.font = fontOf(canvas, 12, '600');
  ctx.fillStyle = MUTED;
  ctx.textBaseline = 'middle';
  ctx.textAlign = 'right';
  ctx.fillText('queries', xQuery, header / 2);
  ctx.textAlign = 'left';
  ctx.fillText('keys', xKey, header / 2);

  // Key weight bars behind the key labels (for the selected query) and the lines.
  const sel = selected ?? (queries.length === 1 ? queries[0] : null);
  const lineWidth = rowH >= 16 ? 3 : rowH >= 8 ? 2 : 1;
  ctx.lineWidth = lineWidth;
  const fade = queries.length > 1 ? 0.6 : 1;
  for (const i of queries) {
    const row = i * m;
    for (let j = 0; j < m; j++) {
      if (masked[row + j]) continue;
      const alpha = Math.min(1, weights[row + j] / scaleTop[i]) * fade;
      if (alpha < 0.01) continue;
      ctx.strokeStyle = `rgba(${ACCENT.join(', ')}, ${alpha.toFixed(3)})`;
      ctx.beginPath();
      ctx.moveTo(xQuery + 6, yOf(i));
      ctx.lineTo(xKey - 6, yOf(j));
      ctx.stroke();
    }
  }
  if (sel !== null) {
    const row = sel * m;
    for (let j = 0; j < m; j++) {
      if (masked[row + j]) continue;
      const alpha = Math.min(1, weights[row + j] / scaleTop[sel]);
      ctx.fillStyle = `rgba(${ACCENT.join(', ')}, ${(0.35 * alpha).toFixed(3)})`;
      ctx.fillRect(xKey - 4, top + j * rowH + 1, width - xKey - 2, Math.max(1, rowH - 2));
    }
  }

  // Labels: all of them when rows are tall enough, else the selected query and its 5 strongest keys.
  ctx.textBaseline = 'middle';
  const keyLabel = (j, strong) => {
    const isMasked = sel !== null && masked[sel * m + j];
    ctx.font = fontOf(canvas, fontSize, strong ? '600' : '');
    ctx.fillStyle = isMasked ? MUTED : textColour;
    ctx.textAlign = 'left';
    const text = strong && sel !== null && !isMasked ? `${keyLabels[j]}  ${weights[sel * m + j].toFixed(3)}` : keyLabels[j];
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
  if (labels) {
    for (let i = 0; i < n; i++) queryLabel(i);
    for (let j = 0; j < m; j++) keyLabel(j, false);
  } else if (sel !== null) {
    queryLabel(sel);
    const open = [];
    for (let j = 0; j < m; j++) if (!masked[sel * m + j]) open.push(j);
    open.sort((a, b) => weights[sel * m + b] - weights[sel * m + a]);
    // Far enough apart not to overlap.
    const shown = [];
    for (const j of open) {
      if (shown.length === 5) break;
      if (shown.every((k) => Math.abs(k - j) * rowH >= fontSize + 2)) shown.push(j);
    }
    for (const j of shown) keyLabel(j, true);
  }
  // Masked keys of the selected query, as grey ticks when labels are hidden.
  if (!labels && sel !== null) {
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
  };
}

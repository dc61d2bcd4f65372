// Export of the current view (the Export buttons): a PNG of the heatmap with its title and legend
// (canvas.toBlob), an SVG of it with its token labels (for papers), a self-contained HTML file of
// the view (the SVG, the call and the model's head scores, nothing fetched), and a JSON document of
// the weights and the mask. Downloads go through a visible link whose href is an object URL
// (blob:), so the file can be fetched again from the page.
import { headAverage } from './checks.js';
import { engineInfo } from './engine-view.js';
import { cellSpan } from './grid.js';
import { MASK_STYLE, colourOf } from './heatmap.js';
import { exportedView, plainCanvases, render } from './heatmap-view.js';
import { KIND_NAMES, MASK_NAMES, $, customCells, modelHead, showError, tokensAsText } from './page.js';

const dom = {
  exportPng: $('#export-png'),
  exportSvg: $('#export-svg'),
  exportHtml: $('#export-html'),
  exportJson: $('#export-json'),
  pngLink: $('#png-link'),
  svgLink: $('#svg-link'),
  htmlLink: $('#html-link'),
  jsonLink: $('#json-link'),
};

// Device pixels a CSS pixel of an exported PNG at least: sharp in a paper or a slide even from a
// screen of one.
const MIN_PNG_RATIO = 2;

/**
 * Draws `title`, then each canvas below the previous one, on a white background, and encodes it.
 * @param {string} title
 * @param {HTMLCanvasElement[]} canvases  drawn at their backing-store size
 * @param {number} ratio  the device pixels a CSS pixel they were drawn at
 * @returns {Promise<Blob>}
 */
function composePng(title, canvases, ratio) {
  const margin = Math.round(12 * ratio);
  const titleHeight = Math.round(28 * ratio);
  const font = `600 ${Math.round(15 * ratio)}px system-ui, sans-serif`;
  const out = document.createElement('canvas');
  const ctx = out.getContext('2d');
  ctx.font = font;
  const titleWidth = Math.ceil(ctx.measureText(title).width);
  const width = Math.max(titleWidth, ...canvases.map((c) => c.width)) + 2 * margin;
  const height = titleHeight + canvases.reduce((h, c) => h + c.height + margin, 0) + margin;
  out.width = width; // resets the context's state
  out.height = height;
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = '#1d2330';
  ctx.font = font;
  ctx.textBaseline = 'middle';
  ctx.fillText(title, margin, margin + titleHeight / 2 - margin / 2);
  let y = titleHeight + margin;
  for (const canvas of canvases) {
    ctx.drawImage(canvas, margin, y);
    y += canvas.height + margin;
  }
  return new Promise((resolve, reject) => {
    out.toBlob((blob) => (blob ? resolve(blob) : reject(new Error('The PNG could not be encoded.'))), 'image/png');
  });
}

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * Points `link` at `blob` (revoking its previous object URL), names the file, shows the link and
 * follows it once so the download starts.
 * @param {Blob} blob
 * @param {string} filename
 * @param {HTMLAnchorElement} link
 */
/** Hides the download links and frees their files: they were of another model's or kind's view. */
export function forgetDownloads() {
  for (const link of [dom.pngLink, dom.svgLink, dom.htmlLink, dom.jsonLink]) {
    if (link.href.startsWith('blob:')) URL.revokeObjectURL(link.href);
    link.removeAttribute('href');
    link.hidden = true;
  }
}

function offerDownload(blob, filename, link) {
  if (link.href.startsWith('blob:')) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(blob);
  link.download = filename;
  link.textContent = `${filename} (${sizeText(blob.size)})`;
  link.hidden = false;
  link.click();
}

/** The file's name: the model (or kind), and the head shown by layer and head (or sentence and head). */
function fileStem({ result: r, head, sentence }) {
  if (r.model) {
    const where = modelHead(head, r.model.heads);
    const model = r.kind === 'opened' ? r.model.name.replaceAll(/[^\w.-]+/g, '_') : 'trained-model';
    return `attention-${model}-layer${where.layer + 1}-head${where.head + 1}`;
  }
  return `attention-${r.kind}-s${sentence + 1}-${head === 'avg' ? 'average' : `head${head + 1}`}`;
}

/** How a picture's cells relate to the tokens: false at one token a cell, else what a cell holds. */
const pooling = ({ step }) => (step > 1 ? `max-pooled: each cell is the largest weight of ${step} × ${step} tokens` : false);

async function exportPng(shown) {
  const { maskKind, custom } = shown.result.request;
  const masks = `${MASK_NAMES[maskKind]}${custom ? ' + custom cells' : ''}`;
  // The picture without the pointer's highlight, at the screen's pixel ratio or 2, whichever is more.
  const ratio = Math.max(MIN_PNG_RATIO, globalThis.devicePixelRatio || 1);
  let blob;
  try {
    blob = await composePng(`${shown.title} · ${masks}`, plainCanvases(ratio), ratio);
  } finally {
    render();
  }
  offerDownload(blob, `${fileStem(shown)}.png`, dom.pngLink);
}

/**
 * A model's head as JSON: model_type, the tokens as the tokenizer gives them (the trained model's
 * characters), layer and head (1-based), and the head's rows of weights over the window shown
 * (every row and key when the text fits one token a cell; else `pooled` says what a cell holds).
 */
function modelJson({ result: r, head }) {
  const where = modelHead(head, r.model.heads);
  const { grid } = r;
  const size = grid.rows * grid.cols;
  const plane = r.weights.subarray(head * size, (head + 1) * size);
  const rows = (array) => Array.from({ length: grid.rows }, (_, i) => Array.from(array.subarray(i * grid.cols, (i + 1) * grid.cols)));
  return {
    model_type: r.model.modelType,
    model: r.model.name,
    tokens: r.tokens[0],
    layer: where.layer + 1,
    head: where.head + 1,
    weights: rows(plane),
    masked: rows(r.masked),
    pooled: pooling(grid),
    grid,
    scores: { standard: r.model.scores[head], text: r.model.textScores?.[head] ?? null, standardLength: r.model.standardLength },
    layers: r.model.layers,
    heads: r.model.heads,
    call: r.call,
    version: engineInfo().features.version,
    build: engineInfo().build,
  };
}

function exportJson(shown) {
  const { result: r, head, sentence: b, zoom } = shown;
  if (r.model) {
    offerDownload(new Blob([JSON.stringify(modelJson(shown))], { type: 'application/json' }), `${fileStem(shown)}.json`, dom.jsonLink);
    return;
  }
  const { rows, cols } = r.grid;
  const size = rows * cols;
  // Everything as the result holds it (the zoom is only named): weights, average and mask alike.
  const document_ = {
    kind: r.kind,
    module: KIND_NAMES[r.kind],
    sentence: b,
    tokens: r.tokens[b],
    keys: [...r.tokens[b], ...r.extraKeys],
    length: r.lengths[b],
    heads: r.H,
    shape: [r.H, rows, cols],
    // The tokens the weights cover and how many a cell holds (its largest weight, when more than 1).
    grid: r.grid,
    weights: Array.from(r.weights.subarray(b * r.H * size, (b + 1) * r.H * size)),
    average: r.H > 1 ? Array.from(headAverage(r.weights, b, r.H, size)) : null,
    masked: Array.from(r.masked.subarray(b * size, (b + 1) * size)),
    maskKind: r.request.maskKind,
    customCells: customCells(r.request.custom, r.n),
    fullyMaskedRows: r.fullyMasked.filter(([sentence]) => sentence === b).map(([, i]) => i),
    outputMaxAbs: r.outputMaxAbs ? Array.from(r.outputMaxAbs.subarray(b * r.n, (b + 1) * r.n)) : null,
    view: { head, zoom },
    config: r.request.config,
    seed: r.request.seed,
    call: r.call,
    features: engineInfo().features,
    build: engineInfo().build,
    forwardMs: r.forwardMs,
  };
  const blob = new Blob([JSON.stringify(document_)], { type: 'application/json' });
  offerDownload(blob, `${fileStem(shown)}.json`, dom.jsonLink);
}

const SVG_MAX_WIDTH = 960; // px of the grid at most
const SVG_LABEL_FONT = 11;
const SVG_VECTOR_CELLS = 128 * 128; // above this many cells, the cells are an embedded image
const rgb = ([r, g, b]) => `rgb(${r},${g},${b})`;
const xml = (text) => String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

/**
 * The view as SVG: every cell a rect coloured as on the page, with its weight as a tooltip (masked
 * cells grey or orange and hatched; above 128 × 128 cells one embedded image instead), token labels on both axes when the cells are large enough to read them (index ticks
 * otherwise), the title above and the colour scale below.
 */
export function heatmapSvg(title, view) {
  const { rowLabels, colLabels, weights, masked, custom, top } = view;
  const n = rowLabels.length;
  const m = colLabels.length;
  const cell = Math.max(1, Math.min(16, Math.floor(SVG_MAX_WIDTH / Math.max(n, m))));
  const labelled = cell >= SVG_LABEL_FONT;
  const labelWidth = (labels) => (labelled ? Math.ceil(0.62 * SVG_LABEL_FONT * Math.max(...labels.map((l) => l.length))) + 6 : 34);
  const left = labelWidth(rowLabels);
  const titleHeight = 24;
  const gridTop = titleHeight + labelWidth(colLabels);
  const legendWidth = Math.min(240, m * cell);
  // Wide enough for the title (14 px, about 0.6 em a character) and the legend with its label.
  const width = Math.max(left + m * cell + 8, 16 + Math.ceil(0.6 * 14 * title.length), left + legendWidth + 90);
  const height = gridTop + n * cell + (view.grid.step > 1 ? 58 : 44);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="${SVG_LABEL_FONT}">`,
    '<defs>',
    ...Object.entries(MASK_STYLE).map(([name, style]) => `<pattern id="hatch-${name}" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="4" height="4" fill="${rgb(style.fill)}"/><line x1="0" y1="0" x2="0" y2="4" stroke="${style.hatch}" stroke-width="1.2"/></pattern>`),
    '</defs>',
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="8" y="16" font-size="14" font-weight="600" fill="#1d2330">${xml(title)}</text>`,
    `<g transform="translate(${left},${gridTop})" shape-rendering="crispEdges">`,
  ];
  if (n * m <= SVG_VECTOR_CELLS) {
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        const k = i * m + j;
        const fill = masked[k] ? `url(#hatch-${custom?.[k] ? 'custom' : 'structural'})` : rgb(colourOf(weights[k] / top[i]));
        const value = masked[k] ? 'masked' : weights[k].toFixed(4);
        out.push(`<rect x="${j * cell}" y="${i * cell}" width="${cell}" height="${cell}" fill="${fill}"><title>${xml(rowLabels[i])} → ${xml(colLabels[j])}: ${value}</title></rect>`);
      }
    }
  } else {
    // Too many cells for rects: one pixel each in an embedded PNG, scaled up unsmoothed.
    const pixels = document.createElement('canvas');
    pixels.width = m;
    pixels.height = n;
    const image = new ImageData(m, n);
    for (let k = 0; k < n * m; k++) {
      const colour = masked[k] ? MASK_STYLE[custom?.[k] ? 'custom' : 'structural'].fill : colourOf(weights[k] / top[Math.floor(k / m)]);
      image.data.set([...colour, 255], 4 * k);
    }
    pixels.getContext('2d').putImageData(image, 0, 0);
    out.push(`<image width="${m * cell}" height="${n * cell}" preserveAspectRatio="none" style="image-rendering:pixelated" href="${pixels.toDataURL('image/png')}"/>`);
  }
  out.push('</g>');
  const step = labelled ? 1 : [1, 2, 4, 8, 16, 32, 64, 128, 256].find((s) => s * cell >= 24) ?? 512;
  // Index labels name tokens: the window's first token plus the cells' tokens before it.
  const { grid } = view;
  for (let i = 0; i < n; i += step) {
    out.push(`<text x="${left - 4}" y="${gridTop + (i + 0.5) * cell}" text-anchor="end" dominant-baseline="middle" fill="#1d2330">${xml(labelled ? rowLabels[i] : cellSpan(grid.row, grid.rowEnd, grid.step, i)[0])}</text>`);
  }
  for (let j = 0; j < m; j += step) {
    const x = left + (j + 0.5) * cell;
    out.push(`<text transform="translate(${x},${gridTop - 4}) rotate(-90)" dominant-baseline="middle" fill="#1d2330">${xml(labelled ? colLabels[j] : cellSpan(grid.col, grid.colEnd, grid.step, j)[0])}</text>`);
  }
  // The colour scale: 0 to the top of the scale (1, the view's maximum, or each row's).
  const legendTop = gridTop + n * cell + 12;
  out.push('<defs><linearGradient id="scale">');
  for (let s = 0; s <= 8; s++) out.push(`<stop offset="${s / 8}" stop-color="${rgb(colourOf(s / 8))}"/>`);
  out.push('</linearGradient></defs>');
  out.push(`<rect x="${left}" y="${legendTop}" width="${legendWidth}" height="10" fill="url(#scale)"/>`);
  const scaleTop = view.vmax === null ? 'row max' : view.vmax.toFixed(view.vmax === 1 ? 0 : 3);
  out.push(`<text x="${left}" y="${legendTop + 24}" fill="#1d2330">0</text>`);
  out.push(`<text x="${left + legendWidth}" y="${legendTop + 24}" text-anchor="end" fill="#1d2330">${scaleTop}</text>`);
  out.push(`<rect x="${left + legendWidth + 16}" y="${legendTop}" width="10" height="10" fill="url(#hatch-structural)"/>`);
  out.push(`<text x="${left + legendWidth + 30}" y="${legendTop + 9}" fill="#1d2330">masked</text>`);
  if (view.grid.step > 1) out.push(`<text x="${left}" y="${legendTop + 38}" fill="#1d2330">${xml(pooling(view.grid))}</text>`);
  out.push('</svg>');
  return out.join('\n');
}

function exportSvg(shown) {
  const svg = heatmapSvg(shown.title, shown.view);
  offerDownload(new Blob([svg], { type: 'image/svg+xml' }), `${fileStem(shown)}.svg`, dom.svgLink);
}

/** The view as one HTML file that needs nothing else: the SVG, what was computed, and how. */
function exportHtml(shown) {
  const { result: r, title } = shown;
  const score = (x) => (x === null || x === undefined ? '–' : x.toFixed(3));
  const scores = r.model
    ? `<h2>Head scores</h2><p>Induction and previous-token scores on ${r.model.standardLength} random tokens repeated, and on the text.</p>` +
      '<table><tr><th>layer</th><th>head</th><th>induction</th><th>previous token</th><th>induction (text)</th><th>previous token (text)</th></tr>' +
      r.model.scores.map(({ induction, previousToken }, index) => {
        const { layer, head } = modelHead(index, r.model.heads);
        const own = r.model.textScores?.[index];
        return `<tr><td>${layer + 1}</td><td>${head + 1}</td><td>${score(induction)}</td><td>${score(previousToken)}</td><td>${score(own?.induction)}</td><td>${score(own?.previousToken)}</td></tr>`;
      }).join('') + '</table>'
    : '';
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${xml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2rem;color:#1d2330}code{background:#eef1f8;padding:2px 4px}table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right}</style></head>
<body>
<h1>${xml(title)}</h1>
<p>Text: <code>${xml(r.model ? tokensAsText(r.tokens[0], r.model.modelType === 'bert').join('') : r.tokens[shown.sentence].join(' '))}</code></p>
${heatmapSvg(title, shown.view)}
<p>Computed by attention-wasm ${xml(engineInfo().features.version)} (${xml(engineInfo().build)} build): <code>${xml(r.call)}</code></p>
${scores}
</body>
</html>
`;
  offerDownload(new Blob([html], { type: 'text/html' }), `${fileStem(shown)}.html`, dom.htmlLink);
}

export function bindExport() {
  // Each export takes the view on screen (nothing before the first result).
  const exporting = (run) => () => {
    const shown = exportedView();
    if (!shown) return;
    Promise.resolve().then(() => run(shown)).catch(showError);
  };
  dom.exportPng.addEventListener('click', exporting(exportPng));
  dom.exportSvg.addEventListener('click', exporting(exportSvg));
  dom.exportHtml.addEventListener('click', exporting(exportHtml));
  dom.exportJson.addEventListener('click', exporting(exportJson));
}

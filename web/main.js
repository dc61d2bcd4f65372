// The demo page: loads the package exactly as a user would (its public entry, no private hooks),
// computes causal self-attention over toy embeddings of a sentence and draws the weights.
//
// For tests the page publishes its last result on the DOM: after every render
// `document.body.dataset.state` is 'ready' and the JSON data block
// <script type="application/json" id="attention-result"> holds
//   { tokens, shape: [n, n], weights: [n * n, row-major], masked: [n * n, 1 = masked],
//     isCausal, features, forwardMs }.
// A JSON data block is never executed, so the CSP (no inline scripts) allows it. On failure the
// state is 'error' and the message is shown on the page.
import { init } from '../dist/index.mjs';
import { EMBED_DIM, EXAMPLE_SENTENCE, embed, tokenize } from './embeddings.js';
import { drawHeatmap, drawLegend } from './heatmap.js';

const $ = (selector) => document.querySelector(selector);

const elements = {
  form: $('#controls'),
  sentence: $('#sentence'),
  causal: $('#causal'),
  canvas: $('#heatmap'),
  legend: $('#legend'),
  readout: $('#readout'),
  error: $('#error'),
  result: $('#attention-result'),
  simd: $('#feature-simd'),
  threads: $('#feature-threads'),
  version: $('#feature-version'),
  isolated: $('#feature-isolated'),
  time: $('#forward-time'),
  dims: $('#dims'),
};

let attention = null;
let current = null; // { tokens, weights, masked, n }
let layout = null; // hit-testing of the drawn heatmap
let focusCell = null; // { row, col } under the pointer or the keyboard cursor

function setState(state) {
  document.body.dataset.state = state;
}

function showError(error) {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  elements.error.textContent = message;
  elements.error.hidden = false;
  if (!current) {
    // Nothing was ever drawn: no empty canvas, no "Loading…" left standing beside the error.
    elements.canvas.hidden = true;
    elements.legend.hidden = true;
    elements.readout.textContent = '';
  }
  setState('error');
}

/** Causal self-attention over the sentence's embeddings: query = key = value = X [n, d]. */
function compute(sentence, isCausal) {
  const tokens = tokenize(sentence);
  if (tokens.length === 0) throw new Error('Type at least one word.');
  const x = embed(tokens, EMBED_DIM);
  const start = performance.now();
  const { weights } = attention.scaledDotProductAttention(x, x, x, { isCausal, needWeights: true });
  const forwardMs = performance.now() - start;
  const n = tokens.length;
  // PyTorch's causal mask is top-left aligned: query i may attend to keys j <= i.
  const masked = Uint8Array.from({ length: n * n }, (_, k) => (isCausal && k % n > Math.floor(k / n) ? 1 : 0));
  return { tokens, n, weights: weights.data, masked, isCausal, forwardMs };
}

function describeCell({ row, col }) {
  const { tokens, weights, masked, n } = current;
  const k = row * n + col;
  return `Query “${tokens[row]}” (${row}) → key “${tokens[col]}” (${col}): ` +
    `weight ${weights[k].toFixed(4)}, ${masked[k] ? 'masked' : 'not masked'}`;
}

function render() {
  if (!current) return;
  layout = drawHeatmap(elements.canvas, {
    rowLabels: current.tokens,
    colLabels: current.tokens,
    weights: current.weights,
    masked: current.masked,
    highlight: focusCell,
  });
  drawLegend(elements.legend);
  elements.readout.textContent = focusCell
    ? describeCell(focusCell)
    : 'Hover over a cell, or focus the heatmap and use the arrow keys.';
}

function publish() {
  const { tokens, n, weights, masked, isCausal, forwardMs } = current;
  elements.result.textContent = JSON.stringify({
    tokens,
    shape: [n, n],
    weights: Array.from(weights),
    masked: Array.from(masked),
    isCausal,
    features: attention.features,
    forwardMs,
  });
  elements.time.textContent = `${forwardMs.toFixed(3)} ms`;
  elements.dims.textContent = `n = ${n}, d = ${EMBED_DIM}`;
  elements.canvas.setAttribute('aria-label',
    `Attention weights, ${n} queries by ${n} keys${isCausal ? ', causal mask' : ''}`);
}

function run() {
  try {
    current = compute(elements.sentence.value, elements.causal.checked);
    focusCell = null;
    elements.error.hidden = true;
    elements.canvas.hidden = false;
    elements.legend.hidden = false;
    render();
    publish();
    setState('ready');
  } catch (error) {
    showError(error);
  }
}

function setFocusCell(cell) {
  const same = cell && focusCell && cell.row === focusCell.row && cell.col === focusCell.col;
  if (same || (!cell && !focusCell)) return;
  focusCell = cell;
  render();
}

function pointerCell(event) {
  const box = elements.canvas.getBoundingClientRect();
  return layout?.cellAt(event.clientX - box.left, event.clientY - box.top) ?? null;
}

const KEY_MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

function onKey(event) {
  const move = KEY_MOVES[event.key];
  if (!move || !current) return;
  event.preventDefault();
  const { row, col } = focusCell ?? { row: 0, col: 0 };
  const clamp = (v) => Math.min(current.n - 1, Math.max(0, v));
  setFocusCell(focusCell ? { row: clamp(row + move[0]), col: clamp(col + move[1]) } : { row, col });
}

function showFeatures() {
  const { simd, threads, version } = attention.features;
  elements.simd.textContent = simd ? 'yes' : 'no';
  elements.threads.textContent = String(threads);
  elements.version.textContent = version;
  elements.isolated.textContent = globalThis.crossOriginIsolated ? 'yes' : 'no';
}

async function main() {
  elements.sentence.value = EXAMPLE_SENTENCE;
  elements.form.addEventListener('submit', (event) => {
    event.preventDefault();
    run();
  });
  elements.causal.addEventListener('change', run);
  elements.canvas.addEventListener('pointermove', (event) => setFocusCell(pointerCell(event)));
  elements.canvas.addEventListener('pointerleave', () => setFocusCell(null));
  elements.canvas.addEventListener('keydown', onKey);
  elements.canvas.addEventListener('blur', () => setFocusCell(null));
  // The canvas follows its CSS width; redraw at the new size rather than stretching pixels.
  let lastWidth = 0;
  new ResizeObserver(() => {
    if (elements.canvas.clientWidth !== lastWidth) {
      lastWidth = elements.canvas.clientWidth;
      render();
    }
  }).observe(elements.canvas);

  attention = await init();
  // One untimed call first, so that the time shown is a steady-state forward, not first-call setup.
  const warmUp = embed(tokenize(EXAMPLE_SENTENCE), EMBED_DIM);
  attention.scaledDotProductAttention(warmUp, warmUp, warmUp, { isCausal: true });
  showFeatures();
  run();
}

window.addEventListener('unhandledrejection', (event) => showError(event.reason));
main().catch(showError);

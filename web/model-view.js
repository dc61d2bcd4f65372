// The model viewer: open a Hugging Face model folder (config.json, tokenizer.json and the
// .safetensors weights, chosen as a folder or dropped as files), and see every head of every layer
// on your text as a layers × heads grid; a click shows one head large, its tokens on the axes, and
// exports it as JSON. This view owns its state and its part of the DOM (#model-panel); the worker
// runs the model (worker.js: 'openModel', 'modelAttention').
//
// Test hooks: the folder input is [data-testid="open-model"], the text [data-testid="text"],
// each grid cell has data-layer and data-head (1-based, as shown), #model-panel's data-state is
// 'empty', 'busy', 'ready' or 'error', and its data-memory the worker's package stats() (JSON)
// once a folder is opened or refused.
import { modelAttention, onModelProgress, openModel } from './compute.js';
import { colourOf, drawThumbnail } from './heatmap.js';

const $ = (selector) => document.querySelector(selector);
const HEAD_SIZE = 480; // CSS px of the large view
const LABEL_SPACE = 90; // room for token labels left of and above the large view

// A token as the text it stands for: byte-level BPE writes a space as Ġ and a newline as Ċ
// (GPT-2, Llama 3, Qwen); shown as ␣ and ↵ so that word starts stay visible.
export const displayToken = (token) => token.replaceAll('Ġ', '␣').replaceAll('Ċ', '↵');

export function bindModelView() {
  const panel = $('#model-panel');
  const status = $('#model-status');
  const progress = $('#model-progress');
  const text = $('[data-testid="text"]');
  const grid = $('#model-grid');
  const headCanvas = $('#model-head');
  const headTitle = $('#model-head-title');
  const exportButton = $('#model-export');
  const exportLink = $('#model-export-link');
  const scoresLine = $('#model-scores');
  const textQuery = $('#model-text-query');
  const readout = $('#model-readout');
  const textView = $('#model-text-view');
  const state = { info: null, result: null, selected: { layer: 1, head: 1 }, query: 0, seq: 0 };

  const setStatus = (phase, message) => {
    panel.dataset.state = phase;
    status.textContent = message;
    status.classList.toggle('error', phase === 'error');
  };

  onModelProgress(({ phase, done, total }) => {
    progress.hidden = false;
    progress.max = total;
    progress.value = done;
    if (phase === 'loading') setStatus('busy', 'Building the model…');
    else setStatus('busy', `Reading the weights: ${(done / 2 ** 20).toFixed(1)} of ${(total / 2 ** 20).toFixed(1)} MiB`);
  });

  let typing = 0; // the pending update after typing
  async function open(files) {
    if (!files.length) return;
    clearTimeout(typing);  // the opened model is computed on the text as it is now
    state.seq++;
    state.info = state.result = null;
    grid.replaceChildren();
    setStatus('busy', `Opening ${files.length} files…`);
    const reply = await openModel(files);
    progress.hidden = true;
    panel.dataset.memory = JSON.stringify(reply.memory);
    if (!reply.ok) {
      setStatus('error', `This folder cannot be opened: ${reply.message}.`);
      return;
    }
    state.info = reply;
    state.selected = { layer: 1, head: 1 };
    await update();
  }

  async function update() {
    if (!state.info) return;
    const seq = ++state.seq;
    setStatus('busy', 'Computing every head…');
    const reply = await modelAttention(text.value);
    if (seq !== state.seq) return;  // a newer text or model is on its way
    if (!reply.ok) {
      setStatus('error', reply.message);
      return;
    }
    state.result = reply;
    state.query = reply.tokens.length - 1;
    const { name, modelType, layers, heads, dtype } = state.info;
    setStatus('ready', `${name} (${modelType}, ${dtype}): ${layers} layers × ${heads} heads over ${reply.tokens.length} tokens.`);
    drawGrid();
    drawHead();
    showScores();
  }

  // The strongest induction and previous-token heads, on the standard sequence and on the text.
  function showScores() {
    const { standardScores, standardLength } = state.info;
    const best = (scores, key) => {
      let top = null;
      scores.forEach((layer, l) => layer.forEach((s, h) => {
        if (s[key] !== null && (!top || s[key] > top.value)) top = { layer: l + 1, head: h + 1, value: s[key] };
      }));
      return top;
    };
    const line = (key, what) => {
      const standard = best(standardScores, key), own = best(state.result.scores, key);
      const ownText = own ? `; on your text L${own.layer} H${own.head} (${own.value.toFixed(2)})` : '; your text repeats no token, so it has none';
      return `${what}: L${standard.layer} H${standard.head} (${standard.value.toFixed(2)} on ${standardLength} random tokens repeated)${ownText}.`;
    };
    scoresLine.textContent = `${line('induction', 'Strongest induction head')} ${line('previousToken', 'Strongest previous-token head')}`;
  }

  const percent = (x) => (x === null ? '–' : x.toFixed(2));
  const cellTitle = (layer, head) => {
    const own = state.result.scores[layer - 1][head - 1], standard = state.info.standardScores[layer - 1][head - 1];
    return `Layer ${layer}, head ${head}: induction ${percent(standard.induction)} on the repeated random tokens, ${percent(own.induction)} on your text; `
      + `previous token ${percent(standard.previousToken)}, ${percent(own.previousToken)}`;
  };

  // Each head's weights as drawThumbnail takes them; causal models hide the keys after each query.
  function view(layer, head) {
    const t = state.result.tokens.length;
    const weights = state.result.attentions[layer - 1].subarray((head - 1) * t * t, head * t * t);
    const masked = new Uint8Array(t * t);
    if (state.info.causal) for (let i = 0; i < t; i++) masked.fill(1, i * t + i + 1, (i + 1) * t);
    return { weights, masked, n: t, m: t, top: new Float32Array(t).fill(1) };
  }

  function drawGrid() {
    const { layers, heads } = state.info;
    grid.style.setProperty('--heads', heads);
    const cells = [document.createElement('span')];
    for (let head = 1; head <= heads; head++) {
      const label = document.createElement('span');
      label.className = 'grid-label head-label';
      label.textContent = `H${head}`;
      cells.push(label);
    }
    for (let layer = 1; layer <= layers; layer++) {
      const label = document.createElement('span');
      label.className = 'grid-label';
      label.textContent = `L${layer}`;
      cells.push(label);
      for (let head = 1; head <= heads; head++) {
        const cell = document.createElement('button');
        cell.type = 'button';
        cell.className = 'grid-cell';
        cell.dataset.layer = layer;
        cell.dataset.head = head;
        cell.title = cellTitle(layer, head);
        cell.setAttribute('aria-label', cell.title);
        cell.setAttribute('aria-pressed', String(layer === state.selected.layer && head === state.selected.head));
        const canvas = document.createElement('canvas');
        const caption = document.createElement('span');
        caption.className = 'grid-score';
        // The induction score on the standard sequence: the number that picks out induction heads.
        caption.textContent = percent(state.info.standardScores[layer - 1][head - 1].induction);
        cell.append(canvas, caption);
        cells.push(cell);
      }
    }
    grid.replaceChildren(...cells);
    for (const cell of grid.querySelectorAll('.grid-cell')) drawThumbnail(cell.firstChild, view(Number(cell.dataset.layer), Number(cell.dataset.head)));
  }

  // The selected head large: a cell per query and key, the tokens on both axes when they fit.
  function drawHead() {
    const { layer, head } = state.selected;
    const { weights, masked, n } = view(layer, head);
    const tokens = state.result.tokens;
    const cell = Math.max(1, Math.floor(HEAD_SIZE / n));
    const labels = cell >= 9;
    const offset = labels ? LABEL_SPACE : 0;
    const size = offset + cell * n;
    const ratio = window.devicePixelRatio || 1;
    headCanvas.width = size * ratio;
    headCanvas.height = size * ratio;
    // The CSS height follows the width (style.css): a narrow screen scales the map down whole.
    headCanvas.style.width = `${size}px`;
    const ctx = headCanvas.getContext('2d');
    ctx.scale(ratio, ratio);
    ctx.clearRect(0, 0, size, size);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        const [r, g, b] = masked[i * n + j] ? [226, 228, 232] : colourOf(weights[i * n + j]);
        ctx.fillStyle = `rgb(${r}, ${g}, ${b})`;
        ctx.fillRect(offset + j * cell, offset + i * cell, cell, cell);
      }
    if (labels) {
      ctx.fillStyle = '#1f2937';
      ctx.font = `${Math.min(12, cell - 1)}px system-ui, sans-serif`;
      ctx.textBaseline = 'middle';
      const label = (token) => {
        const shown = displayToken(token);
        return shown.length > 12 ? `${shown.slice(0, 11)}…` : shown;
      };
      tokens.forEach((token, i) => {
        ctx.textAlign = 'right';
        ctx.fillText(label(token), offset - 4, offset + (i + 0.5) * cell);
        ctx.save();
        ctx.translate(offset + (i + 0.5) * cell, offset - 4);
        ctx.rotate(-Math.PI / 2);
        ctx.textAlign = 'left';
        ctx.fillText(label(token), 0, 0);
        ctx.restore();
      });
    }
    headTitle.textContent = `Layer ${layer}, head ${head}: rows are queries, columns keys${labels ? '' : ' (hover for tokens)'}`;
    headCanvas.dataset.cell = String(cell);
    headCanvas.dataset.offset = String(offset);
    exportButton.disabled = false;
    drawText();
  }

  // The text coloured by the selected query's weights over it (as CircuitsVis' coloured tokens):
  // each token's background is its weight on the scale of the maps, the query outlined.
  function drawText() {
    const { weights, masked, n } = view(state.selected.layer, state.selected.head);
    const i = state.query;
    const spans = state.result.tokens.map((token, j) => {
      const span = document.createElement('span');
      span.className = 'text-token';
      // As running text: byte-level spaces and newlines as themselves, WordPiece's ## joined on.
      span.textContent = token.replaceAll('Ġ', ' ').replaceAll('Ċ', '\n').replace(/^##/, '');
      span.dataset.token = String(j);
      if (masked[i * n + j]) {
        span.classList.add('masked');
        span.title = 'masked: a later token';
      } else {
        const weight = weights[i * n + j];
        const [r, g, b] = colourOf(weight);
        span.style.background = `rgb(${r}, ${g}, ${b})`;
        span.style.color = 0.299 * r + 0.587 * g + 0.114 * b < 140 ? '#fff' : '#111';
        span.dataset.weight = weight.toFixed(4);
        span.title = `weight ${weight.toFixed(4)}`;
      }
      if (j === i) span.classList.add('query');
      return span;
    });
    textView.replaceChildren(...spans);
    textQuery.textContent = `What token ${i + 1} (${JSON.stringify(displayToken(state.result.tokens[i]))}) reads, in layer ${state.selected.layer}, head ${state.selected.head} (click a row of the map, or a token, to choose another):`;
  }

  grid.addEventListener('click', (event) => {
    const cell = event.target.closest('.grid-cell');
    if (!cell || !state.result) return;
    state.selected = { layer: Number(cell.dataset.layer), head: Number(cell.dataset.head) };
    for (const other of grid.querySelectorAll('.grid-cell')) other.setAttribute('aria-pressed', String(other === cell));
    drawHead();
  });

  headCanvas.addEventListener('mousemove', (event) => {
    if (!state.result) return;
    const cell = Number(headCanvas.dataset.cell), offset = Number(headCanvas.dataset.offset);
    const box = headCanvas.getBoundingClientRect();
    const i = Math.floor((event.clientY - box.top - offset) / cell), j = Math.floor((event.clientX - box.left - offset) / cell);
    const { tokens } = state.result;
    if (i < 0 || j < 0 || i >= tokens.length || j >= tokens.length) return;
    const { weights, masked, n } = view(state.selected.layer, state.selected.head);
    const weight = masked[i * n + j] ? 'masked (a later key)' : weights[i * n + j].toFixed(4);
    // At the pointer: the tokens a cell joins, for maps too dense for labels on the axes.
    readout.textContent = `Query ${i + 1} ${JSON.stringify(displayToken(tokens[i]))} → key ${j + 1} ${JSON.stringify(displayToken(tokens[j]))}: ${weight}`;
  });

  headCanvas.addEventListener('click', (event) => {
    if (!state.result) return;
    const cell = Number(headCanvas.dataset.cell), offset = Number(headCanvas.dataset.offset);
    const i = Math.floor((event.clientY - headCanvas.getBoundingClientRect().top - offset) / cell);
    if (i < 0 || i >= state.result.tokens.length) return;
    state.query = i;
    drawText();
  });

  textView.addEventListener('click', (event) => {
    const span = event.target.closest('.text-token');
    if (!span) return;
    state.query = Number(span.dataset.token);
    drawText();
  });

  exportButton.addEventListener('click', () => {
    const { layer, head } = state.selected;
    const { weights, n } = view(layer, head);
    const rows = Array.from({ length: n }, (_, i) => Array.from(weights.subarray(i * n, (i + 1) * n)));
    const json = { model_type: state.info.modelType, model: state.info.name, tokens: state.result.tokens, layer, head, weights: rows };
    URL.revokeObjectURL(exportLink.href);
    exportLink.href = URL.createObjectURL(new Blob([JSON.stringify(json)], { type: 'application/json' }));
    exportLink.download = `${String(state.info.name).replaceAll(/[^\w.-]+/g, '_')}-layer${layer}-head${head}.json`;
    exportLink.click();
  });

  $('[data-testid="open-model"]').addEventListener('change', (event) => open(event.target.files));
  panel.addEventListener('dragover', (event) => event.preventDefault());
  panel.addEventListener('drop', (event) => {
    event.preventDefault();
    open(event.dataTransfer.files);
  });
  text.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(update, 250);
  });
  setStatus('empty', 'Choose a model folder (or drop its files here): config.json, tokenizer.json and model.safetensors (or its shards).');
}

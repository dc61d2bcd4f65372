// The neuron view: for the query the heatmap points at, how the head shown weighs each key, step
// by step as the block computes it: q and each k as strips of their components, the score's terms
// (q·k; for Transformer-XL its content and position terms; for additive attention its score), the
// scaled score, the soft-capped score where there is a cap, the masks, the softmax, and each key's
// weighted value (weight · v), summing to the head's output. It owns the #neuron section; heatmap-view.js tells it what to follow and the
// worker computes the numbers (neuron.js).
import { visible } from './page.js';

const MAX_ROWS = 48; // keys listed at most: the heaviest, in position order
const STRIP_CELL = 3; // CSS px per vector component

/** Diverging colour for x in [-1, 1]: blue, white at 0, red. */
function diverging(x) {
  const a = Math.min(1, Math.abs(x));
  const fade = Math.round(255 * (1 - a));
  return x < 0 ? `rgb(${fade}, ${fade}, 255)` : `rgb(255, ${fade}, ${fade})`;
}

/** A vector as a row of coloured cells, scaled so that ±`scale` is full colour. */
function strip(values, scale, label) {
  const canvas = document.createElement('canvas');
  const ratio = window.devicePixelRatio || 1;
  canvas.width = values.length * STRIP_CELL * ratio;
  canvas.height = 10 * ratio;
  canvas.className = 'strip';
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', label);
  const context = canvas.getContext('2d');
  context.scale(ratio, ratio);
  values.forEach((value, c) => {
    context.fillStyle = diverging(scale > 0 ? value / scale : 0);
    context.fillRect(c * STRIP_CELL, 0, STRIP_CELL, 10);
  });
  return canvas;
}

const maxAbs = (values) => values.reduce((max, x) => Math.max(max, Math.abs(x)), 0);
// Six characters up to ±999.9 ("-1.234", "-12.35", "-123.5"): the number columns stay narrow.
const format = (x) => x.toFixed(Math.abs(x) >= 100 ? 1 : Math.abs(x) >= 10 ? 2 : 3);

function cell(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

/** A row's label, cut with an ellipsis where the column is narrow: its title holds all of it. */
function labelCell(text) {
  const node = cell('th', text);
  node.title = text;
  return node;
}

export class NeuronView {
  /**
   * root: the #neuron section; compute(selection) → Promise of the worker's numbers (runner.js's
   * neuron(), through compute.js's computeNeuron).
   */
  constructor(root, compute) {
    this.root = root;
    this.compute = compute;
    this.title = root.querySelector('#neuron-title');
    this.body = root.querySelector('#neuron-body');
    this.wanted = null; // the selection last asked for, as a key
  }

  /**
   * Follows a selection (see heatmap-view.js: { seq, tokens, query, kind, ... }), or null: nothing
   * picked yet.
   */
  follow(selection) {
    if (!selection) {
      this.wanted = null;
      this.title.textContent = 'Pick a head (a thumbnail) and a query (hover a heatmap row, or click a query in the lines view).';
      this.body.replaceChildren();
      return;
    }
    const key = JSON.stringify([selection.seq, selection.sentence, selection.layer, selection.head, selection.query]);
    if (key === this.wanted) return;
    this.wanted = key;
    this.compute(selection).then((numbers) => {
      if (this.wanted === key) this.draw(selection, numbers);
    }, (error) => {
      if (this.wanted === key) {
        this.title.textContent = `No neuron view: ${error.message}`;
        this.body.replaceChildren();
      }
    });
  }

  draw({ tokens, query }, n) {
    const m = n.masked.length;
    const d = n.q.length;
    const dv = n.values.length / m;
    this.title.textContent = `Query “${visible(tokens[query])}” (${query}) · ${n.describe}`;
    const keyScale = Math.max(maxAbs(n.q), maxAbs(n.keys));
    const valueScale = maxAbs(n.values);
    // The keys the masks leave open; past MAX_ROWS, the heaviest of them, in position order.
    const open = Array.from({ length: m }, (_, j) => j).filter((j) => !n.masked[j]);
    const shown = open.length <= MAX_ROWS ? open : [...open].sort((a, b) => n.weights[b] - n.weights[a]).slice(0, MAX_ROWS).sort((a, b) => a - b);
    const blank = () => n.terms.map(() => cell('td'));

    // A fixed layout that fits the box (about 340 px beside the heatmap, or on a phone): the key's
    // label is cut with an ellipsis (its title holds it), the strips take the width the numbers leave.
    const table = cell('table', undefined, 'neuron-table');
    const capped = n.capped ? ['soft-capped'] : [];
    const names = ['key', 'k', ...n.terms.map((term) => term.name), 'scaled', ...capped, 'softmax', 'weight · v'];
    const kinds = ['key', 'strip', ...n.terms.map(() => 'number'), 'number', ...capped.map(() => 'number'), 'softmax', 'strip'];
    const columns = table.appendChild(cell('colgroup'));
    const header = table.createTHead().insertRow();
    names.forEach((name, c) => {
      columns.append(cell('col', undefined, kinds[c]));
      header.append(cell('th', name, kinds[c] === 'number' ? 'number' : undefined));
    });
    const body = table.createTBody();
    const qRow = body.insertRow();
    qRow.className = 'query-row';
    const q = cell('td');
    q.append(strip(n.q, keyScale, `q, ${d} components`));
    const blankCapped = () => capped.map(() => cell('td'));
    qRow.append(labelCell(`q “${visible(tokens[query])}”`), q, ...blank(), cell('td'), ...blankCapped(), cell('td'), cell('td'));
    for (const j of shown) {
      const row = body.insertRow();
      const w = n.weights[j];
      const k = cell('td');
      k.append(strip(n.keys.subarray(j * d, (j + 1) * d), keyScale, `k of key ${j}`));
      const weight = cell('td', undefined, 'weight');
      const bar = cell('span', undefined, 'bar');
      bar.style.width = `${(100 * w).toFixed(1)}%`;
      weight.append(w.toFixed(3), bar);
      const weighted = cell('td');
      weighted.append(strip(n.values.subarray(j * dv, (j + 1) * dv).map((v) => w * v), valueScale, `weight times v of key ${j}`));
      row.append(labelCell(`${visible(tokens[j])} (${j})`), k, ...n.terms.map((term) => cell('td', format(term.values[j]), 'number')),
        cell('td', format(n.scaled[j]), 'number'), ...(n.capped ? [cell('td', format(n.capped[j]), 'number')] : []), weight, weighted);
    }
    const hidden = m - open.length;
    const masks = hidden === m ? 'every key masked: zero weights, zero output' : hidden ? `${hidden} key${hidden > 1 ? 's' : ''} masked` : 'no key masked';
    const listed = open.length > shown.length ? `${shown.length} heaviest of ${open.length} keys shown` : open.length ? 'Σ = 1' : '';
    const out = body.insertRow();
    out.className = 'output-row';
    const sum = cell('td');
    sum.append(strip(n.output, valueScale, `the head's output, ${dv} components`));
    // The notes span the columns of numbers (a key's strip column is too narrow for them).
    const notes = cell('td', [masks, listed].filter(Boolean).join('; '), 'notes');
    notes.colSpan = 3 + n.terms.length + capped.length;
    out.append(cell('th', 'output'), notes, sum);
    this.body.replaceChildren(table);
  }
}

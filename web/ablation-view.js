// Head ablation: remove heads of the trained or the opened model and see what they did, as
// TransformerLens shows it by ablating heads: token by token on the user's text, the change in
// log-probability of the token that follows (red where it fell, blue where it rose), and at the
// selected token the most likely next tokens before and after. The worker runs the model with the
// package's headMask (runner.js ablate()). This view owns the heads removed and its part of the DOM.
import { computeAblation } from './compute.js';
import { markAblated, selectedQuery, viewState } from './heatmap-view.js';
import { $, modelHead, tokensAsText, visible } from './page.js';

const dom = {
  panel: $('#ablation'),
  remove: $('#ablate-head'),
  removed: $('#ablated-heads'),
  restore: $('#ablation-restore'),
  summary: $('#ablation-summary'),
  text: $('#ablation-text'),
};

const state = {
  shown: null, // the result on screen (kind 'model' or 'opened')
  modelKey: null, // which model the heads belong to
  heads: [], // removed: [layer, head], 0-based
  seq: 0, // the latest computation; older replies are dropped
};

const headLabel = ([layer, head]) => `L${layer + 1} H${head + 1}`;
const percent = ({ token, p }) => `“${visible(token)}” ${(100 * p).toFixed(1)} %`;

/** A new result: heads removed from another model are forgotten; otherwise the ablation follows the text. */
export function showAblation(result) {
  const key = result.model ? `${result.kind}:${result.model.name ?? 'trained'}:${result.model.layers}` : null;
  state.shown = result.model ? result : null;
  if (key !== state.modelKey) {
    state.modelKey = key;
    state.heads = [];
  }
  dom.remove.disabled = !state.shown || result.model.modelType === 'bert';
  update();
}

function textOf(result) {
  return result.kind === 'model' ? result.tokens[0].join('') : result.model.text;
}

async function update() {
  const seq = ++state.seq;
  dom.removed.replaceChildren(...state.heads.map((pair) => {
    const chip = document.createElement('button');
    chip.type = 'button';
    chip.className = 'secondary chip';
    chip.textContent = `${headLabel(pair)} ×`;
    chip.title = `Put ${headLabel(pair)} back`;
    chip.dataset.layer = String(pair[0] + 1);
    chip.dataset.head = String(pair[1] + 1);
    chip.addEventListener('click', () => {
      state.heads = state.heads.filter((other) => other !== pair);
      update();
    });
    return chip;
  }));
  dom.restore.hidden = state.heads.length === 0;
  markAblated(state.heads);
  dom.panel.dataset.state = state.heads.length ? 'busy' : 'empty';
  if (!state.shown || state.heads.length === 0) {
    dom.summary.textContent = state.shown?.model.modelType === 'bert' ? 'Head ablation follows next-token predictions: it is for decoders.'
      : 'Remove heads to see, token by token, how the model’s prediction of the next token changes without them.';
    dom.text.replaceChildren();
    return;
  }
  const request = { kind: state.shown.kind, text: textOf(state.shown), heads: state.heads, position: selectedQuery() };
  let result;
  try {
    result = await computeAblation(request);
  } catch (error) {
    if (seq !== state.seq) return;
    dom.summary.textContent = error.message;
    dom.text.replaceChildren();
    dom.panel.dataset.state = 'error';
    return;
  }
  if (seq !== state.seq) return;
  draw(result);
  dom.panel.dataset.state = 'ready';
}

function draw({ tokens, delta, position, before, after, loss }) {
  const names = state.heads.map(headLabel).join(', ');
  const largest = delta.reduce((top, d) => Math.max(top, Math.abs(d)), 1e-6);
  dom.text.replaceChildren(...tokensAsText(tokens, state.shown.model.modelType === 'bert').map((text, i) => {
    const span = document.createElement('span');
    span.className = 'text-token';
    span.textContent = text;
    span.dataset.token = String(i);
    if (i >= 1) {
      // Token i is what position i − 1 predicted.
      const d = delta[i - 1];
      const strength = Math.min(1, Math.abs(d) / largest);
      span.style.background = d < 0 ? `rgba(220, 38, 38, ${strength})` : `rgba(37, 99, 235, ${strength})`;
      span.style.color = strength > 0.55 ? '#fff' : '#111';
      span.dataset.delta = d.toFixed(4);
      span.title = `log-probability of this token ${d >= 0 ? '+' : ''}${d.toFixed(3)} without ${names}`;
    }
    if (i === position) span.classList.add('query');
    return span;
  }));
  dom.summary.textContent = `Without ${names}: the next token's mean log-probability ${(-loss.before).toFixed(3)} → ${(-loss.after).toFixed(3)}. `
    + `After “${visible(tokens[position])}” (${position}): ${before.map(percent).join(', ')} → ${after.map(percent).join(', ')}.`;
}

export function bindAblation() {
  dom.remove.addEventListener('click', () => {
    const { head } = viewState();
    if (!state.shown || head === 'avg') return;
    const { layer, head: index } = modelHead(head, state.shown.model.heads);
    if (!state.heads.some(([l, h]) => l === layer && h === index)) state.heads = [...state.heads, [layer, index]];
    update();
  });
  dom.restore.addEventListener('click', () => {
    state.heads = [];
    update();
  });
}

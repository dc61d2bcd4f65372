// What the page's views share: the page's state for tests (setState) and its error banner
// (showError), and how tokens, numbers and kinds are written. Each view owns its state and its
// part of the DOM (controls-view, heatmap-view with neuron-view, generation-view, export-view,
// engine-view, model-view); main.js wires them to the worker (compute.js).

export const $ = (selector) => document.querySelector(selector);

export const KIND_NAMES = {
  model: 'GroupedQueryAttention',
  opened: 'your model',
  sdpa: 'scaledDotProductAttention',
  mha: 'MultiheadAttention',
  additive: 'AdditiveAttention',
  relative: 'RelativeMultiHeadAttention',
};

export const MASK_NAMES = { none: 'no mask', causal: 'causal mask', padding: 'key padding mask', both: 'causal + key padding mask' };

export class InputError extends Error {}

export function setState(state) {
  document.body.dataset.state = state;
}

/** Shows `error` above the views, which stay dimmed until the next result (main.js). */
export function showError(error) {
  const message = error instanceof Error ? `${error.name === 'Error' ? '' : `${error.name}: `}${error.message}` : String(error);
  const banner = $('#error');
  banner.textContent = message;
  banner.hidden = false;
  $('.view-body').classList.add('stale');
  setState('error');
}

/** A flat head index of the trained model's [layers · heads] as its (0-based) layer and head. */
export const modelHead = (index, heads) => ({ layer: Math.floor(index / heads), head: index % heads });

/**
 * A token with spaces and line breaks made visible: the trained model's characters, and the marks
 * tokenizers write for them (byte-level BPE's Ġ and Ċ: GPT-2, Llama 3, Qwen; SentencePiece's ▁).
 */
export const visible = (token) => token.replace(/[ Ġ▁]/g, '␣').replace(/[\nĊ]/g, '↵');

/**
 * Tokens as the text they stand for, in running text, one string a token: byte-level BPE's Ġ and
 * SentencePiece's ▁ are spaces; WordPiece (BERT, `wordPiece`) writes none, so a space goes before
 * each token as Hugging Face's decode joins them ("[CLS] the cat sat."): not before the first, a
 * ## piece, nor where its clean-up takes the space out (before . ? ! , and ', after ').
 */
export const tokensAsText = (tokens, wordPiece = false) => tokens.map((token, i) => {
  if (!wordPiece) return token.replace(/[Ġ▁]/g, ' ').replaceAll('Ċ', '\n');
  if (token.startsWith('##')) return token.slice(2);
  return i === 0 || /^[.?!,']$/.test(token) || tokens[i - 1] === "'" ? token : ` ${token}`;
});

/** Labels on the canvases stay short; the readout shows the whole token. */
export const shortLabel = (token) => (token.length > 14 ? `${token.slice(0, 13)}…` : visible(token));

export const formatNumber = (x) => (x === 0 ? '0' : Math.abs(x) >= 0.001 ? x.toFixed(4) : x.toExponential(2));

export function customCells(custom, L) {
  const cells = [];
  if (custom) for (let k = 0; k < custom.length; k++) if (custom[k]) cells.push([Math.floor(k / L), k % L]);
  return cells;
}

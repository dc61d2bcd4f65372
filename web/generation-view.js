// The trained model's panel: its next-character predictions, "Repeat this text", and "Generate":
// one character a step through the worker's f16 KV caches, each step's new row of weights drawn as
// it arrives, with the decode step's time.
import { requestUpdate } from './compute.js';
import { MAX_TOKENS, MODEL_MAX_TOKENS } from './embeddings.js';
import { el, ui, visible } from './page.js';

const GENERATE_COUNT = 32;

function syncGenerateButton() {
  el.generate.textContent = ui.generating > 0 ? 'Stop' : `Generate ${GENERATE_COUNT} characters`;
  // Generation keeps every row of weights, up to the other kinds' length (runner.js).
  const full = ui.shown?.model && ui.shown.n >= MAX_TOKENS;
  el.generate.disabled = ui.generating === 0 && Boolean(full);
  el.generate.title = full ? `Generation runs up to ${MAX_TOKENS} characters.` : '';
}

/** The model's next-character predictions, the decode step's time, and the next generation step. */
export function showModel() {
  const { model, kind } = ui.shown;
  if (kind !== 'model') {
    ui.generating = 0;
    syncGenerateButton();
    return;
  }
  el.modelNext.textContent = `Next character: ${model.next.map(({ token, p }) => `“${visible(token)}” ${(100 * p).toFixed(0)} %`).join(', ')}`;
  // A character generated from the text as it was asked for; typed over since, it is dropped.
  if (model.generated !== null && el.text.value === ui.shown.request.sentences[0].join('')) {
    el.text.value += model.generated;
    el.text.scrollTop = el.text.scrollHeight;
    el.decodeTime.textContent = `${ui.shown.forwardMs.toFixed(2)} ms (f16 KV cache, ${ui.shown.n} tokens)`;
    // Generation stops at MAX_TOKENS characters (runner.js), however many were asked for.
    ui.generating = ui.shown.n < MAX_TOKENS ? Math.max(0, ui.generating - 1) : 0;
    if (ui.generating > 0) requestUpdate(true);
  }
  showGenerated();
  syncGenerateButton();
}

/** What the last generation wrote, highlighted (the text view underlines it too). */
function showGenerated() {
  const characters = Array.from(el.text.value);
  const from = ui.generatedFrom;
  el.generated.hidden = from === null || from >= characters.length;
  if (el.generated.hidden) return;
  const mark = document.createElement('mark');
  mark.textContent = characters.slice(from).join('');
  el.generated.replaceChildren(`Generated (${characters.length - from} characters): `, mark);
}

/** Whether the text is as long as "Repeat this text" may make it. */
const repeatLimit = () => (el.kind.value === 'model' ? MODEL_MAX_TOKENS : el.text.maxLength);

export function syncRepeatButton() {
  const full = Array.from(el.text.value).length >= repeatLimit();
  el.repeatText.disabled = full;
  el.repeatText.title = full ? `The text is at its limit (${repeatLimit()} characters).` : '';
}

export function bindGeneration() {
  el.text.addEventListener('input', () => {
    ui.generating = 0; // typing takes the text back: the step on its way is dropped (showModel)
    ui.generatedFrom = null;
    showGenerated();
    syncGenerateButton();
    syncRepeatButton();
  });
  el.repeatText.addEventListener('click', () => {
    // The text, a line break, the text again: cut at the limit rather than refused.
    const text = el.text.value;
    el.text.value = Array.from(`${text}\n${text}`).slice(0, repeatLimit()).join('');
    ui.guided = false;
    ui.generatedFrom = null;
    showGenerated();
    syncRepeatButton();
    requestUpdate();
  });
  el.generate.addEventListener('click', () => {
    if (ui.generating > 0) {
      ui.generating = 0;
    } else {
      ui.generating = GENERATE_COUNT;
      ui.generatedFrom = Array.from(el.text.value).length;
      ui.guided = false;
      requestUpdate(true);
    }
    syncGenerateButton();
  });
  el.kind.addEventListener('change', syncRepeatButton);
  syncRepeatButton();
}

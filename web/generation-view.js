// The trained model's panel: its next-character predictions, "Repeat this text", and "Generate":
// one character a step through the worker's f16 KV caches, each step's new row of weights drawn as
// it arrives, with the decode step's time.
import { requestUpdate } from './compute.js';
import { MAX_TOKENS } from './embeddings.js';
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
  const { model } = ui.shown;
  if (!model) {
    ui.generating = 0;
    syncGenerateButton();
    return;
  }
  el.modelNext.textContent = `Next character: ${model.next.map(({ token, p }) => `“${visible(token)}” ${(100 * p).toFixed(0)} %`).join(', ')}`;
  if (model.generated !== null) {
    el.text.value += model.generated;
    el.decodeTime.textContent = `${ui.shown.forwardMs.toFixed(2)} ms (f16 KV cache, ${ui.shown.n} tokens)`;
    // Generation stops at MAX_TOKENS characters (runner.js), however many were asked for.
    ui.generating = ui.shown.n < MAX_TOKENS ? Math.max(0, ui.generating - 1) : 0;
    if (ui.generating > 0) requestUpdate(true);
  }
  syncGenerateButton();
}

export function bindGeneration() {
  el.text.addEventListener('input', () => {
    ui.generating = 0; // typing takes the text back
    syncGenerateButton();
  });
  el.repeatText.addEventListener('click', () => {
    el.text.value += el.text.value;
    requestUpdate();
  });
  el.generate.addEventListener('click', () => {
    if (ui.generating > 0) {
      ui.generating = 0;
    } else {
      ui.generating = GENERATE_COUNT;
      requestUpdate(true);
    }
    syncGenerateButton();
  });
}

// The trained model's panel: its next-character predictions, "Repeat this text", and "Generate":
// one character a step through the worker's f16 KV caches, each step's new row of weights drawn as
// it arrives, with the decode step's time. It owns the generation under way; the text it writes
// into is the controls' (controls-view.js).
import { requestUpdate } from './compute.js';
import { kindValue, textLimit, textValue, writeText } from './controls-view.js';
import { MAX_TOKENS, MODEL_MAX_TOKENS } from './embeddings.js';
import { guide, markGenerated } from './heatmap-view.js';
import { $, visible } from './page.js';

const GENERATE_COUNT = 32;

const dom = {
  repeatText: $('#repeat-text'),
  generate: $('#generate'),
  modelNext: $('#model-next'),
  decodeTime: $('#decode-time'),
  generated: $('#generated'),
};

let generating = 0; // characters still to generate
let generatedFrom = null; // where the last generation's characters start in the text
let shown = null; // the result on screen

/** Characters still to generate (published with each result). */
export const stillGenerating = () => generating;

function syncGenerateButton() {
  dom.generate.textContent = generating > 0 ? 'Stop' : `Generate ${GENERATE_COUNT} characters`;
  // Each generation step shows every row of weights, up to the other kinds' length (runner.js).
  const full = shown?.kind === 'model' && shown.n >= MAX_TOKENS;
  dom.generate.disabled = generating === 0 && Boolean(full);
  dom.generate.title = full ? `Generation runs up to ${MAX_TOKENS} characters.` : '';
}

/** Ends a generation under way (the user typed, or a step failed). */
export function stopGeneration() {
  generating = 0;
  syncGenerateButton();
}

/**
 * A new result: the model's next-character predictions, the character a generation step wrote
 * (added to the text, then the next step asked for) and the decode step's time.
 */
export function showModel(result) {
  shown = result;
  if (result.kind !== 'model') {
    stopGeneration();
    // An opened model's note: the text cut at the tokens the viewer reads.
    dom.modelNext.textContent = result.model?.note ?? '';
    return;
  }
  const { model } = result;
  dom.modelNext.textContent = `Next character: ${model.next.map(({ token, p }) => `“${visible(token)}” ${(100 * p).toFixed(0)} %`).join(', ')}`;
  // A character generated from the text as it was asked for; typed over since, it is dropped.
  if (model.generated !== null && textValue() === result.request.sentences[0].join('')) {
    writeText(textValue() + model.generated);
    dom.decodeTime.textContent = `${result.phases.generate.toFixed(2)} ms (model.generate: prefill and one step, f16 KV caches, ${result.n} tokens)`;
    // Generation stops at MAX_TOKENS characters (runner.js), however many were asked for.
    generating = result.n < MAX_TOKENS ? Math.max(0, generating - 1) : 0;
    if (generating > 0) requestUpdate(true);
  }
  showGenerated();
  syncGenerateButton();
}

/** What the last generation wrote, highlighted (the coloured text underlines it too). */
function showGenerated() {
  const characters = Array.from(textValue());
  dom.generated.hidden = generatedFrom === null || generatedFrom >= characters.length;
  if (dom.generated.hidden) return;
  const mark = document.createElement('mark');
  mark.textContent = characters.slice(generatedFrom).join('');
  dom.generated.replaceChildren(`Generated (${characters.length - generatedFrom} characters): `, mark);
}

function setGeneratedFrom(from) {
  generatedFrom = from;
  markGenerated(from);
  showGenerated();
}

/** How long "Repeat this text" may make the text: the trained model's characters, else the box's. */
const repeatLimit = () => (kindValue() === 'model' ? MODEL_MAX_TOKENS : textLimit());

/** The Repeat button is off once the text is at its limit; runs when the text or the kind change. */
export function syncRepeatButton() {
  const full = Array.from(textValue()).length >= repeatLimit();
  dom.repeatText.disabled = full;
  dom.repeatText.title = full ? `The text is at its limit (${repeatLimit()} characters).` : '';
}

/** Typing takes the text back: the generation stops and the step on its way is dropped (showModel). */
export function onTyped() {
  stopGeneration();
  setGeneratedFrom(null);
  syncRepeatButton();
}

export function bindGeneration() {
  dom.repeatText.addEventListener('click', () => {
    // The text, a line break, the text again: cut at the limit rather than refused.
    const text = textValue();
    writeText(Array.from(`${text}\n${text}`).slice(0, repeatLimit()).join(''));
    guide(false);
    setGeneratedFrom(null);
    syncRepeatButton();
    requestUpdate();
  });
  dom.generate.addEventListener('click', () => {
    if (generating > 0) {
      generating = 0;
    } else {
      generating = GENERATE_COUNT;
      setGeneratedFrom(Array.from(textValue()).length);
      guide(false);
      requestUpdate(true);
    }
    syncGenerateButton();
  });
  syncRepeatButton();
}

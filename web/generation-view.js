// The model's panel (the trained model's and an opened decoder's): the most likely next tokens
// after the last token, or after the query locked (on the heatmap, the lines view or the coloured
// text); "Repeat this text"; and "Generate": one token a step (the trained model's characters,
// through the worker's f16 KV caches; an opened decoder's tokens, through f32 ones, as
// transformers' greedy generate), each step's new row of weights drawn as it arrives, with the
// decode step's time. It owns the generation under way; the text it writes into is the controls'
// (controls-view.js).
import { computePrediction, requestUpdate } from './compute.js';
import { kindValue, textLimit, textValue, writeText } from './controls-view.js';
import { MAX_TOKENS, MODEL_MAX_TOKENS } from './embeddings.js';
import { guide, markGenerated } from './heatmap-view.js';
import { $, visible } from './page.js';

const GENERATE_COUNT = 32;

const dom = {
  repeatText: $('#repeat-text'),
  generate: $('#generate'),
  modelNext: $('#model-next'),
  textCut: $('#text-cut'),
  decodeTime: $('#decode-time'),
  generated: $('#generated'),
};

let generating = 0; // tokens (characters, for the trained model) still to generate
let generatedFrom = null; // where the last generation's characters start in the text
let shown = null; // the result on screen

/** Tokens still to generate (published with each result). */
export const stillGenerating = () => generating;

/** What a model generates one a step: the trained model's characters, an opened model's tokens. */
const unit = (result) => (result?.kind === 'opened' ? 'tokens' : 'characters');

function syncGenerateButton() {
  dom.generate.textContent = generating > 0 ? 'Stop' : `Generate ${GENERATE_COUNT} ${unit(shown)}`;
  // Each generation step shows every row of weights, up to the other kinds' length (runner.js);
  // a streamed model would read every layer from its files at each token.
  const model = shown?.model;
  const why = !model ? ''
    : model.modelType === 'bert' ? 'BERT is an encoder: it does not generate.'
      : model.streamed ? 'Generation runs on models that stay in memory; this one is read layer by layer.'
        : shown.n >= (model.generationLimit ?? MAX_TOKENS) ? `Generation runs up to ${model.generationLimit ?? MAX_TOKENS} ${unit(shown)}.` : '';
  dom.generate.disabled = generating === 0 && why !== '';
  dom.generate.title = why;
}

/** Ends a generation under way (the user typed, or a step failed). */
export function stopGeneration() {
  generating = 0;
  syncGenerateButton();
}

/**
 * A new result: the token a generation step wrote (added to the text, then the next step asked
 * for) and the decode step's time; an opened model's note on a text cut at the tokens the viewer
 * reads. (followQuery shows the predictions.)
 */
export function showModel(result) {
  shown = result;
  const { model } = result;
  dom.textCut.textContent = model?.note ?? '';
  if (!model) {
    stopGeneration();
    return;
  }
  // A token generated from the text as it was asked for; typed over since, it is dropped.
  const asked = result.kind === 'model' ? result.request.sentences[0].join('') : result.request.text;
  if (model.generated !== null && textValue() === asked) {
    writeText(textValue() + model.generated);
    const caches = result.kind === 'model' ? 'f16' : 'f32';
    dom.decodeTime.textContent = `${result.phases.generate.toFixed(2)} ms (model.generate: prefill and one step, ${caches} KV caches, ${result.n} tokens)`;
    // Generation stops at MAX_TOKENS tokens (runner.js), however many were asked for, and at the
    // end of the sequence.
    generating = result.n < (model.generationLimit ?? MAX_TOKENS) && !model.ended ? Math.max(0, generating - 1) : 0;
    if (generating > 0) requestUpdate(true);
  }
  showGenerated();
  syncGenerateButton();
}

let predicted = null; // which result and position the predictions shown are of

/**
 * The most likely next tokens at `position` of `result` (the query the views follow, a token):
 * the run's own after the last token, else asked of the worker (runner.js predict()).
 */
export function followQuery(result, position) {
  if (!result.model) return;
  const key = `${result.id}:${position}`;
  if (key === predicted) return;
  predicted = key;
  const { next } = result.model;
  if (next === null) {
    dom.modelNext.textContent = '';
    return;
  }
  const list = (predictions) => predictions.map(({ token, p }) => `“${visible(token)}” ${(100 * p).toFixed(1)} %`).join(', ');
  if (position === result.n - 1) {
    dom.modelNext.textContent = `Next ${unit(result) === 'tokens' ? 'token' : 'character'}: ${list(next)}`;
    return;
  }
  const text = result.kind === 'model' ? result.tokens[0].join('') : result.model.text;
  computePrediction({ kind: result.kind, text, position }).then((predictions) => {
    if (predicted === key) dom.modelNext.textContent = `After “${visible(result.tokens[0][position])}” (${position}): ${list(predictions)}`;
  }, (error) => {
    if (predicted === key) dom.modelNext.textContent = `No prediction: ${error.message}`;
  });
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

// The demo's compute worker: runs attention through the package's public entry, imported exactly as
// a user would, so the page stays responsive while wasm works. main.js sends one request at a time
// and keeps only the latest change waiting, so nothing queues up here. runner.js does the work.
//
// Messages in:  { type: 'init', threads }
//               { type: 'file', id, config, stateDict }     a MultiheadAttention to load
//               { type: 'compute', id, request }            see runner.js
//               { type: 'neuron', id, selection }           the neuron view's numbers (runner.js)
//               { type: 'openModel', id, files }            a Hugging Face model folder (models/folder.js)
//               { type: 'modelAttention', id, text }        every head of the opened model on `text`
// Messages out: { type: 'ready', features, build, crossOriginIsolated } | { type: 'fatal', message }
//               { type: 'file', id, ok, message? }
//               { type: 'result', id, result } | { type: 'error', id, message }
//               { type: 'neuron', id, ok, numbers | message }
//               { type: 'progress', phase, done, total }    while a model folder is read
//               { type: 'model', id, ok, message? | ...}    { name, modelType, layers, heads, dtype,
//                                                           causal, standardScores, memory: the
//                                                           package's stats() } or { tokens,
//                                                           attentions, scores }
import { init } from '../dist/index.mjs';
import { CharModel } from './model.js';
import { openModelFolder } from './models/folder.js';
import { headScores, repeatedRandomIds } from './models/scores.js';
import { AttentionRunner } from './runner.js';

let runner = null;
let attn = null;
let opened = null; // the model folder the viewer opened
// The viewer shows at most this many tokens (its JSON export holds every weight).
const MAX_MODEL_TOKENS = 512;

const describeError = (error) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error));

async function fetchOk(name) {
  const response = await fetch(new URL(`./model/${name}`, import.meta.url));
  if (!response.ok) throw new Error(`model/${name}: HTTP ${response.status}`);
  return response;
}

/** The trained model (scripts/train_demo_model.py), its weights read by the package's loadSafetensors. */
async function loadModel(attn) {
  const [config, bytes] = await Promise.all([
    fetchOk('config.json').then((response) => response.json()),
    fetchOk('model.safetensors').then((response) => response.arrayBuffer()),
  ]);
  return new CharModel(attn, config, attn.loadSafetensors(new Uint8Array(bytes)));
}

self.addEventListener('message', async ({ data: message }) => {
  if (message.type === 'init') {
    try {
      // threads > 1 takes the pthreads build when this worker is cross-origin isolated; the
      // package falls back to one thread itself otherwise (features.threads says which).
      attn = await init({ threads: message.threads });
      runner = new AttentionRunner(attn);
      try {
        runner.setModel(await loadModel(attn));
      } catch (error) {
        // The other kinds still work without it; the model's requests report this.
        runner.modelError = `The trained model did not load: ${describeError(error)}`;
      }
      self.postMessage({
        type: 'ready',
        features: { ...attn.features },
        build: attn.build,
        crossOriginIsolated: self.crossOriginIsolated === true,
      });
    } catch (error) {
      self.postMessage({ type: 'fatal', message: describeError(error) });
    }
  } else if (message.type === 'file') {
    try {
      runner.loadFile(message);
      self.postMessage({ type: 'file', id: message.id, ok: true });
    } catch (error) {
      self.postMessage({ type: 'file', id: message.id, ok: false, message: describeError(error) });
    }
  } else if (message.type === 'neuron') {
    try {
      const numbers = runner.neuron(message.selection);
      self.postMessage({ type: 'neuron', id: message.id, ok: true, numbers });
    } catch (error) {
      self.postMessage({ type: 'neuron', id: message.id, ok: false, message: describeError(error) });
    }
  } else if (message.type === 'openModel') {
    // Opening another model disposes the last: its memory is back before the new one loads.
    opened?.dispose();
    opened = null;
    try {
      opened = await openModelFolder(attn, message.files, { onProgress: (p) => self.postMessage({ type: 'progress', ...p }) });
      const { model, name, dtype } = opened;
      // The standard sequence: random tokens from the middle of the vocabulary (special tokens sit
      // at its ends), repeated once, as long as the model's positions allow (up to 2 × 50).
      const length = Math.min(50, Math.floor(model.maxPositions / 2));
      const ids = repeatedRandomIds(Math.floor(0.1 * model.vocabSize), Math.ceil(0.9 * model.vocabSize), length);
      const standardScores = headScores(model.forward(ids, { needWeights: true, logits: 'none' }).attentions, model.heads, ids);
      self.postMessage({
        type: 'model', id: message.id, ok: true, name, modelType: model.modelType, layers: model.layers, heads: model.heads, dtype,
        causal: model.modelType !== 'bert', standardScores, standardLength: length, memory: attn.stats(),
      });
    } catch (error) {
      self.postMessage({ type: 'model', id: message.id, ok: false, message: error.message, memory: attn.stats() });
    }
  } else if (message.type === 'modelAttention') {
    try {
      if (!opened) throw new Error('no model is open');
      const { ids, tokens } = opened.tokenizer.encode(message.text);
      if (ids.length > MAX_MODEL_TOKENS) throw new Error(`the text is ${ids.length} tokens; the viewer shows at most ${MAX_MODEL_TOKENS}`);
      if (ids.length === 0) throw new Error('the text has no tokens');
      const { attentions } = opened.model.forward(Int32Array.from(ids), { needWeights: true, logits: 'none' });
      const scores = headScores(attentions, opened.model.heads, ids);
      self.postMessage({ type: 'model', id: message.id, ok: true, tokens, attentions, scores }, attentions.map((a) => a.buffer));
    } catch (error) {
      self.postMessage({ type: 'model', id: message.id, ok: false, message: error.message });
    }
  } else if (message.type === 'compute') {
    try {
      const result = runner.run(message.request);
      const transfer = [result.weights, result.masked, result.outputMaxAbs]
        .filter(Boolean).map((array) => array.buffer);
      self.postMessage({ type: 'result', id: message.id, result }, transfer);
    } catch (error) {
      self.postMessage({ type: 'error', id: message.id, message: describeError(error) });
    }
  }
});

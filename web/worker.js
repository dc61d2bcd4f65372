// The demo's compute worker: runs attention through the package's public entry, imported exactly as
// a user would, so the page stays responsive while wasm works. main.js sends one request at a time
// and keeps only the latest change waiting, so nothing queues up here. runner.js does the work.
//
// Messages in:  { type: 'init', threads }
//               { type: 'file', id, config, stateDict }     a MultiheadAttention to load
//               { type: 'compute', id, request }            see runner.js
//               { type: 'neuron', id, selection }           the neuron view's numbers (runner.js)
//               { type: 'ablate', id, request }             what removing heads changes (runner.js)
//               { type: 'predict', id, request }            the next tokens at a position (runner.js)
//               { type: 'cancel', id }                      stops the compute request `id` (an opened
//                                                           model's run) between two layers
//               { type: 'recycle', weights }                a model's last pictures (trained or opened), which
//                                                           the page no longer reads: the next ones
//                                                           are pooled into them (runner.js)
//               { type: 'openModel', id, files }            a Hugging Face model folder (runner.js
//                                                           openFolder); then requests of kind 'opened'
// Messages out: { type: 'ready', features, build, crossOriginIsolated } | { type: 'fatal', message }
//               { type: 'file', id, ok, message? }
//               { type: 'result', id, result } | { type: 'error', id, message }
//               { type: 'neuron', id, ok, numbers | message }
//               { type: 'ablate', id, ok, result | message }
//               { type: 'predict', id, ok, predictions | message }
//               { type: 'layer', id, layer, model, weights, masked, rows, cols }
//                                                           an opened model's layer done during the
//                                                           compute request `id`: its heads' pictures
//                                                           [heads, rows, cols] (runner.js run()) and
//                                                           the model's { name, openId, modelType, layers,
//                                                           heads, scores (null until the first
//                                                           text's forward is done), standardLength }
//               { type: 'progress', phase, done, total }    while a model folder opens (phase
//                                                           'reading': bytes; 'loading': layers), and
//                                                           while an opened model runs ('forward'; then
//                                                           'scoring': its heads on the standard sequence,
//                                                           after its first text)
//               { type: 'model', id, ok, message? | ...}    { name, modelType, layers, heads, dtype,
//                                                           streamed, standardLength, memory: the package's
//                                                           stats() }
import { init } from '../dist/index.mjs';
import { TrainedModel } from './model.js';
import { AttentionRunner } from './runner.js';

let runner = null;
let attn = null;
const running = new Map(); // compute request id → the AbortController of its run

const describeError = (error) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error));

async function fetchBytes(name) {
  const response = await fetch(new URL(`./model/${name}`, import.meta.url));
  if (!response.ok) throw new Error(`model/${name}: HTTP ${response.status}`);
  return [name, await response.arrayBuffer()];
}

/** The trained model (scripts/train_demo_model.py): its folder opened by the package's openModel. */
async function loadModel(attn) {
  return TrainedModel.open(attn, new Map(await Promise.all(['config.json', 'model.safetensors'].map(fetchBytes))));
}

// A request answered { type, id, ok: true, ...what work() gives } or { type, id, ok: false, message },
// with transferOf(answer) moved rather than copied.
async function answer(message, work, transferOf = () => []) {
  try {
    const fields = await work();
    self.postMessage({ type: message.type, id: message.id, ok: true, ...fields }, transferOf(fields));
  } catch (error) {
    self.postMessage({ type: message.type, id: message.id, ok: false, message: describeError(error) });
  }
}

// openModel's progress as the page's bar shows it: bytes while the headers are read, then layers.
const progressOf = ({ phase, layer, layers, bytesRead, bytesTotal }) =>
  (phase === 'reading' ? { phase, done: bytesRead, total: bytesTotal } : { phase, done: layer, total: layers });

self.addEventListener('message', async ({ data: message }) => {
  if (message.type === 'init') {
    try {
      // threads > 1 takes the pthreads build when this worker is cross-origin isolated; the
      // package falls back to one thread itself otherwise (features.threads says which).
      attn = await init({ threads: message.threads });
      runner = new AttentionRunner(attn);
      try {
        await runner.setModel(await loadModel(attn));
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
    await answer(message, () => {
      runner.loadFile(message);
      return {};
    });
  } else if (message.type === 'neuron') {
    await answer(message, async () => ({ numbers: await runner.neuron(message.selection) }));
  } else if (message.type === 'openModel') {
    // A run of the model being replaced stops before its model is disposed.
    for (const controller of running.values()) controller.abort();
    try {
      const info = await runner.openFolder(message.files, (p) => self.postMessage({ type: 'progress', ...progressOf(p) }));
      self.postMessage({ type: 'model', id: message.id, ok: true, ...info, memory: attn.stats() });
    } catch (error) {
      self.postMessage({ type: 'model', id: message.id, ok: false, message: error.message, memory: attn.stats() });
    }
  } else if (message.type === 'ablate') {
    await answer(message, async () => ({ result: await runner.ablate(message.request) }), ({ result }) => [result.delta.buffer]);
  } else if (message.type === 'predict') {
    await answer(message, async () => ({ predictions: await runner.predict(message.request) }));
  } else if (message.type === 'cancel') {
    running.get(message.id)?.abort();
  } else if (message.type === 'recycle') {
    runner.spare = message.weights;
  } else if (message.type === 'compute') {
    const controller = new AbortController();
    running.set(message.id, controller);
    try {
      const onProgress = (p) => self.postMessage({ type: 'progress', ...progressOf(p) });
      const onLayer = (layer, picture) => self.postMessage({ type: 'layer', id: message.id, layer, model: runner.openedInfo(), ...picture },
        [picture.weights.buffer, picture.masked.buffer]);
      const result = await runner.run(message.request, { signal: controller.signal, onProgress, onLayer });
      const transfer = [result.weights, result.masked, result.outputMaxAbs]
        .filter(Boolean).map((array) => array.buffer);
      self.postMessage({ type: 'result', id: message.id, result }, transfer);
    } catch (error) {
      self.postMessage({ type: 'error', id: message.id, message: describeError(error) });
    } finally {
      running.delete(message.id);
    }
  }
});

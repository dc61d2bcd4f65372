// The demo's compute worker: runs attention through the package's public entry, imported exactly as
// a user would, so the page stays responsive while wasm works. main.js sends one request at a time
// and keeps only the latest change waiting, so nothing queues up here. runner.js does the work.
//
// Messages in:  { type: 'init', threads }
//               { type: 'file', id, config, stateDict }     a MultiheadAttention to load
//               { type: 'compute', id, request }            see runner.js
// Messages out: { type: 'ready', features, build, crossOriginIsolated } | { type: 'fatal', message }
//               { type: 'file', id, ok, message? }
//               { type: 'result', id, result } | { type: 'error', id, message }
import { init } from '../dist/index.mjs';
import { AttentionRunner } from './runner.js';

let runner = null;

const describeError = (error) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error));

self.addEventListener('message', async ({ data: message }) => {
  if (message.type === 'init') {
    try {
      // threads > 1 takes the pthreads build when this worker is cross-origin isolated; the
      // package falls back to one thread itself otherwise (features.threads says which).
      const attn = await init({ threads: message.threads });
      runner = new AttentionRunner(attn);
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

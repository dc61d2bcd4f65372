// The engine panel: the package's features in the worker, the forward and update times, and the
// exact call that ran.
import { $, el, ui } from './page.js';

export function showFeatures() {
  const { simd, threads, version } = ui.features;
  // Relaxed builds fuse their multiply-adds (relaxed SIMD): the engine's fastest.
  el.simd.textContent = !simd ? 'no' : ui.build.endsWith('relaxed') ? 'yes, relaxed (FMA)' : 'yes';
  el.threads.textContent = String(threads);
  el.version.textContent = version;
  el.isolated.textContent = `${globalThis.crossOriginIsolated ? 'yes' : 'no'} (page), ${ui.crossOriginIsolated ? 'yes' : 'no'} (worker)`;
}

export function showTimes() {
  const r = ui.shown;
  const { simd, threads } = ui.features;
  // The model's time also covers its norms and MLP in JS and the pictures of its window.
  const what = r.model ? 'model' : 'forward';
  $('#speed').textContent = `${what} ${r.forwardMs.toFixed(1)} ms, attention in wasm (${simd ? 'SIMD' : 'scalar'}, ` +
    `${threads} thread${threads > 1 ? 's' : ''}) · update ${r.updateMs.toFixed(0)} ms`;
  el.forwardTime.textContent = `${r.forwardMs.toFixed(2)} ms`;
  el.updateTime.textContent = `${r.updateMs.toFixed(1)} ms (worker ${r.workerMs.toFixed(1)} ms)`;
  el.apiCall.textContent = r.call;
}

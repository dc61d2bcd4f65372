// The engine panel: the package's features in the worker, the forward and update times, and the
// exact call that ran. It keeps what the worker said it runs (engineInfo()).
import { $ } from './page.js';

const dom = {
  simd: $('#feature-simd'),
  threads: $('#feature-threads'),
  version: $('#feature-version'),
  isolated: $('#feature-isolated'),
  forwardTime: $('#forward-time'),
  updateTime: $('#update-time'),
  apiCall: $('#api-call'),
  speed: $('#speed'),
};

let engine = null; // { features, build, crossOriginIsolated } from the worker's 'ready'

/** What the worker runs: the package's features, its build, and whether the worker is isolated. */
export const engineInfo = () => engine;

/** The worker's 'ready' message: { features, build, crossOriginIsolated }. */
export function showFeatures({ features, build, crossOriginIsolated }) {
  engine = { features, build, crossOriginIsolated };
  const { simd, threads, version } = features;
  // Relaxed builds fuse their multiply-adds (relaxed SIMD): the engine's fastest.
  dom.simd.textContent = !simd ? 'no' : build.endsWith('relaxed') ? 'yes, relaxed (FMA)' : 'yes';
  dom.threads.textContent = String(threads);
  dom.version.textContent = version;
  dom.isolated.textContent = `${globalThis.crossOriginIsolated ? 'yes' : 'no'} (page), ${crossOriginIsolated ? 'yes' : 'no'} (worker)`;
}

/** A result's times and call. */
export function showTimes(r) {
  const { simd, threads } = engine.features;
  // The model's time also covers its norms and MLP and the pictures of its window.
  const what = r.model ? 'model' : 'forward';
  dom.speed.textContent = `${what} ${r.forwardMs.toFixed(1)} ms, attention in wasm (${simd ? 'SIMD' : 'scalar'}, ` +
    `${threads} thread${threads > 1 ? 's' : ''}) · update ${r.updateMs.toFixed(0)} ms`;
  dom.forwardTime.textContent = `${r.forwardMs.toFixed(2)} ms`;
  dom.updateTime.textContent = `${r.updateMs.toFixed(1)} ms (worker ${r.workerMs.toFixed(1)} ms)`;
  dom.apiCall.textContent = r.call;
}

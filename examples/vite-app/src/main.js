import { run } from './attention.js';

function show(id, outcome) {
  document.getElementById(`${id}-status`).textContent = outcome.error
    ? outcome.error
    : `simd ${outcome.result.features.simd}, threads ${outcome.result.features.threads}, output [${outcome.result.output.map((x) => x.toFixed(4)).join(', ')}]`;
  document.getElementById(`${id}-result`).textContent = JSON.stringify(outcome);
}

run('page').then(
  (result) => show('page', { result }),
  (error) => show('page', { error: `${error.name}: ${error.message}` }),
);

const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
worker.addEventListener('message', ({ data }) => show('worker', data));
worker.addEventListener('error', (event) => show('worker', { error: `worker error: ${event.message}` }));

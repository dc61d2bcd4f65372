// Asks worker.js for `cycles` instances (?cycles=30), each created, used and disposed (unless
// ?dispose=0, the calibration run), and publishes what it reports in #result.
const params = new URLSearchParams(location.search);
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
worker.addEventListener('message', ({ data }) => {
  document.getElementById('result').textContent = JSON.stringify(data);
  document.body.dataset.state = data.error ? 'error' : 'ready';
});
worker.postMessage({ cycles: Number(params.get('cycles') ?? 30), dispose: params.get('dispose') !== '0' });

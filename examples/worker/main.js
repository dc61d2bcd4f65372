// Starts the module worker, sends it a batch and shows what comes back. Input buffers are
// transferred, not copied; so are the results on the way back.
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });

const show = (id, text) => {
  document.getElementById(id).textContent = text;
};

function request(message, transfer = []) {
  return new Promise((resolve, reject) => {
    const id = Math.random();
    const onMessage = ({ data }) => {
      if (data.id !== id) return;
      worker.removeEventListener('message', onMessage);
      if (data.error) reject(new Error(data.error));
      else resolve(data);
    };
    worker.addEventListener('message', onMessage);
    worker.postMessage({ ...message, id }, transfer);
  });
}

try {
  const { features, crossOriginIsolated } = await request({ type: 'init', threads: 2 });
  show('features', `SIMD ${features.simd}, ${features.threads} thread(s), version ${features.version}`);
  // (L, N, E) = (4, 1, 8): self-attention over four tokens.
  const x = Float32Array.from({ length: 4 * 8 }, (_, i) => Math.cos(i));
  const result = await request({ type: 'forward', shape: [4, 1, 8], data: x }, [x.buffer]);
  show('shape', JSON.stringify(result.output.shape));
  show('result', JSON.stringify({
    crossOriginIsolated,
    features,
    outputShape: result.output.shape,
    weightsShape: result.weights.shape,
    weightRowSums: result.weightRowSums,
    output: [...result.output.data],
  }));
  document.body.dataset.state = 'ready';
} catch (error) {
  show('features', `${error.name}: ${error.message}`);
  document.body.dataset.state = 'error';
}

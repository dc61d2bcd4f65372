// A module worker ({ type: 'module' }) that owns one attention-wasm instance. Messages in:
//   { id, type: 'init', threads }            -> { id, features, crossOriginIsolated }
//   { id, type: 'forward', shape, data }     -> { id, output, weights, weightRowSums }
// Errors come back as { id, error }.
import { init } from '../../dist/index.mjs';

let attn;
let mha;

// Deterministic parameters for nn.MultiheadAttention(8, 2); a real app would load a state_dict.
function parameters(E) {
  const tensor = (shape) => {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.7) * 0.3;
    return { shape, data };
  };
  return {
    in_proj_weight: tensor([3 * E, E]),
    in_proj_bias: tensor([3 * E]),
    'out_proj.weight': tensor([E, E]),
    'out_proj.bias': tensor([E]),
  };
}

self.addEventListener('message', async ({ data: message }) => {
  const { id } = message;
  try {
    if (message.type === 'init') {
      // A second 'init' replaces the instance: the old one's workers and memory go with dispose().
      attn?.dispose();
      // In a cross-origin isolated page the worker is isolated too: threads work here.
      attn = await init({ threads: message.threads });
      mha = new attn.MultiheadAttention(8, 2).loadStateDict(parameters(8));
      self.postMessage({ id, features: { ...attn.features }, crossOriginIsolated: self.crossOriginIsolated === true });
    } else if (message.type === 'forward') {
      const x = { shape: message.shape, data: message.data };
      const { output, weights } = mha.forward(x); // key = value = x; weights [N, n, m]
      const m = weights.shape.at(-1);
      const weightRowSums = [];
      for (let row = 0; row < weights.data.length / m; row++)
        weightRowSums.push(weights.data.subarray(row * m, (row + 1) * m).reduce((a, b) => a + b, 0));
      self.postMessage({ id, output, weights, weightRowSums }, [output.data.buffer, weights.data.buffer]);
    }
  } catch (error) {
    self.postMessage({ id, error: `${error.name}: ${error.message}` });
  }
});

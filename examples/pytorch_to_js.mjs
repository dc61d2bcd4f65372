// Loads a MultiheadAttention exported by export_pytorch.py and reproduces PyTorch's output.
// Usage: node examples/pytorch_to_js.mjs [export.json]
import { readFile } from 'node:fs/promises';
import { init } from 'attention-wasm';

const path = process.argv[2] ?? new URL('./mha_export.json', import.meta.url);
const { config, stateDict, example } = JSON.parse(await readFile(path, 'utf8'));
const tensor = ({ shape, data }) => ({ shape, data: Float32Array.from(data) });

const attn = await init();
const { embedDim, numHeads, ...opts } = config;
const mha = new attn.MultiheadAttention(embedDim, numHeads, opts);
mha.loadStateDict(Object.fromEntries(Object.entries(stateDict).map(([name, t]) => [name, tensor(t)])));

const { output, weights } = mha.forward(tensor(example.query), tensor(example.key), tensor(example.value), {
  keyPaddingMask: { shape: example.keyPaddingMask.shape, data: Uint8Array.from(example.keyPaddingMask.data) },
});

mha.dispose(); // frees its wasm memory now rather than at garbage collection

const maxError = (got, want) => Math.max(...got.data.map((x, i) => Math.abs(x - want.data[i]) / (1 + Math.abs(want.data[i]))));
console.log(JSON.stringify({
  outputShape: output.shape,
  weightsShape: weights.shape,
  outputError: maxError(output, example.output),
  weightsError: maxError(weights, example.weights),
}));

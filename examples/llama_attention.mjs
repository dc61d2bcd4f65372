// Loads the Llama-style attention block export_llama_attention.py exported to .safetensors, runs
// its prefill and 32 decode steps through a KVCache, and compares every step with PyTorch.
// Usage: node examples/llama_attention.mjs [llama_attention.safetensors]
import { readFile } from 'node:fs/promises';
import { init } from 'attention-wasm';

const path = process.argv[2] ?? new URL('./llama_attention.safetensors', import.meta.url);
const bytes = await readFile(path);
// The exporter keeps its settings as JSON in the header's __metadata__ (8-byte size, then JSON).
const header = JSON.parse(bytes.subarray(8, 8 + Number(bytes.readBigUInt64LE(0))).toString('utf8'));
const config = JSON.parse(header.__metadata__.config);

const attn = await init();
const tensors = attn.loadSafetensors(bytes);
const block = new attn.GroupedQueryAttention(config.hiddenSize, config.numHeads, config.numKeyValueHeads, { ropeBase: config.ropeBase });
block.loadStateDict(tensors, { prefix: config.prefix });

const x = tensors.get('example.x');
const want = tensors.get('example.output');
const width = config.hiddenSize;
const tokens = (from, to) => ({ shape: [1, to - from, width], data: x.data.subarray(from * width, to * width) });

const cache = block.createCache(config.prefill + config.decodeSteps);
const outputs = [block.forward(tokens(0, config.prefill), { cache }).output];
for (let t = config.prefill; t < config.prefill + config.decodeSteps; t++) outputs.push(block.forward(tokens(t, t + 1), { cache }).output);

let maxError = 0;
let at = 0;
for (const { data } of outputs) {
  for (let i = 0; i < data.length; i++) maxError = Math.max(maxError, Math.abs(data[i] - want.data[at + i]) / (1 + Math.abs(want.data[at + i])));
  at += data.length;
}
console.log(JSON.stringify({ steps: outputs.length, cacheLength: cache.length, maxError }));
attn.dispose(); // frees the instance's wasm memory (the block and cache with it)

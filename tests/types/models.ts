// attention-wasm/models as users' TypeScript sees it (tests/js/types.test.js runs tsc on it).
import { init } from 'attention-wasm';
import { DEFAULT_RESIDENT_BYTES, MODEL_TYPES, openModel } from 'attention-wasm/models';
import type { Model, ModelOutput, ModelProgress } from 'attention-wasm/models';

const attn = await init();
const controller = new AbortController();
const model: Model = await openModel(attn, './checkpoint', {
  dtype: 'auto', residentBytes: DEFAULT_RESIDENT_BYTES, signal: controller.signal,
  onProgress: ({ phase, layer, layers, bytesRead, bytesTotal }: ModelProgress) => console.log(phase, layer, layers, bytesRead, bytesTotal),
});
const fromFiles: Model = await openModel(attn, [new File([], 'config.json')]);
const fromMap: Model = await openModel(attn, new Map<string, Blob | Uint8Array | ArrayBuffer>([['config.json', new Uint8Array(2)]]));
const types: readonly string[] = MODEL_TYPES;

const out: ModelOutput = await model.forward([1, 2, 3], { outputAttentions: true, outputHiddenStates: true, logits: 'all', headMask: [[1, 0]] });
const weights: Float32Array | undefined = out.attentions?.[0]?.data;
const hidden: readonly number[] | undefined = out.hiddenStates?.[0]?.shape;
const logits: Float32Array | undefined = out.logits?.data;
const batch = await model.forward([Int32Array.of(1, 2), Int32Array.of(0, 3)], { attentionMask: { data: [1, 1, 0, 1], shape: [2, 2] }, logits: 'none' });
const into = await model.forward([1, 2], { outputAttentions: true, out: { attentions: new Float32Array(1024) } });

const parts = await model.project(out.hiddenStates![0]!, { layer: 0 });
const scale: number = parts.scale;
const window: number | null = parts.window;
const ids: number[] = await model.generate([1, 2], { maxNewTokens: 4, doSample: true, temperature: 0.8, topK: 40, topP: 0.9, seed: 1, onToken: (id: number) => console.log(id), cacheDtype: 'f16' });
const description = [model.modelType, model.layers, model.heads, model.kvHeads, model.headDim, model.vocabSize, model.maxPositions, model.dtype, model.streamed, model.weightBytes];
await model.dispose();
await fromFiles.dispose();
await fromMap.dispose();
console.log(types, weights, hidden, logits, batch, into, scale, window, ids, description);

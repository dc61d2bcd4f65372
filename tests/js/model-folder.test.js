// Opening a Hugging Face model folder as the viewer does (web/models/folder.js), with Node stand-ins
// for the browser's File objects: each fixture folder of tests/fixtures/models/ opens, tokenises
// and runs as its reference says; shards with their index read as the whole file; opening models
// in turn and disposing them gives the memory back; a folder that lacks a file, holds .bin weights
// or an unsupported model_type is refused with a message that says which and why.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { init } from 'attention-wasm';

import { ModelFolderError, openModelFolder } from '../../web/models/folder.js';
import { TOLERANCE, maxRelativeError, safetensorsBytes, toTensor } from './helpers.js';

const ROOT = new URL('../fixtures/models/', import.meta.url);
const NAMES = readdirSync(ROOT).sort();

// A File as <input webkitdirectory> gives it: its path in the folder, its size, its bytes.
function file(folder, name, bytes) {
  return { name, webkitRelativePath: `${folder}/${name}`, size: bytes.byteLength, arrayBuffer: async () => bytes.slice().buffer };
}

function folderFiles(folder) {
  return readdirSync(new URL(`${folder}/`, ROOT)).filter((name) => name !== 'reference.json')
    .map((name) => file(folder, name, new Uint8Array(readFileSync(new URL(`${folder}/${name}`, ROOT)))));
}

const reference = (folder) => JSON.parse(readFileSync(new URL(`${folder}/reference.json`, ROOT), 'utf8'));

let attn;
before(async () => {
  attn = await init();
});
after(() => attn.dispose());

for (const folder of NAMES) {
  test(`${folder}: opens, tokenises and runs as its reference`, async () => {
    const progress = [];
    const opened = await openModelFolder(attn, folderFiles(folder), { onProgress: (p) => progress.push(p) });
    const ref = reference(folder);
    const { ids, tokens } = opened.tokenizer.encode(ref.text);
    assert.deepEqual({ ids, tokens }, { ids: ref.ids, tokens: ref.tokens });
    const { logits, attentions } = opened.model.forward(Int32Array.from(ids), { needWeights: true });
    assert.ok(maxRelativeError(logits, toTensor(ref.logits).data) <= TOLERANCE);
    assert.ok(maxRelativeError(attentions[0], toTensor(ref.attentions).data.subarray(0, attentions[0].length)) <= TOLERANCE);
    assert.equal(opened.dtype, 'f32');
    assert.deepEqual(progress.at(-1), { phase: 'loading', done: 1, total: 1 });
    assert.ok(progress.some((p) => p.phase === 'reading' && p.done === p.total));
    opened.dispose();
  });
}

test('an f16 checkpoint stays binary16: the attention projections and every Linear, within f16 rounding of the f32 run', async () => {
  const folder = 'llama-gqa';
  const files = folderFiles(folder).map((f) => (f.name !== 'config.json' ? f
    : file(folder, 'config.json', new TextEncoder().encode(JSON.stringify({ ...JSON.parse(readFileSync(new URL(`${folder}/config.json`, ROOT), 'utf8')), torch_dtype: 'float16' })))));
  const half = await openModelFolder(attn, files);
  const whole = await openModelFolder(attn, folderFiles(folder));
  try {
    assert.equal(half.dtype, 'f16');
    for (const block of half.model.blocks) {
      assert.equal(block.attention.dtype, 'f16');
      for (const linear of [block.gate, block.up, block.down]) assert.equal(linear.dtype, 'f16');
    }
    assert.equal(whole.model.blocks[0].attention.dtype, 'f32');
    const ids = Int32Array.from(reference(folder).ids);
    const err = maxRelativeError(half.model.forward(ids).logits, whole.model.forward(ids).logits);
    assert.ok(err > 0 && err < 2e-2, `f16 weights move the logits by ${err}`);
  } finally {
    half.dispose();
    whole.dispose();
  }
});

test('shards named by model.safetensors.index.json read as the whole file', async () => {
  const folder = 'llama-gqa';
  const whole = attn.loadSafetensors(readFileSync(new URL(`${folder}/model.safetensors`, ROOT)));
  const names = [...whole.keys()];
  const half = Math.ceil(names.length / 2);
  const shard = (part) => safetensorsBytes(Object.fromEntries(part.map((name) => [name, whole.get(name)])));
  const shardNames = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  const index = { metadata: {}, weight_map: Object.fromEntries(names.map((name, i) => [name, shardNames[i < half ? 0 : 1]])) };
  const files = folderFiles(folder).filter((f) => f.name !== 'model.safetensors');
  files.push(file(folder, shardNames[0], shard(names.slice(0, half))), file(folder, shardNames[1], shard(names.slice(half))));
  files.push(file(folder, 'model.safetensors.index.json', new TextEncoder().encode(JSON.stringify(index))));
  const opened = await openModelFolder(attn, files);
  const ref = reference(folder);
  assert.ok(maxRelativeError(opened.model.forward(Int32Array.from(ref.ids)).logits, toTensor(ref.logits).data) <= TOLERANCE);
  opened.dispose();
  // An index naming a shard the folder lacks.
  await assert.rejects(openModelFolder(attn, files.filter((f) => f.name !== shardNames[1])),
    (err) => err instanceof ModelFolderError && err.message.includes(shardNames[1]));
});

test('opening three models in turn and disposing each gives the memory back', async () => {
  const live = attn.stats().liveObjects;
  let heap;
  for (let round = 0; round < 2; round++) {
    for (const folder of ['llama-gqa', 'gpt2', 'bert']) {
      const opened = await openModelFolder(attn, folderFiles(folder));
      assert.ok(attn.stats().liveObjects > live);
      opened.dispose();
      assert.equal(attn.stats().liveObjects, live, `${folder}: every module freed`);
    }
    // The first round sizes the heap; the second one needs no more.
    if (round === 0) heap = attn.stats().wasmHeapBytes;
    else assert.equal(attn.stats().wasmHeapBytes, heap);
  }
});

test('a folder the viewer cannot open says which file or field and why', async () => {
  const files = folderFiles('gpt2');
  const without = (name) => files.filter((f) => f.name !== name);
  const refused = (promise, ...parts) => assert.rejects(promise, (err) => {
    assert.ok(err instanceof ModelFolderError, String(err));
    for (const part of parts) assert.ok(err.message.includes(part), `${err.message} includes ${part}`);
    return true;
  });
  await refused(openModelFolder(attn, without('config.json')), 'no config.json');
  await refused(openModelFolder(attn, without('tokenizer.json')), 'no tokenizer.json');
  await refused(openModelFolder(attn, without('model.safetensors')), 'no model.safetensors');
  await refused(openModelFolder(attn, [...without('model.safetensors'), file('gpt2', 'pytorch_model.bin', new Uint8Array(8))]), '.bin', '.safetensors');
  const t5 = file('gpt2', 'config.json', new TextEncoder().encode(JSON.stringify({ model_type: 't5' })));
  await refused(openModelFolder(attn, [...without('config.json'), t5]), '"t5"', 'llama', 'gpt2', 'bert');
  const broken = file('gpt2', 'config.json', new TextEncoder().encode('{ "model_type": '));
  await refused(openModelFolder(attn, [...without('config.json'), broken]), 'config.json is not valid JSON');
  // A weights file that lacks a tensor the model needs names it.
  const tensors = attn.loadSafetensors(readFileSync(new URL('gpt2/model.safetensors', ROOT)));
  tensors.delete('transformer.h.1.mlp.c_fc.weight');
  const partial = file('gpt2', 'model.safetensors', safetensorsBytes(Object.fromEntries(tensors)));
  await refused(openModelFolder(attn, [...without('model.safetensors'), partial]), "'transformer.h.1.mlp.c_fc.weight'");
  assert.equal(attn.stats().liveObjects, 0, 'nothing left behind by the refused folders');
});

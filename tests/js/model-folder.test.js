// Opening a Hugging Face model folder as the viewer does (web/model-folder.js: the package's
// openModel and the folder's tokenizer.json), with Node's File objects as a folder input gives them:
// each fixture folder of tests/fixtures/models/ opens, tokenises and runs as its reference says;
// opening models in turn and disposing them gives the memory back; a folder without a tokenizer is
// refused with a message that says so, and the package's refusals reach the page as they are.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { openModelFolder } from '../../web/model-folder.js';
import { TOLERANCE, maxRelativeError, toTensor } from './helpers.js';

const ROOT = new URL('../fixtures/models/', import.meta.url);
const NAMES = readdirSync(ROOT).sort();

// A File as <input webkitdirectory> gives it: its path in the folder, its size, its bytes.
function file(folder, name, bytes) {
  const made = new File([bytes], name);
  Object.defineProperty(made, 'webkitRelativePath', { value: `${folder}/${name}` });
  return made;
}

function folderFiles(folder) {
  return readdirSync(new URL(`${folder}/`, ROOT)).filter((name) => name !== 'reference.json')
    .map((name) => file(folder, name, readFileSync(new URL(`${folder}/${name}`, ROOT))));
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
    const { logits, attentions } = await opened.model.forward(ids, { outputAttentions: true, logits: 'all' });
    assert.ok(maxRelativeError(logits.data, toTensor(ref.logits).data) <= TOLERANCE);
    assert.ok(maxRelativeError(attentions[0].data, toTensor(ref.attentions).data.subarray(0, attentions[0].data.length)) <= TOLERANCE);
    assert.equal(opened.name, opened.model.config._name_or_path ?? folder);
    assert.deepEqual(progress.at(-1), { phase: 'loading', layer: opened.model.layers, layers: opened.model.layers, bytesRead: progress.at(-1).bytesRead, bytesTotal: progress[0].bytesTotal });
    await opened.dispose();
  });
}

test('opening three models in turn and disposing each gives the memory back', async () => {
  const live = attn.stats().liveObjects;
  let heap;
  for (let round = 0; round < 2; round++) {
    for (const folder of ['llama-gqa', 'gpt2', 'bert']) {
      const opened = await openModelFolder(attn, folderFiles(folder));
      assert.ok(attn.stats().liveObjects > live);
      await opened.dispose();
      assert.equal(attn.stats().liveObjects, live, `${folder}: every module freed`);
    }
    // The first round sizes the heap; the second one needs no more.
    if (round === 0) heap = attn.stats().wasmHeapBytes;
    else assert.equal(attn.stats().wasmHeapBytes, heap);
  }
});

test('a folder the viewer cannot open says which file and why', async () => {
  const files = folderFiles('gpt2');
  const without = (name) => files.filter((f) => f.name !== name);
  await assert.rejects(openModelFolder(attn, without('tokenizer.json')), /no tokenizer\.json/);
  const broken = file('gpt2', 'tokenizer.json', new TextEncoder().encode('{ "model": '));
  await assert.rejects(openModelFolder(attn, [...without('tokenizer.json'), broken]), /tokenizer\.json is not valid JSON/);
  await assert.rejects(openModelFolder(attn, without('config.json')), (error) => error instanceof AttentionError && /config\.json/.test(error.message));
  await assert.rejects(openModelFolder(attn, [...without('model.safetensors'), file('gpt2', 'pytorch_model.bin', new Uint8Array(8))]), /pytorch_model\.bin/);
  assert.equal(attn.stats().liveObjects, 0, 'nothing left behind by the refused folders');
});

// attention-wasm/models on tiny random-weight checkpoints in Hugging Face's layout
// (tests/fixtures/models/, written by hf_models_fixture.py with a float64 reference transcribed
// from transformers): every family's attentions, hidden states and logits from the public subpath,
// resident and streamed (bit-identical), from a folder path, a Map and Files; sharded folders;
// batches; generate; and every kind of bad folder and bad call, each an AttentionError naming the
// file, tensor or argument, with the instance's memory back where it was.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, mock, test } from 'node:test';

import { Tokenizer } from '@huggingface/tokenizers';
import { AttentionError, init } from 'attention-wasm';
import { DEFAULT_RESIDENT_BYTES, MODEL_TYPES, openModel } from 'attention-wasm/models';

import { largeLlamaFolder } from './checkpoint-writer.js';
import { BUILDS, TOLERANCE, maxRelativeError, safetensorsBytes, toTensor } from './helpers.js';

const ROOT = new URL('../fixtures/models/', import.meta.url);
const NAMES = readdirSync(ROOT).sort();
const folder = (name) => new URL(`${name}/`, ROOT);
const read = (name, file) => readFileSync(new URL(file, folder(name)));
const json = (name, file) => JSON.parse(read(name, file).toString('utf8'));
const reference = (name) => json(name, 'reference.json');
// The folder as a Map of file name → bytes, with `changes` (name → bytes, or null to leave out).
const folderMap = (name, changes = {}) => new Map([...new Map([...readdirSync(folder(name)).filter((file) => file !== 'reference.json')
  .map((file) => [file, read(name, file)]), ...Object.entries(changes)])].filter(([, bytes]) => bytes !== null));

const concat = (tensors) => Float32Array.from(tensors.flatMap((tensor) => Array.from(tensor.data)));

function assertMatches(result, ref, what) {
  const check = (got, want, part) => {
    const error = maxRelativeError(got, toTensor(want).data);
    assert.ok(error <= TOLERANCE, `${what} ${part}: max relative error ${error}`);
  };
  check(concat(result.attentions), ref.attentions, 'attentions');
  check(concat(result.hiddenStates), ref.hidden_states, 'hidden states');
  check(result.logits.data, ref.logits, 'logits');
}

test('MODEL_TYPES lists the families', () => {
  assert.deepEqual([...MODEL_TYPES].sort(), ['bert', 'gemma', 'gemma2', 'gemma3_text', 'gpt2', 'gpt_neox', 'llama', 'mistral', 'olmo2', 'phi3', 'qwen2', 'qwen3'].sort());
  assert.equal(DEFAULT_RESIDENT_BYTES, 2 ** 30);
});

for (const name of NAMES) {
  test(`${name}: the npm tokenizer gives the reference's ids and tokens`, () => {
    const encoded = new Tokenizer(json(name, 'tokenizer.json'), json(name, 'tokenizer_config.json')).encode(reference(name).text);
    assert.deepEqual({ ids: encoded.ids, tokens: encoded.tokens }, { ids: reference(name).ids, tokens: reference(name).tokens });
  });
}

for (const build of BUILDS) {
  describe(`${build.name} build: openModel`, () => {
    let attn;
    before(async () => {
      attn = await init(build.opts);
    });
    after(() => attn.dispose());

    for (const name of NAMES) {
      test(`${name}: attentions, hidden states and logits as transformers', resident and streamed bit for bit`, async () => {
        const ref = reference(name);
        const resident = await openModel(attn, folder(name));
        const streamed = await openModel(attn, fileURLPath(folder(name)), { residentBytes: 0 });
        try {
          assert.equal(resident.streamed, false);
          assert.equal(streamed.streamed, true);
          const opts = { outputAttentions: true, outputHiddenStates: true, logits: 'all' };
          const got = await resident.forward(ref.ids, opts);
          assertMatches(got, ref, name);
          const again = await streamed.forward(Int32Array.from(ref.ids), opts);
          assert.deepEqual(again, got, 'streamed = resident');
          const [layers, heads, t] = toTensor(ref.attentions).shape;
          assert.deepEqual(got.attentions[0].shape, [1, heads, t, t]);
          assert.equal(got.attentions.length, layers);
          assert.equal(got.hiddenStates.length, layers + 1);
          assert.deepEqual([resident.layers, resident.heads], [layers, heads]);
        } finally {
          await resident.dispose();
          await streamed.dispose();
        }
        assert.equal(attn.stats().liveObjects, 0);
      });
    }
  });
}

// A folder path given as a string (a URL object is covered beside it).
function fileURLPath(url) {
  return decodeURIComponent(url.pathname);
}

test('a folder path may be a file: URL string too', async () => {
  const attn = await init();
  const model = await openModel(attn, folder('gpt2').href);
  assert.equal(model.modelType, 'gpt2');
  await model.dispose();
  attn.dispose();
});

// Head `head`'s softmax rows from what model.project says the layer's attention reads.
function softmaxOfParts({ query, key, scale, softcap, window, causal }, head) {
  const [, heads, t, d] = query.shape;
  const kvHead = Math.floor(head / (heads / key.shape[1]));
  const rows = new Float32Array(t * t);
  for (let i = 0; i < t; i++) {
    const scores = Array.from({ length: t }, (_, j) => {
      if ((causal && j > i) || (window !== null && j <= i - window)) return -Infinity;
      let dot = 0;
      for (let c = 0; c < d; c++) dot += query.data[(head * t + i) * d + c] * key.data[(kvHead * t + j) * d + c];
      const scaled = dot * scale;
      return softcap === null ? scaled : softcap * Math.tanh(scaled / softcap);
    });
    const max = Math.max(...scores);
    const exp = scores.map((v) => Math.exp(v - max));
    const sum = exp.reduce((a, b) => a + b, 0);
    exp.forEach((v, j) => { rows[i * t + j] = v / sum; });
  }
  return rows;
}

describe('every family, against transformers: head_mask, greedy generate, project', () => {
  let attn;
  before(async () => {
    attn = await init();
  });
  after(() => attn.dispose());

  for (const name of NAMES) {
    test(`${name}: headMask as HF's head_mask (a 0, a 0.5 and ones; [heads] for every layer too), streamed as resident`, async () => {
      const ref = reference(name);
      const resident = await openModel(attn, folder(name));
      const streamed = await openModel(attn, folder(name), { residentBytes: 0 });
      const opts = { outputAttentions: true, outputHiddenStates: true, logits: 'all', headMask: ref.head_mask.mask };
      const got = await resident.forward(ref.ids, opts);
      assertMatches(got, ref.head_mask, `${name} head_mask`);
      assert.deepEqual(await streamed.forward(ref.ids, opts), got);
      // Ones change nothing; one row [heads] applies to every layer.
      const ones = new Array(resident.heads).fill(1);
      assert.deepEqual(await resident.forward(ref.ids, { ...opts, headMask: ones }), await resident.forward(ref.ids, { ...opts, headMask: undefined }));
      const everyLayer = await resident.forward(ref.ids, { ...opts, headMask: Float32Array.from(ref.head_mask.mask[0]) });
      const asRows = await resident.forward(ref.ids, { ...opts, headMask: ref.head_mask.mask.map(() => ref.head_mask.mask[0]) });
      assert.deepEqual(everyLayer, asRows);
      await resident.dispose();
      await streamed.dispose();
    });

    test(`${name}: project() gives what each layer's attention reads: its softmax is every head's weights`, async () => {
      const ref = reference(name);
      const model = await openModel(attn, folder(name), { residentBytes: name === 'gemma2' ? 0 : undefined });
      const { hiddenStates } = await model.forward(ref.ids, { outputHiddenStates: true, logits: 'none' });
      const want = toTensor(ref.attentions);
      const [layers, heads, t] = want.shape;
      for (let layer = 0; layer < layers; layer++) {
        const parts = await model.project(hiddenStates[layer], { layer });
        assert.deepEqual(parts.query.shape, [1, heads, t, model.headDim]);
        assert.deepEqual(parts.key.shape, [1, model.kvHeads, t, model.headDim]);
        for (let head = 0; head < heads; head++) {
          const err = maxRelativeError(softmaxOfParts(parts, head), want.data.subarray((layer * heads + head) * t * t, (layer * heads + head + 1) * t * t));
          assert.ok(err <= TOLERANCE, `layer ${layer + 1} head ${head + 1}: max relative error ${err}`);
        }
      }
      await model.dispose();
    });

    if (reference(name).generate)
      test(`${name}: greedy generate gives HF's greedy ids`, async () => {
        const ref = reference(name);
        const model = await openModel(attn, folder(name));
        const got = await model.generate(ref.ids, { maxNewTokens: ref.generate.max_new_tokens });
        assert.deepEqual(got, [...ref.ids, ...ref.generate.ids]);
        await model.dispose();
      });
  }
});

describe('openModel: sources, options and results', () => {
  let attn;
  before(async () => {
    attn = await init();
  });
  after(() => attn.dispose());

  test('a Map of bytes, a Map of Blobs and Files give the folder path\'s results', async () => {
    const name = 'llama-gqa', ref = reference(name);
    const byPath = await openModel(attn, folder(name));
    const want = await byPath.forward(ref.ids, { outputAttentions: true, logits: 'all' });
    await byPath.dispose();
    const map = folderMap(name);
    const sources = [
      map,
      new Map([...map].map(([file, bytes]) => [file, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)])),
      new Map([...map].map(([file, bytes]) => [file, new Blob([bytes])])),
      [...map].map(([file, bytes]) => new File([bytes], file)),
    ];
    for (const source of sources)
      for (const residentBytes of [undefined, 0]) {
        const model = await openModel(attn, source, { residentBytes });
        assert.deepEqual(await model.forward(ref.ids, { outputAttentions: true, logits: 'all' }), want);
        await model.dispose();
      }
  });

  test('reads of a megabyte and more fill buffers reused layer after layer: a folder and Blobs give the bytes\' results, call after call', async () => {
    // Every read large enough to go through the model's read buffers; a second call reuses them.
    const dir = mkdtempSync(join(tmpdir(), 'attention-models-'));
    try {
      const files = largeLlamaFolder(json('llama-gqa', 'config.json'));
      for (const [file, bytes] of files) writeFileSync(join(dir, file), bytes);
      const ids = Array.from({ length: 24 }, (_, i) => (i * 7919) % 20000);
      const fromMap = await openModel(attn, files);
      const want = await fromMap.forward(ids, { outputAttentions: true, logits: 'all' });
      await fromMap.dispose();
      // A folder's file handles and Blobs' byte streams read into the buffers.
      for (const source of [dir, new Map([...files].map(([file, bytes]) => [file, new Blob([bytes])]))])
        for (const residentBytes of [undefined, 0]) {
          const model = await openModel(attn, source, { residentBytes });
          assert.equal(model.streamed, residentBytes === 0);
          for (const call of [1, 2]) assert.deepEqual(await model.forward(ids, { outputAttentions: true, logits: 'all' }), want, `call ${call}, residentBytes ${residentBytes}`);
          await model.dispose();
        }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a Blob byte stream that stalls is cancelled and read again: the forward is what it is without the stall', { timeout: 60_000 }, async () => {
    const files = largeLlamaFolder(json('llama-gqa', 'config.json'));
    const ids = Array.from({ length: 24 }, (_, i) => (i * 7919) % 20000);
    const plain = await openModel(attn, files, { residentBytes: 0 });
    const want = await plain.forward(ids, { outputAttentions: true, logits: 'all' });
    await plain.dispose();
    // The first byte stream of a large read never brings a byte, as Chromium's now and then did.
    class StallingBlob extends Blob {
      stalls = 1;
      slice(begin, end) {
        const part = super.slice(begin, end);
        if (part.size < 2 ** 20 || this.stalls === 0) return part;
        this.stalls--;
        return { size: part.size, arrayBuffer: () => part.arrayBuffer(), stream: () => new ReadableStream({ type: 'bytes', pull: () => new Promise(() => {}) }) };
      }
    }
    const blob = new StallingBlob([files.get('model.safetensors')]);
    const source = new Map([['config.json', new Blob([files.get('config.json')])], ['model.safetensors', blob]]);
    const warnings = [];
    const warn = console.warn;
    console.warn = (message) => warnings.push(message);
    // The stall is told from ten one-second ticks in which the event loop ran: mocked here.
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const model = await openModel(attn, source, { residentBytes: 0 });
      let settled = false;
      const forward = model.forward(ids, { outputAttentions: true, logits: 'all' }).finally(() => { settled = true; });
      while (!settled) {
        await new Promise((resolve) => setImmediate(resolve));
        mock.timers.tick(1000);
      }
      assert.deepEqual(await forward, want);
      await model.dispose();
    } finally {
      mock.timers.reset();
      console.warn = warn;
    }
    assert.equal(blob.stalls, 0, 'a read stalled');
    assert.ok(warnings.length >= 1 && /brought nothing for 10 s; reading them again/.test(warnings[0]), JSON.stringify(warnings));
  });

  test('shards with model.safetensors.index.json read as the single file', async () => {
    const name = 'gpt2', ref = reference(name);
    const { map, want } = await shardedGpt2(attn, ref);
    for (const residentBytes of [undefined, 0]) {
      const model = await openModel(attn, map, { residentBytes });
      assert.deepEqual(await model.forward(ref.ids, { outputAttentions: true, logits: 'all' }), want);
      await model.dispose();
    }
  });

  test("logits: 'last' is each row's last token of 'all', 'none' gives none; the attentions stay", async () => {
    const name = 'qwen3-qknorm', ref = reference(name);
    const model = await openModel(attn, folder(name));
    const all = await model.forward(ref.ids, { logits: 'all', outputAttentions: true });
    const last = await model.forward(ref.ids, { outputAttentions: true });
    const vocab = model.vocabSize;
    assert.deepEqual(last.logits, { data: all.logits.data.slice(-vocab), shape: [1, 1, vocab] });
    assert.deepEqual(last.attentions, all.attentions);
    const none = await model.forward(ref.ids, { logits: 'none' });
    assert.deepEqual(none, { logits: null, attentions: null, hiddenStates: null });
    await model.dispose();
  });

  test('out.attentions: every layer written into the one array given', async () => {
    const name = 'gemma2', ref = reference(name);
    const model = await openModel(attn, folder(name));
    const t = ref.ids.length;
    const want = await model.forward(ref.ids, { outputAttentions: true, logits: 'none' });
    const into = new Float32Array(model.layers * model.heads * t * t);
    const got = await model.forward(ref.ids, { outputAttentions: true, logits: 'none', out: { attentions: into } });
    got.attentions.forEach((layer, l) => {
      assert.equal(layer.data.buffer, into.buffer);
      assert.deepEqual(layer.data, want.attentions[l].data);
    });
    await model.dispose();
  });

  test('onLayer: each layer\'s attentions as outputAttentions returns them, as the layer finishes, resident and streamed', async () => {
    for (const name of NAMES) {
      const ref = reference(name);
      for (const residentBytes of [undefined, 0]) {
        const model = await openModel(attn, folder(name), { residentBytes });
        const headMask = Array.from({ length: model.heads }, (_, h) => (h === 1 ? 0.5 : 1));
        const want = await model.forward(ref.ids, { outputAttentions: true, headMask, logits: 'none' });
        const events = [], seen = [], arrays = new Set();
        const got = await model.forward(ref.ids, {
          headMask, logits: 'none',
          onProgress: ({ layer }) => events.push(`progress ${layer}`),
          // Awaited: the weights are still this layer's after a pause.
          onLayer: async (layer, { attentions }) => {
            events.push(`layer ${layer}`);
            await new Promise((resolve) => setTimeout(resolve, 1));
            arrays.add(attentions.data.buffer);
            seen.push({ data: attentions.data.slice(), shape: attentions.shape });
          },
        });
        const what = `${name}, residentBytes ${residentBytes}`;
        assert.deepEqual(events, Array.from({ length: model.layers }, (_, l) => [`layer ${l}`, `progress ${l + 1}`]).flat(), what);
        assert.deepEqual(seen, want.attentions, what);
        assert.equal(got.attentions, null, what);
        // Lent where the attention wrote them, views of the instance's memory: none copied out.
        assert.equal(arrays.size, 1, `${what}: one memory for every layer's weights`);
        assert.ok(arrays.values().next().value.byteLength > model.layers * want.attentions[0].data.byteLength, `${what}: the instance's memory`);
        // With outputAttentions, the callback sees the very tensors returned.
        const tensors = [];
        const both = await model.forward(ref.ids, { headMask, logits: 'none', outputAttentions: true, onLayer: (layer, { attentions }) => tensors.push(attentions.data) });
        assert.deepEqual(tensors, both.attentions.map((tensor) => tensor.data), what);
        tensors.forEach((data, l) => assert.equal(data, both.attentions[l].data, what));
        await model.dispose();
      }
    }
  });

  test('a left-padded batch: each row equals the row run alone', async () => {
    for (const name of ['llama-gqa', 'gpt2', 'bert', 'olmo2']) {
      const ref = reference(name);
      const model = await openModel(attn, folder(name), { residentBytes: name === 'bert' ? 0 : undefined });
      const long = ref.ids, short = ref.ids.slice(0, -3), t = long.length;
      const padded = [...new Array(3).fill(0), ...short];
      const attentionMask = { data: [...new Array(t).fill(1), 0, 0, 0, ...new Array(t - 3).fill(1)], shape: [2, t] };
      const batch = await model.forward([long, padded], { attentionMask, logits: 'all', outputAttentions: true });
      const alone = await model.forward(short, { logits: 'all', outputAttentions: true });
      const vocab = model.vocabSize;
      const rowLogits = batch.logits.data.subarray((t + 3) * vocab, 2 * t * vocab);
      assert.ok(maxRelativeError(rowLogits, alone.logits.data) <= TOLERANCE, `${name}: padded row's logits`);
      const whole = await model.forward(long, { logits: 'all' });
      assert.ok(maxRelativeError(batch.logits.data.subarray(0, t * vocab), whole.logits.data) <= TOLERANCE, `${name}: unpadded row's logits`);
      // Layer 1, head 1: the padded row's real queries over its real keys.
      const s = t - 3, plane = batch.attentions[0].data.subarray(model.heads * t * t, (model.heads + 1) * t * t);
      const rows = Float32Array.from({ length: s * s }, (_, k) => plane[(3 + Math.floor(k / s)) * t + 3 + (k % s)]);
      assert.ok(maxRelativeError(rows, alone.attentions[0].data.subarray(0, s * s)) <= TOLERANCE, `${name}: padded row's weights`);
      await model.dispose();
    }
  });

  test('generate: greedy equals the argmax of full forwards step after step (the KV caches), resident and streamed', async () => {
    for (const name of ['llama-gqa', 'gpt2', 'gemma3', 'phi3']) {
      const ref = reference(name);
      for (const residentBytes of [undefined, 0]) {
        const model = await openModel(attn, folder(name), { residentBytes });
        const tokens = [];
        const got = await model.generate(ref.ids, { maxNewTokens: 6, eosTokenId: [], onToken: (id) => tokens.push(id) });
        const want = [...ref.ids];
        for (let i = 0; i < 6; i++) {
          const { logits } = await model.forward(want);
          want.push(logits.data.indexOf(Math.max(...logits.data)));
        }
        assert.deepEqual(got, want, name);
        assert.deepEqual(tokens, want.slice(ref.ids.length));
        await model.dispose();
      }
    }
    assert.equal(attn.stats().liveObjects, 0);
  });

  test('generate: a seed repeats a sampled text; eos stops it; an f16 cache runs', async () => {
    const name = 'llama-gqa', ref = reference(name);
    const model = await openModel(attn, folder(name));
    const opts = { maxNewTokens: 8, doSample: true, temperature: 1.5, topK: 20, topP: 0.9, seed: 7, eosTokenId: [] };
    const a = await model.generate(ref.ids, opts), b = await model.generate(ref.ids, opts);
    assert.deepEqual(a, b);
    assert.equal(a.length, ref.ids.length + 8);
    const greedy = await model.generate(ref.ids, { maxNewTokens: 4, eosTokenId: [] });
    const stop = greedy[ref.ids.length];
    assert.deepEqual(await model.generate(ref.ids, { maxNewTokens: 4, eosTokenId: stop }), greedy.slice(0, ref.ids.length + 1));
    assert.equal((await model.generate(ref.ids, { maxNewTokens: 4, eosTokenId: [], cacheDtype: 'f16' })).length, ref.ids.length + 4);
    await model.dispose();
  });

  test("GPT-2's and BERT's base-model names (no 'transformer.' or 'bert.' prefix) open too", async () => {
    for (const [name, prefix] of [['gpt2', 'transformer.'], ['bert', 'bert.']]) {
      const ref = reference(name);
      const tensors = attn.loadSafetensors(read(name, 'model.safetensors'));
      const base = Object.fromEntries([...tensors].filter(([key]) => key.startsWith(prefix)).map(([key, t]) => [key.slice(prefix.length), t]));
      const model = await openModel(attn, folderMap(name, { 'model.safetensors': safetensorsBytes(base) }));
      const got = await model.forward(ref.ids, { outputAttentions: true });
      assert.ok(maxRelativeError(concat(got.attentions), toTensor(ref.attentions).data) <= TOLERANCE, name);
      if (name === 'bert') assert.equal(got.logits, null, 'a BertModel file has no masked-LM head');
      await model.dispose();
    }
  });

  test('the model describes itself', async () => {
    const model = await openModel(attn, folder('llama-gqa'));
    const config = json('llama-gqa', 'config.json');
    assert.deepEqual(
      { modelType: model.modelType, layers: model.layers, heads: model.heads, kvHeads: model.kvHeads, headDim: model.headDim, vocabSize: model.vocabSize, maxPositions: model.maxPositions, dtype: model.dtype, streamed: model.streamed },
      { modelType: 'llama', layers: 2, heads: 4, kvHeads: 2, headDim: 16, vocabSize: config.vocab_size, maxPositions: config.max_position_embeddings, dtype: 'f32', streamed: false },
    );
    assert.deepEqual(model.config, config);
    // Layers: q, k, v, o, gate, up, down as f32 and two norms; the tied head [vocab, 64].
    assert.equal(model.weightBytes, 4 * (2 * (64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + config.vocab_size * 64));
    await model.dispose();
  });

  test("progress: 'loading' layer by layer when resident, 'forward' layer by layer in a call", async () => {
    const progress = [];
    const model = await openModel(attn, folder('gpt2'), { onProgress: (p) => progress.push(p) });
    const total = read('gpt2', 'model.safetensors').length;
    assert.deepEqual(progress.map(({ phase, layer, layers, bytesTotal }) => [phase, layer, layers, bytesTotal]),
      [['reading', 0, 0, total], ['loading', 1, 2, total], ['loading', 2, 2, total]]);
    const calls = [];
    await model.forward(reference('gpt2').ids, { onProgress: (p) => calls.push([p.phase, p.layer]) });
    assert.deepEqual(calls, [['forward', 1], ['forward', 2]]);
    await model.dispose();
  });
});

// gpt2's weights split into two shards by layer, with the index transformers writes.
async function shardedGpt2(attn, ref) {
  const tensors = attn.loadSafetensors(read('gpt2', 'model.safetensors'));
  const names = [...tensors.keys()];
  const first = names.filter((n) => n.includes('.h.0.') || n.includes('wte') || n.includes('wpe'));
  const second = names.filter((n) => !first.includes(n));
  const shard = (list) => safetensorsBytes(Object.fromEntries(list.map((n) => [n, tensors.get(n)])));
  const files = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  const index = { metadata: {}, weight_map: Object.fromEntries([...first.map((n) => [n, files[0]]), ...second.map((n) => [n, files[1]])]) };
  const map = folderMap('gpt2', { 'model.safetensors': null, [files[0]]: shard(first), [files[1]]: shard(second), 'model.safetensors.index.json': new TextEncoder().encode(JSON.stringify(index)) });
  const model = await openModel(attn, folder('gpt2'));
  const want = await model.forward(ref.ids, { outputAttentions: true, logits: 'all' });
  await model.dispose();
  return { map, want };
}

describe('openModel: bad folders and bad calls', () => {
  let attn;
  before(async () => {
    attn = await init();
  });
  after(() => attn.dispose());

  // Rejects with an AttentionError whose message has every part of `words`; memory where it was.
  async function refused(promise, argument, words = []) {
    const before = attn.stats();
    await assert.rejects(promise, (error) => {
      assert.ok(error instanceof AttentionError, `an AttentionError, got ${error}`);
      assert.equal(error.argument, argument);
      for (const word of words) assert.ok(error.message.includes(word), `'${error.message}' names ${word}`);
      return true;
    });
    assert.deepEqual(attn.stats(), before);
  }

  const header = (bytes) => {
    const size = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
    return JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + size)));
  };
  // model.safetensors of `name` rewritten: change(tensors as a plain object) → tensors to write.
  const rewritten = (name, change) => {
    const tensors = Object.fromEntries(attn.loadSafetensors(read(name, 'model.safetensors')));
    return folderMap(name, { 'model.safetensors': safetensorsBytes(change(tensors)) });
  };

  test('folders the package cannot open, named by file and tensor', async () => {
    await refused(openModel(attn, folderMap('gpt2', { 'config.json': null })), 'source', ['config.json']);
    await refused(openModel(attn, folderMap('gpt2', { 'config.json': new TextEncoder().encode('{ nope') })), 'config.json', ['valid JSON']);
    await refused(openModel(attn, folderMap('gpt2', { 'model.safetensors': null })), 'source', ['model.safetensors']);
    await refused(openModel(attn, folderMap('gpt2', { 'model.safetensors': null, 'pytorch_model.bin': new Uint8Array(4) })), 'source', ['pytorch_model.bin']);
    const { map } = await shardedGpt2(attn, reference('gpt2'));
    map.delete('model-00002-of-00002.safetensors');
    await refused(openModel(attn, map), 'model.safetensors.index.json', ['model-00002-of-00002.safetensors', 'lacks']);
    await refused(openModel(attn, folderMap('gpt2', { 'config.json': new TextEncoder().encode(JSON.stringify({ ...json('gpt2', 'config.json'), model_type: 't5' })) })),
      'config.json: model_type', ['"t5"', ...MODEL_TYPES]);
    await refused(openModel(attn, rewritten('llama-gqa', ({ 'model.layers.1.mlp.up_proj.weight': _, ...rest }) => rest)), "tensor 'model.layers.1.mlp.up_proj.weight'", ['none of that name']);
    await refused(openModel(attn, rewritten('llama-gqa', (t) => ({ ...t, 'model.layers.0.mlp.down_proj.weight': { data: new Float32Array(64 * 64), shape: [64, 64] } }))),
      "model.safetensors: tensor 'model.layers.0.mlp.down_proj.weight'", ['[64, 128]', '[64, 64]']);
    await refused(openModel(attn, folder('gpt2'), { dtype: 'f8' }), 'dtype', ['"f8"']);
    await refused(openModel(attn, 42), 'source', ['folder path']);
    await refused(openModel(null, folder('gpt2')), 'attn', ['init()']);
  });

  test("a header that lies about its offsets, and a file cut short while a layer streams", async () => {
    const bytes = read('gpt2', 'model.safetensors');
    const size = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
    const lying = header(bytes);
    const [first] = Object.keys(lying).filter((k) => k !== '__metadata__');
    lying[first] = { ...lying[first], data_offsets: [lying[first].data_offsets[0] + 4, lying[first].data_offsets[1] + 4] };
    const text = new TextEncoder().encode(JSON.stringify(lying).padEnd(size));
    const lied = Uint8Array.from(bytes);
    lied.set(text, 8);
    await refused(openModel(attn, folderMap('gpt2', { 'model.safetensors': lied })), `model.safetensors: tensor '${first}'.data_offsets`);
    // A file whose header is whole but whose data ends early: a streamed call names it.
    const cut = folderMap('gpt2');
    const whole = cut.get('model.safetensors');
    const model = await openModel(attn, new Map([...cut].map(([file, b]) => [file, file === 'model.safetensors' ? new Blob([b]) : b])), { residentBytes: 0 });
    await model.dispose();
    cut.set('model.safetensors', new TruncatedBlob(whole, whole.length - 100));
    const streamed = await openModel(attn, cut, { residentBytes: 0 });
    await refused(streamed.forward(reference('gpt2').ids), 'model.safetensors', ['truncated']);
    await streamed.dispose();
  });

  test('bad calls name the argument, and the model still works after them', async () => {
    const name = 'llama-gqa', ref = reference(name);
    for (const residentBytes of [undefined, 0]) {
      const model = await openModel(attn, folder(name), { residentBytes });
      const want = await model.forward(ref.ids, { outputAttentions: true });
      await refused(model.forward([1, 2, model.vocabSize]), 'ids[2]', [`[0, ${model.vocabSize})`]);
      await refused(model.forward([1, -1]), 'ids[1]');
      await refused(model.forward([[1, 2], [3, 4, 5]]), 'ids[1]', ['2 ids']);
      await refused(model.forward([]), 'ids');
      await refused(model.forward('hello'), 'ids');
      await refused(model.forward(ref.ids, { headMask: [1, 1, 1] }), 'headMask', ['[2, 4] or [4]', '[3]']);
      await refused(model.forward(ref.ids, { headMask: [[1, 1, 1, 1]] }), 'headMask', ['[1, 4]']);
      await refused(model.forward(ref.ids, { attentionMask: { data: [1, 1], shape: [1, 2] } }), 'attentionMask', [`[1, ${ref.ids.length}]`]);
      await refused(model.forward(ref.ids, { logits: 'first' }), 'logits');
      await refused(model.forward(ref.ids, { onLayer: 'print' }), 'onLayer', ['a function', '"print"']);
      await refused(model.forward(ref.ids, { outputAttention: true }), 'outputAttention', ['unknown option']);
      await refused(model.forward(ref.ids, { out: { attentions: new Float32Array(4) } }), 'out.attentions', ['outputAttentions']);
      await refused(model.forward(ref.ids, { outputAttentions: true, out: { attentions: new Float32Array(4) } }), 'out.attentions');
      await refused(model.generate(ref.ids, { maxNewTokens: 1.5 }), 'maxNewTokens');
      await refused(model.generate(ref.ids, { topP: 2 }), 'topP');
      await refused(model.generate([ref.ids, ref.ids]), 'ids', ['one sequence']);
      assert.deepEqual(await model.forward(ref.ids, { outputAttentions: true }), want, 'the model works after bad calls');
      await model.dispose();
      await refused(model.forward(ref.ids), 'model.forward', ['disposed']);
    }
    const bert = await openModel(attn, folder('bert'));
    await refused(bert.generate(reference('bert').ids), 'model.generate', ['encoder']);
    await bert.dispose();
  });

  test('an abort mid-forward rejects with an AbortError, frees the streamed layer, and the model still works', async () => {
    const name = 'gemma2', ref = reference(name);
    for (const residentBytes of [undefined, 0]) {
      const model = await openModel(attn, folder(name), { residentBytes });
      const want = await model.forward(ref.ids);
      const before = attn.stats();
      const controller = new AbortController();
      const forward = model.forward(ref.ids, { signal: controller.signal, onProgress: ({ layer }) => layer === 1 && controller.abort() });
      await assert.rejects(forward, { name: 'AbortError' });
      assert.deepEqual(attn.stats(), before);
      await assert.rejects(openModel(attn, folder(name), { signal: AbortSignal.abort() }), { name: 'AbortError' });
      assert.deepEqual(attn.stats(), before);
      assert.deepEqual(await model.forward(ref.ids), want);
      await model.dispose();
    }
    assert.equal(attn.stats().liveObjects, 0);
  });

  test('an abort sent by an event lands between a resident model\'s layers and between generated tokens', async () => {
    const name = 'gemma2', ref = reference(name);
    const model = await openModel(attn, folder(name));
    assert.equal(model.streamed, false);
    // A timer stands for a click or a worker's message: it runs only when the forward lets it.
    const controller = new AbortController();
    const layers = [];
    const forward = model.forward(ref.ids, { signal: controller.signal, onLayer: (layer) => {
      layers.push(layer);
      if (layer === 0) setTimeout(() => controller.abort(), 0);
    } });
    await assert.rejects(forward, { name: 'AbortError' });
    assert.deepEqual(layers, [0], 'stopped before the second layer');
    const stopping = new AbortController();
    const tokens = [];
    const generation = model.generate(ref.ids, { maxNewTokens: 5, signal: stopping.signal, onToken: (id) => {
      tokens.push(id);
      setTimeout(() => stopping.abort(), 0);
    } });
    await assert.rejects(generation, { name: 'AbortError' });
    assert.equal(tokens.length, 1, 'stopped before the second token');
    await model.dispose();
  });

  test('an exception thrown in onLayer (or a rejection) rejects the forward, frees the streamed layer, and the model still works', async () => {
    const name = 'llama-gqa', ref = reference(name);
    for (const residentBytes of [undefined, 0]) {
      const model = await openModel(attn, folder(name), { residentBytes });
      const want = await model.forward(ref.ids, { outputAttentions: true });
      const before = attn.stats();
      const thrown = new Error('the caller\'s own error');
      const layers = [];
      await assert.rejects(model.forward(ref.ids, { onLayer: (layer) => {
        layers.push(layer);
        throw thrown;
      } }), (error) => error === thrown);
      assert.deepEqual(layers, [0], 'no layer runs after the throw');
      assert.deepEqual(attn.stats(), before);
      await assert.rejects(model.forward(ref.ids, { onLayer: async (layer) => layer === 1 && Promise.reject(thrown) }), (error) => error === thrown);
      assert.deepEqual(attn.stats(), before);
      assert.deepEqual(await model.forward(ref.ids, { outputAttentions: true }), want);
      await model.dispose();
    }
    assert.equal(attn.stats().liveObjects, 0);
  });
});

// A Blob whose bytes end early, as a file cut while it is read: its size is the whole file's.
class TruncatedBlob extends Blob {
  constructor(bytes, kept) {
    super([bytes.subarray(0, kept)]);
    this.wholeSize = bytes.length;
  }

  get size() {
    return this.wholeSize;
  }
}

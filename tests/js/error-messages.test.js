// Errors that name what is wrong (issue #35): a safetensors header size that disagrees with the
// header's JSON (once read as "bytes that are not UTF-8" or as broken JSON), in loadSafetensors and
// in attention-wasm/models' range reader alike; an __metadata__ value that is not a string (once
// "got an object" for the whole map); and values that errors.js describe() once misdescribed: a
// DataView (once "DataView(undefined)"), a function (once its whole source), a BigInt (once shown as
// the number it is not).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';
import { openModel } from 'attention-wasm/models';

let attn;
before(async () => {
  attn = await init();
});
after(() => attn.dispose());

const fixture = (path) => readFileSync(new URL(`../fixtures/${path}`, import.meta.url));

// A .safetensors file from its header text (or bytes) and data.
function safetensorsFile(header, data = new Uint8Array(0)) {
  const text = typeof header === 'string' ? new TextEncoder().encode(header) : header;
  const file = new Uint8Array(8 + text.length + data.length);
  new DataView(file.buffer).setBigUint64(0, BigInt(text.length), true);
  file.set(text, 8);
  file.set(data, 8 + text.length);
  return file;
}

/** The AttentionError `fn` throws (or the one its promise rejects with). */
async function thrown(fn) {
  try {
    await fn();
  } catch (error) {
    assert.ok(error instanceof AttentionError, `an AttentionError: ${error}`);
    return error;
  }
  assert.fail('expected a throw');
}

describe('a safetensors header size that disagrees with the header', () => {
  // A model folder's weights: the header's JSON is padded with spaces to a multiple of 8 bytes.
  const CONFIG = fixture('models/llama-gqa/config.json');
  const WEIGHTS = fixture('models/llama-gqa/model.safetensors');
  const size = Number(new DataView(WEIGHTS.buffer, WEIGHTS.byteOffset).getBigUint64(0, true));
  const withSize = (headerSize) => {
    const copy = Uint8Array.from(WEIGHTS);
    new DataView(copy.buffer).setBigUint64(0, BigInt(headerSize), true);
    return copy;
  };
  // Both readers: the whole file in memory, and the range reader of openModel.
  const errors = async (bytes) => [
    await thrown(() => attn.loadSafetensors(bytes)),
    await thrown(() => openModel(attn, new Map([['config.json', CONFIG], ['model.safetensors', bytes]]))),
  ];

  test('reaching into the data: the size is named, with where the JSON and its padding end', async () => {
    for (const past of [16, 1, WEIGHTS.length - 8 - size]) {
      const [loaded, opened] = await errors(withSize(size + past));
      const want = `expected a header size (the file's first 8 bytes) that ends the header with its JSON object and the spaces after it: ${size}, got ${size + past}, ${past} byte${past > 1 ? 's' : ''} past them`;
      assert.equal(loaded.message, `bytes: ${want}`);
      assert.equal(opened.message, `model.safetensors: ${want}`);
      assert.doesNotMatch(loaded.message, /UTF-8|invalid JSON/);
    }
  });

  test('too small: the size ends inside the JSON object', async () => {
    const [loaded, opened] = await errors(withSize(size - 100));
    const want = `expected a header size (the file's first 8 bytes) that ends the header with its JSON object, got ${size - 100}, which ends inside the object`;
    assert.equal(loaded.message, `bytes: ${want}`);
    assert.equal(opened.message, `model.safetensors: ${want}`);
  });

  test('a size within the padding is no error of the header', () => {
    // One space fewer in the header: it parses, and the data is one byte longer than its tensors.
    assert.match((() => { try { attn.loadSafetensors(withSize(size - 1)); } catch (e) { return e.message; } })(), /^bytes: expected data that ends where its last tensor ends/);
  });

  test('bytes that are not UTF-8 inside the JSON: where', async () => {
    const bad = safetensorsFile(Uint8Array.of(0x7b, 0x22, 0x61, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d)); // {"a\xc3(":1}
    assert.equal((await thrown(() => attn.loadSafetensors(bad))).message, 'bytes: expected a header of UTF-8 JSON, got bytes that are not UTF-8 (at byte 4 of the header)');
    const first = safetensorsFile(Uint8Array.of(0x7b, 0xff, 0x7d));
    assert.equal((await thrown(() => attn.loadSafetensors(first))).message, 'bytes: expected a header of UTF-8 JSON, got bytes that are not UTF-8 (at byte 1 of the header)');
  });
});

test('__metadata__: the key whose value is not a string, and the value', async () => {
  const error = await thrown(() => attn.loadSafetensors(safetensorsFile('{"__metadata__":{"format":"pt","version":1}}')));
  assert.equal(error.argument, "bytes: __metadata__['version']");
  assert.equal(error.message, "bytes: __metadata__['version']: expected a string (the format keeps metadata as strings), got 1");
  const nested = await thrown(() => attn.loadSafetensors([safetensorsFile('{}'), safetensorsFile('{"__metadata__":{"format":{"name":"pt"}}}')]));
  assert.equal(nested.message, "bytes[1]: __metadata__['format']: expected a string (the format keeps metadata as strings), got an object");
  // Not an object at all: the map is named.
  assert.equal((await thrown(() => attn.loadSafetensors(safetensorsFile('{"__metadata__":["pt"]}')))).message, 'bytes: __metadata__: expected an object of strings, got ["pt"]');
});

test('values described as what they are: a DataView by its bytes, a function by its name, a BigInt as one', async () => {
  const view = new DataView(new ArrayBuffer(24));
  assert.equal((await thrown(() => attn.loadSafetensors(view))).got, 'DataView(24 bytes)');
  const t = (shape) => ({ shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) });
  assert.equal((await thrown(() => attn.scaledDotProductAttention({ shape: [2, 3], data: view }, t([2, 3]), t([2, 3])))).message, 'query.data: expected a Float32Array, got DataView(24 bytes)');
  const sdpa = (opts) => thrown(() => attn.scaledDotProductAttention(t([2, 3]), t([2, 3]), t([2, 3]), opts));
  assert.equal((await sdpa({ scale: Math.sqrt })).got, 'the function sqrt');
  assert.equal((await sdpa({ scale: () => 0.5 })).got, 'the function scale');
  assert.equal((await sdpa({ scale: [(x) => x][0] })).got, 'a function');
  assert.equal((await sdpa({ scale: 2n })).got, '2n');
  assert.equal((await thrown(() => attn.scaledDotProductAttention({ shape: [2n, 3n], data: new Float32Array(6) }, t([2, 3]), t([2, 3])))).got, '[2n, 3n]');
});

// attn.loadSafetensors against files written by tests/fixtures/safetensors_fixture.py (every dtype
// decoded exactly; the byte containers and offsets it accepts; each malformed file an AttentionError
// that names the fault, built here from the good file), and loadStateDict's { prefix }.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { before, describe, test } from 'node:test';

import { AttentionError, init } from 'attention-wasm';

import { MODULE_KINDS, assertAttentionError, assertClose, bitIdentical, loadedModule, moduleFixture, tensorOf, toTensor } from './helpers.js';

const fixtureBytes = (name) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url));
const DTYPES_FILE = fixtureBytes('safetensors_dtypes.safetensors');
const MHA_FILE = fixtureBytes('safetensors_mha.safetensors');
const EXPECTED = JSON.parse(fixtureBytes('safetensors_dtypes.json')).tensors;

// A .safetensors file from its header (bytes, text, or a value written as JSON) and data bytes.
function safetensorsFile(header, data = new Uint8Array(0)) {
  const text = header instanceof Uint8Array ? header : new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const file = new Uint8Array(8 + text.length + data.length);
  new DataView(file.buffer).setBigUint64(0, BigInt(text.length), true);
  file.set(text, 8);
  file.set(data, 8 + text.length);
  return file;
}

// The header (parsed) and data bytes of a good file.
function parts(file) {
  const size = Number(new DataView(file.buffer, file.byteOffset, 8).getBigUint64(0, true));
  return { header: JSON.parse(new TextDecoder().decode(file.subarray(8, 8 + size))), data: file.subarray(8 + size) };
}

// The dtypes file with its header changed by `edit(header)` (which changes it in place).
function editedHeader(edit) {
  const { header, data } = parts(DTYPES_FILE);
  edit(header);
  return safetensorsFile(header, data);
}

// The same bytes at `offset` of a larger buffer.
function atOffset(bytes, offset) {
  const copy = new Uint8Array(bytes.length + offset + 3).subarray(offset, offset + bytes.length);
  copy.set(bytes);
  return copy;
}

function assertSameTensors(got, what) {
  assert.deepEqual([...got.keys()], Object.keys(EXPECTED), `${what}: names in the header's order`);
  for (const [name, expected] of Object.entries(EXPECTED)) {
    const want = toTensor(expected);
    const tensor = got.get(name);
    assert.ok(tensor.data instanceof Float32Array, `${what}: ${name} is a Float32Array`);
    assert.deepEqual(tensor.shape, want.shape, `${what}: ${name} shape`);
    // Object.is tells -0 from 0 and matches NaN with NaN.
    want.data.forEach((x, i) => assert.ok(Object.is(tensor.data[i], x), `${what}: ${name}[${i}] is ${tensor.data[i]}, want ${x}`));
  }
}

let attn;
before(async () => {
  attn = await init();
});

describe('loadSafetensors: reading', () => {
  test('F32, F16 and BF16 decode exactly, in the header order', () => {
    assertSameTensors(attn.loadSafetensors(DTYPES_FILE), 'Buffer');
  });

  test('an ArrayBuffer, a Uint8Array and a Node Buffer read the same', () => {
    const arrayBuffer = DTYPES_FILE.buffer.slice(DTYPES_FILE.byteOffset, DTYPES_FILE.byteOffset + DTYPES_FILE.length);
    assertSameTensors(attn.loadSafetensors(arrayBuffer), 'ArrayBuffer');
    assertSameTensors(attn.loadSafetensors(new Uint8Array(arrayBuffer)), 'Uint8Array');
    assertSameTensors(attn.loadSafetensors(Buffer.from(arrayBuffer)), 'Buffer.from');
  });

  test('misaligned data reads the same: a Uint8Array at odd byteOffsets, a header of odd size', () => {
    for (const offset of [1, 2, 3, 5]) assertSameTensors(attn.loadSafetensors(atOffset(DTYPES_FILE, offset)), `byteOffset ${offset}`);
    const { header, data } = parts(DTYPES_FILE);
    const text = `${JSON.stringify(header)} `; // the fixture's header is padded to 8 bytes; this one is not
    assert.notEqual(text.length % 4, 0);
    assertSameTensors(attn.loadSafetensors(safetensorsFile(text, data)), 'unpadded header');
  });

  test('__metadata__ is not a tensor; a file of metadata only has no tensors', () => {
    assert.ok(parts(DTYPES_FILE).header.__metadata__, 'the fixture has __metadata__');
    assert.ok(!attn.loadSafetensors(DTYPES_FILE).has('__metadata__'));
    assert.equal(attn.loadSafetensors(safetensorsFile({ __metadata__: { format: 'pt' } })).size, 0);
    assert.equal(attn.loadSafetensors(safetensorsFile('{}')).size, 0);
  });

  test('scalars have shape [] and one value; empty tensors no values', () => {
    const tensors = attn.loadSafetensors(DTYPES_FILE);
    assert.deepEqual(tensors.get('scalar').shape, []);
    assert.equal(tensors.get('scalar').data.length, 1);
    assert.equal(tensors.get('scalar_bf16').data[0], -2.5);
    assert.deepEqual(tensors.get('empty_f16').shape, [0, 3]);
    assert.equal(tensors.get('empty_bf16').data.length, 0);
  });

  test('results are copies: changing the bytes afterwards changes nothing', () => {
    const bytes = Uint8Array.from(DTYPES_FILE);
    const tensors = attn.loadSafetensors(bytes);
    bytes.fill(0, 8 + Number(new DataView(bytes.buffer).getBigUint64(0, true)));
    assertSameTensors(tensors, 'after the bytes were zeroed');
    for (const tensor of tensors.values()) assert.notEqual(tensor.data.buffer, bytes.buffer);
  });

  test('names that read as array indices keep the header order too', () => {
    const entry = (begin) => ({ dtype: 'F32', shape: [], data_offsets: [begin, begin + 4] });
    const header = `{"b":${JSON.stringify(entry(0))},"10":${JSON.stringify(entry(4))},"2":${JSON.stringify(entry(8))},"a":${JSON.stringify(entry(12))}}`;
    const tensors = attn.loadSafetensors(safetensorsFile(header, new Uint8Array(Float32Array.of(1, 2, 3, 4).buffer)));
    assert.deepEqual([...tensors.keys()], ['b', '10', '2', 'a']);
    assert.deepEqual([...tensors.values()].map((t) => t.data[0]), [1, 2, 3, 4]);
  });

  test('tensors listed out of data order are found by their offsets', () => {
    const { header, data } = parts(DTYPES_FILE);
    const reversed = Object.fromEntries(Object.entries(header).reverse());
    const tensors = attn.loadSafetensors(safetensorsFile(reversed, data));
    assert.deepEqual([...tensors.keys()], Object.keys(EXPECTED).reverse());
    assert.ok(bitIdentical(tensors.get('f16').data, attn.loadSafetensors(DTYPES_FILE).get('f16').data));
  });
});

// binary16 bits → value, written out from IEEE 754 (independent of the package's reader).
function halfValue(bits) {
  const sign = bits & 0x8000 ? -1 : 1, exponent = (bits >> 10) & 31, fraction = bits & 1023;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return exponent === 0 ? sign * fraction * 2 ** -24 : sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

// An F32 file of one tensor 'x' holding `values`, with `metadata` when given.
function f32File(values, metadata) {
  const data = new Uint8Array(Float32Array.from(values).buffer);
  const header = { ...(metadata ? { __metadata__: metadata } : {}), x: { dtype: 'F32', shape: [values.length], data_offsets: [0, data.length] } };
  return safetensorsFile(header, data);
}

describe('loadSafetensors: shards, metadata and binary16', () => {
  test("the file's __metadata__ is the map's metadata; a file without one gives {}", () => {
    assert.deepEqual({ ...attn.loadSafetensors(DTYPES_FILE).metadata }, {
      format: 'pt', about: 'Generated by tests/fixtures/safetensors_fixture.py with torch 1.13.0a0',
    });
    assert.deepEqual({ ...attn.loadSafetensors(f32File([1])).metadata }, {});
    assert.ok(!Object.keys(attn.loadSafetensors(DTYPES_FILE)).includes('metadata'), 'metadata is not an enumerable own key');
  });

  test('shards merge into one map, shard after shard, their metadata kept where first given', () => {
    const shards = attn.loadSafetensors([DTYPES_FILE, f32File([0.5, -2], { format: 'np', shard: '2' })]);
    assert.deepEqual([...shards.keys()], [...Object.keys(EXPECTED), 'x']);
    assert.deepEqual([...shards.get('x').data], [0.5, -2]);
    assert.equal(shards.metadata.format, 'pt');
    assert.equal(shards.metadata.shard, '2');
    const { x, ...first } = Object.fromEntries(shards);
    assertSameTensors(new Map(Object.entries(first)), 'the first shard');
  });

  test('a name in two shards, a malformed shard and no shard at all are errors that name the shard', () => {
    assertAttentionError(() => attn.loadSafetensors([DTYPES_FILE, f32File([1]), f32File([2])]), AttentionError,
      "bytes[2]: tensor 'x'", ['a name no other shard has', 'a tensor of bytes[1] too']);
    assertAttentionError(() => attn.loadSafetensors([f32File([1]), new Uint8Array(3)]), AttentionError, 'bytes[1]', ['3 bytes']);
    assertAttentionError(() => attn.loadSafetensors([]), AttentionError, 'bytes', ['an empty array']);
  });

  test("dtype 'f16' keeps F16 bits as they are and rounds F32 and BF16 to the nearest binary16", () => {
    const halves = attn.loadSafetensors(DTYPES_FILE, { dtype: 'f16' });
    assert.deepEqual([...halves.keys()], Object.keys(EXPECTED));
    for (const [name, expected] of Object.entries(EXPECTED)) {
      const tensor = halves.get(name), want = toTensor(expected);
      assert.ok(tensor.data instanceof Uint16Array, name);
      assert.equal(tensor.dtype, 'f16');
      assert.deepEqual(tensor.shape, want.shape);
      want.data.forEach((x, i) => {
        const got = halfValue(tensor.data[i]);
        if (expected.dtype === 'F16') assert.ok(Object.is(got, x), `${name}[${i}]: ${got}, the file holds ${x}`);
        else if (Number.isNaN(x)) assert.ok(Number.isNaN(got), `${name}[${i}]`);
        else if (Math.abs(x) <= 65504) {
          // No binary16 lies nearer x than the one chosen.
          for (const neighbour of [tensor.data[i] - 1, tensor.data[i] + 1].filter((b) => (b & 0x7c00) !== 0x7c00 && b >= 0 && b < 0x10000))
            assert.ok(Math.abs(got - x) <= Math.abs(halfValue(neighbour) - x), `${name}[${i}]: ${got} for ${x}`);
        }
      });
    }
  });

  test("dtype 'f16' rounds ties to even, overflows to Inf past 65504 and keeps subnormals", () => {
    const cases = [
      [65504, 0x7bff], [65519.99, 0x7bff], [65520, 0x7c00], [-1e6, 0xfc00], [1 + 2 ** -11, 0x3c00], [1 + 3 * 2 ** -11, 0x3c02],
      [2 ** -24, 0x0001], [2 ** -25, 0x0000], [3 * 2 ** -25, 0x0002], [-0, 0x8000], [2 ** -14, 0x0400], [0.1, 0x2e66],
    ];
    const { data } = attn.loadSafetensors(f32File(cases.map(([x]) => x)), { dtype: 'f16' }).get('x');
    cases.forEach(([x, bits], i) => assert.equal(data[i], bits, `${x} → 0x${data[i].toString(16)}, want 0x${bits.toString(16)}`));
    const nan = attn.loadSafetensors(f32File([NaN]), { dtype: 'f16' }).get('x').data[0];
    assert.equal(nan & 0x7c00, 0x7c00);
    assert.notEqual(nan & 0x3ff, 0);
  });

  test("dtype 'bf16' keeps BF16 bits as they are and rounds F32 and F16 to the nearest bfloat16", () => {
    const words = attn.loadSafetensors(DTYPES_FILE, { dtype: 'bf16' });
    const bfloatValue = (bits) => new Float32Array(Uint32Array.of(bits << 16).buffer)[0];
    for (const [name, expected] of Object.entries(EXPECTED)) {
      const tensor = words.get(name), want = toTensor(expected);
      assert.ok(tensor.data instanceof Uint16Array, name);
      assert.equal(tensor.dtype, 'bf16');
      assert.deepEqual(tensor.shape, want.shape);
      want.data.forEach((x, i) => {
        const got = bfloatValue(tensor.data[i]);
        if (expected.dtype === 'BF16') assert.ok(Object.is(got, x), `${name}[${i}]: ${got}, the file holds ${x}`);
        else if (Number.isNaN(x)) assert.ok(Number.isNaN(got), `${name}[${i}]`);
        else if (!Number.isFinite(got)) assert.ok(Math.abs(x) >= (2 - 2 ** -8) * 2 ** 127, `${name}[${i}]: ${got} for ${x}, below the halfway point past the largest bfloat16`);
        else if (Number.isFinite(x)) {
          // No bfloat16 lies nearer x than the one chosen.
          for (const neighbour of [tensor.data[i] - 1, tensor.data[i] + 1].filter((b) => (b & 0x7f80) !== 0x7f80 && b >= 0 && b < 0x10000))
            assert.ok(Math.abs(got - x) <= Math.abs(bfloatValue(neighbour) - x), `${name}[${i}]: ${got} for ${x}`);
        }
      });
    }
    // Ties to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
    const { data } = attn.loadSafetensors(f32File([1 + 2 ** -8, 1 + 3 * 2 ** -8, -0, NaN]), { dtype: 'bf16' }).get('x');
    assert.deepEqual([...data.subarray(0, 3)], [0x3f80, 0x3f82, 0x8000]);
    assert.equal(data[3] & 0x7f80, 0x7f80);
    assert.notEqual(data[3] & 0x7f, 0, 'NaN stays NaN');
  });

  test('dtype must be f32, f16 or bf16', () => {
    assertAttentionError(() => attn.loadSafetensors(DTYPES_FILE, { dtype: 'f64' }), AttentionError, 'dtype', ['"f64"', '"bf16"']);
  });
});

describe('loadSafetensors: malformed files', () => {
  const { header: goodHeader, data: goodData } = parts(DTYPES_FILE);
  const headerLength = DTYPES_FILE.length - goodData.length - 8;
  const withSize = (size) => {
    const file = Uint8Array.from(DTYPES_FILE);
    new DataView(file.buffer).setBigUint64(0, size, true);
    return file;
  };
  const setField = (name, field, value) => editedHeader((h) => (h[name][field] = value));
  const deleteField = (name, field) => editedHeader((h) => delete h[name][field]);

  // [description, bytes, argument, message parts]
  const BAD_FILES = [
    ['a string', 'model.safetensors', 'bytes', ['ArrayBuffer', 'Uint8Array']],
    ['null', null, 'bytes', []],
    ['a Float32Array', new Float32Array(4), 'bytes', ['Float32Array']],
    ['an array of bytes', [...DTYPES_FILE], 'bytes', []],
    ['no bytes', new Uint8Array(0), 'bytes', ['8 bytes', '0 bytes']],
    ['7 bytes', DTYPES_FILE.subarray(0, 7), 'bytes', ['7 bytes']],
    ['a header size past the end of the file', withSize(BigInt(DTYPES_FILE.length - 7)), 'bytes', [`${DTYPES_FILE.length - 7} bytes of header`]],
    ['a header size above 100 MB', withSize(100_000_001n), 'bytes', ['100000000', '100000001']],
    ['a header size of 2^64 - 1', withSize(2n ** 64n - 1n), 'bytes', ['18446744073709551615']],
    ['a header that is not UTF-8', safetensorsFile(Uint8Array.of(0x7b, 0xff, 0x7d)), 'bytes', ['UTF-8']],
    ['a header that is not JSON', safetensorsFile('{"f32": '), 'bytes', ['JSON']],
    ['a header starting with a byte-order mark', safetensorsFile('\uFEFF{}'), 'bytes', ['JSON']],
    ['a header that is an array', safetensorsFile('[]'), 'bytes', ['JSON object', '[]']],
    ['a header that is a string', safetensorsFile('"f32"'), 'bytes', ['JSON object']],
    ['a header that is null', safetensorsFile('null'), 'bytes', ['null']],
    ['a name given twice', safetensorsFile('{"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]}}', new Uint8Array(4)), 'bytes', ["'w'", 'once']],
    ['__metadata__ with a number', editedHeader((h) => (h.__metadata__.version = 2)), "bytes: __metadata__['version']", ['expected a string', 'got 2']],
    ['__metadata__ that is a string', editedHeader((h) => (h.__metadata__ = 'pt')), 'bytes: __metadata__', []],
    ['an entry that is a number', editedHeader((h) => (h.f32 = 5)), "bytes: tensor 'f32'", ['dtype, shape, data_offsets', '5']],
    ['an entry that is an array', editedHeader((h) => (h.f32 = [])), "bytes: tensor 'f32'", []],
    ['an entry without a dtype', deleteField('f32', 'dtype'), "bytes: tensor 'f32'.dtype", ['F32, F16, BF16', 'undefined']],
    ['an entry without a shape', deleteField('f32', 'shape'), "bytes: tensor 'f32'.shape", ['undefined']],
    ['an entry without data_offsets', deleteField('f32', 'data_offsets'), "bytes: tensor 'f32'.data_offsets", ['[begin, end]', 'undefined']],
    ['a dtype that is a number', setField('f32', 'dtype', 32), "bytes: tensor 'f32'.dtype", ['32']],
    ['an unknown dtype', setField('f32', 'dtype', 'F31'), "bytes: tensor 'f32'.dtype", ['unknown dtype "F31"', 'F32, F16, BF16']],
    ['a lower-case dtype', setField('f32', 'dtype', 'f32'), "bytes: tensor 'f32'.dtype", ['unknown dtype "f32"']],
    ...['I64', 'F64', 'BOOL', 'I32', 'U8', 'F8_E4M3'].map((dtype) => [
      `dtype ${dtype}`, setField('f32', 'dtype', dtype), "bytes: tensor 'f32'.dtype", [`${dtype}, which is not supported`, 'F32, F16, BF16'],
    ]),
    ['a shape that is not an array', setField('f32', 'shape', 12), "bytes: tensor 'f32'.shape", ['12']],
    ['a negative dimension', setField('f32', 'shape', [-3, -4]), "bytes: tensor 'f32'.shape", ['non-negative integers', '[-3, -4]']],
    ['a fractional dimension', setField('f32', 'shape', [1.5, 8]), "bytes: tensor 'f32'.shape", ['[1.5, 8]']],
    ['a dimension that is a string', setField('f32', 'shape', ['3', 4]), "bytes: tensor 'f32'.shape", []],
    ['data_offsets that is not an array', setField('f32', 'data_offsets', 48), "bytes: tensor 'f32'.data_offsets", ['[begin, end]', '48']],
    ['data_offsets of one number', setField('f32', 'data_offsets', [0]), "bytes: tensor 'f32'.data_offsets", ['[0]']],
    ['data_offsets of three numbers', setField('f32', 'data_offsets', [0, 24, 48]), "bytes: tensor 'f32'.data_offsets", ['[0, 24, 48]']],
    ['data_offsets with begin > end', setField('f32', 'data_offsets', [48, 0]), "bytes: tensor 'f32'.data_offsets", ['begin ≤ end', '[48, 0]']],
    ['a negative begin', setField('f32', 'data_offsets', [-4, 44]), "bytes: tensor 'f32'.data_offsets", ['[-4, 44]']],
    ['a fractional end', setField('f32', 'data_offsets', [0, 47.5]), "bytes: tensor 'f32'.data_offsets", ['[0, 47.5]']],
    ['offsets that are strings', setField('f32', 'data_offsets', ['0', '48']), "bytes: tensor 'f32'.data_offsets", []],
    ['an end past the data', setField('scalar_bf16', 'data_offsets', [108, 112]), "bytes: tensor 'scalar_bf16'.data_offsets", [`within the ${goodData.length} bytes`, '[108, 112]']],
    ['a shape with fewer elements than the bytes', setField('f32', 'shape', [3, 3]), "bytes: tensor 'f32'.data_offsets", ['36 bytes', 'F32 [3, 3]', '48 bytes']],
    ['a dtype of another size than the bytes', setField('f32', 'dtype', 'F16'), "bytes: tensor 'f32'.data_offsets", ['24 bytes', '48 bytes']],
    ['an empty shape with bytes', setField('f16', 'shape', [0, 16]), "bytes: tensor 'f16'.data_offsets", ['0 bytes', '32 bytes']],
    [
      'overlapping tensors',
      setField('f16', 'data_offsets', [40, 72]),
      "bytes: tensor 'f16'.data_offsets",
      ["tensor 'f32' has [0, 48]", '[40, 72], which overlaps'],
    ],
    ['two tensors on the same bytes', setField('scalar', 'data_offsets', [0, 4]), /^bytes: tensor '(scalar|f32)'\.data_offsets$/, ['overlaps']],
    ['a gap between tensors', editedHeader((h) => delete h.scalar), "bytes: tensor 'scalar_bf16'.data_offsets", ["begin at 104, where tensor 'bf16' ends", '[108, 110]']],
    ['a first tensor that does not begin the data', editedHeader((h) => delete h.f32), "bytes: tensor 'f16'.data_offsets", ['begin at 0, where the data begins', '[48, 80]']],
    ['bytes after the last tensor', safetensorsFile(goodHeader, Uint8Array.of(...goodData, 0, 0, 0, 0)), 'bytes', [`ends where its last tensor ends, ${goodData.length} bytes`, `${goodData.length + 4} bytes of data`]],
    ['data but no tensors', safetensorsFile('{}', new Uint8Array(4)), 'bytes', ['0 bytes after the header', '4 bytes of data']],
  ];
  assert.equal(headerLength % 8, 0, 'the fixture pads its header as the reference writer does');

  for (const [what, bytes, argument, message] of BAD_FILES) {
    test(what, () => {
      assertAttentionError(() => attn.loadSafetensors(bytes), AttentionError, argument, message);
    });
  }

  test('a Uint8Array window onto a larger buffer is read within the window only', () => {
    // The bytes past the window hold the rest of a valid file; reading them would hide the fault.
    const window = (length) => new Uint8Array(DTYPES_FILE.buffer, DTYPES_FILE.byteOffset, length);
    assertAttentionError(() => attn.loadSafetensors(window(DTYPES_FILE.length - 2)), AttentionError, "bytes: tensor 'scalar_bf16'.data_offsets");
    assertAttentionError(() => attn.loadSafetensors(window(20)), AttentionError, 'bytes', [`${headerLength} bytes of header`, '12 bytes']);
  });

  test('the entry checks name the tensor at fault, not the first one', () => {
    assertAttentionError(() => attn.loadSafetensors(setField('bf16', 'dtype', 'I64')), AttentionError, "bytes: tensor 'bf16'.dtype");
  });
});

describe('loadStateDict with a prefix', () => {
  const mhaCase = moduleFixture('mha', 'no_mask');
  const PREFIX = 'layers.0.attn.';
  const { forward } = MODULE_KINDS.MultiheadAttention;

  // A Map of `stateDict` under `prefix`, among entries the prefix leaves out.
  const prefixed = (stateDict, prefix) =>
    new Map([
      ['embed.weight', tensorOf([4, 8])],
      ...Object.entries(stateDict).map(([name, tensor]) => [prefix + name, tensor]),
      [`${prefix.slice(0, -1)}_norm.weight`, tensorOf([8])],
      [`other.${prefix}in_proj_weight`, tensorOf([2])],
    ]);

  // fn(module), then the module is disposed.
  function withModule(module, fn) {
    try {
      return fn(module);
    } finally {
      module.dispose();
    }
  }
  const fresh = (kind, c) => MODULE_KINDS[kind].create(attn, c);
  const plainResult = (kind, c) => withModule(loadedModule(attn, kind, c), (module) => MODULE_KINDS[kind].forward(module, c));

  test('MultiheadAttention from the .safetensors file, one layer at a time, as from each plain state dict', () => {
    const file = attn.loadSafetensors(MHA_FILE);
    for (const [layer, name] of [[0, 'no_mask'], [1, 'cross_attention_n3_m7']]) {
      const c = moduleFixture('mha', name);
      const want = plainResult('MultiheadAttention', c);
      const got = withModule(fresh('MultiheadAttention', c), (module) => forward(module.loadStateDict(file, { prefix: `layers.${layer}.attn.` }), c));
      assert.ok(bitIdentical(got.output.data, want.output.data), `layer ${layer}: output`);
      assert.ok(bitIdentical(got.weights.data, want.weights.data), `layer ${layer}: weights`);
      assertClose(got.output, c.output, `layer ${layer}: output against PyTorch`);
    }
  });

  const GOOD_CASES = { MultiheadAttention: 'no_mask', SelfAttention: 'no_mask', AdditiveAttention: 'no_mask', RelativeMultiHeadAttention: 'square_no_mask' };
  for (const [kind, { file }] of Object.entries(MODULE_KINDS)) {
    test(`${kind}: a prefix reads the entries under it, from a Map or an object`, () => {
      const c = moduleFixture(file, GOOD_CASES[kind]);
      const want = plainResult(kind, c);
      for (const stateDict of [prefixed(c.stateDict, PREFIX), Object.fromEntries(prefixed(c.stateDict, PREFIX))]) {
        const got = withModule(fresh(kind, c), (module) => MODULE_KINDS[kind].forward(module.loadStateDict(stateDict, { prefix: PREFIX }), c));
        assert.ok(bitIdentical(got.output.data, want.output.data), `${stateDict.constructor.name}: output`);
      }
    });
  }

  test("no prefix (or '') reads every entry, as in v1: unrelated entries are errors", () => {
    const file = attn.loadSafetensors(MHA_FILE);
    withModule(fresh('MultiheadAttention', mhaCase), (module) => {
      for (const opts of [undefined, {}, { prefix: '' }, null])
        assertAttentionError(() => module.loadStateDict(file, opts), AttentionError, /^stateDict\['(embed\.weight|layers\.0\.attn\.in_proj_weight)'\]$/);
      const got = forward(module.loadStateDict(mhaCase.stateDict, { prefix: '' }), mhaCase);
      assertClose(got.output, mhaCase.output, 'output');
    });
  });

  const without = (dict, name) => Object.fromEntries(Object.entries(dict).filter(([key]) => key !== name));
  const sd = mhaCase.stateDict;
  // [description, state dict before prefixing, prefix, argument, message parts]
  const BAD_PREFIXED = [
    ['a missing entry', without(sd, 'out_proj.bias'), PREFIX, `stateDict['${PREFIX}out_proj.bias']`, ['[8]', 'a missing entry']],
    ['an extra entry', { ...sd, extra: tensorOf([3]) }, PREFIX, `stateDict['${PREFIX}extra']`, ['no such entry', 'out_proj.weight']],
    ['a mis-shaped entry', { ...sd, 'out_proj.weight': tensorOf([8, 9]) }, PREFIX, `stateDict['${PREFIX}out_proj.weight']`, ['[8, 8]', '[8, 9]']],
    ['a Float64Array entry', { ...sd, in_proj_bias: { shape: [24], data: new Float64Array(24) } }, PREFIX, `stateDict['${PREFIX}in_proj_bias'].data`, ['Float64Array']],
    ['a data length that does not match', { ...sd, in_proj_bias: { shape: [24], data: new Float32Array(23) } }, PREFIX, `stateDict['${PREFIX}in_proj_bias'].data`, ['23', '24']],
    ['a prefix of replacement patterns', without(sd, 'in_proj_weight'), "$&$'$1.", "stateDict['$&$'$1.in_proj_weight']", ['[24, 8]']],
  ];

  for (const [what, dict, prefix, argument, message] of BAD_PREFIXED) {
    test(`errors name the full key: ${what}`, () => {
      withModule(fresh('MultiheadAttention', mhaCase), (module) => {
        assertAttentionError(() => module.loadStateDict(prefixed(dict, prefix), { prefix }), AttentionError, argument, message);
      });
    });
  }

  test('a prefix nothing starts with: the first entry the module needs is missing', () => {
    withModule(fresh('MultiheadAttention', mhaCase), (module) => {
      assertAttentionError(() => module.loadStateDict(attn.loadSafetensors(MHA_FILE), { prefix: 'layers.2.attn.' }), AttentionError, /^stateDict\['layers\.2\.attn\./, ['a missing entry']);
    });
  });

  test('the options: an object whose only key is prefix, a string', () => {
    withModule(fresh('MultiheadAttention', mhaCase), (module) => {
      for (const bad of [5, null, ['layers.'], { prefix: 'layers.' }]) assertAttentionError(() => module.loadStateDict(sd, { prefix: bad }), AttentionError, 'prefix', ['a string']);
      assertAttentionError(() => module.loadStateDict(sd, { prefx: PREFIX }), AttentionError, 'prefx');
      assertAttentionError(() => module.loadStateDict(sd, PREFIX), AttentionError, 'opts');
    });
  });

  test('a Map whose keys are not strings', () => {
    withModule(fresh('MultiheadAttention', mhaCase), (module) => {
      const map = new Map([...Object.entries(sd), [7, tensorOf([1])]]);
      assertAttentionError(() => module.loadStateDict(map), AttentionError, 'stateDict', ['strings', '7']);
      assertAttentionError(() => module.loadStateDict(map, { prefix: PREFIX }), AttentionError, 'stateDict');
    });
  });
});

// Reading the .safetensors format (huggingface/safetensors): an 8-byte little-endian header size N,
// N bytes of UTF-8 JSON `{ name: { dtype, shape, data_offsets: [begin, end] }, __metadata__? }`,
// then the tensors' bytes, offsets counted from the end of the header. What counts as malformed
// follows the reference implementation (safetensors/src/tensor.rs: read_metadata, Metadata::validate).
import { AttentionError, describe, shapeString } from './errors.js';
import { checkShape, numel } from './validate.js';

export const HEADER_SIZE_BYTES = 8;
// The reference's MAX_HEADER_SIZE: a header size above it is refused before anything is decoded.
const MAX_HEADER_BYTES = 100_000_000;
const METADATA_KEY = '__metadata__';

// IEEE 754 binary16: a sign bit, 5 exponent bits (bias 15), 10 fraction bits.
function halfToFloat(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  if (exponent === 0) return sign * fraction * 2 ** -24; // ±0 and the subnormals
  return sign * (0x400 + fraction) * 2 ** (exponent - 25);
}

// Each dtype read here: its elements are read as unsigned words of its size, then converted to the
// dtype asked for: float32 (F32 bit for bit; BF16, the upper half of a float32, by a shift; F16 by
// value), binary16 ('f16': F32 and BF16 rounded to nearest even) or bfloat16 ('bf16': F32 and F16
// rounded to nearest even). Plain loops: `from` with a mapping function is about ten times slower
// on large tensors. Every conversion returns fresh words, never a view of the caller's bytes.
const DTYPES = new Map([
  ['F32', { Words: Uint32Array, stored: 'f32', to: { f32: (words) => new Float32Array(words.slice().buffer), f16: floatWordsToHalves, bf16: floatWordsToBfloat16s } }],
  ['F16', { Words: Uint16Array, stored: 'f16', to: { f32: halvesToFloats, f16: (words) => words.slice(), bf16: (words) => floatWordsToBfloat16s(new Uint32Array(halvesToFloats(words).buffer)) } }],
  ['BF16', { Words: Uint16Array, stored: 'bf16', to: { f32: bfloat16sToFloats, f16: (words) => floatWordsToHalves(new Uint32Array(bfloat16sToFloats(words).buffer)), bf16: (words) => words.slice() } }],
]);

// float32 bits → binary16 bits, rounding to nearest, ties to even; past 65504 (from 65520, halfway
// to the next power of two) ±Inf, NaN stays NaN. As the core's to_half (src/half.h).
function floatBitsToHalf(bits) {
  const sign = (bits >>> 16) & 0x8000;
  const magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) return sign | 0x7e00 | ((magnitude >>> 13) & 0x3ff);
  if (magnitude >= 0x477ff000) return sign | 0x7c00;
  if (magnitude < 0x38800000) {
    // Below 2^-14: a subnormal multiple of 2^-24, rounded to nearest even.
    const scaled = new Float32Array(new Uint32Array([magnitude]).buffer)[0] * 2 ** 24;
    const floor = Math.floor(scaled), rest = scaled - floor;
    return sign | (rest > 0.5 || (rest === 0.5 && floor % 2) ? floor + 1 : floor);
  }
  let half = (magnitude - 0x38000000) >>> 13;
  const dropped = magnitude & 0x1fff;
  if (dropped > 0x1000 || (dropped === 0x1000 && half & 1)) half++;
  return sign | half;
}

// Float32 words (the bits of F32, or BF16 moved up) as binary16 words.
function floatWordsToHalves(words) {
  const halves = new Uint16Array(words.length);
  for (let i = 0; i < words.length; i++) halves[i] = floatBitsToHalf(words[i]);
  return halves;
}

// Float32 words as bfloat16 words: the upper halves, rounded to nearest even; NaN stays NaN.
function floatWordsToBfloat16s(words) {
  const halves = new Uint16Array(words.length);
  for (let i = 0; i < words.length; i++) {
    const bits = words[i];
    halves[i] = (bits & 0x7fffffff) > 0x7f800000 ? (bits >>> 16) | 0x40 : (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16;
  }
  return halves;
}

function halvesToFloats(words) {
  const floats = new Float32Array(words.length);
  for (let i = 0; i < words.length; i++) floats[i] = halfToFloat(words[i]);
  return floats;
}

function bfloat16sToFloats(words) {
  const bits = new Uint32Array(words.length);
  for (let i = 0; i < words.length; i++) bits[i] = words[i] << 16;
  return new Float32Array(bits.buffer);
}

// The reference's other dtypes, with their bits per element: real ones, refused as not
// supported rather than unknown.
const OTHER_DTYPES = new Map([
  ['BOOL', 8], ['U8', 8], ['I8', 8], ['I16', 16], ['U16', 16], ['I32', 32], ['U32', 32], ['I64', 64], ['U64', 64], ['F64', 64], ['C64', 64],
  ['F4', 4], ['F6_E2M3', 6], ['F6_E3M2', 6], ['F8_E5M2', 8], ['F8_E4M3', 8], ['F8_E8M0', 8], ['F8_E4M3FNUZ', 8], ['F8_E5M2FNUZ', 8],
]);

const LITTLE_ENDIAN = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

// `count` words of `Words` at `begin` of `bytes`, in the engine's byte order. A typed-array view
// needs an offset that is a multiple of its element size (and the file's byte order); DataView
// needs neither. The format promises no alignment (a header size need not be a multiple of 8, and
// the caller's Uint8Array may start anywhere in its buffer), so misaligned data is not an error:
// it is copied through a DataView instead of viewed.
function readWords(bytes, begin, count, Words) {
  const offset = bytes.byteOffset + begin;
  const size = Words.BYTES_PER_ELEMENT;
  if (LITTLE_ENDIAN && offset % size === 0) return new Words(bytes.buffer, offset, count);
  const view = new DataView(bytes.buffer, offset, count * size);
  const words = new Words(count);
  if (size === 2) for (let i = 0; i < count; i++) words[i] = view.getUint16(2 * i, true);
  else for (let i = 0; i < count; i++) words[i] = view.getUint32(4 * i, true);
  return words;
}

function asBytes(bytes) {
  if (bytes instanceof Uint8Array) return bytes; // Node's Buffer included
  if (bytes instanceof ArrayBuffer) return new Uint8Array(bytes);
  throw new AttentionError('bytes', 'an ArrayBuffer, Uint8Array or Buffer holding a .safetensors file', describe(bytes));
}

// The header's top-level names in file order. JSON.parse keeps one of repeated names and moves
// names that read as array indices ("0", "12") to the front, so the order is read from the text
// itself (valid JSON by now): a string at depth 1 followed by a colon is a name.
function namesInFileOrder(text) {
  const names = [];
  const colon = /[ \t\n\r]*:/y;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    else if (c === '"') {
      const start = i;
      for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
      colon.lastIndex = i + 1;
      if (depth === 1 && colon.test(text)) names.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return names;
}

// Where the JSON object that `bytes` start with ends (the offset past its closing brace), or -1
// when it does not close within them. Read on the bytes: every byte of a multi-byte UTF-8
// character is ≥ 0x80, so none reads as a quote, a backslash or a bracket.
function objectEnd(bytes) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      if (b === 0x5c) i++;
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x7b || b === 0x5b) depth++;
    else if ((b === 0x7d || b === 0x5d) && --depth === 0) return i + 1;
  }
  return -1;
}

const isJsonSpace = (b) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

// The first byte of `bytes` (which do not decode) at which UTF-8 fails: the longest prefix that
// decodes as a stream (an unfinished character at its end is no error yet) ends there.
function firstNonUtf8(bytes) {
  let good = 0;
  let bad = bytes.length;
  while (bad - good > 1) {
    const mid = (good + bad) >> 1;
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, mid), { stream: true });
      good = mid;
    } catch {
      bad = mid;
    }
  }
  return good;
}

function parseHeader(headerBytes) {
  // A header size that disagrees with the JSON would otherwise read as bytes that are not UTF-8
  // (a size reaching into the tensors' data) or as broken JSON: name the size instead.
  const start = headerBytes.findIndex((b) => !isJsonSpace(b));
  if (headerBytes[start] === 0x7b) {
    const size = "a header size (the file's first 8 bytes) that ends the header with its JSON object";
    let end = objectEnd(headerBytes);
    if (end < 0) throw new AttentionError('bytes', size, `${headerBytes.length}, which ends inside the object`);
    while (isJsonSpace(headerBytes[end])) end++; // the spaces that pad it
    const past = headerBytes.length - end;
    if (past) throw new AttentionError('bytes', `${size} and the spaces after it: ${end}`, `${headerBytes.length}, ${past} byte${past > 1 ? 's' : ''} past them`);
  }
  let text;
  try {
    // ignoreBOM keeps a byte-order mark in the text, where JSON.parse refuses it, as the reference does.
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(headerBytes);
  } catch {
    throw new AttentionError('bytes', 'a header of UTF-8 JSON', `bytes that are not UTF-8 (at byte ${firstNonUtf8(headerBytes)} of the header)`);
  }
  let header;
  try {
    header = JSON.parse(text);
  } catch (error) {
    throw new AttentionError('bytes', 'a header of UTF-8 JSON', `invalid JSON (${error.message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header))
    throw new AttentionError('bytes', 'a header that is a JSON object of tensors', describe(header));
  const names = namesInFileOrder(text);
  const seen = new Set();
  for (const name of names) {
    if (seen.has(name)) throw new AttentionError('bytes', 'each tensor named once in the header', `'${name}' more than once`);
    seen.add(name);
  }
  return { header, names };
}

function checkMetadata(metadata) {
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
    throw new AttentionError(`bytes: ${METADATA_KEY}`, 'an object of strings', describe(metadata));
  for (const [key, value] of Object.entries(metadata))
    if (typeof value !== 'string') throw new AttentionError(`bytes: ${METADATA_KEY}['${key}']`, 'a string (the format keeps metadata as strings)', describe(value));
}

function checkDtype(dtype, argument) {
  if (DTYPES.has(dtype)) return dtype;
  const supported = `one of ${[...DTYPES.keys()].join(', ')}`;
  if (OTHER_DTYPES.has(dtype)) throw new AttentionError(argument, supported, `${dtype}, which is not supported`);
  throw new AttentionError(argument, supported, typeof dtype === 'string' ? `the unknown dtype ${describe(dtype)}` : describe(dtype));
}

function checkOffsets(offsets, argument, dataLength) {
  const ok = Array.isArray(offsets) && offsets.length === 2 && offsets.every(Number.isSafeInteger) && offsets[0] >= 0 && offsets[0] <= offsets[1];
  if (!ok) throw new AttentionError(argument, '[begin, end]: integers with 0 ≤ begin ≤ end', describe(offsets));
  if (offsets[1] > dataLength) throw new AttentionError(argument, `an end within the ${dataLength} bytes of data`, shapeString(offsets));
  return offsets;
}

// One header entry, checked: { name, dtype, stored, shape, begin, end }. With `lenient`, a tensor
// of a dtype this reader does not convert is kept (stored null), to be refused only if read: a
// model loader skips the buffers it does not use (GPT-NeoX's U8 `attention.bias`).
function readEntry(name, info, dataLength, lenient) {
  const argument = `bytes: tensor '${name}'`;
  if (info === null || typeof info !== 'object' || Array.isArray(info))
    throw new AttentionError(argument, '{ dtype, shape, data_offsets }', describe(info));
  const other = lenient && OTHER_DTYPES.has(info.dtype);
  const dtype = other ? info.dtype : checkDtype(info.dtype, `${argument}.dtype`);
  const shape = checkShape(info.shape, argument);
  const [begin, end] = checkOffsets(info.data_offsets, `${argument}.data_offsets`, dataLength);
  const elementBits = other ? OTHER_DTYPES.get(dtype) : 8 * DTYPES.get(dtype).Words.BYTES_PER_ELEMENT;
  const bytes = Math.ceil((numel(shape) * elementBits) / 8);
  if (end - begin !== bytes)
    throw new AttentionError(`${argument}.data_offsets`, `${bytes} bytes (${dtype} ${shapeString(shape)}: ${elementBits / 8} bytes per element)`, `${end - begin} bytes ${shapeString([begin, end])}`);
  return { name, dtype, stored: other ? null : DTYPES.get(dtype).stored, shape, begin, end };
}

// As the reference (Metadata::validate, then read_metadata's size check): sorted by offsets, each
// tensor begins where the previous one ends and the last ends where the file ends, so the tensors
// cover the data exactly: no overlaps, no holes, no trailing bytes.
function checkCoverage(entries, dataLength) {
  const byOffset = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let previous = null;
  for (const entry of byOffset) {
    const end = previous ? previous.end : 0;
    const argument = `bytes: tensor '${entry.name}'.data_offsets`;
    const got = shapeString([entry.begin, entry.end]);
    if (entry.begin < end)
      throw new AttentionError(argument, `bytes no other tensor has (tensor '${previous.name}' has ${shapeString([previous.begin, previous.end])})`, `${got}, which overlaps it`);
    if (entry.begin > end) {
      const where = previous ? `tensor '${previous.name}' ends` : 'the data begins';
      throw new AttentionError(argument, `to begin at ${end}, where ${where} (the format leaves no gaps)`, got);
    }
    previous = entry;
  }
  const end = previous ? previous.end : 0;
  if (end !== dataLength)
    throw new AttentionError('bytes', `data that ends where its last tensor ends, ${end} bytes after the header`, `${dataLength} bytes of data`);
}

// The header's size from a file's first 8 bytes (`prefix`), checked against the file's `fileBytes`:
// → where the header ends and the data begins.
export function headerEnd(prefix, fileBytes) {
  if (fileBytes < HEADER_SIZE_BYTES)
    throw new AttentionError('bytes', `a .safetensors file: at least the ${HEADER_SIZE_BYTES} bytes of its header size`, `${fileBytes} bytes`);
  const headerBytes = new DataView(prefix.buffer, prefix.byteOffset, HEADER_SIZE_BYTES).getBigUint64(0, true);
  if (headerBytes > BigInt(MAX_HEADER_BYTES))
    throw new AttentionError('bytes', `a header size of at most ${MAX_HEADER_BYTES} bytes (the reference implementation's limit)`, `${headerBytes}`);
  const end = HEADER_SIZE_BYTES + Number(headerBytes);
  if (end > fileBytes)
    throw new AttentionError('bytes', `${headerBytes} bytes of header after the ${HEADER_SIZE_BYTES}-byte size, as it says`, `${fileBytes - HEADER_SIZE_BYTES} bytes after the size`);
  return end;
}

/**
 * A header's JSON bytes checked against the `dataBytes` that follow it: → { metadata, entries:
 * [{ name, dtype (the file's: 'F32' | 'F16' | 'BF16'), stored ('f32' | 'f16' | 'bf16'), shape,
 * begin, end }] } in file order, offsets counted from the start of the data (readEntry: `lenient`).
 */
export function headerEntries(headerBytes, dataBytes, { lenient = false } = {}) {
  const { header, names } = parseHeader(headerBytes);
  const entries = [];
  for (const name of names) {
    if (name === METADATA_KEY) checkMetadata(header[name]);
    else entries.push(readEntry(name, header[name], dataBytes, lenient));
  }
  checkCoverage(entries, dataBytes);
  return { metadata: header[METADATA_KEY] ?? {}, entries };
}

/**
 * One tensor from its header entry and its bytes (`bytes` holds the entry's data from byte
 * `begin`), as `dtype` ('f32' | 'f16' | 'bf16'): { data: Float32Array, shape }, or { data:
 * Uint16Array of binary16 or bfloat16 bits, shape, dtype }.
 */
export function tensorFromEntry({ dtype: stored, shape }, bytes, begin, dtype, { view = false } = {}) {
  const { Words, stored: storedAs, to } = DTYPES.get(stored);
  const words = readWords(bytes, begin, numel(shape), Words);
  // `view`: the caller copies the data before `bytes` change (into wasm memory), so a tensor
  // stored as asked is not copied here first.
  const data = !view || storedAs !== dtype ? to[dtype](words) : dtype === 'f32' ? new Float32Array(words.buffer, words.byteOffset, words.length) : words;
  return dtype === 'f32' ? { data, shape } : { data, shape, dtype };
}

// An AttentionError about the whole file ('bytes') told of one named `argument` instead.
export function renamed(error, argument) {
  if (error instanceof AttentionError && argument !== 'bytes')
    return new AttentionError(error.argument.replace(/^bytes/, argument), error.expected, error.got);
  return error;
}

// One file's header checked and its tensors read as `dtype`: { metadata, tensors: [[name,
// tensor]] }. Errors name the file as `argument` ('bytes', or 'bytes[i]' for a shard).
function readFile(bytes, argument, dtype) {
  try {
    const file = asBytes(bytes);
    const end = headerEnd(file, file.length);
    const data = file.subarray(end);
    const { metadata, entries } = headerEntries(file.subarray(HEADER_SIZE_BYTES, end), data.length);
    return { metadata, tensors: entries.map((entry) => [entry.name, tensorFromEntry(entry, data, entry.begin, dtype)]) };
  } catch (error) {
    throw renamed(error, argument);
  }
}

/**
 * The tensors of a .safetensors file, or of a model's shards, in the headers' order (shard after
 * shard): name → { data: Float32Array, shape }, or with `dtype: 'f16'` name → { data: Uint16Array
 * (binary16 bits; F32 and BF16 rounded to nearest even), shape, dtype: 'f16' }. The map's
 * `metadata` is the files' `__metadata__` (a shard's keys do not replace an earlier shard's). A
 * name in two shards is an error; so is anything malformed, named (`bytes`, or `bytes[i]` for a
 * shard, with the tensor); nothing past the bytes is read. With `dtype: 'bf16'` the tensors are
 * { data: Uint16Array (bfloat16 bits; F32 and F16 rounded to nearest even), shape, dtype: 'bf16' }.
 */
export function loadSafetensors(bytes, dtype = 'f32') {
  // An array of numbers is a file's bytes in the wrong container, not shards.
  if (Array.isArray(bytes) && bytes.some((shard) => typeof shard === 'number'))
    throw new AttentionError('bytes', 'an ArrayBuffer, Uint8Array or Buffer holding a .safetensors file, or an array of them (shards)', 'an array of numbers');
  const files = Array.isArray(bytes) ? bytes.map((shard, i) => [shard, `bytes[${i}]`]) : [[bytes, 'bytes']];
  if (files.length === 0) throw new AttentionError('bytes', 'a .safetensors file, or an array of its shards', 'an empty array');
  const tensors = new Map();
  const where = new Map();
  const metadata = {};
  for (const [file, argument] of files) {
    const read = readFile(file, argument, dtype);
    for (const [key, value] of Object.entries(read.metadata)) if (!(key in metadata)) metadata[key] = value;
    for (const [name, tensor] of read.tensors) {
      if (tensors.has(name))
        throw new AttentionError(`${argument}: tensor '${name}'`, 'a name no other shard has', `the name of a tensor of ${where.get(name)} too`);
      tensors.set(name, tensor);
      where.set(name, argument);
    }
  }
  return Object.defineProperty(tensors, 'metadata', { value: Object.freeze(metadata), enumerable: false });
}

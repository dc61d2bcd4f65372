// Validation of JS values before anything touches wasm memory: what a value is (its type, and that
// it fits the struct field it crosses into: a dimension, a float32, a safe integer, one of a core
// enum's names). What values mean (ranges, how they relate, shapes: ranks, matching dims,
// broadcasting) and the defaults of what is absent are the C++ core's, which reports through the
// same error.
import { AttentionError, describe, shapeString } from './errors.js';

// wasm32 pointers: no single buffer may reach 2 GiB, and dimensions must fit an int32.
export const MAX_DIM = 2 ** 31 - 1;
export const MAX_BYTES = 2 ** 31 - 1;

const TENSOR = '{ data: Float32Array, shape: number[] }';

export function checkShape(shape, argument) {
  if (!Array.isArray(shape)) throw new AttentionError(`${argument}.shape`, 'an array of non-negative integers', describe(shape));
  for (const dim of shape) {
    if (!Number.isInteger(dim) || dim < 0 || dim > MAX_DIM)
      throw new AttentionError(`${argument}.shape`, `non-negative integers no larger than ${MAX_DIM}`, describe(shape));
  }
  return shape;
}

export function numel(shape) {
  return shape.reduce((n, dim) => n * dim, 1);
}

function checkLength(value, argument) {
  const expected = numel(value.shape);
  if (value.data.length !== expected)
    throw new AttentionError(`${argument}.data`, `length ${expected} for shape ${shapeString(value.shape)}`, `length ${value.data.length}`);
}

export function checkTensor(value, argument) {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || Array.isArray(value))
    throw new AttentionError(argument, TENSOR, describe(value));
  if (!(value.data instanceof Float32Array))
    throw new AttentionError(`${argument}.data`, 'a Float32Array', describe(value.data));
  checkShape(value.shape, argument);
  checkLength(value, argument);
  return value;
}

// A tensor argument that callers may leave out for an options object that comes after it: an
// object with neither data nor shape there is named as the options, with `call`, the signature.
export function checkTensorArgument(value, argument, call) {
  if (value && typeof value === 'object' && !('data' in value) && !('shape' in value) && !Array.isArray(value) && !ArrayBuffer.isView(value)) {
    const keys = Object.keys(value);
    throw new AttentionError(argument, `${TENSOR}: options go last, ${call}`, keys.length ? `the options { ${keys.join(', ')} }` : 'an empty object');
  }
  return checkTensor(value, argument);
}

// opts.out of a call returning { output, weights }: the Float32Arrays to write them into, either
// absent; weights only where they are asked for. Each is checked against its result's shape by
// checkOutArray once the shapes are known.
export function checkOutArrays(value, needWeights) {
  const out = checkOptions(value, ['output', 'weights'], 'out');
  if (out.weights != null && !needWeights) throw new AttentionError('out.weights', 'needWeights: true (the weights to write)', 'needWeights false');
  return out;
}

// Runtime.invoke's output entries for { output, weights } (weights' shape null when not asked),
// each written into the caller's array when opts.out gave one (checkOutArrays' result; Linear's
// output array is opts.out itself, named `outputName`). The output may overwrite input
// `outputOverInput` where the module allows it.
export function resultEntries(out, outputShape, weightsShape, outputOverInput = undefined, outputName = 'out.output') {
  return [
    [outputShape, 'output', outputOverInput, checkOutArray(out.output, outputName, outputShape)],
    [weightsShape, 'weights', undefined, weightsShape && checkOutArray(out.weights, 'out.weights', weightsShape)],
  ];
}

// out.weights of the package's whole-model code (bindings/models): the weights stay where the
// call wrote them in wasm memory, lent to the caller until it releases them (HeapScope#lend), where
// a layer's at 2048 tokens would otherwise exist twice (512 MiB each for 32 heads).
export const LEND = Symbol.for('attention-wasm.lend');

// An array a result is written into (opts.out): a Float32Array with room for `shape`, or LEND;
// null and undefined mean none (a new array).
function checkOutArray(value, argument, shape) {
  if (value === null || value === undefined || value === LEND) return value ?? null;
  if (!(value instanceof Float32Array)) throw new AttentionError(argument, 'a Float32Array', describe(value));
  if (value.length < numel(shape))
    throw new AttentionError(argument, `a Float32Array of at least ${numel(shape)} elements (the result ${shapeString(shape)})`, describe(value));
  return value;
}

// A mask is boolean (Uint8Array of 0/1) or additive (Float32Array); null and undefined mean none.
export function checkMask(value, argument) {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'object' || ArrayBuffer.isView(value) || Array.isArray(value))
    throw new AttentionError(argument, '{ data: Uint8Array | Float32Array, shape: number[] }', describe(value));
  if (!(value.data instanceof Uint8Array) && !(value.data instanceof Float32Array))
    throw new AttentionError(`${argument}.data`, 'a Uint8Array (boolean) or a Float32Array (additive)', describe(value.data));
  checkShape(value.shape, argument);
  checkLength(value, argument);
  return value;
}

// Integer ids (document ids): { data: Int32Array, shape }; null and undefined mean none.
export function checkIds(value, argument) {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'object' || ArrayBuffer.isView(value) || Array.isArray(value))
    throw new AttentionError(argument, '{ data: Int32Array, shape: number[] }', describe(value));
  if (!(value.data instanceof Int32Array)) throw new AttentionError(`${argument}.data`, 'an Int32Array', describe(value.data));
  checkShape(value.shape, argument);
  checkLength(value, argument);
  return value;
}

// A positive finite number whose float32 rounding is positive and finite too.
export function checkPositive(value, argument) {
  const ok = typeof value === 'number' && value > 0 && Number.isFinite(value) && Number.isFinite(Math.fround(value)) && Math.fround(value) > 0;
  if (!ok) throw new AttentionError(argument, 'a positive finite number', describe(value));
  return value;
}

// Options objects: unknown keys are errors, so a misspelt option never silently does nothing.
export function checkOptions(opts, allowed, argument = 'opts') {
  if (opts === undefined || opts === null) return {};
  if (typeof opts !== 'object' || Array.isArray(opts) || ArrayBuffer.isView(opts)) throw new AttentionError(argument, 'an options object', describe(opts));
  for (const key of Object.keys(opts)) {
    // A nested object's key is named with its parent's: out.weight, not weight.
    const name = argument === 'opts' ? key : `${argument}.${key}`;
    if (!allowed.includes(key)) throw new AttentionError(name, `one of the options ${allowed.join(', ')}`, 'an unknown option');
  }
  return opts;
}

export function checkBoolean(value, argument, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new AttentionError(argument, 'a boolean', describe(value));
  return value;
}

export function checkChoice(value, argument, choices, fallback) {
  if (value === undefined) return fallback;
  if (!choices.includes(value)) throw new AttentionError(argument, `one of ${choices.map((c) => JSON.stringify(c)).join(', ')}`, describe(value));
  return value;
}

// The names of one of the core's enums (Embind's enum_ object: a property per name, and `values`).
export function enumNames(type) {
  return Object.keys(type).filter((name) => name !== 'values');
}

// One of the names of a core enum but `hidden` (a value only the bindings give), as the number its
// struct field takes; undefined stays undefined (the field's default).
export function checkEnum(value, argument, type, hidden) {
  return value === undefined ? undefined : type[checkChoice(value, argument, enumNames(type).filter((name) => name !== hidden))].value;
}

// The name of a core enum's `value`.
export function enumName(type, value) {
  return enumNames(type).find((name) => type[name].value === value);
}

// `values` without its undefined entries.
export function defined(values) {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
}

// `float32`: the value reaches the core as a float, so its float32 rounding must be in range too
// (1e300 is finite, its float32 is not; 0.99999999999 rounds to 1). `integer` without a range: one
// that converts exactly (a safe integer), its range the core's to check.
export function checkNumber(value, argument, { min = -Infinity, max = Infinity, maxExclusive = false, integer = false, float32 = false } = {}) {
  const inRange = (x) => Number.isFinite(x) && x >= min && (maxExclusive ? x < max : x <= max);
  const ok = typeof value === 'number' && inRange(value) && (!float32 || inRange(Math.fround(value)));
  if (!ok || (integer && !Number.isSafeInteger(value))) {
    const kind = integer ? 'an integer' : float32 ? 'a finite float32 number' : 'a finite number';
    const range = Number.isFinite(min) || Number.isFinite(max) ? ` in [${min}, ${max}${maxExclusive ? ')' : ']'}` : '';
    throw new AttentionError(argument, kind + range, describe(value));
  }
  return value;
}

// alibi: undefined/false none (0), true Press et al.'s slopes (1), a Float32Array of slopes (2).
export function checkAlibi(value) {
  if (value === undefined || value === false) return { mode: 0, slopes: null };
  if (value === true) return { mode: 1, slopes: null };
  if (value instanceof Float32Array) return { mode: 2, slopes: value };
  throw new AttentionError('alibi', 'true or a Float32Array of one slope per query head', describe(value));
}

// Positions: [L] as an Int32Array or as integers that fit one, or [N, L] as { data: Int32Array,
// shape }; null and undefined mean none.
export function checkPositions(value) {
  if (value === undefined || value === null) return null;
  if (value instanceof Int32Array) return { data: value, shape: [value.length] };
  const fits = (x) => Number.isInteger(x) && x >= -(2 ** 31) && x < 2 ** 31;
  if (Array.isArray(value) && value.every(fits)) return { data: Int32Array.from(value), shape: [value.length] };
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && !ArrayBuffer.isView(value)) return checkIds(value, 'positions');
  throw new AttentionError('positions', 'an Int32Array or an array of int32 integers ([L]), or { data: Int32Array, shape: [N, L] }', describe(value));
}

// Hugging Face's attention_mask: { data, shape } holding 1 (a token) and 0 (padding), in any typed
// array or an array (booleans too), as a Uint8Array mask; null and undefined mean none.
export function checkTokenMask(value, argument) {
  if (value === undefined || value === null) return null;
  const pattern = '{ data: Uint8Array | Int32Array | BigInt64Array | number[], shape } of 1 (a token) and 0 (padding)';
  if (typeof value !== 'object' || ArrayBuffer.isView(value) || Array.isArray(value)) throw new AttentionError(argument, pattern, describe(value));
  const { data } = value;
  if (!Array.isArray(data) && !(ArrayBuffer.isView(data) && !(data instanceof DataView)))
    throw new AttentionError(`${argument}.data`, 'a typed array or an array of 1 and 0', describe(data));
  checkShape(value.shape, argument);
  checkLength(value, argument);
  const tokens = new Uint8Array(data.length);
  for (let i = 0; i < data.length; ++i) {
    const v = data[i];
    if (v === 1 || v === 1n || v === true) tokens[i] = 1;
    else if (!(v === 0 || v === 0n || v === false))
      throw new AttentionError(`${argument}.data`, '1 (a token) and 0 (padding) only', `${describe(v)} at index ${i}`);
  }
  return { data: tokens, shape: value.shape };
}

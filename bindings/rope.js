// The RoPE scheme options of attn.rope and GroupedQueryAttention: Hugging Face's rope_scaling as it
// stands in config.json (`ropeScaling`), `maxPositionEmbeddings`, or the frequencies given
// directly (`invFreq`, `attentionScaling`), as the core's RopeScaling struct. Its arrays travel in
// one Float64Array that the caller copies into wasm memory.
import { AttentionError, describe } from './errors.js';
import { checkNumber, enumNames } from './validate.js';

export const ROPE_SCHEME_OPTIONS = ['ropeScaling', 'maxPositionEmbeddings', 'invFreq', 'attentionScaling'];

// The keys each rope_type reads besides rope_type (modeling_rope_utils.py's validation: required
// and optional). The types themselves are the core's (_RopeType, but 'given': invFreq's).
const TYPE_KEYS = {
  linear: ['factor'],
  dynamic: ['factor'],
  yarn: ['factor', 'attention_factor', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim', 'original_max_position_embeddings', 'truncate'],
  longrope: ['short_factor', 'long_factor', 'factor', 'attention_factor', 'original_max_position_embeddings'],
  llama3: ['factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings'],
};

// Where a key belongs instead of ropeScaling (the v5 rope_parameters form carries them inside).
const ELSEWHERE = { rope_theta: 'the base (ropeBase, or base for attn.rope)', partial_rotary_factor: 'rotaryDim (headDim · partial_rotary_factor)' };

// The fields of the core's RopeScaling, none given: each keeps its default there (Embind wants
// every field named).
const NONE = Object.fromEntries([
  'type', 'factor', 'attentionFactor', 'betaFast', 'betaSlow', 'mscale', 'mscaleAllDim', 'truncate', 'lowFreqFactor', 'highFreqFactor',
  'originalMaxPositionEmbeddings', 'maxPositionEmbeddings', 'shortFactor', 'longFactor', 'factorCount', 'invFreq', 'invFreqCount', 'attentionScaling',
].map((field) => [field, undefined]));

function numberList(value, argument) {
  const ok = (Array.isArray(value) || value instanceof Float64Array || value instanceof Float32Array) &&
    Array.prototype.every.call(value, (x) => typeof x === 'number' && Number.isFinite(x));
  if (!ok) throw new AttentionError(argument, 'an array of finite numbers', describe(value));
  return value;
}

function readScaling(wasm, scaling) {
  if (scaling === null || typeof scaling !== 'object' || Array.isArray(scaling))
    throw new AttentionError('ropeScaling', "config.json's rope_scaling object ({ rope_type, factor, ... })", describe(scaling));
  const type = scaling.rope_type ?? scaling.type ?? 'default';
  const types = enumNames(wasm._RopeType).filter((name) => name !== 'given');
  if (!types.includes(type))
    throw new AttentionError('ropeScaling.rope_type', `one of ${types.map((t) => `'${t}'`).join(', ')}`, describe(type));
  const keys = TYPE_KEYS[type] ?? [];
  for (const key of Object.keys(scaling)) {
    if (key === 'rope_type' || key === 'type' || keys.includes(key) || scaling[key] === undefined) continue;
    const expected = ELSEWHERE[key] ? `no ${key} here: it goes to ${ELSEWHERE[key]}` : `only ${['rope_type', ...keys].join(', ')} for rope_type '${type}'`;
    throw new AttentionError(`ropeScaling.${key}`, expected, describe(scaling[key]));
  }
  // Hugging Face reads `x or default` for some keys and `get(x)` for others: null counts as absent.
  const number = (key) => (scaling[key] === undefined || scaling[key] === null ? undefined : checkNumber(scaling[key], `ropeScaling.${key}`));
  const positions = (key) => (scaling[key] === undefined || scaling[key] === null
    ? undefined : checkNumber(scaling[key], `ropeScaling.${key}`, { integer: true }));
  if (scaling.truncate !== undefined && typeof scaling.truncate !== 'boolean')
    throw new AttentionError('ropeScaling.truncate', 'a boolean', describe(scaling.truncate));
  const struct = {
    ...NONE,
    factor: number('factor'), attentionFactor: number('attention_factor'), betaFast: number('beta_fast'), betaSlow: number('beta_slow'),
    mscale: number('mscale'), mscaleAllDim: number('mscale_all_dim'), truncate: scaling.truncate ?? undefined,
    lowFreqFactor: number('low_freq_factor'), highFreqFactor: number('high_freq_factor'),
    originalMaxPositionEmbeddings: positions('original_max_position_embeddings'),
  };
  if (type !== 'longrope') return { type, struct, tables: null };
  const short = numberList(scaling.short_factor, 'ropeScaling.short_factor');
  const long = numberList(scaling.long_factor, 'ropeScaling.long_factor');
  if (long.length !== short.length)
    throw new AttentionError('ropeScaling.long_factor', `${short.length} numbers (as short_factor)`, `${long.length} numbers`);
  const tables = new Float64Array(2 * short.length);
  tables.set(short);
  tables.set(long, short.length);
  return { type, struct: { ...struct, factorCount: short.length }, tables };
}

/**
 * The RoPE scheme of `opts`: { type (a name of the core's _RopeType), struct (the core's
 * RopeScaling without its pointers), tables (a Float64Array for wasm memory, or null) }.
 */
export function checkRopeScheme(wasm, opts) {
  const maxPositionEmbeddings = opts.maxPositionEmbeddings === undefined || opts.maxPositionEmbeddings === null
    ? undefined : checkNumber(opts.maxPositionEmbeddings, 'maxPositionEmbeddings', { integer: true });
  if (opts.invFreq !== undefined && opts.invFreq !== null) {
    if (opts.ropeScaling !== undefined && opts.ropeScaling !== null)
      throw new AttentionError('invFreq', 'either invFreq or ropeScaling, not both', 'both');
    if (!(opts.invFreq instanceof Float64Array || opts.invFreq instanceof Float32Array))
      throw new AttentionError('invFreq', 'a Float64Array or Float32Array of rotaryDim / 2 inverse frequencies', describe(opts.invFreq));
    const attentionScaling = opts.attentionScaling === undefined ? undefined : checkNumber(opts.attentionScaling, 'attentionScaling');
    const tables = Float64Array.from(opts.invFreq);
    return { type: 'given', struct: { ...NONE, maxPositionEmbeddings, invFreqCount: tables.length, attentionScaling }, tables };
  }
  if (opts.attentionScaling !== undefined)
    throw new AttentionError('attentionScaling', 'attentionScaling only with invFreq (ropeScaling has its own attention factor)', describe(opts.attentionScaling));
  const scheme = opts.ropeScaling === undefined || opts.ropeScaling === null
    ? { type: undefined, struct: { ...NONE }, tables: null } : readScaling(wasm, opts.ropeScaling);
  return { ...scheme, struct: { ...scheme.struct, maxPositionEmbeddings } };
}

/** The core's RopeScaling for `scheme`, its tables at `pointer` in wasm memory. */
export function ropeScalingStruct(wasm, scheme, pointer = 0) {
  const { struct } = scheme;
  const at = (offset) => (pointer ? pointer + offset * 8 : 0);
  return {
    ...struct,
    type: wasm._RopeType[scheme.type]?.value,
    shortFactor: scheme.type === 'longrope' ? at(0) : 0,
    longFactor: scheme.type === 'longrope' ? at(struct.factorCount) : 0,
    invFreq: scheme.type === 'given' ? at(0) : 0,
  };
}

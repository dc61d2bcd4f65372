// The one error class users catch. Messages follow PyTorch's habit: the argument, what was
// expected and what was given ("key: expected [2, m, 64], got [2, 7, 32]"). The main entry and
// 'attention-wasm/models' are separate bundles, each with this module: the class is registered
// globally by the first, so that `instanceof AttentionError` holds for either's errors.
const REGISTERED = Symbol.for('attention-wasm.AttentionError');
export const AttentionError = (globalThis[REGISTERED] ??= class AttentionError extends Error {
  /**
   * @param {string} argument  the argument at fault (`query`, `scale`, `stateDict['out_proj.weight']`)
   * @param {string} expected  what it should have been
   * @param {string} got       what it was
   * @param {{ code?: string }} [details]
   */
  constructor(argument, expected, got, { code = 'INVALID_ARGUMENT' } = {}) {
    super(code === 'OUT_OF_MEMORY' ? `${argument}: out of memory: needs ${got}` : `${argument}: expected ${expected}, got ${got}`);
    this.name = 'AttentionError';
    this.argument = argument;
    this.expected = expected;
    this.got = got;
    this.code = code;
  }
});

// A short description of any JS value, for the `got` part of a message.
export function describe(value) {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return value.length <= 8 ? `[${value.map(describe).join(', ')}]` : `an Array of length ${value.length}`;
  // A DataView has no length: its size is in bytes.
  if (value instanceof DataView) return `DataView(${value.byteLength} bytes)`;
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}(${value.length})`;
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'object') return value.constructor && value.constructor !== Object ? value.constructor.name : 'an object';
  // Not its source text; and 2n is not the number 2.
  if (typeof value === 'function') return value.name ? `the function ${value.name}` : 'a function';
  return typeof value === 'bigint' ? `${value}n` : String(value);
}

export function shapeString(shape) {
  return `[${shape.join(', ')}]`;
}

/**
 * Gives each class its own name back: the bundle is minified, and users see these names in the
 * console and in errors that describe a value they passed. Returns `classes`.
 */
export function keepClassNames(classes) {
  for (const [name, cls] of Object.entries(classes)) Object.defineProperty(cls, 'name', { value: name });
  return classes;
}

keepClassNames({ AttentionError });

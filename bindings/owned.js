// What the classes over core objects (modules, KV caches) share: each JS object's record of the
// object it stands for in wasm memory, kept out of users' reach, and the checks every method runs.
import { AttentionError } from './errors.js';
import { throwIfFailed } from './runtime.js';

// Per-object state: { runtime, entry, handle, name, ... }, where `entry` is the runtime's record
// of the core object (Runtime.own).
export const internals = new WeakMap();

/**
 * Makes `target` stand for the core object `handle` (or throws the Status that refused to create
 * it): owned by `runtime`, freed by destroy(wasm, handle). `extra` joins its state.
 */
export function adopt(target, runtime, name, handle, destroy, extra = {}) {
  if (typeof handle !== 'number') throwIfFailed(handle);
  const entry = runtime.own(target, (wasm) => destroy(wasm, handle));
  internals.set(target, { runtime, entry, handle, name, ...extra });
}

// The state of an object that is still alive, and its instance's wasm module, for `method`.
export function live(target, method) {
  const state = internals.get(target);
  const wasm = state.runtime.enter(`${state.name}.${method}`);
  if (!state.runtime.owns(state.entry)) {
    const kind = state.name === 'KVCache' ? 'cache' : 'module';
    throw new AttentionError(state.name, `a ${kind} that is not disposed`, `a disposed ${kind}`, { code: 'DISPOSED' });
  }
  return { state, wasm };
}

/** Frees the core object now; safe twice and after the instance's dispose(). */
export function release(target) {
  const { runtime, entry } = internals.get(target);
  runtime.free(entry);
}

// Read-only, enumerable constructor arguments.
export function expose(target, values) {
  for (const [key, value] of Object.entries(values)) Object.defineProperty(target, key, { value, enumerable: true });
}

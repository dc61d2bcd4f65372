// A checkpoint's tensors (loadSafetensors' map) as the pieces a model is built of, each refused
// with the name it lacks. No DOM.
import { floats } from './ops.js';

// A tensor of the checkpoint, or an error naming it.
export function tensorOf(tensors, name) {
  const tensor = tensors.get(name);
  if (!tensor) throw new Error(`the weights have no '${name}'`);
  return tensor;
}

// A Linear over a checkpoint's weight (and bias), in the weight's own dtype.
export function linearOf(attn, tensors, name, { bias = false } = {}) {
  const weight = tensorOf(tensors, `${name}.weight`);
  const [out, inFeatures] = weight.shape;
  const linear = new attn.Linear(inFeatures, out, { bias, dtype: weight.dtype === 'f16' ? 'f16' : 'f32' });
  const sd = { weight };
  if (bias) sd.bias = { data: floats(tensorOf(tensors, `${name}.bias`)), shape: [out] };
  return linear.loadStateDict(sd);
}

// A LayerNorm's weight and bias as float32: { w, b }.
export function layerNormOf(tensors, name) {
  return { w: floats(tensorOf(tensors, `${name}.weight`)), b: floats(tensorOf(tensors, `${name}.bias`)) };
}

/**
 * The wasm modules a model owns: build(own) makes them, own(module) keeping each (and returning
 * it); if build throws, every module kept so far is disposed before the error goes on, so a model
 * that fails to load leaves no memory behind. → { modules, dispose() } (dispose frees them all).
 */
export function owning(build) {
  const modules = [];
  try {
    build((module) => {
      modules.push(module);
      return module;
    });
  } catch (error) {
    for (const module of modules) module.dispose();
    throw error;
  }
  return { modules, dispose: () => modules.forEach((module) => module.dispose()) };
}

// tfjs-wasm: @tensorflow/tfjs-core on @tensorflow/tfjs-backend-wasm, one thread, the computation
// spelled with matMul / reshape / transpose / softmax and an additive causal mask.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import * as tfWasm from '@tensorflow/tfjs-backend-wasm';
import { E, H, HEAD_DIM, matmulWeights } from '../problem.mjs';

/** Selects the wasm backend (single-threaded SIMD build); returns the versions. */
export async function loadTfjs() {
  // In Node the backend reads its .wasm files from a directory path (it uses fs, not fetch).
  const dist = dirname(createRequire(import.meta.url).resolve('@tensorflow/tfjs-backend-wasm'));
  tfWasm.setWasmPaths(join(dist, '/'));
  tfWasm.setThreadsCount(1);
  if (!(await tf.setBackend('wasm'))) throw new Error('tfjs: the wasm backend did not initialize');
  await tf.ready();
  const w = matmulWeights();
  const weights = {
    inT: tf.tensor2d(w.inT, [E, 3 * E]),
    inBias: tf.tensor1d(w.inBias),
    outT: tf.tensor2d(w.outT, [E, E]),
    outBias: tf.tensor1d(w.outBias),
  };
  return {
    version: `${tf.version_core} (wasm ${tfWasm.version_wasm}, simd ${tf.env().getBool('WASM_HAS_SIMD_SUPPORT')}, threads ${tfWasm.getThreadsCount()})`,
    /** A forward over x [L, E] (the input upload and the output download included). */
    runner(x, L) {
      const maskData = new Float32Array(L * L);
      for (let i = 0; i < L; ++i) maskData.fill(-Infinity, i * L + i + 1, (i + 1) * L);
      const mask = tf.tensor2d(maskData, [L, L]);
      const run = () => {
        const out = tf.tidy(() => {
          const qkv = tf.add(tf.matMul(tf.tensor2d(x, [L, E]), weights.inT), weights.inBias);  // [L, 3E]
          const [q, k, v] = tf.split(qkv, 3, 1).map((t) => tf.transpose(tf.reshape(t, [L, H, HEAD_DIM]), [1, 0, 2]));
          const scores = tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(HEAD_DIM)), mask);  // [H, L, L]
          const heads = tf.matMul(tf.softmax(scores), v);  // [H, L, HEAD_DIM]
          const attended = tf.reshape(tf.transpose(heads, [1, 0, 2]), [L, E]);
          return tf.add(tf.matMul(attended, weights.outT), weights.outBias);
        });
        const data = out.dataSync();
        out.dispose();
        return data;
      };
      run.dispose = () => mask.dispose();
      return run;
    },
  };
}

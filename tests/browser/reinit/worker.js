// A module worker that re-creates its attention-wasm instance, as a long-lived page does. Message
// in: { cycles, dispose }; out: { cycles, features, crossOriginIsolated } or { error }.
import { init } from '../../../dist/index.mjs';

self.addEventListener('message', async ({ data: { cycles, dispose } }) => {
  try {
    const x = { shape: [4, 8], data: Float32Array.from({ length: 32 }, (_, i) => Math.sin(i)) };
    let features;
    for (let i = 0; i < cycles; i++) {
      const attn = await init({ threads: 2 });
      features = attn.features;
      attn.scaledDotProductAttention(x, x, x, { isCausal: true });
      if (dispose) attn.dispose();
    }
    self.postMessage({ cycles, features: { ...features }, crossOriginIsolated: self.crossOriginIsolated === true });
  } catch (error) {
    self.postMessage({ error: `${error.name}: ${error.message}` });
  }
});

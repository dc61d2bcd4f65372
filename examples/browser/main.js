// attention-wasm in a page without a bundler. Serve the repository root with the two headers that
// make the page cross-origin isolated (`node scripts/serve.mjs` does) and open /examples/browser/.
// From an installed package the import is '/node_modules/attention-wasm/dist/index.mjs' or
// whatever URL serves that folder; the .wasm files are found beside it.
import { init } from '../../dist/index.mjs';

const show = (id, text) => {
  document.getElementById(id).textContent = text;
};

try {
  // Two threads where SharedArrayBuffer exists (cross-origin isolated pages), else one.
  const attn = await init({ threads: 2 });
  show('isolated', String(globalThis.crossOriginIsolated === true));
  show('features', `${attn.build} build: SIMD ${attn.features.simd}, ${attn.features.threads} thread(s), version ${attn.features.version}`);

  // Three tokens with d = 2; query i may attend to keys j <= i.
  const x = { shape: [3, 2], data: Float32Array.from([1, 0, 0, 1, 1, 1]) };
  const { output, weights } = attn.scaledDotProductAttention(x, x, x, { isCausal: true, needWeights: true });
  const rows = [0, 1, 2].map((i) => [...weights.data.slice(i * 3, i * 3 + 3)].map((w) => w.toFixed(3)).join('  '));
  show('weights', rows.join('\n'));
  show('result', JSON.stringify({
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    features: attn.features,
    build: attn.build,
    output: [...output.data],
    weights: [...weights.data],
  }));
  document.body.dataset.state = 'ready';
} catch (error) {
  show('features', `${error.name}: ${error.message}`);
  document.body.dataset.state = 'error';
}

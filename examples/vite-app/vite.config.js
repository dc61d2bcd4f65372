// The two headers that make the page cross-origin isolated, so `init({ threads: 2 })` can use the
// pthreads build (SharedArrayBuffer). Without them everything still works, on one thread.
import { defineConfig } from 'vite';

const crossOriginIsolation = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

export default defineConfig({
  server: { headers: crossOriginIsolation },
  preview: { headers: crossOriginIsolation },
  // The dev server pre-bundles dependencies into one file, which breaks the package's
  // `new URL('./x.wasm', import.meta.url)` references: serve it as it is instead.
  optimizeDeps: { exclude: ['attention-wasm'] },
  worker: { format: 'es' },
});

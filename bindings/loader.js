// Picks and instantiates one of the three wasm builds. Import specifiers and wasm URLs are
// literals so that bundlers can see every file they must copy.
import { simd as detectSimd, threads as detectThreads } from 'wasm-feature-detect';

const isNode = typeof process === 'object' && typeof process.versions?.node === 'string';

const BUILDS = {
  simd: {
    factory: () => import('./attention-simd.mjs'),
    wasm: () => new URL('./attention-simd.wasm', import.meta.url),
  },
  scalar: {
    factory: () => import('./attention-scalar.mjs'),
    wasm: () => new URL('./attention-scalar.wasm', import.meta.url),
  },
  threads: {
    factory: () => import('./attention-threads.mjs'),
    wasm: () => new URL('./attention-threads.wasm', import.meta.url),
  },
};

// Threads need SharedArrayBuffer: always there in Node, in browsers only when cross-origin isolated.
async function threadsAvailable() {
  if (typeof SharedArrayBuffer !== 'function') return false;
  if (!isNode && !globalThis.crossOriginIsolated) return false;
  return detectThreads();
}

// `allowSimd: false` forces the scalar build (for engines whose SIMD misbehaves, and for tests).
export async function chooseBuild({ threads, allowSimd }) {
  const simd = allowSimd && (await detectSimd());
  if (threads > 1 && simd && (await threadsAvailable())) return 'threads';
  return simd ? 'simd' : 'scalar';
}

export async function instantiate(name, { threads, wasmBaseUrl }) {
  const build = BUILDS[name];
  const { default: createModule } = await build.factory();
  const options = { threadPoolSize: name === 'threads' ? threads : 0 };
  if (wasmBaseUrl !== undefined) {
    options.locateFile = (file) => new URL(file, wasmBaseUrl).href;
  } else if (isNode) {
    // Node's fetch cannot load file: URLs (TOOLCHAIN.md, pitfall 3): hand over the bytes.
    const { readFile } = await import('node:fs/promises');
    options.wasmBinary = await readFile(build.wasm());
    if (name === 'threads') {
      const [{ createRequire }, { fileURLToPath }] = await Promise.all([import('node:module'), import('node:url')]);
      options.nodeRequire = createRequire(import.meta.url);
      options.nodeDirname = fileURLToPath(new URL('.', import.meta.url));
    }
  }
  const wasm = await createModule(options);
  if (isNode && name === 'threads') {
    // Idle pthread workers must not keep a Node process alive.
    for (const worker of wasm.PThread.unusedWorkers) worker.unref();
  }
  return wasm;
}

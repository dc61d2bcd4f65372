// Picks and instantiates one of the five wasm builds. Every file the package loads at run time is
// named here by a literal `import('./x.mjs')` or `new URL('./x', import.meta.url)`, so bundlers
// (Vite, webpack 5, Rollup, esbuild) see, copy and rewrite each one. The Emscripten glue is never
// left to find a file on its own: its `locateFile` returns these URLs and its wasm arrives through
// `instantiateWasm`, so a bundled app loads the same assets the bundler emitted.
import { AttentionError, describe } from './errors.js';
import { relaxedSimd as checkRelaxedSimd, simd as checkSimd, threads as checkThreads } from 'wasm-feature-detect';

const isNode = typeof process === 'object' && typeof process.versions?.node === 'string';

// Node built-ins, loaded only in Node. The specifier is a variable so that bundlers building for
// browsers neither try to resolve them nor warn that they were "externalized".
const nodeBuiltin = (name) =>
  Promise.resolve(process.getBuiltinModule?.(name) ?? import(/* webpackIgnore: true */ /* @vite-ignore */ name));

export const BUILD_NAMES = ['simd', 'relaxed', 'scalar', 'threads', 'threads-relaxed'];

// `relaxed` builds are the SIMD builds with f32x4.relaxed_madd (fused multiply-add) in their kernels.
const BUILDS = {
  simd: {
    factory: () => import('./attention-simd.mjs'),
    wasm: () => new URL('./attention-simd.wasm', import.meta.url),
  },
  relaxed: {
    factory: () => import('./attention-relaxed.mjs'),
    wasm: () => new URL('./attention-relaxed.wasm', import.meta.url),
  },
  scalar: {
    factory: () => import('./attention-scalar.mjs'),
    wasm: () => new URL('./attention-scalar.wasm', import.meta.url),
  },
  threads: {
    factory: () => import('./attention-threads.mjs'),
    wasm: () => new URL('./attention-threads.wasm', import.meta.url),
    // The pthread worker is a classic script that imports the glue itself (`e.data.urlOrBlob`). A
    // bundler copies both as assets; the worker then imports the glue's copy by its new URL.
    // '?no-inline' stops Vite from turning this 3 KB file into a data: URL, which cannot start a
    // same-origin worker; servers and other bundlers ignore the query.
    worker: () => new URL('./attention-threads.worker.js?no-inline', import.meta.url),
    glue: () => new URL('./attention-threads.mjs', import.meta.url),
    // What load() falls back to when the workers cannot start.
    oneThread: 'simd',
  },
  'threads-relaxed': {
    factory: () => import('./attention-threads-relaxed.mjs'),
    wasm: () => new URL('./attention-threads-relaxed.wasm', import.meta.url),
    worker: () => new URL('./attention-threads-relaxed.worker.js?no-inline', import.meta.url),
    glue: () => new URL('./attention-threads-relaxed.mjs', import.meta.url),
    oneThread: 'relaxed',
  },
};

// What the engine supports does not change: each check runs once. Besides, the threads check opens
// a MessageChannel it never closes, which in Node stays alive with its two ports for good.
const once = (detect) => {
  let result;
  return () => (result ??= detect());
};
const detectSimd = once(checkSimd);
const detectRelaxedSimd = once(checkRelaxedSimd);
const detectThreads = once(checkThreads);

// Threads need SharedArrayBuffer: always there in Node, in browsers only when cross-origin isolated.
async function threadsAvailable() {
  if (typeof SharedArrayBuffer !== 'function') return false;
  if (!isNode && !globalThis.crossOriginIsolated) return false;
  return detectThreads();
}

// `allowSimd: false` forces the scalar build (for engines whose SIMD misbehaves, and for tests);
// `allowRelaxed: false` the plain SIMD builds (results that do not depend on the CPU's FMA).
export async function chooseBuild({ threads, allowSimd, allowRelaxed }) {
  const simd = allowSimd && (await detectSimd());
  if (!simd) return 'scalar';
  const relaxed = allowRelaxed && (await detectRelaxedSimd());
  if (threads > 1 && (await threadsAvailable())) return relaxed ? 'threads-relaxed' : 'threads';
  return relaxed ? 'relaxed' : 'simd';
}

const BYTES = 'an ArrayBuffer or Uint8Array holding a .wasm file';

function checkBytes(value, argument) {
  const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : value instanceof Uint8Array ? value : null;
  if (bytes === null) throw new AttentionError(argument, BYTES, describe(value));
  // Every wasm binary starts with "\0asm": catches a fetched HTML error page or a JS file early.
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d)
    throw new AttentionError(argument, BYTES + ' (starting with "\\0asm")', `${bytes.length} bytes that are not WebAssembly`);
  return bytes;
}

/**
 * Validates `init({ wasmBinary })`: the bytes of the build init picks, or an object with bytes per
 * build name. Returns `{ any }` or a per-build object, or undefined.
 */
export function checkWasmBinary(value) {
  if (value === undefined) return undefined;
  if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return { any: checkBytes(value, 'wasmBinary') };
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new AttentionError('wasmBinary', `${BYTES}, or { ${BUILD_NAMES.join('?, ')}? } of them`, describe(value));
  const perBuild = {};
  for (const key of Object.keys(value)) {
    if (!BUILD_NAMES.includes(key))
      throw new AttentionError(`wasmBinary.${key}`, `one of the builds ${BUILD_NAMES.join(', ')}`, 'an unknown build');
    if (value[key] !== undefined) perBuild[key] = checkBytes(value[key], `wasmBinary.${key}`);
  }
  return perBuild;
}

/** Validates `init({ wasmBaseUrl })` and returns it as a folder URL (a trailing '/' is added). */
export function checkWasmBaseUrl(value) {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' && !(value instanceof URL))
    throw new AttentionError('wasmBaseUrl', 'a string or URL', describe(value));
  let url;
  try {
    // A relative string ('/static/wasm/') is relative to the page (or worker) that runs init().
    url = new URL(value, globalThis.location?.href);
  } catch {
    throw new AttentionError('wasmBaseUrl', 'an absolute URL, or a URL relative to the page', describe(String(value)));
  }
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

// Where a build's wasm comes from: bytes (given, or read from disk in Node) or a URL to fetch.
async function wasmSource(name, { wasmBaseUrl, wasmBinary }) {
  if (wasmBinary?.any) return { bytes: wasmBinary.any, argument: 'wasmBinary' };
  if (wasmBinary?.[name]) return { bytes: wasmBinary[name], argument: `wasmBinary.${name}` };
  const url = wasmBaseUrl ? new URL(`attention-${name}.wasm`, wasmBaseUrl) : BUILDS[name].wasm();
  if (isNode && url.protocol === 'file:') {
    // Node's fetch cannot load file: URLs (CONTRIBUTING.md, toolchain pitfall 3): read the bytes.
    const { readFile } = await nodeBuiltin('node:fs/promises');
    try {
      return { bytes: await readFile(url), url };
    } catch (error) {
      throw loadError(name, url, error.code ?? error.message);
    }
  }
  return { url };
}

// Each build's .wasm opens with a custom section "attention-wasm" holding its name, right after the
// 8-byte header (scripts/tag-wasm.mjs): the builds' imports can agree, so another build's bytes
// would link with this build's glue and run (the scalar build's as 'simd', at scalar speed).
const TAG = 'attention-wasm';

function checkBuildOf(name, { bytes, argument }) {
  // Section id 0, its size, the name's length, the name, the build: each size one LEB128 byte.
  const text = bytes[8] === 0 && bytes[10] === TAG.length ? new TextDecoder().decode(bytes.subarray(11, 10 + bytes[9])) : '';
  const given = text.startsWith(TAG) && text.slice(TAG.length);
  if (given !== name)
    throw new AttentionError(
      argument,
      `the bytes of attention-${name}.wasm (the build init picked; its options threads, simd and relaxedSimd choose it)`,
      given ? `the bytes of attention-${given}.wasm` : 'a module that is none of the builds of this version',
    );
}

function loadError(name, url, reason) {
  return new Error(
    `attention-wasm: could not load attention-${name}.wasm from ${url}: ${reason}. If a bundler or ` +
      'server moved the .wasm files, pass init({ wasmBaseUrl }) or init({ wasmBinary }).',
  );
}

// Emscripten minifies import names (a, b, ...), so another build's module can link with this
// build's glue, every import bound to the wrong function, when their types happen to agree. The
// glue supplies exactly its own module's imports, so the names must match one for one.
function checkImports({ module, instance }, imports) {
  const given = new Set(
    Object.entries(imports).flatMap(([space, fields]) => Object.keys(fields).map((field) => `${space}.${field}`)),
  );
  const wanted = WebAssembly.Module.imports(module).map((entry) => `${entry.module}.${entry.name}`);
  if (wanted.length !== given.size || !wanted.every((entry) => given.has(entry)))
    throw new WebAssembly.LinkError(`its ${wanted.length} imports are not the ${given.size} this build's glue supplies`);
  return { module, instance };
}

async function instantiateSource(name, source, imports) {
  if (source.bytes) {
    try {
      return checkImports(await WebAssembly.instantiate(source.bytes, imports), imports);
    } catch (error) {
      if (!source.argument) throw error;
      throw new AttentionError(
        source.argument,
        `the bytes of attention-${name}.wasm (the build init picked)`,
        `a module that does not ${error instanceof WebAssembly.LinkError ? 'link' : 'compile'} (${error.message})`,
      );
    }
  }
  const { url } = source;
  const get = async () => {
    let response;
    try {
      response = await fetch(url, { credentials: 'same-origin' });
    } catch (error) {
      throw loadError(name, url, error.message);
    }
    if (!response.ok) throw loadError(name, url, `HTTP ${response.status}`);
    return response;
  };
  try {
    if (typeof WebAssembly.instantiateStreaming === 'function') {
      try {
        return checkImports(await WebAssembly.instantiateStreaming(await get(), imports), imports);
      } catch (error) {
        // A server that sends the wrong Content-Type makes streaming fail with a TypeError: fetch
        // again and compile from bytes, as Emscripten's own loader does.
        if (!(error instanceof TypeError)) throw error;
      }
    }
    return checkImports(await WebAssembly.instantiate(await (await get()).arrayBuffer(), imports), imports);
  } catch (error) {
    // Typically an HTML page (a single-page app's fallback) served where the .wasm was expected.
    if (error instanceof WebAssembly.CompileError) throw loadError(name, url, `the response is not WebAssembly (${error.message})`);
    if (error instanceof WebAssembly.LinkError) throw loadError(name, url, `the response is another build's module (${error.message})`);
    throw error;
  }
}

// A pthread worker that cannot start (its script or the glue it imports is missing) would leave
// the glue waiting for ever; after this long without all workers ready, init() gives up on threads.
const THREADS_START_TIMEOUT = 20_000;

async function instantiate(name, { threads, wasmBaseUrl, wasmBinary }) {
  const build = BUILDS[name];
  const source = await wasmSource(name, { wasmBaseUrl, wasmBinary });
  if (source.argument) checkBuildOf(name, source);
  const { default: createModule } = await build.factory();

  let fail;
  const failed = new Promise((_, reject) => {
    fail = reject;
  });
  const onError = (event) =>
    fail(new Error(`attention-wasm: a pthread worker failed to start: ${event?.message ?? `could not load ${build.worker().href}`}`));
  // The pthread workers, and the onerror handlers the glue gave them.
  let workers = [];
  const glueOnerror = new Map();
  const options = {
    threadPoolSize: build.worker ? threads : 0,
    // Emscripten asks for its pthread worker ('attention-threads[-relaxed].worker.js') and names its
    // wasm: answer with the URLs above, never with its own guess next to wherever the glue ended up.
    locateFile: (file, scriptDirectory) => {
      if (file.endsWith('.worker.js') && build.worker) return build.worker();
      if (file.endsWith('.wasm')) return (source.url ?? build.wasm()).href;
      return scriptDirectory + file;
    },
    instantiateWasm: (imports, receiveInstance) => {
      instantiateSource(name, source, imports).then(({ instance, module }) => {
        receiveInstance(instance, module);
        // receiveInstance has given each pthread worker the glue's onerror, which logs and
        // rethrows: in Node from inside an 'error' listener, past every try/catch, ending the
        // process when a worker cannot start (its file missing). Until the workers have started,
        // their errors are start-up's alone: one warning, and init() falls back to one thread.
        for (const worker of workers) {
          glueOnerror.set(worker, worker.onerror);
          worker.onerror = onError;
        }
      }, fail);
      return {}; // exports arrive asynchronously
    },
    onAbort: (what) => fail(new Error(`attention-wasm: the ${name} build aborted while loading: ${what}`)),
  };
  if (build.worker) {
    // Each pthread worker imports this URL (a string: it is posted to the worker).
    options.mainScriptUrlOrBlob = build.glue().href;
    if (isNode) {
      const [{ createRequire }, { fileURLToPath }, { dirname }] = await Promise.all(
        ['node:module', 'node:url', 'node:path'].map(nodeBuiltin),
      );
      // Not new URL('.', import.meta.url): bundlers would take '.' for a file to copy.
      const moduleUrl = import.meta.url;
      options.nodeRequire = createRequire(moduleUrl);
      options.nodeDirname = dirname(fileURLToPath(moduleUrl));
    }
  }

  const ready = createModule(options);
  let timer;
  if (build.worker) {
    // The workers exist as soon as the glue has run (PThread.initMainThread). A worker whose script
    // fails to load reports an error event; one whose import fails reports nothing, hence the timer.
    workers = [...(options.PThread?.unusedWorkers ?? [])];
    for (const worker of workers) {
      if (typeof worker.on === 'function') worker.on('error', onError);
      else worker.addEventListener('error', onError);
    }
    timer = setTimeout(() => fail(new Error(`attention-wasm: pthread workers not ready after ${THREADS_START_TIMEOUT / 1000} s`)), THREADS_START_TIMEOUT);
    timer.unref?.();
  }
  let wasm;
  try {
    wasm = await Promise.race([ready, failed]);
  } catch (error) {
    // The listeners stay: a failed worker's error may still arrive, and in Node an 'error' event
    // that no listener takes is thrown.
    for (const worker of workers) worker.terminate();
    workers = [];
    throw error;
  } finally {
    clearTimeout(timer);
    // Start-up is over: the glue's onerror back. Left in place, a listener holds `fail`, whose
    // never-settled promise holds the race above, settled with the module: a terminated Worker
    // object that Chromium keeps a while after dispose() then keeps the instance's memory
    // (tests/browser/dispose.test.js saw 64 MiB 30 s on in 3 of 32 runs; none in 45 with the
    // listeners removed).
    for (const worker of workers) {
      if (typeof worker.off === 'function') worker.off('error', onError);
      else worker.removeEventListener('error', onError);
      worker.onerror = glueOnerror.get(worker);
    }
    glueOnerror.clear();
  }
  if (isNode && build.worker) {
    // Idle pthread workers must not keep a Node process alive.
    for (const worker of wasm.PThread.unusedWorkers) worker.unref();
  }
  return wasm;
}

/**
 * Chooses a build and instantiates it. If a pthreads build cannot start (a host or bundler that
 * does not serve its worker), init() still succeeds, on the one-thread build of the same SIMD,
 * and says why.
 * @returns {Promise<{ build: string, wasm: object }>}
 */
export async function load({ threads, allowSimd, allowRelaxed, wasmBaseUrl, wasmBinary }) {
  const build = await chooseBuild({ threads, allowSimd, allowRelaxed });
  const { oneThread } = BUILDS[build];
  if (!oneThread) return { build, wasm: await instantiate(build, { threads, wasmBaseUrl, wasmBinary }) };
  try {
    return { build, wasm: await instantiate(build, { threads, wasmBaseUrl, wasmBinary }) };
  } catch (error) {
    if (error instanceof AttentionError) throw error;
    console.warn(`${error.message}; using one thread (the ${oneThread} build) instead.`);
    return { build: oneThread, wasm: await instantiate(oneThread, { threads: 1, wasmBaseUrl, wasmBinary }) };
  }
}

/**
 * Ends what load() started: terminates a threads build's pthread workers, which would otherwise
 * run for ever, each holding the instance's memory.
 */
export function unload(wasm) {
  wasm.PThread?.terminateAllThreads();
}

// The memory read rate inside wasm, the floor a decode step's time is measured against: the best
// sequential read of a 64 MiB buffer in a WebAssembly.Memory, on 1 thread or split across worker
// threads that read their halves at once. The module is hand-assembled (no toolchain): one
// function that sums [ptr, ptr + bytes) in four v128 accumulators.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

export const BUFFER_BYTES = 64 * 2 ** 20;
const PAGES = BUFFER_BYTES / 65536 + 1;

// (func (param $ptr i32) (param $bytes i32) (result f32)) over an imported shared memory.
function moduleBytes() {
  const leb = (n) => {
    const out = [];
    do {
      let byte = n & 0x7f;
      n >>>= 7;
      if (n) byte |= 0x80;
      out.push(byte);
    } while (n);
    return out;
  };
  const section = (id, body) => [id, ...leb(body.length), ...body];
  const name = (s) => [s.length, ...[...s].map((c) => c.charCodeAt(0))];
  const SIMD = 0xfd, F32X4_ADD = [SIMD, 0xe4, 0x01], LOAD = (offset) => [SIMD, 0x00, 0x04, ...leb(offset)];
  const [GET, SET] = [0x20, 0x21];
  const accumulate = (local, offset) => [GET, local, GET, 0, ...LOAD(offset), ...F32X4_ADD, SET, local];
  const body = [
    0x02, 0x04, 0x7b, 0x01, 0x7f,                         // locals: 4 v128 (2..5), 1 i32 end (6)
    GET, 0, GET, 1, 0x6a, SET, 6,                         // end = ptr + bytes
    0x02, 0x40, 0x03, 0x40,                               // block, loop
    GET, 0, GET, 6, 0x4f, 0x0d, 1,                        // br_if (ptr >= end) out
    ...accumulate(2, 0), ...accumulate(3, 16), ...accumulate(4, 32), ...accumulate(5, 48),
    GET, 0, 0x41, 0xc0, 0x00, 0x6a, SET, 0,               // ptr += 64
    0x0c, 0, 0x0b, 0x0b,                                  // br loop, end loop, end block
    GET, 2, GET, 3, ...F32X4_ADD, GET, 4, ...F32X4_ADD, GET, 5, ...F32X4_ADD, SIMD, 0x1f, 0, 0x0b,
  ];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 2, 0x7f, 0x7f, 1, 0x7d]),
    ...section(2, [1, ...name('env'), ...name('mem'), 0x02, 0x03, ...leb(PAGES), ...leb(PAGES)]),
    ...section(3, [1, 0]),
    ...section(7, [1, ...name('sum'), 0x00, 0]),
    ...section(10, [1, ...leb(body.length), ...body]),
  ]);
}

// Best time of `passes` sums over [offset, offset + bytes) of `memory`, in ms.
async function bestPass(memory, offset, bytes, passes) {
  const { instance } = await WebAssembly.instantiate(moduleBytes(), { env: { mem: memory } });
  let best = Infinity;
  for (let pass = 0; pass < passes; pass++) {
    const start = performance.now();
    instance.exports.sum(offset, bytes);
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

if (!isMainThread && workerData?.bandwidthWorker) {
  const { memory, offset, bytes, passes } = workerData;
  parentPort.postMessage(await bestPass(memory, offset, bytes, passes));
}

/**
 * GB/s (1e9 bytes) of the best sequential read of 64 MiB inside wasm memory by `threads` threads,
 * each reading its share at the same time.
 */
export async function readBandwidth(threads, passes = 20) {
  const memory = new WebAssembly.Memory({ initial: PAGES, maximum: PAGES, shared: true });
  // Written first: untouched pages would all map the one zero page and read from cache.
  new Float32Array(memory.buffer, 0, BUFFER_BYTES / 4).fill(1);
  const share = BUFFER_BYTES / threads;
  let ms;
  if (threads === 1) {
    ms = await bestPass(memory, 0, BUFFER_BYTES, passes);
  } else {
    const times = await Promise.all(Array.from({ length: threads }, (_, t) => new Promise((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), {
        workerData: { bandwidthWorker: true, memory, offset: t * share, bytes: share, passes },
      });
      worker.once('message', (best) => worker.terminate().then(() => resolve(best)));
      worker.once('error', reject);
    })));
    ms = Math.max(...times);  // the shares run side by side: the slowest bounds the whole read
  }
  return BUFFER_BYTES / (ms * 1e6);
}

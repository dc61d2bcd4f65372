// A Blob's byte ranges read into the caller's buffers through byte streams, watched for stalls;
// run on the thread that opened the model or in its reader worker (reader_worker.js), which
// serveBlobRanges answers for.

// A Blob stream's read counts as stalled after STALL_TICKS ticks of a second each in which the
// event loop ran and the read did not settle: time the thread spends in wasm (a layer's forward,
// many seconds for a large model) is one late tick, not a stall.
const STALL_TICKS = 10;
const STALLED = Symbol('stalled');

// `read`'s result, or STALLED.
function untilStalled(read) {
  let timer;
  const stalled = new Promise((resolve) => {
    let ticks = 0;
    const tick = () => {
      if (++ticks >= STALL_TICKS) resolve(STALLED);
      else timer = setTimeout(tick, 1000);
    };
    timer = setTimeout(tick, 1000);
  });
  return Promise.race([read, stalled]).finally(() => clearTimeout(timer));
}

/**
 * The bytes [begin, end) of a Blob: into `into` (its memory, which a byte stream's reads transfer
 * from buffer to buffer: the view returned is of the last one) where the engine's Blob streams take
 * a BYOB reader, else in a buffer of their own.
 */
export async function blobRange(blob, begin, end, into) {
  let reader = null;
  try {
    reader = into && blob.slice(begin, end).stream().getReader({ mode: 'byob' });
  } catch {
    // Blob streams without byte-stream reads: a buffer of their own.
  }
  if (!reader) return new Uint8Array(await blob.slice(begin, end).arrayBuffer());
  // The first read detaches `into`: its place is taken now.
  const { byteOffset, length } = into;
  let { buffer } = into, done = 0;
  while (done < length) {
    const read = reader.read(new Uint8Array(buffer, byteOffset + done, length - done));
    let result = await untilStalled(read);
    if (result === STALLED) {
      // Chromium (156) now and then leaves a worker's Blob stream waiting for ever: a streamed 1B
      // model's run of 2048 tokens stopped at a layer's read, its worker idle. The reader is
      // cancelled and the rest read through a new slice, into the buffer the cancel hands back
      // (or, where it does not, the whole range into a buffer of its own).
      console.warn(`attention-wasm: a read of the file's bytes ${begin + done}–${end} brought nothing for ${STALL_TICKS} s; reading them again`);
      reader.cancel().catch(() => {});
      result = await untilStalled(read);
      reader.releaseLock();
      if (result !== STALLED && result.value) {
        buffer = result.value.buffer;
      } else {
        buffer = new ArrayBuffer(byteOffset + length);
        done = 0;
      }
      reader = blob.slice(begin + done, end).stream().getReader({ mode: 'byob' });
      continue;
    }
    const { value, done: ended } = result;
    if (value) buffer = value.buffer;
    if (ended) break;
    done += value.length;
  }
  reader.releaseLock();
  return new Uint8Array(buffer, byteOffset, done);
}

/**
 * Makes `scope` (a worker's global) a reader: each message { id, blob, begin, end, buffer,
 * byteOffset, length } is answered with { id, buffer, byteOffset, length } (the buffer handed
 * back, filled) or { id, error: { name, message } }.
 */
export function serveBlobRanges(scope) {
  scope.onmessage = async ({ data: { id, blob, begin, end, buffer, byteOffset, length } }) => {
    try {
      const bytes = await blobRange(blob, begin, end, new Uint8Array(buffer, byteOffset, length));
      scope.postMessage({ id, buffer: bytes.buffer, byteOffset: bytes.byteOffset, length: bytes.length }, [bytes.buffer]);
    } catch (error) {
      scope.postMessage({ id, error: { name: error?.name, message: String(error?.message ?? error) } });
    }
  };
}

// A model folder as byte ranges: a folder path (Node), the Files of a folder input or a drop, or a
// Map of file name → Blob | Uint8Array | ArrayBuffer. Nothing is read whole: each read asks for
// [begin, end) of one file (a file handle's read in Node, Blob.slice in a page), as llama.cpp's
// loader reads tensors where they lie.
import { AttentionError, describe } from '../errors.js';

// A file's name without the folder path a browser prefixes (webkitRelativePath) or a path's folders.
const baseName = (name) => name.split(/[\\/]/).pop();

const isBlob = (value) => typeof Blob !== 'undefined' && value instanceof Blob;

/**
 * The bytes [begin, end) of a Blob: into `into` (its memory, which a byte stream's reads transfer
 * from buffer to buffer: the view returned is of the last one) where the engine's Blob streams take
 * a BYOB reader, else in a buffer of their own.
 */
async function blobRange(blob, begin, end, into) {
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

// Files held in memory or as Blobs, by name: { name → Blob | Uint8Array }.
function memorySource(entries) {
  const files = new Map();
  for (const [name, value] of entries) {
    const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : value;
    if (!isBlob(bytes) && !(bytes instanceof Uint8Array))
      throw new AttentionError(`source.get('${name}')`, 'a Blob, Uint8Array or ArrayBuffer', describe(value));
    files.set(baseName(name), bytes);
  }
  return {
    names: [...files.keys()],
    size: (name) => (isBlob(files.get(name)) ? files.get(name).size : files.get(name).byteLength),
    read: async (name, begin, end, into) => {
      // Bytes in memory are viewed, not copied.
      const file = files.get(name);
      return isBlob(file) ? blobRange(file, begin, end, into) : file.subarray(begin, end);
    },
    close: async () => {},
  };
}

// A folder on disk, read through file handles opened once and closed by close().
async function folderSource(path) {
  const { readdir, open, stat } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const folder = path instanceof URL || path.startsWith('file:') ? fileURLToPath(path) : path;
  let names;
  try {
    names = await readdir(folder);
  } catch (error) {
    throw new AttentionError('source', 'a folder that holds a Hugging Face checkpoint', `${describe(folder)} (${error.code ?? error.message})`);
  }
  const sizes = new Map();
  const handles = new Map();
  for (const name of names) {
    const info = await stat(join(folder, name));
    if (info.isFile()) sizes.set(name, info.size);
  }
  return {
    names: [...sizes.keys()],
    size: (name) => sizes.get(name),
    read: async (name, begin, end, into) => {
      if (!handles.has(name)) handles.set(name, open(join(folder, name), 'r'));
      const handle = await handles.get(name);
      const bytes = into ?? new Uint8Array(end - begin);
      let done = 0;
      while (done < bytes.length) {
        const { bytesRead } = await handle.read(bytes, done, bytes.length - done, begin + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return done === bytes.length ? bytes : bytes.subarray(0, done);
    },
    close: async () => {
      const open = [...handles.values()];
      handles.clear();
      await Promise.all(open.map(async (handle) => (await handle).close()));
    },
  };
}

/**
 * `source` as { names, size(name), read(name, begin, end, into?) → Promise<Uint8Array>, close() }:
 * a read past a file's end returns fewer bytes (the caller says what is missing). `into`, a
 * Uint8Array of end − begin bytes, is filled where the source can (a file handle, a Blob's byte
 * stream: then the bytes returned are in its memory, its buffer or the one a stream transferred it
 * to), so that the caller reuses its buffers; bytes in memory are returned as views.
 */
export async function openSource(source) {
  if (typeof source === 'string' || source instanceof URL) return folderSource(source);
  if (source instanceof Map) return memorySource(source);
  const files = source && typeof source === 'object' && typeof source[Symbol.iterator] === 'function' ? [...source] : null;
  if (files && files.every(isBlob)) return memorySource(files.map((file) => [file.webkitRelativePath || file.name, file]));
  throw new AttentionError('source', "a folder path (Node), the Files of a folder (File[] or FileList) or a Map of file name → Blob | Uint8Array | ArrayBuffer", describe(source));
}

// A model folder as byte ranges: a folder path (Node), the Files of a folder input or a drop, or a
// Map of file name → Blob | Uint8Array | ArrayBuffer. Nothing is read whole: each read asks for
// [begin, end) of one file (a file handle's read in Node, Blob.slice in a page), as llama.cpp's
// loader reads tensors where they lie.
import { AttentionError, describe } from '../errors.js';
import { blobRange } from './blob_range.js';

// A file's name without the folder path a browser prefixes (webkitRelativePath) or a path's folders.
const baseName = (name) => name.split(/[\\/]/).pop();

const isBlob = (value) => typeof Blob !== 'undefined' && value instanceof Blob;

/**
 * A dedicated worker that reads Blob ranges for this thread (dist/models-reader.mjs, beside this
 * module), or null outside a page or a page's worker (Node). A page's Blob stream brings its bytes
 * as tasks of the thread that reads it: read here, a streamed layer's bytes would wait while the
 * previous layer computes in wasm (0.3 s a layer of a 1B model, at Chromium's 0.4 GB/s); in a
 * worker of their own they arrive meanwhile. → { read(blob, begin, end, into) →
 * Promise<Uint8Array> (rejects with READER_LOST if the worker cannot start: a bundler that left
 * the file behind, a Content-Security-Policy that refuses it), close() }.
 */
function readerWorker() {
  // Node's Worker, where Emscripten's threaded glue sets one, is worker_threads': not this one.
  if (typeof Worker === 'undefined' || globalThis.process?.release?.name === 'node') return null;
  let worker;
  try {
    worker = new Worker(new URL('./models-reader.mjs', import.meta.url), { type: 'module' });
  } catch {
    return null;
  }
  const pending = new Map();
  let nextId = 0, lost = false;
  const end = () => {
    worker.terminate();
    lost = true;
    for (const { reject } of pending.values()) reject(READER_LOST);
    pending.clear();
  };
  worker.onmessage = ({ data }) => {
    const request = pending.get(data.id);
    pending.delete(data.id);
    if (!data.error) request.resolve(new Uint8Array(data.buffer, data.byteOffset, data.length));
    else request.reject(typeof DOMException === 'function' ? new DOMException(data.error.message, data.error.name) : new Error(data.error.message));
  };
  worker.onerror = (event) => {
    event.preventDefault();
    end();
  };
  return {
    read: (blob, begin, end, into) => new Promise((resolve, reject) => {
      if (lost) return reject(READER_LOST);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, blob, begin, end, buffer: into.buffer, byteOffset: into.byteOffset, length: into.length }, [into.buffer]);
    }),
    close: end,
  };
}

// A reader worker's failure: the read is made on this thread instead.
const READER_LOST = Symbol('reader worker lost');

// Files held in memory or as Blobs, by name: { name → Blob | Uint8Array }.
function memorySource(entries) {
  const files = new Map();
  for (const [name, value] of entries) {
    const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : value;
    if (!isBlob(bytes) && !(bytes instanceof Uint8Array))
      throw new AttentionError(`source.get('${name}')`, 'a Blob, Uint8Array or ArrayBuffer', describe(value));
    files.set(baseName(name), bytes);
  }
  // Started with the first read into a buffer, and only if some file is a Blob.
  let reader;
  return {
    names: [...files.keys()],
    size: (name) => (isBlob(files.get(name)) ? files.get(name).size : files.get(name).byteLength),
    read: async (name, begin, end, into) => {
      // Bytes in memory are viewed, not copied.
      const file = files.get(name);
      if (!isBlob(file)) return file.subarray(begin, end);
      if (into && reader === undefined) reader = readerWorker();
      if (into && reader) {
        try {
          return await reader.read(file, begin, end, into);
        } catch (error) {
          if (error !== READER_LOST) throw error;
          // `into` went to the worker: this thread reads into a buffer of its own.
          reader = null;
          return blobRange(file, begin, end, new Uint8Array(end - begin));
        }
      }
      return blobRange(file, begin, end, into);
    },
    close: async () => {
      reader?.close();
      reader = null;
    },
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

// A Hugging Face checkpoint folder located, not loaded: config.json parsed, and every tensor of
// model.safetensors (or of the shards model.safetensors.index.json names) known by its file,
// dtype, shape and byte range from the headers alone. Tensors are read when asked, by range,
// contiguous ones in one read; errors name the file and the tensor.
import { AttentionError, describe, shapeString } from '../errors.js';
import { HEADER_SIZE_BYTES, headerEnd, headerEntries, renamed, tensorFromEntry } from '../safetensors.js';
import { openSource } from './source.js';

const INDEX = 'model.safetensors.index.json';
// One read is at most this long: a layer's tensors lie together, but a read's buffer is memory.
const MAX_READ_BYTES = 64 * 2 ** 20;
// Reads from this size up fill a buffer of the pool (ReadBuffers) when the caller lends one.
const POOLED_READ_BYTES = 2 ** 20;

/**
 * The buffers that a call's large reads fill, each given back once the tensors read into it are
 * packed into wasm memory and taken again by the next read. A fresh buffer costs a page fault per
 * 4 KiB the first time it is written (10–20 µs each on the virtual machines we measured, slower
 * than reading the bytes), so a streamed forward reads layer after layer into the same few
 * buffers. clear() lets them go when the call ends.
 */
export class ReadBuffers {
  constructor() {
    this.free = [];
  }

  /**
   * A lease: take(length) → a Uint8Array of `length` bytes to read into; keep(buffer) holds the
   * buffer that memory is in after the read (a Blob's byte stream transfers it to another);
   * release() gives those back.
   */
  lease() {
    const kept = [];
    return {
      take: (length) => {
        // The smallest free buffer that holds `length` bytes (a tensor may pass MAX_READ_BYTES).
        let best = -1;
        this.free.forEach((buffer, i) => {
          if (buffer.byteLength >= length && (best < 0 || buffer.byteLength < this.free[best].byteLength)) best = i;
        });
        const buffer = best >= 0 ? this.free.splice(best, 1)[0] : new ArrayBuffer(Math.max(length, MAX_READ_BYTES));
        return new Uint8Array(buffer, 0, length);
      },
      keep: (buffer) => kept.push(buffer),
      release: () => this.free.push(...kept.splice(0)),
    };
  }

  clear() {
    this.free.length = 0;
  }
}

async function readJson(files, name) {
  const bytes = await files.read(name, 0, files.size(name));
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (error) {
    throw new AttentionError(name, 'valid JSON', `text that is not (${error.message})`);
  }
}

// The weight files, in order: the shards the index names, model.safetensors, or every
// .safetensors file of the folder by name.
async function weightFiles(files) {
  const names = new Set(files.names);
  if (names.has(INDEX)) {
    const map = (await readJson(files, INDEX)).weight_map;
    if (map === null || typeof map !== 'object') throw new AttentionError(`${INDEX}: weight_map`, 'an object of tensor name → shard file', describe(map));
    const shards = [...new Set(Object.values(map))];
    const missing = shards.filter((name) => !names.has(name));
    if (missing.length) throw new AttentionError(INDEX, 'shards that the folder holds', `${missing.map((name) => `'${name}'`).join(', ')}, which it lacks`);
    return shards;
  }
  if (names.has('model.safetensors')) return ['model.safetensors'];
  const shards = files.names.filter((name) => name.endsWith('.safetensors')).sort();
  if (shards.length) return shards;
  const pickled = files.names.find((name) => name.endsWith('.bin') || name.endsWith('.pt'));
  throw new AttentionError('source', 'model.safetensors, or its shards with model.safetensors.index.json',
    pickled ? `PyTorch pickles ('${pickled}'); the Hub offers .safetensors for most models` : `no weights among ${describe(files.names)}`);
}

export class Checkpoint {
  /** Opens `source` (see source.js): its config.json and weight headers. */
  static async open(source, { onProgress = () => {}, signal } = {}) {
    const files = await openSource(source);
    try {
      if (!files.names.includes('config.json'))
        throw new AttentionError('source', "a folder with config.json (the model's Hugging Face configuration)", `the files ${describe(files.names)}`);
      const config = await readJson(files, 'config.json');
      const tensors = new Map();
      const shards = await weightFiles(files);
      const bytesTotal = shards.reduce((sum, name) => sum + files.size(name), 0);
      for (const name of shards) {
        signal?.throwIfAborted();
        try {
          const size = files.size(name);
          const end = headerEnd(await files.read(name, 0, Math.min(size, HEADER_SIZE_BYTES)), size);
          const { entries } = headerEntries(await files.read(name, HEADER_SIZE_BYTES, end), size - end, { lenient: true });
          for (const entry of entries) {
            if (tensors.has(entry.name))
              throw new AttentionError(`tensor '${entry.name}'`, 'a name no other shard has', `the name of a tensor of '${tensors.get(entry.name).file}' too`);
            tensors.set(entry.name, { ...entry, file: name, begin: end + entry.begin, end: end + entry.end });
          }
        } catch (error) {
          throw renamed(error, name);
        }
      }
      onProgress({ phase: 'reading', layer: 0, layers: 0, bytesRead: 0, bytesTotal });
      return new Checkpoint(files, config, tensors, bytesTotal);
    } catch (error) {
      await files.close();
      throw error;
    }
  }

  constructor(files, config, tensors, bytesTotal) {
    this.files = files;
    this.config = config;
    this.tensors = tensors;
    this.bytesTotal = bytesTotal;
  }

  has(name) {
    return this.tensors.has(name);
  }

  /** The entry of tensor `name` ({ file, stored, shape, begin, end }), checked against `shape` when given. */
  entry(name, shape) {
    const entry = this.tensors.get(name);
    if (!entry) throw new AttentionError(`tensor '${name}'`, `a tensor of the checkpoint${shape ? ` ${shapeString(shape)}` : ''}`, 'none of that name');
    if (shape && (entry.shape.length !== shape.length || entry.shape.some((size, i) => size !== shape[i])))
      throw new AttentionError(`${entry.file}: tensor '${name}'`, shapeString(shape), shapeString(entry.shape));
    if (!entry.stored) throw new AttentionError(`${entry.file}: tensor '${name}'.dtype`, 'F32, F16 or BF16', `${entry.dtype}, which is not supported`);
    return entry;
  }

  /** Bytes of `names` as stored. */
  bytes(names) {
    return names.reduce((sum, name) => sum + this.entry(name).end - this.entry(name).begin, 0);
  }

  /**
   * Tensors `names` read as dtypeOf(name) says ('f32', 'f16', 'bf16'), tensors that lie together
   * in one read: → Map name → tensor. onBytes(n) counts what was read. With `lease` (a
   * ReadBuffers lease) large reads fill its buffers, and the tensors that viewable(name) allows
   * may be views of them: valid until the lease is released.
   */
  async read(names, dtypeOf, { onBytes = () => {}, signal, lease = null, viewable = () => false } = {}) {
    const entries = names.map((name) => this.entry(name)).sort((a, b) => a.file.localeCompare(b.file) || a.begin - b.begin);
    // Runs of neighbouring tensors, each one read; all asked for at once, so that a source that
    // reads elsewhere (a file handle's thread pool, a page's reader worker) has every one under way
    // while this thread is busy.
    const groups = [];
    for (let i = 0; i < entries.length;) {
      let j = i + 1;
      while (j < entries.length && entries[j].file === entries[i].file && entries[j].begin === entries[j - 1].end && entries[j].end - entries[i].begin <= MAX_READ_BYTES) j++;
      groups.push(entries.slice(i, j));
      i = j;
    }
    signal?.throwIfAborted();
    const reads = await Promise.all(groups.map((group) => this.readRange(group[0].file, group[0].begin, group.at(-1).end, lease)));
    const result = new Map();
    for (const [i, group] of groups.entries()) {
      const bytes = reads[i];
      onBytes(bytes.length);
      for (const entry of group)
        result.set(entry.name, tensorFromEntry(entry, bytes, entry.begin - group[0].begin, dtypeOf(entry.name), { view: lease !== null && viewable(entry.name) }));
    }
    return result;
  }

  /** Rows `ids` of the [rows, width] tensor `name` as float32 [ids.length, width]; each distinct row read once. */
  async rows(name, ids) {
    const entry = this.entry(name);
    const [count, width] = entry.shape;
    const rowBytes = (entry.end - entry.begin) / count;
    const out = new Float32Array(ids.length * width);
    const wanted = [...new Set(ids)].sort((a, b) => a - b);
    const rowEntry = { stored: entry.stored, dtype: entry.dtype, shape: [width] };
    const rows = new Map();
    for (let i = 0; i < wanted.length;) {
      let j = i + 1;
      while (j < wanted.length && wanted[j] === wanted[j - 1] + 1 && (j - i + 1) * rowBytes <= MAX_READ_BYTES) j++;
      const bytes = await this.readRange(entry.file, entry.begin + wanted[i] * rowBytes, entry.begin + (wanted[j - 1] + 1) * rowBytes);
      wanted.slice(i, j).forEach((id, k) => rows.set(id, tensorFromEntry(rowEntry, bytes, k * rowBytes, 'f32').data));
      i = j;
    }
    ids.forEach((id, position) => out.set(rows.get(id), position * width));
    return out;
  }

  /** Rows [begin, end) of the 2-D tensor `name` as `dtype`: a tensor [end − begin, cols], a view of `lease`'s buffer when given. */
  async rowBlock(name, begin, end, dtype, lease = null) {
    const entry = this.entry(name);
    const rowBytes = (entry.end - entry.begin) / entry.shape[0];
    const bytes = await this.readRange(entry.file, entry.begin + begin * rowBytes, entry.begin + end * rowBytes, lease);
    return tensorFromEntry({ ...entry, shape: [end - begin, entry.shape[1]] }, bytes, 0, dtype, { view: lease !== null });
  }

  async readRange(file, begin, end, lease = null) {
    const into = lease && end - begin >= POOLED_READ_BYTES ? lease.take(end - begin) : undefined;
    const bytes = await this.files.read(file, begin, end, into);
    // The lent memory: its buffer, filled or not (a source of bytes in memory returns views of
    // them), or, once a byte stream has detached it, the buffer the bytes were transferred to.
    if (into) lease.keep(into.buffer.byteLength === 0 ? bytes.buffer : into.buffer);
    if (bytes.length !== end - begin)
      throw new AttentionError(file, `bytes ${begin} to ${end}, as its header says`, `a file that ends at byte ${begin + bytes.length} (truncated?)`);
    return bytes;
  }

  close() {
    return this.files.close();
  }
}

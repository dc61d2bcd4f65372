// A whole Hugging Face model over a located checkpoint (checkpoint.js) and its family's layers:
// layers that fit `residentBytes` are packed once and kept; the others are streamed, each call
// reading a layer's byte ranges while the previous layer computes, packing it, running it for every
// token and freeing it. The output head is built only when logits are asked; embedding rows are
// read for the ids given.
import { AttentionError, describe, shapeString } from '../errors.js';
import { LEND, checkBoolean, checkChoice, checkNumber, checkOptions, checkTokenMask } from '../validate.js';
import { ReadBuffers } from './checkpoint.js';
import { linearFrom, linearHead } from './parts.js';
import { checkSampling, sampleNext } from './sampling.js';

// Bytes per element of a matrix held as each dtype.
const ELEMENT_BYTES = { f32: 4, f16: 2, bf16: 2 };
// A linear output head is read and packed in blocks of vocabulary rows of at most this size (and
// at most residentBytes, but not under a megabyte: a block per row would be a read and a Linear
// per word): a 128k-word head is half a gigabyte in bf16, more than the layers it follows, and
// each block's read and staging memory is touched fresh once.
const HEAD_BLOCK_BYTES = 16 * 2 ** 20, MIN_HEAD_BLOCK_BYTES = 2 ** 20;

/** A Model's data, checked: `ids` as one Int32Array per row, all rows of one length. */
export function checkIds(ids, vocabSize) {
  const isRow = (value) => Array.isArray(value) ? value.every((id) => typeof id === 'number') : value instanceof Int32Array || value instanceof Uint32Array;
  const rows = isRow(ids) && !(Array.isArray(ids) && ids.length > 0 && typeof ids[0] !== 'number') ? [ids]
    : Array.isArray(ids) && ids.length > 0 && ids.every(isRow) ? ids : null;
  if (!rows) throw new AttentionError('ids', 'token ids (number[], Int32Array or Uint32Array) or a batch of equal-length rows of them', describe(ids));
  const t = rows[0].length;
  if (t === 0) throw new AttentionError('ids', 'at least one token', 'none');
  rows.forEach((row, b) => {
    if (row.length !== t) throw new AttentionError(`ids[${b}]`, `${t} ids, as ids[0] has (a batch's rows are padded to one length)`, `${row.length}`);
    for (let i = 0; i < t; i++)
      if (!Number.isInteger(row[i]) || row[i] < 0 || row[i] >= vocabSize)
        throw new AttentionError(`ids${rows.length > 1 ? `[${b}]` : ''}[${i}]`, `a token id in [0, ${vocabSize}) (the model's vocabulary)`, describe(row[i]));
  });
  return rows.map((row) => Int32Array.from(row));
}

export class Model {
  constructor(attn, checkpoint, family, { dtype, residentBytes, onProgress }) {
    this.attn = attn;
    this.checkpoint = checkpoint;
    this.family = family;
    this.config = checkpoint.config;
    this.modelType = family.config.model_type;
    for (const key of ['layers', 'heads', 'kvHeads', 'headDim', 'vocabSize', 'maxPositions']) this[key] = family[key];
    this.requestedDtype = dtype;
    this.onProgress = onProgress;
    // Every tensor the family needs, checked against the headers now: a missing or misshapen one
    // is an error when the model opens, not in the middle of a call.
    this.layerSpecs = Array.from({ length: family.layers }, (_, layer) => family.layerTensors(layer));
    const { linearHead: head } = family;
    this.headSpecs = head ? [{ name: head.name, shape: [family.vocabSize, family.width], matrix: true }] : family.headTensors();
    for (const spec of [...this.layerSpecs.flat(), ...this.headSpecs]) checkpoint.entry(spec.name, spec.shape);
    const stored = checkpoint.entry(this.layerSpecs[0].find((spec) => spec.matrix).name).stored;
    this.dtype = dtype === 'auto' ? stored : dtype;
    const held = (specs) => specs.reduce((sum, { name, shape, matrix }) => sum + shape.reduce((a, b) => a * b, 1) * (matrix ? ELEMENT_BYTES[this.dtypeOf(name)] : 4), 0);
    this.layerBytes = this.layerSpecs.map(held);
    this.headBytes = held(this.headSpecs);
    this.weightBytes = this.layerBytes.reduce((a, b) => a + b, 0) + this.headBytes;
    this.streamed = this.weightBytes > residentBytes;
    this.residentBytes = residentBytes;
    this.blocks = new Array(family.layers).fill(null); // resident layers, once built
    this.head = null; // the resident head, once built
    this.readBuffers = new ReadBuffers();
    this.disposed = false;
  }

  // The dtype a matrix is held in: the requested one, or as stored ('auto').
  dtypeOf(name) {
    return this.requestedDtype === 'auto' ? this.checkpoint.entry(name).stored : this.requestedDtype;
  }

  /**
   * Reads the tensors `specs` name (matrices in the model's dtype, the rest as float32) → Map.
   * With `lease` (of this.readBuffers) the matrices may be views of its buffers: they go into
   * wasm memory before it is released; vectors such as norms, kept in JS, are always copies.
   */
  async readTensors(specs, signal, lease = null) {
    const byName = new Map(specs.map((spec) => [spec.name, spec]));
    return this.checkpoint.read(specs.map((spec) => spec.name), (name) => (byName.get(name).matrix ? this.dtypeOf(name) : 'f32'), {
      signal, lease, viewable: (name) => byName.get(name).matrix, onBytes: (bytes) => { this.bytesRead += bytes; },
    });
  }

  /** A part built from the tensors `specs` name, read into this.readBuffers: → { part, dispose() }. */
  async readAndBuild(specs, signal, make) {
    const lease = this.readBuffers.lease();
    try {
      const tensors = await this.readTensors(specs, signal, lease);
      return this.build((own) => make(tensors, own));
    } finally {
      lease.release();
    }
  }

  /** Builds a part (a layer or the head) from its tensors: → { part, dispose() }; nothing is left behind if it fails. */
  build(make) {
    const modules = [];
    try {
      const part = make((module) => {
        modules.push(module);
        return module;
      });
      return { part, dispose: () => modules.splice(0).forEach((module) => module.dispose()) };
    } catch (error) {
      modules.forEach((module) => module.dispose());
      throw error;
    }
  }

  loadLayer(layer, signal) {
    return this.readAndBuild(this.layerSpecs[layer], signal, (tensors, own) => this.family.buildLayer(tensors, layer, own));
  }

  /** Reads the small tensors every call needs and, for a resident model, packs every layer. */
  async load(signal) {
    const globals = this.family.globals();
    const specs = Object.entries(globals).map(([name, shape]) => ({ name, shape, matrix: false }));
    for (const spec of specs) this.checkpoint.entry(spec.name, spec.shape);
    this.bytesRead = 0;
    this.globals = await this.readTensors(specs, signal);
    if (this.streamed) return;
    try {
      for (let layer = 0; layer < this.layers; layer++) {
        signal?.throwIfAborted();
        this.blocks[layer] = await this.loadLayer(layer, signal);
        this.onProgress(this.progressOf('loading', layer + 1));
      }
    } catch (error) {
      this.releaseLayers();
      throw error;
    } finally {
      this.readBuffers.clear();
    }
  }

  progressOf(phase, layer) {
    return { phase, layer, layers: this.layers, bytesRead: this.bytesRead, bytesTotal: this.checkpoint.bytesTotal };
  }

  releaseLayers() {
    this.blocks.forEach((block) => block?.dispose());
    this.blocks.fill(null);
    this.head?.dispose();
    this.head = null;
  }

  live(method) {
    if (this.disposed) throw new AttentionError(`model.${method}`, 'a model not yet disposed', 'a disposed model');
  }

  /**
   * Runs the layers over `x` [N · t, width] (the embeddings, changed in place into the last
   * layer's output) with ctx(layer) the options of each layer's call; onLayer(layer, weights)
   * sees each layer's attention weights (or null) and the residual stream after it, and is
   * awaited before the next layer runs; onProgress hears of each layer done. yieldBetweenLayers:
   * a task's pause before each layer after the first (see nextTask).
   */
  async runLayers(x, ctx, onLayer, signal, onProgress, yieldBetweenLayers = false) {
    const { layers } = this;
    // The next streamed layer is read while this one computes.
    let next = this.streamed ? this.loadLayer(0, signal) : null;
    for (let layer = 0; layer < layers; layer++) {
      const block = this.streamed ? await next : this.blocks[layer];
      next = this.streamed && layer + 1 < layers ? this.loadLayer(layer + 1, signal) : null;
      try {
        if (yieldBetweenLayers && layer > 0) await nextTask();
        signal?.throwIfAborted();
        await onLayer(layer, this.family.runLayer(block.part, x, ctx(layer)));
      } catch (error) {
        // The layer being read is freed once it arrives.
        next?.then((pending) => pending.dispose(), () => {});
        throw error;
      } finally {
        if (this.streamed) block.dispose();
      }
      onProgress?.(this.progressOf('forward', layer + 1));
    }
  }

  /** The output head over the final rows x [rows, width] → logits [rows, vocab], or null without a head. */
  async logits(x, rows, signal) {
    if (this.headSpecs.length === 0) return null;
    if (this.head) return this.head.part.forward(x, rows);
    const { linearHead: spec } = this.family;
    if (spec) return this.blockedHead(x, rows, spec, signal);
    const head = await this.readAndBuild(this.headSpecs, signal, (tensors, own) => this.family.buildHead(tensors, own));
    if (!this.streamed) this.head = head;
    try {
      return head.part.forward(x, rows);
    } finally {
      if (this.streamed) head.dispose();
    }
  }

  // A linear head read, packed and run in blocks of vocabulary rows: each block's bytes go through
  // the same read buffer and wasm's staging memory, where the whole head at once (half a gigabyte
  // for a 128k-word vocabulary) would first touch three times its size in fresh memory. A resident
  // model keeps the packed blocks; a streamed one frees each after its logits.
  async blockedHead(x, rows, { name, softcap }, signal) {
    const { vocabSize: vocab } = this, width = this.family.width;
    const dtype = this.dtypeOf(name);
    const blockBytes = Math.min(HEAD_BLOCK_BYTES, Math.max(MIN_HEAD_BLOCK_BYTES, this.residentBytes));
    const blockRows = Math.max(1, Math.floor(blockBytes / (width * ELEMENT_BYTES[dtype])));
    const logits = new Float32Array(rows * vocab);
    const kept = [];
    try {
      for (let begin = 0; begin < vocab; begin += blockRows) {
        signal?.throwIfAborted();
        const end = Math.min(vocab, begin + blockRows);
        const lease = this.readBuffers.lease();
        let block;
        try {
          const weight = await this.checkpoint.rowBlock(name, begin, end, dtype, lease);
          this.bytesRead += (end - begin) * width * ELEMENT_BYTES[this.checkpoint.entry(name).stored];
          block = this.build((own) => linearHead(own(linearFrom(this.attn, new Map([['head.weight', weight]]), 'head')), softcap));
        } finally {
          lease.release();
        }
        const part = { begin, end, block };
        try {
          blockLogits([part], x, rows, vocab, logits);
        } finally {
          if (this.streamed) block.dispose();
          else kept.push(part);
        }
      }
    } catch (error) {
      kept.forEach(({ block }) => block.dispose());
      throw error;
    }
    if (!this.streamed)
      this.head = { part: { forward: (input, n) => blockLogits(kept, input, n, vocab, new Float32Array(n * vocab)) }, dispose: () => kept.forEach(({ block }) => block.dispose()) };
    return logits;
  }

  /**
   * HF's `model(ids, output_attentions=…, output_hidden_states=…)`: → { logits ([N, t, vocab] for
   * 'all', [N, 1, vocab] for 'last', null for 'none' or a model without a head), attentions (per
   * layer [N, heads, t, t]) | null, hiddenStates (layers + 1 of [N, t, hidden]) | null }.
   */
  async forward(ids, opts) {
    this.live('forward');
    opts = checkOptions(opts, ['outputAttentions', 'outputHiddenStates', 'logits', 'attentionMask', 'headMask', 'signal', 'onProgress', 'onLayer', 'out']);
    const rows = checkIds(ids, this.vocabSize);
    const n = rows.length, t = rows[0].length;
    const outputAttentions = checkBoolean(opts.outputAttentions, 'outputAttentions', false);
    const outputHiddenStates = checkBoolean(opts.outputHiddenStates, 'outputHiddenStates', false);
    const logits = checkChoice(opts.logits, 'logits', ['last', 'all', 'none'], 'last');
    const attentionMask = this.checkAttentionMask(opts.attentionMask, n, t);
    const headMask = this.checkHeadMask(opts.headMask);
    const attentionsOut = this.checkAttentionsOut(opts.out, outputAttentions, n, t);
    const onProgress = checkCallback(opts.onProgress, 'onProgress');
    const onLayer = checkCallback(opts.onLayer, 'onLayer');
    if (t > this.maxPositions)
      throw new AttentionError('ids', `at most ${this.maxPositions} tokens (the model's max_position_embeddings)`, `${t}`);
    const signal = opts.signal;
    signal?.throwIfAborted();
    try {
      return await this.run(rows, { attentionMask, headMask, outputAttentions, attentionsOut, outputHiddenStates, logits, signal, onProgress, onLayer });
    } finally {
      this.readBuffers.clear();
    }
  }

  /**
   * The layers over `rows` (Int32Array each), and the logits asked for; `caches` (generation):
   * one KVCache per layer, `past` the positions they hold. `onLayer(layer, { attentions })` sees
   * each layer's weights as they are done: without outputAttentions they are lent where the
   * attention wrote them in wasm memory (LEND) and freed after the call, so that only one layer's
   * are ever held, once.
   */
  async run(rows, { attentionMask = null, headMask = null, outputAttentions = false, attentionsOut = null, outputHiddenStates = false, logits = 'last', signal, onProgress = null, onLayer = null, caches = null, past = 0 }) {
    const n = rows.length, t = rows[0].length, { heads, layers } = this;
    const needWeights = outputAttentions || onLayer !== null;
    const lent = onLayer && !outputAttentions;
    const ids = new Int32Array(n * t);
    rows.forEach((row, b) => ids.set(row, b * t));
    const positions = tokenPositions(attentionMask, n, t, past);
    const x = await this.family.embed(this.checkpoint, ids, positions, this.globals);
    const hiddenStates = outputHiddenStates ? [x.slice()] : null;
    const attentions = outputAttentions ? [] : null;
    const buffers = {};
    const family = this.family;
    const ctx = (layer) => {
      const headRow = headMask && headMask.subarray(layer * heads, (layer + 1) * heads);
      const weightsOut = attentionsOut ? attentionsOut.subarray(layer * n * heads * t * t, (layer + 1) * n * heads * t * t) : lent ? LEND : null;
      const cache = caches ? caches[layer] : null;
      return {
        n, t, buffers, needWeights, weightsOut, headMask: headRow, attentionMask, cache,
        // GroupedQueryAttention.forward's options for this call. Its output goes into an array
        // of the call's, reused layer after layer, as the MLP's does: no fresh 16 MiB a layer at
        // 2048 tokens of a 1B model.
        attentionOptions: () => ({
          needWeights,
          out: { output: (buffers.attention ??= new Float32Array(n * t * family.width)), ...(weightsOut ? { weights: weightsOut } : {}) },
          ...(headRow ? { headMask: headRow } : {}),
          ...(attentionMask ? { attentionMask: { data: attentionMask, shape: [n, t] } } : {}),
          ...(cache ? { cache } : {}),
        }),
      };
    };
    this.bytesRead = 0;
    const shape = [n, heads, t, t];
    await this.runLayers(x, ctx, async (layer, weights) => {
      try {
        attentions?.push(weights);
        hiddenStates?.push(x.slice());
        await onLayer?.(layer, { attentions: { data: weights.data, shape } });
      } finally {
        if (lent) weights.release();
      }
    }, signal, onProgress, Boolean(signal) && !caches);
    const final = family.final(x, this.globals);
    if (hiddenStates) hiddenStates[layers] = final === x ? x.slice() : final;
    let result = null;
    if (logits !== 'none') {
      const last = logits === 'last';
      const input = last ? new Float32Array(n * this.family.width) : final;
      if (last) for (let b = 0; b < n; b++) input.set(final.subarray(((b + 1) * t - 1) * family.width, (b + 1) * t * family.width), b * family.width);
      const values = await this.logits(input, last ? n : n * t, signal);
      result = values && { data: values, shape: [n, last ? 1 : t, values.length / (n * (last ? 1 : t))] };
    }
    return {
      logits: result,
      attentions: attentions && attentions.map((weights) => ({ data: weights.data, shape })),
      hiddenStates: hiddenStates && hiddenStates.map((data) => ({ data, shape: [n, t, family.width] })),
    };
  }

  /**
   * HF's `generate`: greedy, or sampled (temperature, top-k, top-p in HF's order) → the ids given
   * followed by the new ones, up to `maxNewTokens` and past an end-of-sequence id.
   */
  async generate(ids, opts) {
    this.live('generate');
    opts = checkOptions(opts, ['maxNewTokens', 'doSample', 'temperature', 'topK', 'topP', 'seed', 'eosTokenId', 'onToken', 'signal', 'cacheDtype']);
    if (!this.family.causal) throw new AttentionError('model.generate', 'a decoder (causal language model)', `${this.modelType}, an encoder`);
    const rows = checkIds(ids, this.vocabSize);
    if (rows.length !== 1) throw new AttentionError('ids', 'one sequence (generate takes no batch)', `${rows.length} rows`);
    const maxNewTokens = checkNumber(opts.maxNewTokens ?? 20, 'maxNewTokens', { min: 0, max: 2 ** 31 - 1, integer: true });
    const sampling = checkSampling(opts);
    const eos = new Set([opts.eosTokenId ?? this.family.config.eos_token_id ?? []].flat());
    for (const id of eos) checkNumber(id, 'eosTokenId', { min: 0, max: this.vocabSize - 1, integer: true });
    const onToken = checkCallback(opts.onToken, 'onToken');
    const cacheDtype = checkChoice(opts.cacheDtype, 'cacheDtype', ['f32', 'f16', 'q8'], 'f32');
    const prompt = rows[0];
    const maxLength = prompt.length + maxNewTokens;
    if (maxLength > this.maxPositions)
      throw new AttentionError('maxNewTokens', `at most ${this.maxPositions - prompt.length} (max_position_embeddings less the ${prompt.length} ids given)`, `${maxNewTokens}`);
    const out = [...prompt];
    if (maxNewTokens === 0) return out;
    const { signal } = opts;
    const caches = [];
    try {
      for (let layer = 0; layer < this.layers; layer++)
        caches.push(new this.attn.KVCache({ heads: this.kvHeads, headDim: this.headDim, maxLength, dtype: cacheDtype, window: this.family.windowOf?.(layer) ?? null }));
      let step = [prompt];
      for (let i = 0; i < maxNewTokens; i++) {
        if (signal && i > 0) await nextTask();
        const { logits } = await this.run(step, { caches, past: out.length - step[0].length, signal });
        const next = sampleNext(logits.data, sampling);
        out.push(next);
        onToken?.(next);
        if (eos.has(next)) break;
        step = [Int32Array.of(next)];
      }
    } finally {
      caches.forEach((cache) => cache.dispose());
      this.readBuffers.clear();
    }
    return out;
  }

  /**
   * What layer `layer`'s attention reads from `hiddenState` [N, t, hidden] (the layer's input:
   * forward's hiddenStates[layer]) and how it scores: { query [N, heads, t, d], key, value
   * [N, kvHeads, t, d] (q and k as the scores read them: after QK-norm and RoPE at `positions`,
   * default each row's 0 … t − 1), scale, softcap, window, causal }.
   */
  async project(hiddenState, opts) {
    this.live('project');
    opts = checkOptions(opts, ['layer', 'positions', 'signal']);
    const layer = checkNumber(opts.layer, 'layer', { min: 0, max: this.layers - 1, integer: true });
    const width = this.family.width;
    const shape = hiddenState?.shape;
    if (!(hiddenState?.data instanceof Float32Array) || !Array.isArray(shape) || shape.length !== 3 || shape[2] !== width || hiddenState.data.length !== shape[0] * shape[1] * width)
      throw new AttentionError('hiddenState', `{ data: Float32Array, shape: [N, t, ${width}] } (a hidden state forward returns)`, describe(shape ? shapeString(shape) : hiddenState));
    const [n, t] = shape;
    const positions = opts.positions === undefined ? tokenPositions(null, n, t, 0) : Int32Array.from(opts.positions);
    if (positions.length !== n * t) throw new AttentionError('positions', `${n * t} positions ([N, t])`, `${positions.length}`);
    const block = this.streamed ? await this.loadLayer(layer, opts.signal) : this.blocks[layer];
    try {
      return this.family.project(block.part, hiddenState.data, { n, t, positions });
    } finally {
      if (this.streamed) block.dispose();
      this.readBuffers.clear();
    }
  }

  checkAttentionMask(value, n, t) {
    const mask = checkTokenMask(value, 'attentionMask');
    if (!mask) return null;
    if (mask.shape.length !== 2 || mask.shape[0] !== n || mask.shape[1] !== t)
      throw new AttentionError('attentionMask', `[${n}, ${t}] (the ids' shape)`, shapeString(mask.shape));
    return mask.data.every((v) => v === 1) ? null : mask.data;
  }

  // headMask: [layers, heads] or [heads] (every layer) as nested arrays, a flat typed array or
  // { data, shape } → Float32Array [layers · heads], or null.
  checkHeadMask(value) {
    if (value === undefined || value === null) return null;
    const { layers, heads } = this;
    let data, shape;
    if (Array.isArray(value) && value.every(Array.isArray)) [data, shape] = [value.flat(), [value.length, ...(value.length ? [value[0].length] : [])]];
    else if (Array.isArray(value) || value instanceof Float32Array) [data, shape] = [value, [value.length]];
    else if (value && typeof value === 'object' && value.data && Array.isArray(value.shape)) [data, shape] = [value.data, value.shape];
    else throw new AttentionError('headMask', `[${layers}, ${heads}] or [${heads}] numbers (nested arrays, a Float32Array or { data, shape })`, describe(value));
    const perLayer = shape.length === 1 && shape[0] === heads;
    const whole = shape.length === 2 && shape[0] === layers && shape[1] === heads && data.length === layers * heads;
    if (!perLayer && !whole) throw new AttentionError('headMask', `[${layers}, ${heads}] or [${heads}] (layers, heads)`, shapeString(shape));
    const mask = new Float32Array(layers * heads);
    for (let i = 0; i < mask.length; i++) {
      const v = data[perLayer ? i % heads : i];
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new AttentionError('headMask', 'finite numbers', `${describe(v)} at index ${i}`);
      mask[i] = v;
    }
    return mask;
  }

  checkAttentionsOut(out, outputAttentions, n, t) {
    if (out === undefined || out === null) return null;
    out = checkOptions(out, ['attentions'], 'out');
    if (out.attentions === undefined || out.attentions === null) return null;
    if (!outputAttentions) throw new AttentionError('out.attentions', 'outputAttentions: true with it', 'outputAttentions false');
    const size = this.layers * n * this.heads * t * t;
    if (!(out.attentions instanceof Float32Array) || out.attentions.length < size)
      throw new AttentionError('out.attentions', `a Float32Array of at least ${size} elements ([layers, N, heads, t, t])`, describe(out.attentions));
    return out.attentions;
  }

  /** Frees every packed layer and the head, and closes the checkpoint's files. */
  async dispose() {
    if (this.disposed) return;
    this.disposed = true;
    this.releaseLayers();
    await this.checkpoint.close();
  }
}

// Each block's logits [rows, end − begin] of x [rows, width], into their columns of logits [rows, vocab].
function blockLogits(blocks, x, rows, vocab, logits) {
  for (const { begin, end, block } of blocks) {
    const part = block.part.forward(x, rows);
    for (let r = 0; r < rows; r++) logits.set(part.subarray(r * (end - begin), (r + 1) * (end - begin)), r * vocab + begin);
  }
  return logits;
}

// A resident model's layers never wait for anything, so without a pause between them an abort
// sent by an event (a click, a worker's message, a timer) could not land before the whole forward
// ends. The pause is a timer, so that timers due run first, but set from a task of its own (a
// message to a channel, closed once it lands): browsers hold a timer set from a timer's task 5
// deep to at least 4 ms, and these would be nested as deep as the layers (a Chromium worker:
// 24 pauses 82 ms, 0.8 ms this way).
async function nextTask() {
  await new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel();
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
  await new Promise((resolve) => setTimeout(resolve, 0));
}

function checkCallback(value, argument) {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'function') throw new AttentionError(argument, 'a function', describe(value));
  return value;
}

// Each token's position: generate()'s rule, cumsum(attentionMask) − 1 (padding at 0), after the
// `past` positions a cache holds; 0 … t − 1 without padding.
function tokenPositions(attentionMask, n, t, past) {
  const positions = new Int32Array(n * t);
  for (let b = 0; b < n; b++) {
    let count = 0;
    for (let i = 0; i < t; i++) {
      const token = attentionMask ? attentionMask[b * t + i] : 1;
      count += token;
      positions[b * t + i] = token ? past + count - 1 : 0;
    }
  }
  return positions;
}

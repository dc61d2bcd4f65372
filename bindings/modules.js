// The attention modules: PyTorch-style classes over core objects held in wasm memory. Each
// instance of init() gets its own classes, bound to its own wasm instance.
import { AttentionError, describe, keepClassNames, shapeString } from './errors.js';
import { cacheHandle } from './kv_cache.js';
import {
  checkBoolean, checkChoice, checkEnum, checkMask, checkNumber, checkOptions, checkPositions, checkShape, checkTensor, checkTensorArgument,
  checkTokenMask, checkOutArrays, defined, enumName, enumNames, MAX_DIM, numel, resultEntries,
} from './validate.js';
import { adopt, expose, internals, live, release } from './owned.js';
import { disposeSymbol, idsView, maskView, tensorView, throwIfFailed } from './runtime.js';
import { configArguments, configError } from './from_config.js';
import { checkRopeScheme, ROPE_SCHEME_OPTIONS, ropeScalingStruct } from './rope.js';

// Sizes cross as dimensions (integers that fit an int32); 0 is no size (kdim's and headDim's "absent").
function checkSize(value, argument) {
  return checkNumber(value, argument, { min: 1, max: MAX_DIM, integer: true });
}

function optionalSize(value, argument) {
  return value === undefined ? undefined : checkSize(value, argument);
}

function checkSeed(value, argument = 'seed') {
  return checkNumber(value, argument, { min: 0, max: Number.MAX_SAFE_INTEGER, integer: true });
}

// The options every module constructor takes: dropout (its range is the core's to check) and the
// dropout seed of the calls that give none (0 unless given: the JS side's own state).
function checkModuleOptions(opts) {
  return {
    dropout: opts.dropout === undefined ? undefined : checkNumber(opts.dropout, 'dropout', { float32: true }),
    seed: opts.seed === undefined ? 0 : checkSeed(opts.seed),
  };
}

// A created module: its handle, or the Status that refused its configuration, thrown.
function handleOf(made) {
  if (made.handle === undefined) throwIfFailed(made);
  return made.handle;
}

// What a module exposes: its configuration as the core resolved it (the defaults of what was not
// given, what it derived), the given values as they were given (a float32 field keeps the
// caller's number), `names` mapping enum fields to their Embind enums.
function configOf(made, given, names = {}) {
  const config = { ...made.config, ...defined(given) };
  for (const [key, type] of Object.entries(names)) if (typeof config[key] === 'number') config[key] = enumName(type, config[key]);
  return config;
}

// Dropout draws: the call's seed, else the module's seed advanced once per call, so a run repeats
// exactly while successive calls differ.
function nextSeed(state, seed) {
  if (seed !== undefined) return checkSeed(seed);
  return (state.seed + state.calls++) % Number.MAX_SAFE_INTEGER;
}

// The core knows the entries by their names under the prefix; its errors name the keys as given,
// and the prefix it suggests for a whole model's names is a full one.
function withPrefix(status, prefix) {
  if (!status || !prefix) return status;
  return {
    ...status,
    argument: status.argument.replace("stateDict['", () => `stateDict['${prefix}`),
    expected: status.expected.replace("load with prefix '", () => `load with prefix '${prefix}`),
  };
}

// A prefix must end where a name's part does: 'model.layers.0.self_attn.', not '...self_attn'.
function checkPrefix(prefix, names) {
  if (typeof prefix !== 'string') throw new AttentionError('prefix', 'a string', describe(prefix));
  if (prefix && !prefix.endsWith('.') && names.some((name) => name.startsWith(`${prefix}.`)))
    throw new AttentionError('prefix', `a prefix ending in '.' ('${prefix}.': the names under it continue after a dot)`, `'${prefix}'`);
}

// The entries of a state dict (an object or a Map) under `opts.prefix`: { prefix, entries: [name, tensor][] }.
function stateDictEntries(stateDict, opts) {
  const isMap = stateDict instanceof Map;
  if (!isMap && (stateDict === null || typeof stateDict !== 'object' || Array.isArray(stateDict) || ArrayBuffer.isView(stateDict)))
    throw new AttentionError('stateDict', 'an object mapping state_dict() names to tensors', describe(stateDict));
  opts = checkOptions(opts, ['prefix']);
  const prefix = opts.prefix === undefined ? '' : opts.prefix;
  const given = isMap ? [...stateDict.entries()] : Object.entries(stateDict);
  const nonString = given.find(([name]) => typeof name !== 'string');
  if (nonString) throw new AttentionError('stateDict', 'a Map whose keys are state_dict() names (strings)', `the key ${describe(nonString[0])}`);
  checkPrefix(prefix, given.map(([name]) => name));
  return { prefix, entries: given.filter(([name]) => name.startsWith(prefix)) };
}

// The 16-bit dtypes a weight tensor may come in (how a module holds its weights is the core's
// _WeightDtype).
const WORD_DTYPES = ['f16', 'bf16'];

// A weight: a float32 tensor, or a 16-bit one ({ data: Uint16Array, shape, dtype: 'f16' }
// (binary16) or dtype: 'bf16' (bfloat16, the upper half of a float32), as loadSafetensors gives).
function checkWeight(tensor, argument) {
  const words = WORD_DTYPES.includes(tensor?.dtype);
  if (!words && !(tensor?.data instanceof Uint16Array)) return checkTensor(tensor, argument);
  if (!words || !(tensor.data instanceof Uint16Array))
    throw new AttentionError(`${argument}.data`, "a Float32Array, or 16-bit words in a Uint16Array with dtype: 'f16' (binary16) or 'bf16' (bfloat16)",
      `${describe(tensor.data)} ${tensor.dtype === undefined ? 'without a dtype' : `with dtype ${describe(tensor.dtype)}`}`);
  checkShape(tensor.shape, argument);
  if (tensor.data.length !== numel(tensor.shape))
    throw new AttentionError(`${argument}.data`, `length ${numel(tensor.shape)} for shape ${shapeString(tensor.shape)}`, `length ${tensor.data.length}`);
  return tensor;
}

// What a checked tensor holds, as the core's _WeightDtype.
function weightDtype(wasm, tensor) {
  return wasm._WeightDtype[tensor.data instanceof Uint16Array ? tensor.dtype : 'f32'];
}

// Loads a state dict's entries under opts.prefix into `module`, each checked by `check`:
// checkTensor (float32), or checkWeight (16-bit too, which the core widens, or keeps for the
// weights a module holds as 16-bit words).
function loadEntries(module, stateDict, opts, check) {
  const { state: { runtime, handle }, wasm } = live(module, 'loadStateDict');
  const { prefix, entries } = stateDictEntries(stateDict, opts);
  entries.forEach(([name, tensor]) => {
    check(tensor, `stateDict['${name}']`);
    runtime.checkRank(tensor.shape, `stateDict['${name}']`, 'the shape PyTorch gives it');
  });
  runtime.invoke(
    entries.map(([name, tensor]) => [tensor.data, `stateDict['${name}']`]),
    [],
    (pointers) => withPrefix(wasm._moduleLoadStateDict(handle, entries.map(([name, tensor], i) => ({
      name: name.slice(prefix.length), tensor: tensorView(pointers[i], tensor), dtype: weightDtype(wasm, tensor),
    }))), prefix),
  );
  return module;
}

// train(mode) and eval(); `method` is the one called, for errors.
function setTraining(module, method, mode) {
  const { state, wasm } = live(module, method);
  checkBoolean(mode, 'mode', true);
  wasm._moduleSetTraining(state.handle, mode);
  state.training = mode;
  return module;
}

class AttentionModule {
  constructor(runtime, name, handle, seed) {
    adopt(this, runtime, name, handle, (wasm, h) => wasm._moduleDestroy(h), { training: false, seed, calls: 0 });
  }

  /** Whether dropout is active (modules start in eval mode). */
  get training() {
    return internals.get(this).training;
  }

  /** Switches training mode (dropout on) or eval mode (off). Returns this. */
  train(mode = true) {
    return setTraining(this, 'train', mode);
  }

  eval() {
    return setTraining(this, 'eval', false);
  }

  /**
   * Loads PyTorch state_dict() entries: { name: { data: Float32Array, shape } } or a Map. With
   * `opts.prefix` only the entries whose names start with it are read, as the names that follow it.
   */
  loadStateDict(stateDict, opts) {
    return loadEntries(this, stateDict, opts, checkTensor);
  }

  /**
   * Frees the module's wasm memory now. Safe to call twice, and after its instance's dispose()
   * (which freed it already); later use throws.
   */
  dispose() {
    release(this);
  }

  [disposeSymbol]() {
    this.dispose();
  }
}

// Runs a module's forward: check() (the result shapes), then run(pointers, output, weights) with
// `inputs` copied into wasm memory at `pointers`. The output may overwrite input `outputOverInput`
// where the module allows it. `out`: the arrays the caller gave for the results (validate.js's
// resultEntries), the output's named `outputName`.
export function forward(runtime, check, inputs, run, outputOverInput, out = {}, outputName = undefined) {
  const result = check();
  if (!result || result.output === undefined) throwIfFailed(result);
  const [output, weights] = runtime.invoke(
    inputs,
    resultEntries(out, result.output, result.weights, outputOverInput, outputName),
    (pointers, [into, w]) => run(pointers, into, w),
  );
  return { output, weights };
}

// A module's tensors ([tensor, argument, the shape it should have]) and masks ([mask or null,
// option name, ...]), their ranks checked: the inputs to copy into wasm memory, in that order, and
// args(pointers), the arguments of its Embind pair with them at those pointers (none: shapes only):
// the tensors' views, then options(...the masks' views), the core's options struct. A boolean
// mask's 1 means masked out (`trueMeansMasked`) or may attend.
function moduleInputs(runtime, wasm, tensors, masks, trueMeansMasked, options) {
  for (const [value, argument, pattern] of [...tensors, ...masks]) if (value) runtime.checkRank(value.shape, argument, pattern);
  return {
    inputs: [...tensors, ...masks].map(([value, argument]) => [value?.data, argument]),
    args: (pointers = []) => [
      ...tensors.map(([tensor], i) => tensorView(pointers[i], tensor)),
      options(...masks.map(([mask], i) => maskView(wasm, mask, pointers[tensors.length + i], trueMeansMasked))),
    ],
  };
}

// forward() of AdditiveAttention and RelativeMultiHeadAttention: query, key, value and one mask
// option, whose Embind pair is called by check(wasm, handle, q, k, v, options) and run(wasm, handle,
// q, k, v, options, out, w), `options` the core's struct: the mask under the option's name, the
// seed, and what `readOptions` makes of the options named in `options`. `patterns` describe the
// four shapes for errors; `prepareMask` adapts the mask's polarity.
function forwardWithMask(module, [query, key, value], opts, { maskOption, patterns, trueMeansMasked, prepareMask = (m) => m, options = [], readOptions, check, run }) {
  const called = live(module, 'forward');
  const { state: { handle }, wasm } = called;
  const signature = 'forward(query, key, value, opts)';
  checkTensor(query, 'query');
  checkTensorArgument(key, 'key', signature);
  checkTensorArgument(value, 'value', signature);
  opts = checkOptions(opts, [maskOption, ...options, 'seed']);
  const mask = prepareMask(checkMask(opts[maskOption], maskOption));
  const extra = readOptions?.(opts);
  const seed = nextSeed(called.state, opts.seed);
  const { runtime } = called.state;
  const { inputs, args } = moduleInputs(
    runtime, wasm,
    [[query, 'query', patterns[0]], [key, 'key', patterns[1]], [value, 'value', patterns[2]]],
    [[mask, maskOption, patterns[3]]],
    trueMeansMasked,
    (m) => ({ [maskOption]: m, seed, ...extra }),
  );
  return forward(runtime, () => check(wasm, handle, ...args()), inputs, (pointers, out, w) => run(wasm, handle, ...args(pointers), out, w));
}

// Relative attention reads any mask as 0 = masked, nonzero = keep: a float mask becomes bytes.
function asKeepBytes(mask) {
  if (!mask || mask.data instanceof Uint8Array) return mask;
  return { data: Uint8Array.from(mask.data, (x) => (x !== 0 ? 1 : 0)), shape: mask.shape };
}

// Above this much memory for the packed keys and values, MultiheadAttention without weights takes
// its heads one at a time (multihead_attention.h): the heap then holds one head's keys and values
// instead of all of them, and the attention output waits in a JS array of the query's size. From
// L = 8192 at E = 512, N = 1; the results are the same bit for bit either way.
export const SPILL_ABOVE_BYTES = 32 * 2 ** 20;

// The JS array a MultiheadAttention forward may keep its attention output in, or null. Asked once
// the shapes have passed the core's check (which said whether weights are written).
function spillFor(module, query, key, needWeights) {
  if (needWeights || module.numHeads === 1) return null;
  const keyRows = numel(key.shape) / module.kdim;  // N * m, whatever the layout
  const packedBytes = 2 * 4 * module.embedDim * keyRows;
  return packedBytes >= SPILL_ABOVE_BYTES ? new Float32Array(numel(query.shape)) : null;
}

// headMask: one factor per query head, a Float32Array or numbers; null and undefined mean none.
function checkHeadMask(value) {
  if (value === undefined || value === null) return null;
  if (value instanceof Float32Array) return { data: value, shape: [value.length] };
  if (Array.isArray(value) && value.every((v) => typeof v === 'number')) return { data: Float32Array.from(value), shape: [value.length] };
  throw new AttentionError('headMask', 'a Float32Array or an array of numbers, one per query head ([numHeads])', describe(value));
}

// GroupedQueryAttention's x and call options, checked: the inputs to copy into wasm memory (x,
// positions, attnMask, attentionMask, headMask) and options(pointers), the core's
// GroupedQueryAttentionOptions with them at those pointers (none: shapes only).
function blockInputs(runtime, wasm, x, opts) {
  checkTensor(x, 'x');
  const cache = opts.cache === undefined || opts.cache === null ? 0 : cacheHandle(opts.cache, runtime, 'cache');
  const positions = checkPositions(opts.positions);
  const tokens = checkTokenMask(opts.attentionMask, 'attentionMask');
  const mask = checkMask(opts.attnMask, 'attnMask');
  const headMask = checkHeadMask(opts.headMask);
  runtime.checkRank(x.shape, 'x', '[N, t, hiddenSize]');
  if (positions) runtime.checkRank(positions.shape, 'positions', '[t] or [N, t]');
  if (tokens) runtime.checkRank(tokens.shape, 'attentionMask', '[N, t]');
  if (mask) runtime.checkRank(mask.shape, 'attnMask', 'broadcastable to [N, numHeads, t, m]');
  return {
    inputs: [[x.data, 'x'], [positions?.data, 'positions'], [mask?.data, 'attnMask'], [tokens?.data, 'attentionMask'], [headMask?.data, 'headMask']],
    options: ([, at, m, t, h] = []) => ({
      positions: idsView(positions, at), attnMask: maskView(wasm, mask, m), attentionMask: maskView(wasm, tokens, t), cache,
      headMask: idsView(headMask, h),
    }),
  };
}

const GQA_OPTIONS = ['dtype', 'headDim', 'qkvBias', 'outputBias', 'ropeBase', 'ropeInterleaved', 'rotaryDim', 'qkNorm', 'slidingWindow', 'softcap', 'scale'];

// qkNorm: { scope, eps, unitOffset } as the core's QkNorm (a scope of its enum but none); what is
// absent, and the whole when none is given, takes its defaults.
function checkQkNorm(wasm, value) {
  if (value === undefined || value === null) return { scope: undefined, eps: undefined, unitOffset: undefined };
  const scopes = enumNames(wasm._QkNormScope).filter((name) => name !== 'none');
  if (typeof value !== 'object' || Array.isArray(value))
    throw new AttentionError('qkNorm', `{ scope: ${scopes.map((name) => `'${name}'`).join(' | ')}, eps, unitOffset }`, describe(value));
  checkOptions(value, ['scope', 'eps', 'unitOffset'], 'qkNorm');
  if (value.scope === undefined) throw new AttentionError('qkNorm.scope', scopes.map((name) => `'${name}'`).join(' or '), 'none');
  return {
    scope: checkEnum(value.scope, 'qkNorm.scope', wasm._QkNormScope, 'none'),
    eps: value.eps === undefined ? undefined : checkNumber(value.eps, 'qkNorm.eps'),
    unitOffset: checkBoolean(value.unitOffset, 'qkNorm.unitOffset'),
  };
}

export function createModuleClasses(runtime, KVCache) {
  class MultiheadAttention extends AttentionModule {
    /** torch.nn.MultiheadAttention(embedDim, numHeads, ...). Starts in eval mode. */
    constructor(embedDim, numHeads, opts) {
      const wasm = runtime.enter('new MultiheadAttention');
      checkSize(embedDim, 'embedDim');
      checkSize(numHeads, 'numHeads');
      opts = checkOptions(opts, ['bias', 'addBiasKV', 'addZeroAttn', 'kdim', 'vdim', 'batchFirst', 'dropout', 'seed']);
      const { dropout, seed } = checkModuleOptions(opts);
      const given = {
        embedDim,
        numHeads,
        bias: checkBoolean(opts.bias, 'bias'),
        addBiasKV: checkBoolean(opts.addBiasKV, 'addBiasKV'),
        addZeroAttn: checkBoolean(opts.addZeroAttn, 'addZeroAttn'),
        kdim: optionalSize(opts.kdim, 'kdim'),
        vdim: optionalSize(opts.vdim, 'vdim'),
        batchFirst: checkBoolean(opts.batchFirst, 'batchFirst'),
        dropout,
      };
      const made = wasm._mhaCreate(given);
      super(runtime, 'MultiheadAttention', handleOf(made), seed);
      expose(this, configOf(made, given));
    }

    /**
     * query (L, N, E) ((N, L, E) with batchFirst, or unbatched (L, E)); key and value default to
     * the query. Returns { output, weights }.
     */
    forward(query, key, value, opts) {
      const called = live(this, 'forward');
      const signature = 'forward(query, key, value, opts), key and value null for the query itself';
      checkTensor(query, 'query');
      key = checkTensorArgument(key ?? query, 'key', signature);
      value = checkTensorArgument(value ?? key, 'value', signature);
      opts = checkOptions(opts, ['keyPaddingMask', 'attnMask', 'needWeights', 'averageAttnWeights', 'isCausal', 'seed']);
      const attnMask = checkMask(opts.attnMask, 'attnMask');
      const padding = checkMask(opts.keyPaddingMask, 'keyPaddingMask');
      // The core's MultiheadAttentionOptions, its masks as given; absent options take its defaults.
      const given = {
        needWeights: checkBoolean(opts.needWeights, 'needWeights'),
        averageAttnWeights: checkBoolean(opts.averageAttnWeights, 'averageAttnWeights'),
        isCausal: checkBoolean(opts.isCausal, 'isCausal'),
        seed: nextSeed(called.state, opts.seed),
      };
      const { state: { handle }, wasm } = called;
      const { inputs, args } = moduleInputs(
        runtime, wasm,
        [[query, 'query', '(L, N, E)'], [key, 'key', '(S, N, kdim)'], [value, 'value', '(S, N, vdim)']],
        [[attnMask, 'attnMask', '[n, m] or [N*numHeads, n, m]'], [padding, 'keyPaddingMask', '[N, m]']],
        true,
        (am, kpm) => ({ attnMask: am, keyPaddingMask: kpm, ...given }),
      );
      return forward(
        runtime,
        () => wasm._mhaCheck(handle, ...args()),
        inputs,
        (pointers, out, w) => wasm._mhaForward(handle, ...args(pointers), out, w, spillFor(this, query, key, w !== 0)),
        0,  // the core may write its output over the query (multihead_attention.h)
      );
    }
  }

  class SelfAttention extends AttentionModule {
    /** Single-head self-attention with its own key and value sizes. Starts in eval mode. */
    constructor(embedDim, keySize, valueSize, opts) {
      const wasm = runtime.enter('new SelfAttention');
      checkSize(embedDim, 'embedDim');
      checkSize(keySize, 'keySize');
      checkSize(valueSize, 'valueSize');
      opts = checkOptions(opts, ['dropout', 'seed']);
      const { dropout, seed } = checkModuleOptions(opts);
      const given = { embedDim, keySize, valueSize, dropout };
      const made = wasm._selfAttentionCreate(given);
      super(runtime, 'SelfAttention', handleOf(made), seed);
      expose(this, configOf(made, given));
    }

    /** x [N, L, embedDim]; attnMask broadcastable to [N, L, L], boolean 1 = masked out. */
    forward(x, opts) {
      const called = live(this, 'forward');
      checkTensor(x, 'x');
      opts = checkOptions(opts, ['attnMask', 'seed']);
      const mask = checkMask(opts.attnMask, 'attnMask');
      const seed = nextSeed(called.state, opts.seed);
      const { state: { handle }, wasm } = called;
      const { inputs, args } = moduleInputs(
        runtime, wasm, [[x, 'x', '[N, L, embedDim]']], [[mask, 'attnMask', 'broadcastable to [N, L, L]']], true,
        (attnMask) => ({ attnMask, seed }),
      );
      return forward(
        runtime,
        () => wasm._selfAttentionCheck(handle, ...args()),
        inputs,
        (pointers, out, w) => wasm._selfAttentionForward(handle, ...args(pointers), out, w),
      );
    }
  }

  class AdditiveAttention extends AttentionModule {
    /** Additive (Bahdanau) attention: scores = w_v · tanh(W_q q + W_k k). Starts in eval mode. */
    constructor(querySize, keySize, hiddenSize, opts) {
      const wasm = runtime.enter('new AdditiveAttention');
      checkSize(querySize, 'querySize');
      checkSize(keySize, 'keySize');
      checkSize(hiddenSize, 'hiddenSize');
      opts = checkOptions(opts, ['dropout', 'seed']);
      const { dropout, seed } = checkModuleOptions(opts);
      const given = { querySize, keySize, hiddenSize, dropout };
      const made = wasm._additiveCreate(given);
      super(runtime, 'AdditiveAttention', handleOf(made), seed);
      expose(this, configOf(made, given));
    }

    /** query [N, n, dq], key [N, m, dk], value [N, m, dv]; attnMask broadcastable to [N, n, m], 1 = masked out. */
    forward(query, key, value, opts) {
      return forwardWithMask(this, [query, key, value], opts, {
        maskOption: 'attnMask',
        patterns: ['[N, n, querySize]', '[N, m, keySize]', '[N, m, dv]', 'broadcastable to [N, n, m]'],
        trueMeansMasked: true,
        check: (wasm, ...args) => wasm._additiveCheck(...args),
        run: (wasm, ...args) => wasm._additiveForward(...args),
      });
    }
  }

  class RelativeMultiHeadAttention extends AttentionModule {
    /** Transformer-XL relative multi-head attention (labml.ai formulation). Starts in eval mode. */
    constructor(heads, dModel, opts) {
      const wasm = runtime.enter('new RelativeMultiHeadAttention');
      checkSize(heads, 'heads');
      checkSize(dModel, 'dModel');
      opts = checkOptions(opts, ['P', 'dropout', 'seed']);
      const { dropout, seed } = checkModuleOptions(opts);
      const given = { heads, dModel, P: optionalSize(opts.P, 'P'), dropout };
      const made = wasm._relativeCreate(given);
      super(runtime, 'RelativeMultiHeadAttention', handleOf(made), seed);
      expose(this, configOf(made, given));
    }

    /**
     * query [n, B, dModel], key and value [m, B, dModel]; mask [n|1, m, B|1], 0 = masked out.
     * weightsLayout 'nmBH' (labml's [n, m, B, heads], the default) or 'BHnm' ([B, heads, n, m]).
     */
    forward(query, key, value, opts) {
      return forwardWithMask(this, [query, key, value], opts, {
        maskOption: 'mask',
        patterns: ['[n, B, dModel]', '[m, B, dModel]', '[m, B, dModel]', '[n or 1, m, B or 1]'],
        trueMeansMasked: false,
        prepareMask: asKeepBytes,
        options: ['weightsLayout'],
        // The core's heads_first, or its default when no layout is given.
        readOptions: (o) => {
          const layout = checkChoice(o.weightsLayout, 'weightsLayout', ['nmBH', 'BHnm']);
          return { headsFirst: layout && layout === 'BHnm' };
        },
        check: (wasm, ...args) => wasm._relativeCheck(...args),
        run: (wasm, ...args) => wasm._relativeForward(...args),
      });
    }
  }

  class GroupedQueryAttention extends AttentionModule {
    /**
     * Hugging Face's LlamaAttention / MistralAttention / Qwen2Attention / Qwen3Attention /
     * Gemma2Attention / Gemma3Attention / Phi3Attention / Olmo2Attention block. opts: headDim,
     * qkvBias, outputBias, ropeBase, ropeInterleaved, rotaryDim, ropeScaling, maxPositionEmbeddings,
     * invFreq, attentionScaling, qkNorm, slidingWindow, softcap, scale, dtype ('f32', 'f16' or
     * 'bf16': the q/k/v/o projections held as binary16 or bfloat16, as Linear's weight).
     */
    constructor(hiddenSize, numHeads, numKeyValueHeads, opts) {
      const wasm = runtime.enter('new GroupedQueryAttention');
      checkSize(hiddenSize, 'hiddenSize');
      checkSize(numHeads, 'numHeads');
      checkSize(numKeyValueHeads, 'numKeyValueHeads');
      opts = checkOptions(opts, [...GQA_OPTIONS, ...ROPE_SCHEME_OPTIONS]);
      // The core's GroupedQueryAttentionConfig: what is absent (undefined, or null for the
      // optionals) takes its defaults, and the sizes it derives (headDim, rotaryDim) are its own.
      const optional = (value, check) => (value === undefined || value === null ? undefined : check(value));
      const given = {
        hiddenSize,
        numHeads,
        numKeyValueHeads,
        headDim: optional(opts.headDim, (v) => checkSize(v, 'headDim')),
        qkvBias: checkBoolean(opts.qkvBias, 'qkvBias'),
        outputBias: checkBoolean(opts.outputBias, 'outputBias'),
        ropeBase: optional(opts.ropeBase, (v) => checkNumber(v, 'ropeBase')),
        ropeInterleaved: checkBoolean(opts.ropeInterleaved, 'ropeInterleaved'),
        rotaryDim: optional(opts.rotaryDim, (v) => checkNumber(v, 'rotaryDim', { integer: true })),
        slidingWindow: optional(opts.slidingWindow, (v) => checkSize(v, 'slidingWindow')),
        softcap: optional(opts.softcap, (v) => checkNumber(v, 'softcap', { float32: true })),
        scale: optional(opts.scale, (v) => checkNumber(v, 'scale', { float32: true })),
        dtype: checkEnum(opts.dtype, 'dtype', wasm._WeightDtype),
      };
      const qkNorm = checkQkNorm(wasm, opts.qkNorm);
      const scheme = checkRopeScheme(wasm, opts);
      // The scheme's tables are read during the call.
      let made;
      runtime.invoke([[scheme.tables, 'ropeScaling']], [], ([tables]) => {
        made = wasm._gqaCreate({ ...given, ropeScaling: ropeScalingStruct(wasm, scheme, tables), qkNorm });
        return made.handle === undefined ? made : null;
      });
      super(runtime, 'GroupedQueryAttention', made.handle, 0);
      const config = configOf(made, { ...given, dtype: opts.dtype }, { dtype: wasm._WeightDtype });
      expose(this, {
        ...config,
        qkNorm: opts.qkNorm == null ? null : { ...made.config.qkNorm, ...defined(qkNorm), scope: opts.qkNorm.scope },
        ropeScaling: opts.ropeScaling ?? null, maxPositionEmbeddings: scheme.struct.maxPositionEmbeddings ?? null,
      });
    }

    /**
     * The attention block of layer `opts.layer` (0) of the model a parsed Hugging Face config.json
     * describes: model_type llama, mistral, qwen2, qwen3, gemma2, gemma3_text (or gemma3's
     * text_config), phi3 or olmo2; `opts.dtype` as the constructor's.
     */
    static fromConfig(config, opts) {
      runtime.enter('GroupedQueryAttention.fromConfig');
      const [hiddenSize, numHeads, numKeyValueHeads, options, names] = configArguments(config, opts);
      try {
        return new GroupedQueryAttention(hiddenSize, numHeads, numKeyValueHeads, options);
      } catch (error) {
        throw configError(error, names);
      }
    }

    /**
     * As AttentionModule's, and Phi-3's fused qkv_proj.weight ([q | k | v] rows) in place of
     * q_proj, k_proj and v_proj. Any entry may be binary16 or bfloat16 (as loadSafetensors(bytes,
     * { dtype }) gives them): the projections are held as this.dtype, the biases and norms as floats.
     */
    loadStateDict(stateDict, opts) {
      live(this, 'loadStateDict');
      const prefix = typeof opts?.prefix === 'string' ? opts.prefix : '';
      const fusedName = `${prefix}qkv_proj.weight`;
      const entries = stateDict instanceof Map ? stateDict : stateDict !== null && typeof stateDict === 'object' ? new Map(Object.entries(stateDict)) : null;
      const fused = entries?.get(fusedName);
      if (fused === undefined) return loadEntries(this, stateDict, opts, checkWeight);
      checkWeight(fused, `stateDict['${fusedName}']`);
      const q = this.numHeads * this.headDim, kv = this.numKeyValueHeads * this.headDim, width = this.hiddenSize;
      if (fused.shape.length !== 2 || fused.shape[0] !== q + 2 * kv || fused.shape[1] !== width)
        throw new AttentionError(`stateDict['${fusedName}']`, `[${q + 2 * kv}, ${width}] (the rows of q_proj, k_proj and v_proj)`, shapeString(fused.shape));
      const split = new Map(entries);
      split.delete(fusedName);
      for (const [name, first, rows] of [['q_proj', 0, q], ['k_proj', q, kv], ['v_proj', q + kv, kv]]) {
        if (split.has(`${prefix}${name}.weight`))
          throw new AttentionError(`stateDict['${prefix}${name}.weight']`, `either qkv_proj.weight or ${name}.weight, not both`, 'both');
        split.set(`${prefix}${name}.weight`, { data: fused.data.subarray(first * width, (first + rows) * width), shape: [rows, width], dtype: fused.dtype });
      }
      return loadEntries(this, split, opts, checkWeight);
    }

    /** A KVCache shaped for this block: numKeyValueHeads heads of headDim, window slidingWindow. */
    createCache(maxLength, opts) {
      live(this, 'createCache');
      opts = checkOptions(opts, ['batch', 'dtype']);
      return new KVCache({
        batch: opts.batch ?? undefined, heads: this.numKeyValueHeads, headDim: this.headDim, maxLength,
        dtype: opts.dtype ?? undefined, window: this.slidingWindow,
      });
    }

    /**
     * x [N, t, hiddenSize] → { output [N, t, hiddenSize], weights [N, numHeads, t, m] | null }.
     * opts: cache (k and v appended, attention over all it holds), attentionMask (Hugging Face's
     * attention_mask [N, t], 1 a token, 0 padding; kept by the cache), positions ([t] or [N, t];
     * default generate()'s), attnMask (broadcastable to [N, numHeads, t, m], boolean 1 = may
     * attend), headMask (Hugging Face's head_mask [numHeads]: each head's weights, returned so,
     * and its share of the output scaled by its factor), needWeights, out ({ output, weights }:
     * arrays to write the results into).
     */
    forward(x, opts) {
      const { state, wasm } = live(this, 'forward');
      opts = checkOptions(opts, ['cache', 'positions', 'attentionMask', 'attnMask', 'headMask', 'needWeights', 'out']);
      const block = blockInputs(runtime, wasm, x, opts);
      const needWeights = checkBoolean(opts.needWeights, 'needWeights', false);
      const out = checkOutArrays(opts.out, needWeights);
      return forward(
        runtime,
        () => {
          const result = wasm._gqaCheck(state.handle, tensorView(0, x), block.options());
          return result?.output && !needWeights ? { ...result, weights: null } : result;
        },
        block.inputs,
        (pointers, output, w) => wasm._gqaForward(state.handle, tensorView(pointers[0], x), block.options(pointers), output, w),
        undefined,
        out,
      );
    }

    /**
     * What forward()'s attention reads, for looking inside the block: x [N, t, hiddenSize] →
     * { query [N, numHeads, t, headDim], key and value [N, numKeyValueHeads, t, headDim] },
     * projected, QK-normed and rotated at the positions forward() would use. opts: positions,
     * attentionMask, cache (as forward's: they set those positions; nothing is appended).
     */
    project(x, opts) {
      const { state, wasm } = live(this, 'project');
      opts = checkOptions(opts, ['cache', 'positions', 'attentionMask']);
      const block = blockInputs(runtime, wasm, x, opts);
      const shapes = wasm._gqaProjectCheck(state.handle, tensorView(0, x), block.options());
      if (!shapes?.query) throwIfFailed(shapes);
      const [query, key, value] = runtime.invoke(
        block.inputs,
        [[shapes.query, 'query'], [shapes.key, 'key'], [shapes.key, 'value']],
        (pointers, [q, k, v]) => wasm._gqaProject(state.handle, tensorView(pointers[0], x), block.options(pointers), q, k, v),
      );
      return { query, key, value };
    }
  }

  class Linear extends AttentionModule {
    /**
     * torch.nn.Linear(inFeatures, outFeatures): y = x·Wᵀ + b over x [..., inFeatures]. opts: bias
     * (true), dtype ('f32', or 'f16' / 'bf16': the weight held as binary16 / bfloat16, half the
     * memory, f32 arithmetic).
     */
    constructor(inFeatures, outFeatures, opts) {
      const wasm = runtime.enter('new Linear');
      checkSize(inFeatures, 'inFeatures');
      checkSize(outFeatures, 'outFeatures');
      opts = checkOptions(opts, ['bias', 'dtype']);
      const given = { inFeatures, outFeatures, bias: checkBoolean(opts.bias, 'bias'), dtype: checkEnum(opts.dtype, 'dtype', wasm._WeightDtype) };
      const made = wasm._linearCreate(given);
      super(runtime, 'Linear', handleOf(made), 0);
      expose(this, configOf(made, { ...given, dtype: opts.dtype }, { dtype: wasm._WeightDtype }));
    }

    /**
     * weight [outFeatures, inFeatures] and bias [outFeatures]: float32 tensors, or a binary16 or
     * bfloat16 weight, which a Linear of that dtype keeps bit for bit (others widen or round it).
     */
    loadStateDict(stateDict, opts) {
      const { state: { handle }, wasm } = live(this, 'loadStateDict');
      const { prefix, entries } = stateDictEntries(stateDict, opts);
      const names = this.bias ? ['weight', 'bias'] : ['weight'];
      const byName = new Map(entries.map(([name, tensor]) => [name.slice(prefix.length), tensor]));
      for (const name of byName.keys())
        if (!names.includes(name)) throw new AttentionError(`stateDict['${prefix}${name}']`, `no such entry (this module has ${names.join(', ')})`, 'an entry');
      const named = (name) => `stateDict['${prefix}${name}']`;
      const weight = byName.has('weight') ? checkWeight(byName.get('weight'), named('weight')) : null;
      const bias = byName.has('bias') ? checkTensor(byName.get('bias'), named('bias')) : null;
      if (!weight) throw new AttentionError(named('weight'), shapeString([this.outFeatures, this.inFeatures]), 'a missing entry');
      runtime.invoke([[weight.data, named('weight')], [bias?.data, named('bias')]], [], ([w, b]) => {
        const status = wasm._linearLoad(handle, { weight: w, weightDtype: weightDtype(wasm, weight), weightShape: weight.shape, bias: b, biasShape: bias ? bias.shape : [] });
        return status && { ...status, argument: named(status.argument) };
      });
      return this;
    }

    /**
     * x [..., inFeatures] → [..., outFeatures]. opts.out: a Float32Array with room for the output
     * that the result is written into (its `data` is out, or its start), for callers that reuse
     * one buffer per layer.
     */
    forward(x, opts) {
      const { state, wasm } = live(this, 'forward');
      checkTensor(x, 'x');
      opts = checkOptions(opts, ['out']);
      runtime.checkRank(x.shape, 'x', '[..., inFeatures]');
      return forward(
        runtime,
        () => wasm._linearCheck(state.handle, tensorView(0, x)),
        [[x.data, 'x']],
        ([xp], out) => wasm._linearForward(state.handle, tensorView(xp, x), out),
        undefined,
        { output: opts.out },
        'out',
      ).output;
    }
  }

  return keepClassNames({ MultiheadAttention, SelfAttention, AdditiveAttention, RelativeMultiHeadAttention, GroupedQueryAttention, Linear });
}

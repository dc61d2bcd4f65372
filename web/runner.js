// AttentionRunner: the demo's computation, apart from the worker's messaging so that Node can run
// it too. Embeds a batch, builds each function's masks in its own polarity, runs attention through
// the public API, asking each for weights [N, H, n, m] (H = 1 for the single-head functions), and
// adds the page's mask [N, n, m] (1 = masked) and the fully masked rows. The page averages the
// heads of the sentence it shows (headAverage) and, once it has drawn, verifies the whole result
// with checkResult() (masked weights, row sums, fully masked rows and their outputs). No DOM here.
import { MAX_TOKENS, embed, mulberry32, padBatch } from './embeddings.js';
import { additiveMask, maskedCells, mhaMasks, relativeMask, sdpaMasks } from './masks.js';
import { Generation, headScores } from './model.js';
import { kindNeuron, modelNeuron } from './neuron.js';
import { additiveParameters, multiheadParameters, relativeParameters } from './parameters.js';

/** RelativeMultiHeadAttention's P: relative positions each side; n and m may not exceed it. */
const RELATIVE_P = MAX_TOKENS;

/** A Float32Array / Uint8Array that owns its whole ArrayBuffer, so it can be transferred. */
function own(array) {
  const whole = array.buffer instanceof ArrayBuffer && array.byteOffset === 0 && array.byteLength === array.buffer.byteLength;
  return whole ? array : array.slice();
}

/** Embeds a padded batch into one tensor laid out [N, L, d] (`batchFirst`) or [L, N, d]. */
function embedBatch(tokens, d, batchFirst) {
  const N = tokens.length;
  const L = tokens[0].length;
  const data = new Float32Array(N * L * d);
  tokens.forEach((sentence, b) => {
    if (batchFirst) embed(sentence, d, data, b * L * d, d);
    else embed(sentence, d, data, b * d, N * d);
  });
  return { data, shape: batchFirst ? [N, L, d] : [L, N, d] };
}

const shapeOf = (tensor) => `[${tensor.shape.join(', ')}]`;

/**
 * Runs requests on one package instance, keeping the seeded module last used (rebuilt only when
 * its kind, sizes or seed change) and the module last loaded from a file.
 */
export class AttentionRunner {
  /** @param {import('../dist/index.mjs').Attention} attn  what init() returned */
  constructor(attn) {
    this.attn = attn;
    this.cached = null; // { key, module }
    this.fileModule = null; // { id, module }
    this.model = null; // the trained model (setModel), its head scores and a generation under way
    this.modelError = null;
    this.headScores = null;
    this.generation = null;
    this.neuronInputs = null;
  }

  /** Loads a MultiheadAttention from a file's { id, config, stateDict }; throws the API's error. */
  loadFile({ id, config, stateDict }) {
    const { embedDim, numHeads, ...opts } = config;
    const module = new this.attn.MultiheadAttention(embedDim, numHeads, opts);
    try {
      module.loadStateDict(stateDict);
    } catch (error) {
      module.dispose();
      throw error;
    }
    this.fileModule?.module.dispose();
    this.fileModule = { id, module };
  }

  seededModule(kind, config, seed) {
    const { attn } = this;
    const key = JSON.stringify([kind, config, seed]);
    if (this.cached?.key === key) return this.cached.module;
    this.cached?.module.dispose();
    this.cached = null;
    let module;
    if (kind === 'mha') {
      module = new attn.MultiheadAttention(config.embedDim, config.numHeads);
      module.loadStateDict(multiheadParameters(config, seed));
    } else if (kind === 'additive') {
      module = new attn.AdditiveAttention(config.d, config.d, config.hiddenSize);
      module.loadStateDict(additiveParameters(config, seed));
    } else {
      module = new attn.RelativeMultiHeadAttention(config.heads, config.dModel, { P: RELATIVE_P });
      module.loadStateDict(relativeParameters({ ...config, P: RELATIVE_P }, seed));
    }
    this.cached = { key, module };
    return module;
  }

  /**
   * Takes the trained model (a CharModel) and scores its heads once: induction and previous-token
   * scores on random characters repeated twice (REPEAT_PERIOD of them, then the same again;
   * tests/fixtures/demo_model_fixture.py draws the same ones).
   */
  setModel(model) {
    this.model = model;
    const random = mulberry32(REPEAT_SEED);
    const half = Array.from({ length: REPEAT_PERIOD }, () => REPEAT_ALPHABET[Math.floor(random() * REPEAT_ALPHABET.length)]).join('');
    const ids = model.encode(half + half);
    this.headScores = headScores(model.forward(ids, { needWeights: true }).weights, model.heads, ids.length).flat();
  }

  /**
   * The model's next token after `text`, greedily, through the f16 caches of the generation under
   * way when `text` is where that generation stands (else a new one, prefilled with `text`).
   */
  generate(text) {
    const ids = this.model.encode(text);
    const current = this.generation;
    if (!current || current.ids.length !== ids.length || current.ids.some((id, i) => id !== ids[i])) {
      current?.dispose();
      this.generation = new Generation(this.model, ids, MAX_TOKENS);
    }
    return this.generation.step();
  }

  /**
   * The neuron view's numbers (neuron.js) for { kind: 'model', text, layer, head, query } or, for
   * the other kinds, { kind, request, sentence, head, query }. The model's attention inputs are
   * kept for the last text: moving along the rows reuses them.
   */
  neuron(selection) {
    if (selection.kind !== 'model') return kindNeuron(selection, RELATIVE_P);
    const { text, layer, head, query } = selection;
    if (this.neuronInputs?.text !== text) {
      this.neuronInputs = { text, inputs: this.model.forward(this.model.encode(text)).attentionInputs };
    }
    return modelNeuron(this.model, this.neuronInputs.inputs[layer], layer, head, query);
  }

  /** See compute(). */
  run(request) {
    return request.kind === 'model' ? computeModel(this, request) : compute(this, request);
  }
}

const REPEAT_PERIOD = 100;
const REPEAT_SEED = 2022;
// Random characters of ordinary text: the model has seen every one of them often. (Rare symbols
// would measure how a head copes with what it never saw, not what it does.)
const REPEAT_ALPHABET = 'abcdefghijklmnopqrstuvwxyz ';
const TOP_PREDICTIONS = 5;

/** The `count` most likely next tokens after logits [vocab], with their probabilities. */
function topPredictions(logits, vocab, count) {
  const max = Math.max(...logits);
  const exp = Array.from(logits, (x) => Math.exp(x - max));
  const sum = exp.reduce((a, b) => a + b, 0);
  return exp.map((e, id) => ({ token: vocab[id], p: e / sum }))
    .sort((a, b) => b.p - a.p)
    .slice(0, count);
}

/**
 * The trained model over request.sentences[0] (its characters), every layer's heads as one
 * [1, layers · heads, t, t] result; with request.generate, one more token first (see generate()).
 */
function computeModel(runner, request) {
  const { model } = runner;
  if (!model) throw new Error(runner.modelError ?? 'The trained model is still loading.');
  const started = performance.now();
  const text = request.sentences[0].join('');
  let weights;
  let next;
  let generated = null;
  let forwardMs;
  let tokens;
  if (request.generate) {
    const { id, stepMs } = runner.generate(text);
    const generation = runner.generation;
    generated = model.vocab[id];
    forwardMs = stepMs;
    weights = generation.weights();
    next = generation.next;
    tokens = Array.from(model.decode(generation.ids));
  } else {
    const forwardStarted = performance.now();
    const result = model.forward(model.encode(text), { needWeights: true });
    forwardMs = performance.now() - forwardStarted;
    runner.neuronInputs = { text, inputs: result.attentionInputs }; // the neuron view reads them next
    const t = request.sentences[0].length;
    weights = new Float32Array(model.layers * model.heads * t * t);
    result.weights.forEach((layer, l) => weights.set(layer, l * model.heads * t * t));
    next = result.logits.subarray(-model.vocab.length);
    tokens = request.sentences[0];
  }
  const t = tokens.length;
  const H = model.layers * model.heads;
  const spec = { N: 1, n: t, m: t, causal: true, lengths: null, custom: null };
  const masked = maskedCells(spec);
  const { hidden_size: width, num_attention_heads: heads, num_key_value_heads: kvHeads, head_dim: headDim } = model.config;
  const options = request.generate ? '{ cache, needWeights: true }' : '{ needWeights: true }';
  return {
    kind: 'model',
    tokens: [tokens],
    lengths: [t],
    N: 1,
    H,
    n: t,
    m: t,
    embedDim: width,
    extraKeys: [],
    weights,
    masked,
    outputMaxAbs: null,
    fullyMasked: [],
    weightsShape: [1, H, t, t],
    outputShape: [1, request.generate ? 1 : t, width],
    call: `new GroupedQueryAttention(${width}, ${heads}, ${kvHeads}, { headDim: ${headDim} }).forward(x [1, ${request.generate ? 1 : t}, ${width}], ${options}) in each of ${model.layers} layers`,
    forwardMs,
    phases: {},
    workerMs: performance.now() - started,
    model: {
      layers: model.layers,
      heads: model.heads,
      scores: runner.headScores,
      next: topPredictions(next, model.vocab, TOP_PREDICTIONS),
      generated,
    },
  };
}

/** Describes a boolean mask for the page: "[2, 7, 7] (1 = may attend)". */
function maskNote(mask, meaning) {
  return mask ? `${shapeOf(mask)} (1 = ${meaning})` : null;
}

function callNote(name, args, options) {
  const opts = Object.entries(options).filter(([, v]) => v !== null && v !== false).map(([k, v]) => `${k}: ${v}`);
  return `${name}(${args.join(', ')}${opts.length ? `, { ${opts.join(', ')} }` : ''})`;
}

/**
 * request: { kind: 'sdpa' | 'mha' | 'additive' | 'relative', sentences: string[][] (unpadded),
 *            config, seed, fileId (mha from a file, or null), causal, padding,
 *            custom: Uint8Array [L * L] or null }
 */
function compute(runner, request) {
  const { attn } = runner;
  const started = performance.now();
  const { kind, sentences, config, seed } = request;
  const tokens = padBatch(sentences);
  const N = tokens.length;
  const L = tokens[0].length;
  const lengths = sentences.map((s) => s.length);
  const spec = { N, n: L, m: L, causal: request.causal, lengths: request.padding ? lengths : null, custom: request.custom };

  let raw; // what the API returned
  let forwardMs;
  let H = 1;
  let extraKeys = [];
  let outputLayout;
  let call;
  let E;
  let forwardStarted;
  const time = (run) => {
    forwardStarted = performance.now();
    raw = run();
    forwardMs = performance.now() - forwardStarted;
  };

  if (kind === 'sdpa') {
    E = config.d;
    const x = embedBatch(tokens, E, true);
    const { isCausal, attnMask } = sdpaMasks(spec);
    time(() => attn.scaledDotProductAttention(x, x, x, { isCausal, attnMask, needWeights: true }));
    outputLayout = 'Nn';
    call = callNote('attn.scaledDotProductAttention', [`x ${shapeOf(x)}`, 'x', 'x'],
      { isCausal, attnMask: maskNote(attnMask, 'may attend'), needWeights: true });
  } else if (kind === 'mha') {
    const { fileModule } = runner;
    const module = request.fileId === null
      ? runner.seededModule(kind, config, seed)
      : fileModule?.id === request.fileId ? fileModule.module : null;
    if (!module) throw new Error('The loaded file is no longer available; load it again.');
    H = module.numHeads;
    E = module.embedDim;
    const q = embedBatch(tokens, module.embedDim, module.batchFirst);
    const k = module.kdim === module.embedDim ? q : embedBatch(tokens, module.kdim, module.batchFirst);
    const v = module.vdim === module.kdim ? k : embedBatch(tokens, module.vdim, module.batchFirst);
    const { isCausal, attnMask } = mhaMasks(spec);
    // The package's own helper gives MultiheadAttention's polarity (1 = padding).
    const keyPaddingMask = request.padding ? attn.masks.keyPadding(lengths, L) : null;
    time(() => module.forward(q, k, v, { isCausal, attnMask, keyPaddingMask, averageAttnWeights: false }));
    if (module.addBiasKV) extraKeys.push('bias_k');
    if (module.addZeroAttn) extraKeys.push('zero');
    outputLayout = module.batchFirst ? 'Nn' : 'nN';
    const args = [`query ${shapeOf(q)}`, k === q ? 'query' : `key ${shapeOf(k)}`, v === q ? 'query' : v === k ? 'key' : `value ${shapeOf(v)}`];
    call = callNote(`new MultiheadAttention(${E}, ${H}).forward`, args, {
      isCausal,
      keyPaddingMask: maskNote(keyPaddingMask, 'padding'),
      attnMask: maskNote(attnMask, 'not allowed'),
      averageAttnWeights: 'false',
    });
  } else if (kind === 'additive') {
    const module = runner.seededModule(kind, config, seed);
    E = config.d;
    const x = embedBatch(tokens, E, true);
    const attnMask = additiveMask(spec);
    time(() => module.forward(x, x, x, { attnMask }));
    outputLayout = 'Nn';
    call = callNote(`new AdditiveAttention(${E}, ${E}, ${config.hiddenSize}).forward`, [`x ${shapeOf(x)}`, 'x', 'x'],
      { attnMask: maskNote(attnMask, 'masked out') });
  } else if (kind === 'relative') {
    const module = runner.seededModule(kind, config, seed);
    H = config.heads;
    E = config.dModel;
    const x = embedBatch(tokens, E, false);
    const mask = relativeMask(spec);
    // Per-head planes, as the views read them: no transpose of labml's [n, m, B, heads].
    time(() => module.forward(x, x, x, { mask, weightsLayout: 'BHnm' }));
    outputLayout = 'nN';
    call = callNote(`new RelativeMultiHeadAttention(${H}, ${E}, { P: ${RELATIVE_P} }).forward`, [`x ${shapeOf(x)}`, 'x', 'x'],
      { mask: mask ? `${shapeOf(mask)} (0 = masked out)` : null, weightsLayout: "'BHnm'" });
  } else {
    throw new Error(`Unknown attention kind ${JSON.stringify(kind)}.`);
  }

  const n = L;
  const m = L + extraKeys.length;
  const phases = { beforeForward: forwardStarted - started, forward: forwardMs };
  let mark = performance.now();
  const phase = (name, value) => {
    const now = performance.now();
    phases[name] = now - mark;
    mark = now;
    return value;
  };
  const weights = phase('weights', own(raw.weights.data));
  const masked = phase('mask', maskedCells(spec, m));
  const outputMaxAbs = phase('output', rowMaxAbs(raw.output, N, n, outputLayout));
  const fullyMasked = phase('fullyMasked', fullyMaskedRows(masked, N, n, m));
  return {
    kind,
    tokens,
    lengths,
    N,
    H,
    n,
    m,
    embedDim: E,
    extraKeys,
    weights,
    masked,
    outputMaxAbs,
    fullyMasked,
    weightsShape: raw.weights.shape,
    outputShape: raw.output.shape,
    call,
    forwardMs,
    phases,
    workerMs: performance.now() - started,
  };
}

/** max |output| per query row, [N, n], from an output laid out [N, n, E] ('Nn') or [n, N, E] ('nN'). */
function rowMaxAbs(output, N, n, layout) {
  const E = output.shape.at(-1);
  const result = new Float32Array(N * n);
  for (let b = 0; b < N; b++) {
    for (let i = 0; i < n; i++) {
      const start = (layout === 'Nn' ? b * n + i : i * N + b) * E;
      let max = 0;
      for (let e = 0; e < E; e++) {
        const a = Math.abs(output.data[start + e]);
        if (Number.isNaN(a)) {
          max = NaN; // never hidden behind a number
          break;
        }
        if (a > max) max = a;
      }
      result[b * n + i] = max;
    }
  }
  return result;
}

/** Sentence b's mean over heads of weights [N, H, plane], as [plane]. */
export function headAverage(weights, b, H, plane) {
  const average = new Float32Array(plane);
  const first = b * H * plane;
  for (let k = 0; k < plane; k++) {
    let sum = 0;
    for (let h = 0, at = first + k; h < H; h++, at += plane) sum += weights[at];
    average[k] = sum / H;
  }
  return average;
}

/** [b, i] of every query row whose keys are all masked. */
function fullyMaskedRows(masked, N, n, m) {
  const rows = [];
  for (let b = 0; b < N; b++) {
    for (let i = 0; i < n; i++) {
      const row = masked.subarray((b * n + i) * m, (b * n + i + 1) * m);
      if (row.every((cell) => cell === 1)) rows.push([b, i]);
    }
  }
  return rows;
}

/**
 * What the page promises, checked on a result of run(): masked weights are 0, other rows sum to 1,
 * fully masked rows have zero weights and a zero output; nonFinite counts rows whose sum is NaN or
 * infinite.
 */
export function checkResult({ weights, masked, outputMaxAbs, fullyMasked, N, H, n, m }) {
  let maxMaskedWeight = 0;
  let maxRowSumError = 0;
  let nonFinite = 0;
  for (let b = 0; b < N; b++) {
    for (let i = 0; i < n; i++) {
      const maskRow = (b * n + i) * m;
      let open = 0;
      for (let j = 0; j < m; j++) open += 1 - masked[maskRow + j];
      const want = open === 0 ? 0 : 1;
      for (let h = 0; h < H; h++) {
        const row = ((b * H + h) * n + i) * m;
        let sum = 0;
        for (let j = 0; j < m; j++) {
          const w = weights[row + j];
          sum += w;
          if (masked[maskRow + j] === 1) {
            const a = w < 0 ? -w : w;
            if (a > maxMaskedWeight) maxMaskedWeight = a;
          }
        }
        if (!Number.isFinite(sum)) nonFinite++;
        const error = sum > want ? sum - want : want - sum;
        if (error > maxRowSumError) maxRowSumError = error;
      }
    }
  }
  let maxFullyMaskedOutput = 0;
  for (const [b, i] of fullyMasked) maxFullyMaskedOutput = Math.max(maxFullyMaskedOutput, outputMaxAbs[b * n + i]);
  return { maxMaskedWeight, maxRowSumError, maxFullyMaskedOutput, nonFinite };
}

// AttentionRunner: the demo's computation, apart from the worker's messaging so that Node can run
// it too. Embeds a batch, builds each function's masks in its own polarity, runs attention through
// the public API, asking each for weights [N, H, n, m] (H = 1 for the single-head functions), and
// adds the page's mask [N, n, m] (1 = masked) and the fully masked rows. The page averages the
// heads of the sentence it shows (headAverage) and, once it has drawn, verifies the whole result
// with checkResult() (masked weights, row sums, fully masked rows and their outputs). The trained
// model's text may be 2048 characters long: its weights come as pictures of the window on screen
// (grid.js), downsampled to at most 512 cells a side and checked here. No DOM here.
import { MAX_TOKENS, OPENED_MAX_TOKENS, embed, mulberry32, padBatch } from './embeddings.js';
import { MAX_GRID, binsOf, cellSpan, columnsOf, gridOf, pooledPlanes } from './grid.js';
import { additiveMask, maskedCells, mhaMasks, relativeMask, sdpaMasks } from './masks.js';
import { checkCausalRows, checkRows, noFindings } from './checks.js';
import { openModelFolder } from './model-folder.js';
import { HeadScorer, headScores, inductionTargets, repeatTargets, repeatedRandomIds } from './scores.js';
import { aboutParts, kindNeuron, modelNeuron } from './neuron.js';
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

/** a, then b, in one Float32Array. */
function joined(a, b) {
  const out = new Float32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

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
    this.model = null; // the trained model (setModel) and its head scores
    this.modelError = null;
    this.headScores = null;
    this.opened = null; // the Hugging Face model folder opened (openFolder) and its head scores
    this.lastForward = null; // see modelForward()
    this.neuronLayer = null; // see neuronParts()
    this.spare = null; // pictures the page gave back (worker.js's 'recycle'), for pictureArray()
    this.ablationBaseline = null; // the last unablated logits (ablate())
    this.opens = 0; // folders opened: each gets its own grid, even with a name and shape seen before
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
   * Takes the trained model (model.js's TrainedModel) and scores its heads once: induction and
   * previous-token scores on random characters repeated twice (REPEAT_PERIOD of them, then the same
   * again; tests/fixtures/demo_model_fixture.py draws the same ones).
   */
  async setModel(trained) {
    this.model = trained;
    this.neuronLayer = null;
    this.lastForward = null;
    const random = mulberry32(REPEAT_SEED);
    const half = Array.from({ length: REPEAT_PERIOD }, () => REPEAT_ALPHABET[Math.floor(random() * REPEAT_ALPHABET.length)]).join('');
    const ids = trained.encode(half + half);
    const { attentions } = await trained.model.forward(ids, { outputAttentions: true, logits: 'none' });
    this.headScores = headScores(attentions.map((layer) => layer.data), trained.model.heads, repeatTargets(ids.length, REPEAT_PERIOD)).flat();
  }

  /**
   * Opens a Hugging Face model folder's files (model-folder.js), disposing the last one first so
   * that its memory is back before the new one loads. Its heads are scored on the standard
   * sequence (scoreStandard) after the first text's forward, not before it: a streamed model
   * reads all its weights for a forward, and the text's first layer should not wait for them.
   * → { name, modelType, layers, heads, dtype, streamed, standardLength }
   */
  async openFolder(files, onProgress) {
    await this.opened?.folder.dispose();
    this.opened = null;
    this.neuronLayer = null; // it holds the last model: its tables would stay in memory
    this.ablationBaseline = null; // and its logits
    const folder = await openModelFolder(this.attn, files, { onProgress });
    const { model } = folder;
    const length = Math.min(50, Math.floor(model.maxPositions / 2));
    this.opened = { folder, standardScores: null, standardLength: length, openId: ++this.opens };
    return { name: folder.name, modelType: model.modelType, layers: model.layers, heads: model.heads, dtype: model.dtype, streamed: model.streamed, standardLength: length };
  }

  /**
   * The opened model's head scores on the standard sequence: random tokens from the middle of the
   * vocabulary (special tokens sit at its ends), repeated once, as long as the model's positions
   * allow (up to 2 × 50). Once a model; onProgress hears the forward's layers.
   */
  async scoreStandard(signal, onProgress) {
    const { folder: { model }, standardLength: length } = this.opened;
    const ids = repeatedRandomIds(Math.floor(0.1 * model.vocabSize), Math.ceil(0.9 * model.vocabSize), length);
    const { attentions } = await model.forward(ids, { outputAttentions: true, logits: 'none', signal, onProgress });
    this.opened.standardScores = headScores(attentions.map((layer) => layer.data), model.heads, repeatTargets(ids.length, length)).flat();
  }

  /**
   * What the page needs of the opened model to lay out its grid: { name, openId, modelType,
   * layers, heads, scores (null until scoreStandard), standardLength }.
   */
  openedInfo() {
    const { folder: { name, model }, standardScores, standardLength, openId } = this.opened;
    return { name, openId, modelType: model.modelType, layers: model.layers, heads: model.heads, scores: standardScores, standardLength };
  }

  /** The trained model's next token after `text`, greedily, through f16 KV caches (model.generate). */
  async generate(text) {
    const ids = this.model.encode(text);
    const [id] = (await this.model.model.generate(ids, { maxNewTokens: 1, cacheDtype: 'f16', eosTokenId: [] })).slice(ids.length);
    return id;
  }

  /**
   * The trained model's forward over `text`, kept for the next request on the same text (a zoom,
   * the neuron view): { text, length, ids, hidden: each layer's input [1, t, width] (forward's
   * hiddenStates), next: the next-token logits }.
   */
  async modelForward(text) {
    const last = this.lastForward;
    if (last?.text === text) return last;
    const ids = this.model.encode(text);
    const { logits, hiddenStates } = await this.model.model.forward(ids, { outputHiddenStates: true });
    this.lastForward = { text, length: ids.length, ids, hidden: hiddenStates, next: logits.data };
    return this.lastForward;
  }

  /**
   * The neuron view's numbers (neuron.js) for { kind: 'model' | 'opened', text, layer, head, query }
   * or, for the other kinds, { kind, request, sentence, head, query }.
   */
  async neuron(selection) {
    const { kind, text, layer, head, query } = selection;
    if (kind !== 'model' && kind !== 'opened') return kindNeuron(this.attn, selection, RELATIVE_P);
    const { parts, model } = await this.neuronParts(kind, text, layer);
    return modelNeuron(parts, layer, head, query, aboutParts(model));
  }

  /**
   * What layer `layer` of the trained (`kind` 'model') or the opened model ('opened') reads over
   * `text` (the package's model.project), from its forward's hidden states: the trained model's
   * kept forward, or for the opened model a forward of its own on the first neuron asked of a text
   * (every layer's input, held only once the neuron view is used). The last layer's parts are kept
   * for the next query pointed at.
   */
  async neuronParts(kind, text, layer) {
    if (kind === 'opened' && !this.opened) throw new Error('No model folder is open.');
    const model = kind === 'model' ? this.model.model : this.opened.folder.model;
    const kept = this.neuronLayer;
    if (kept?.model === model && kept.text === text && kept.layer === layer) return kept;
    let hidden;
    if (kind === 'model') hidden = (await this.modelForward(text)).hidden;
    else if (this.opened.forward?.text === text) hidden = this.opened.forward.hidden;
    else {
      hidden = (await model.forward(this.textModel(kind, text).ids, { logits: 'none', outputHiddenStates: true })).hiddenStates;
      this.opened.forward = { text, hidden };
    }
    this.neuronLayer = { model, text, layer, parts: await model.project(hidden[layer], { layer }) };
    return this.neuronLayer;
  }

  /**
   * What removing `heads` ([[layer, head]], 0-based) does to the trained ('model') or the opened
   * model's ('opened') predictions over `text` (the package's headMask, HF's head_mask): per token,
   * the change in log-probability of the token that follows it, and at `position` (a token, or
   * null for the last) the most likely next tokens before and after.
   * → { tokens, delta [t − 1], position, before, after: [{ token, p }], loss: { before, after } }
   */
  async ablate({ kind, text, heads, position }) {
    const { model, ids, tokens, vocab } = this.textModel(kind, text);
    if (model.modelType === 'bert') throw new Error('Head ablation follows next-token predictions; BERT predicts masked tokens.');
    const t = ids.length;
    const limit = Math.floor(ABLATION_LOGITS / model.vocabSize);
    if (t > limit) throw new Error(`Ablation reads every position's logits: at most ${limit} tokens of this model's ${model.vocabSize}-word vocabulary; the text is ${t}.`);
    if (t < 2) throw new Error('Ablation needs two tokens or more: what each token predicts is the token after it.');
    const mask = new Float32Array(model.layers * model.heads).fill(1);
    for (const [layer, head] of heads) mask[layer * model.heads + head] = 0;
    const kept = this.ablationBaseline;
    const before = kept?.model === model && kept.text === text ? kept.logits : (await model.forward(ids, { logits: 'all' })).logits.data;
    this.ablationBaseline = { model, text, logits: before };
    const after = (await model.forward(ids, { logits: 'all', headMask: { data: mask, shape: [model.layers, model.heads] } })).logits.data;
    const vocabSize = model.vocabSize;
    const row = (logits, i) => logits.subarray(i * vocabSize, (i + 1) * vocabSize);
    const delta = new Float32Array(t - 1);
    let lossBefore = 0, lossAfter = 0;
    for (let i = 0; i < t - 1; i++) {
      const was = logProbability(row(before, i), ids[i + 1]), is = logProbability(row(after, i), ids[i + 1]);
      delta[i] = is - was;
      lossBefore -= was / (t - 1);
      lossAfter -= is / (t - 1);
    }
    const at = position === null || position >= t ? t - 1 : position;
    return {
      tokens, delta, position: at, loss: { before: lossBefore, after: lossAfter },
      before: topPredictions(row(before, at), vocab, TOP_PREDICTIONS), after: topPredictions(row(after, at), vocab, TOP_PREDICTIONS),
    };
  }

  /**
   * The model `kind` names and `text` as its ids and tokens, cut as its views cut them (`length`:
   * the tokens before the cut, `limit` where it is), and its vocabulary's strings. A text the
   * opened model generated keeps the ids it generated (its tokenizer might split the text
   * otherwise).
   */
  textModel(kind, text) {
    if (kind === 'model') {
      if (!this.model) throw new Error(this.modelError ?? 'The trained model is still loading.');
      const ids = this.model.encode(text);
      return { model: this.model.model, ids, tokens: Array.from(text), vocab: this.model.vocab };
    }
    if (!this.opened) throw new Error('No model folder is open.');
    const { model, tokenizer } = this.opened.folder;
    const vocab = { length: model.vocabSize, at: (id) => tokenizer.id_to_token(id) ?? `[${id}]` };
    const kept = this.opened.generated;
    const { ids, tokens } = kept?.text === text ? { ids: kept.ids, tokens: Array.from(kept.ids, vocab.at) } : tokenizer.encode(text);
    const limit = Math.min(OPENED_MAX_TOKENS, model.maxPositions);
    return { model, ids: ids.slice(0, limit), tokens: tokens.slice(0, limit), vocab, length: ids.length, limit };
  }

  /**
   * The most likely next tokens after token `position` of `text` for the trained ('model') or the
   * opened decoder ('opened'): a forward of the tokens up to it (a causal model's prediction there
   * reads nothing later). → [{ token, p }]
   */
  async predict({ kind, text, position }) {
    const { model, ids, vocab } = this.textModel(kind, text);
    if (model.modelType === 'bert') throw new Error('BERT predicts masked tokens, not the next one.');
    if (!Number.isInteger(position) || position < 0 || position >= ids.length) throw new Error(`No token ${position}: the text has ${ids.length}.`);
    const { logits } = await model.forward(ids.slice(0, position + 1), { logits: 'last' });
    return topPredictions(logits.data, vocab, TOP_PREDICTIONS);
  }

  /**
   * The opened decoder's greedy next token after `text` (model.generate, f32 KV caches, as
   * transformers' greedy generate): → { text: `text` and the token as the tokenizer decodes it,
   * piece: what the token added, eos: whether it ends the sequence }. The ids are kept for the
   * new text (textModel).
   */
  async generateOpened(text, signal) {
    const { model, ids } = this.textModel('opened', text);
    if (model.modelType === 'bert') throw new Error('BERT is an encoder: it does not generate.');
    if (model.streamed) throw new Error('Generation runs on models that stay in memory; this one is read layer by layer at each step.');
    const limit = generationLimit(model);
    if (ids.length >= limit) throw new Error(`Generation runs up to ${limit} tokens; the text has ${ids.length}.`);
    const all = await model.generate(ids, { maxNewTokens: 1, eosTokenId: [], signal });
    const { tokenizer } = this.opened.folder;
    const decode = (list) => tokenizer.decode(Array.from(list), { skip_special_tokens: false });
    const [before, after] = [decode(ids), decode(all)];
    // What the new token adds to the text as decoded (SentencePiece's decoders write a token's
    // leading space only after another token).
    const piece = after.startsWith(before) ? after.slice(before.length) : decode(all.slice(ids.length));
    const next = all.at(-1);
    const eos = [model.config.eos_token_id ?? model.config.text_config?.eos_token_id ?? []].flat().includes(next);
    this.opened.generated = { text: text + piece, ids: Int32Array.from(all) };
    return { text: text + piece, piece, eos };
  }

  /** An array of `length` zeros for the model's pictures: the page's spare one when it fits. */
  pictureArray(length) {
    const spare = this.spare;
    this.spare = null;
    return spare?.length === length ? spare.fill(0) : new Float32Array(length);
  }

  /**
   * See compute(), computeModel() and computeOpened(); an opened model's run stops at `signal`,
   * tells `onProgress` of each layer done (the package's model.forward options) and gives
   * `onLayer(layer, picture)` each layer's heads as soon as they are computed, pooled to at most
   * LAYER_PICTURE cells a side (pooledPlanes: { weights [heads, rows, cols], masked, rows, cols }).
   */
  async run(request, { signal, onProgress, onLayer } = {}) {
    if (request.kind === 'model') return computeModel(this, request);
    if (request.kind === 'opened') return computeOpened(this, request, { signal, onProgress, onLayer });
    return compute(this, request);
  }
}

const REPEAT_PERIOD = 100;
const REPEAT_SEED = 2022;
// Random characters of ordinary text: the model has seen every one of them often. (Rare symbols
// would measure how a head copes with what it never saw, not what it does.)
const REPEAT_ALPHABET = 'abcdefghijklmnopqrstuvwxyz ';
const TOP_PREDICTIONS = 5;
/** Tokens an opened model generates up to: where each step still shows every weight, within its positions. */
const generationLimit = (model) => Math.min(MAX_TOKENS, model.maxPositions);

// Cells a side of the pictures of each layer sent as it finishes: enough for the grid's thumbnails.
const LAYER_PICTURE = 64;

// Logits one ablation reads at most (twice: before and after), 32 M floats (128 MB) each.
const ABLATION_LOGITS = 1 << 25;

/**
 * The `count` most likely next tokens after logits [vocab], with their probabilities; vocab.at(id)
 * names each id (the trained model's vocabulary string, or the opened model's tokenizer).
 */
function topPredictions(logits, vocab, count) {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const best = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a]).slice(0, count);
  return best.map((id) => ({ token: vocab.at(id), p: Math.exp(logits[id] - max) / sum }));
}

/** log softmax(logits)[id]. */
function logProbability(logits, id) {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  return logits[id] - max - Math.log(sum);
}

// Weights one KVCache.attend returns at most (4 MB): longer windows are computed in chunks of rows,
// each chunk's keys stopping at its last row, so that little of what is copied out is masked.
const CHUNK_WEIGHTS = 1 << 20;
let chunkWeights = null; // modelPictures()' array for them

/**
 * The trained model over request.sentences[0] (its characters), every layer's heads as one
 * [layers · heads, rows, cols] picture of request.window (grid.js; null = the whole map);
 * with request.generate, one more character first (AttentionRunner#generate), then the same.
 */
async function computeModel(runner, request) {
  const trained = runner.model;
  if (!trained) throw new Error(runner.modelError ?? 'The trained model is still loading.');
  const { model } = trained;
  const started = performance.now();
  let text = request.sentences[0].join('');
  let generated = null;
  const phases = {}; // ms: the generated character, the forward (or a text seen before: none) and the pictures of the window
  if (request.generate) {
    const length = request.sentences[0].length; // characters (text.length counts UTF-16 units)
    if (length >= MAX_TOKENS) throw new Error(`Generation runs up to ${MAX_TOKENS} characters; the text has ${length}.`);
    generated = trained.vocab[await runner.generate(text)];
    text += generated;
    phases.generate = performance.now() - started;
  }
  const forwardStarted = performance.now();
  const forward = await runner.modelForward(text);
  const picturesStarted = performance.now();
  phases.forward = picturesStarted - forwardStarted;
  const grid = gridOf(forward.length, forward.length, request.generate ? null : request.window);
  // The scores on the text need every row: a window of all of them scores them once per text.
  const scorer = forward.textScores || grid.row > 0 || grid.rowEnd < forward.length
    ? null : new HeadScorer(model.layers, model.heads, inductionTargets(forward.ids));
  const pictures = await modelPictures(runner.attn, model, forward, grid, scorer, runner.pictureArray(model.layers * model.heads * grid.rows * grid.cols));
  if (scorer) forward.textScores = scorer.scores().flat();
  phases.pictures = performance.now() - picturesStarted;
  const forwardMs = performance.now() - forwardStarted;
  const next = forward.next;
  const tokens = Array.from(text);
  const textScores = forward.textScores ?? null;
  const t = tokens.length;
  const H = model.layers * model.heads;
  const { hidden_size: width } = model.config;
  return {
    kind: 'model',
    tokens: [tokens],
    lengths: [t],
    N: 1,
    H,
    n: t,
    m: t,
    grid: pictures.grid,
    embedDim: width,
    extraKeys: [],
    weights: pictures.weights,
    masked: causalCells(pictures.grid),
    checks: pictures.checks,
    outputMaxAbs: null,
    fullyMasked: [],
    weightsShape: [1, H, pictures.grid.rows, pictures.grid.cols],
    outputShape: [1, t, width],
    call: `model.forward(ids [${t}], { outputHiddenStates: true }), then per layer model.project(hiddenStates[layer], { layer }) and KVCache.attend(q, { needWeights: true })${request.generate ? `, after model.generate(ids, { maxNewTokens: 1, cacheDtype: 'f16' })` : ''}`,
    forwardMs,
    phases,
    workerMs: performance.now() - started,
    model: {
      name: 'the trained model',
      modelType: model.config.model_type,
      layers: model.layers,
      heads: model.heads,
      scores: runner.headScores,
      standardLength: REPEAT_PERIOD,
      textScores,
      next: topPredictions(next, trained.vocab, TOP_PREDICTIONS),
      generated,
    },
  };
}

// An opened model's pictures of every head at once stay within this many bytes: a 1B model's 512
// heads at 512 × 512 cells would hold 512 MiB in the worker, and the page's last ones as much again.
const PICTURES_BYTES = 128 * 2 ** 20;

/** Cells a side of the pictures of `planes` heads: MAX_GRID, fewer for models of many heads. */
export const pictureCells = (planes) => Math.min(MAX_GRID, Math.floor(Math.sqrt(PICTURES_BYTES / (4 * planes))));

/**
 * The opened Hugging Face model (openFolder) over request.text, tokenized as HF's default encode
 * does (special tokens included), cut at OPENED_MAX_TOKENS with a note; with request.generate,
 * one greedy token first (AttentionRunner#generateOpened). Up to a picture's cells (pictureCells
 * tokens) every layer's heads as [layers · heads, t, t], whole, written there by the forward (one
 * copy of them in the worker); past them, pictures of request.window, each layer's weights
 * max-pooled into them as the forward finishes the layer (its onLayer: one layer's weights held,
 * each streamed layer read once). Each layer's heads go to `onLayer` as the layer finishes (see
 * run()). A decoder's next-token predictions come from the last position's
 * logits; the forward's hidden states are kept for the neuron view (neuronParts).
 */
async function computeOpened(runner, request, { signal, onProgress, onLayer }) {
  if (!runner.opened) throw new Error('No model folder is open.');
  const started = performance.now();
  const { folder: { model, name }, standardLength } = runner.opened;
  let text = request.text;
  let generated = null;
  const phases = {};
  if (request.generate) {
    generated = await runner.generateOpened(text, signal);
    text = generated.text;
    phases.generate = performance.now() - started;
  }
  const { ids, tokens, vocab, length, limit } = runner.textModel('opened', text);
  if (ids.length === 0) throw new Error('The text has no tokens.');
  const note = length > limit ? `The text is ${length} tokens; the viewer reads its first ${limit} (${limit === OPENED_MAX_TOKENS ? 'the viewer\'s limit' : 'the model\'s max_position_embeddings'}).` : null;
  const t = ids.length;
  const { heads } = model;
  const H = model.layers * heads;
  const causal = model.modelType !== 'bert';
  if (runner.opened.forward?.text !== text) runner.opened.forward = null; // another text's inputs (neuronParts)
  const forwardStarted = performance.now();
  const wanted = { outputHiddenStates: true, logits: causal ? 'last' : 'none', signal };
  let pictures, textScores, logits;
  const cellsMax = pictureCells(H);
  const pooled = t > cellsMax;
  if (pooled) {
    // Each layer's weights pooled into the window's cells as the forward finishes the layer (its
    // onLayer): one layer's [heads, t, t] held at a time, each streamed layer read once.
    const grid = gridOf(t, t, request.window, cellsMax);
    const scorer = grid.row > 0 || grid.rowEnd < t ? null : new HeadScorer(model.layers, heads, inductionTargets(ids));
    const masked = causalCells(grid);
    const cells = grid.rows * grid.cols;
    pictures = { grid, weights: runner.pictureArray(H * cells), checks: noFindings(), masked };
    const pool = (layer, { attentions: { data } }) => {
      poolCausalRows(pictures, heads, scorer, layer, (h) => data.subarray((h * t + grid.row) * t, (h * t + grid.rowEnd) * t), grid.row, grid.rowEnd - grid.row, t);
      onLayer?.(layer, pooledPlanes(pictures.weights.subarray(layer * heads * cells, (layer + 1) * heads * cells), heads, grid.rows, grid.cols, masked, LAYER_PICTURE));
    };
    const forward = await model.forward(ids, { ...wanted, onProgress, onLayer: pool });
    logits = forward.logits;
    runner.opened.forward = { text, hidden: forward.hiddenStates };
    textScores = scorer ? scorer.scores().flat() : null;
  } else {
    // Every layer's weights straight into the one array the views read; each layer's go to the
    // page as soon as it is done (the forward's progress follows each layer).
    const weights = runner.pictureArray(H * t * t);
    const grid = gridOf(t, t);
    const masked = causal ? causalCells(grid) : new Uint8Array(t * t);
    const layerDone = (progress) => {
      onProgress?.(progress);
      const layer = progress.layer - 1;
      onLayer?.(layer, pooledPlanes(weights.subarray(layer * heads * t * t, (layer + 1) * heads * t * t), heads, t, t, masked, LAYER_PICTURE));
    };
    const forward = await model.forward(ids, { ...wanted, outputAttentions: true, out: { attentions: weights }, onProgress: layerDone });
    logits = forward.logits;
    runner.opened.forward = { text, hidden: forward.hiddenStates };
    const checks = noFindings();
    for (let h = 0; h < H; h++) checkRows(weights.subarray(h * t * t, (h + 1) * t * t), masked, t, t, checks);
    pictures = { grid, weights, checks, masked };
    textScores = headScores(forward.attentions.map((layer) => layer.data), heads, inductionTargets(ids)).flat();
  }
  const forwardMs = performance.now() - forwardStarted;
  // The first text of a model: its heads' standard scores after its own grid (see openFolder).
  if (runner.opened.standardScores === null) {
    const scoring = performance.now();
    await runner.scoreStandard(signal, onProgress && ((progress) => onProgress({ ...progress, phase: 'scoring' })));
    phases.standardScores = performance.now() - scoring;
  }
  const { grid, weights, checks } = pictures;
  return {
    kind: 'opened',
    tokens: [tokens],
    lengths: [t],
    N: 1,
    H,
    n: t,
    m: t,
    grid,
    embedDim: heads * model.headDim,
    extraKeys: [],
    weights,
    masked: pictures.masked,
    checks,
    outputMaxAbs: null,
    fullyMasked: [],
    weightsShape: [1, H, grid.rows, grid.cols],
    outputShape: [1, t, heads * model.headDim],
    call: (pooled
      ? `${name}: model.forward(ids [${t}], { outputHiddenStates: true, onLayer }), each layer's weights [1, ${heads}, ${t}, ${t}] pooled into the window as the layer finishes`
      : `${name}: model.forward(ids [${t}], { outputAttentions: true, outputHiddenStates: true }), every layer's weights [1, ${heads}, ${t}, ${t}]`)
      + (generated ? ', after model.generate(ids, { maxNewTokens: 1 })' : ''),
    forwardMs,
    phases,
    workerMs: performance.now() - started,
    model: {
      name,
      openId: runner.opened.openId,
      text,
      modelType: model.modelType,
      streamed: model.streamed,
      layers: model.layers,
      heads,
      scores: runner.opened.standardScores,
      standardLength,
      textScores,
      next: logits ? topPredictions(logits.data, vocab, TOP_PREDICTIONS) : null,
      generated: generated?.piece ?? null,
      ended: generated?.eos ?? false,
      generationLimit: generationLimit(model),
      note,
    },
  };
}

/**
 * Every head's weights over `grid` of a causal model's [t, t] map, max-pooled into the grid's
 * cells, from a forward ({ length: t, hidden: its hiddenStates }): per layer, what the layer's
 * attention reads (the package's model.project of its input: q, k and v after QK-norm and RoPE,
 * the layer's scale, soft cap and window), the keys and values in a KVCache, the
 * window's query rows attending chunk by chunk, the cache truncated to the keys up to each chunk's
 * last row (the rest are hidden by the causal mask). Only the window's rows are computed; the
 * checks cover every one of them, and `scorer` (a HeadScorer) takes them when given. `weights`:
 * zeros to pool into. (An opened model's pictures come from its forward instead: computeOpened.)
 * → { grid, weights [layers · heads, rows, cols], checks }
 */
export async function modelPictures(attn, model, forward, grid, scorer = null, weights = new Float32Array(model.layers * model.heads * grid.rows * grid.cols)) {
  const { heads, kvHeads, headDim: d } = model;
  const pictures = { grid, weights, checks: noFindings() };
  const windowRows = grid.rowEnd - grid.row;
  // attend() writes each chunk into these, reused chunk after chunk (and the weights' from one
  // update to the next): fresh arrays would cost more than the attention (memory to fault in).
  const out = { weights: chunkWeights ??= new Float32Array(CHUNK_WEIGHTS), output: new Float32Array(heads * windowRows * d) };
  const chunkQueries = new Float32Array(heads * windowRows * d); // a chunk's rows of every head
  const cache = new attn.KVCache({ heads: kvHeads, headDim: d, maxLength: forward.length });
  try {
    for (let layer = 0; layer < model.layers; layer++) {
      const { query, key, value, scale, softcap, window } = await model.project(forward.hidden[layer], { layer });
      const scoring = { scale, ...(softcap === null ? {} : { softcap }), ...(window === null ? {} : { window }) };
      cache.reset().append(key, value);
      for (let end = grid.rowEnd; end > grid.row;) {
        const count = Math.min(end - grid.row, Math.max(1, Math.floor(CHUNK_WEIGHTS / (heads * end))));
        const first = end - count;
        for (let h = 0; h < heads; h++) {
          const rows = (h * forward.length + first) * d;
          chunkQueries.set(query.data.subarray(rows, rows + count * d), h * count * d);
        }
        cache.truncate(end);
        const queries = { data: chunkQueries.subarray(0, heads * count * d), shape: [1, heads, count, d] };
        const chunk = cache.attend(queries, { needWeights: true, out, ...scoring }).weights.data;
        poolCausalRows(pictures, heads, scorer, layer, (h) => chunk.subarray(h * count * end, (h + 1) * count * end), first, count, end);
        end = first;
      }
    }
  } finally {
    cache.dispose();
  }
  return pictures;
}

/**
 * Rows first … first + count − 1 (inside the window of `pictures.grid`) of every head of `layer`
 * of a causal map, planeOf(head) [count, m] over keys 0 … m − 1: checked, scored by `scorer` when
 * given, and max-pooled into their cells of pictures.weights [layers · heads, rows, cols].
 */
function poolCausalRows({ grid, weights, checks }, heads, scorer, layer, planeOf, first, count, m) {
  const cells = grid.rows * grid.cols;
  const rowBin = binsOf(first, count, grid.row, grid.step);
  // Keys past m are not in the planes: their cells stay 0 (and masked).
  const columns = columnsOf(grid.col, Math.min(grid.colEnd, m), grid.step);
  for (let h = 0; h < heads; h++) {
    const plane = planeOf(h);
    const picture = layer * heads + h;
    checkCausalRows(plane, count, m, first, checks, { rowBin, columns, cols: grid.cols, out: weights.subarray(picture * cells, (picture + 1) * cells) });
    scorer?.add(layer, h, plane, first, count, m);
  }
}

/** The causal mask over `grid`'s cells: 1 where every key of the cell comes after every query. */
function causalCells(grid) {
  const masked = new Uint8Array(grid.rows * grid.cols);
  for (let r = 0; r < grid.rows; r++) {
    const [, lastQuery] = cellSpan(grid.row, grid.rowEnd, grid.step, r);
    for (let c = 0; c < grid.cols; c++) masked[r * grid.cols + c] = cellSpan(grid.col, grid.colEnd, grid.step, c)[0] > lastQuery ? 1 : 0;
  }
  return masked;
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
    const softcap = config.softcap ?? undefined;
    time(() => attn.scaledDotProductAttention(x, x, x, { isCausal, attnMask, softcap, needWeights: true }));
    outputLayout = 'Nn';
    call = callNote('attn.scaledDotProductAttention', [`x ${shapeOf(x)}`, 'x', 'x'],
      { isCausal, attnMask: maskNote(attnMask, 'may attend'), softcap: config.softcap ?? null, needWeights: true });
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
    grid: gridOf(n, m),
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

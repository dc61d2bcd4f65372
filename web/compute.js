// The worker (worker.js, which computes) and the page's request queue. Requests are coalesced: one
// is computed at a time and only the latest change waits behind it, so dragging a slider or a mask
// never queues stale work. An opened model's run (seconds, layer by layer, for a large model) is
// cancelled by the request that replaces it, and typing into it waits for a short pause first.
// main.js starts it with the functions that read the controls and take each result.
import { $, setState, showError } from './page.js';

// How long typing must pause before an opened model runs the text (ms).
const OPENED_PAUSE_MS = 250;

const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
let nextId = 1;
let inFlight = null; // { id, request, requestedAt }
let pending = null;
export const counts = { requested: 0, computed: 0 }; // published: shows the coalescing at work
const replies = new Map(); // id -> what takes the worker's answer to a 'file' or 'neuron' message
let readRequest = null; // set by startWorker
let takeResult = null;
let onFailure = () => {};
let ready = false; // the worker's package is up
let inputProblem = null; // what is wrong with the controls, until they are fixed
let pause = null; // the timer of an opened model's request waiting for typing to pause

/** What is wrong with the controls (an InputError), or null. */
export const inputError = () => inputProblem;

/** Posts a message with a fresh id and resolves with the worker's reply to it. */
function ask(message, transfer = []) {
  const id = nextId++;
  return new Promise((resolve) => {
    replies.set(id, resolve);
    worker.postMessage({ ...message, id }, transfer);
  });
}

/**
 * Gives the worker back the trained model's pictures once nothing on the page reads them: it pools
 * the next ones into that memory, already in place (fresh memory costs more than the pooling).
 */
export function recycle(weights) {
  worker.postMessage({ type: 'recycle', weights }, [weights.buffer]);
}

/** What removing heads changes: see runner.js ablate(). */
export async function computeAblation(request) {
  const reply = await ask({ type: 'ablate', request });
  if (!reply.ok) throw new Error(reply.message);
  return reply.result;
}

/** The next tokens after a position of a model's text (see runner.js predict()). */
export async function computePrediction(request) {
  const reply = await ask({ type: 'predict', request });
  if (!reply.ok) throw new Error(reply.message);
  return reply.predictions;
}

let layerListener = () => {};
/**
 * Calls `listener(message)` with each layer's pictures of the opened model's run in flight as the
 * layer finishes (worker.js's 'layer' message); a run cancelled since is not heard.
 */
export function onLayerPictures(listener) {
  layerListener = listener;
}

/** The neuron view's numbers for a selection (see runner.js). */
export async function computeNeuron(selection) {
  const reply = await ask({ type: 'neuron', selection });
  if (!reply.ok) throw new Error(reply.message);
  return reply.numbers;
}

/**
 * Opens a Hugging Face model folder's files in the worker → its reply (model-folder.js). The worker
 * stops the run under way first: its result is of the model being replaced.
 */
export function openModel(files) {
  if (inFlight) inFlight.cancelled = true;
  return ask({ type: 'openModel', files: Array.from(files) });
}

let progressListener = () => {};
/** Calls `listener({ phase, done, total })` while the worker reads a model folder. */
export function onModelProgress(listener) {
  progressListener = listener;
}

// An opened model's run, layer by layer, in the busy line.
function showRunProgress({ phase, done, total }) {
  const what = phase === 'scoring' ? 'Scoring the heads on the standard sequence' : 'Computing';
  $('#busy').textContent = `${what}… layer ${done} of ${total}`;
}

/** Loads a MultiheadAttention in the worker from a file's { config, stateDict } → its reply. */
export function sendFile(config, stateDict) {
  return ask({ type: 'file', config, stateDict }, Object.values(stateDict).map((t) => t.data.buffer));
}

function send(job) {
  inFlight = job;
  $('#busy').textContent = 'Computing…';
  worker.postMessage({ type: 'compute', id: job.id, request: job.request });
}

/** Queues `job`: sent now, or parked behind the one in flight, which is cancelled if it is an opened model's run. */
function enqueue(job) {
  counts.requested++;
  setState('busy');
  if (!inFlight) return send(job);
  pending = job;
  if (inFlight.request.kind === 'opened' && !inFlight.cancelled) {
    inFlight.cancelled = true;
    worker.postMessage({ type: 'cancel', id: inFlight.id });
  }
}

/**
 * Reads the controls into a request and sends it, or parks it behind the one in flight. With
 * `generate`, the model adds one character first (through the worker's KV caches). An opened
 * model's run waits for a pause in typing unless `whole`: an edit made at once (a paste, a drop).
 */
export function requestUpdate(generate = false, { whole = false } = {}) {
  if (!ready) return;
  let request;
  try {
    request = { ...readRequest(), generate };
  } catch (error) {
    // Nothing valid to compute: drop the waiting request; a result still in flight is drawn, but
    // the error stays up until the controls are fixed.
    pending = null;
    inputProblem = error;
    showError(error);
    return;
  }
  inputProblem = null;
  const job = { id: nextId++, request, requestedAt: performance.now() };
  clearTimeout(pause);
  // Typing into an opened model waits for a pause; a generation step or a paste does not.
  if (request.kind !== 'opened' || generate || whole) return enqueue(job);
  setState('busy');
  pause = setTimeout(() => enqueue(job), OPENED_PAUSE_MS);
}

function afterJob() {
  inFlight = null;
  if (pending) {
    const next = pending;
    pending = null;
    send(next);
  }
}

/** Whether no request is being computed (a result is final once nothing newer is on its way). */
export function isIdle() {
  return inFlight === null;
}

/**
 * Starts the worker's package instance with `threads`: `onReady(message)` runs when it is up,
 * `read()` builds a request from the controls, `accept(job, result)` takes each result and
 * `failed()` runs when a request fails.
 */
export function startWorker({ threads, onReady, read, accept, failed }) {
  readRequest = read;
  takeResult = accept;
  onFailure = failed;
  worker.addEventListener('message', ({ data: message }) => {
    if (message.type === 'ready') {
      ready = true;
      onReady(message);
      requestUpdate();
    } else if (message.type === 'fatal') {
      showError(new Error(`The package could not start: ${message.message}`));
    } else if (message.type === 'progress') {
      // An opened model's layers are named with their pictures ('layer'): one frame a layer.
      if (message.phase === 'forward' && inFlight?.request.kind === 'opened') return;
      if (message.phase === 'forward' || message.phase === 'scoring') showRunProgress(message);
      else progressListener(message);
    } else if (message.type === 'layer') {
      if (inFlight?.id !== message.id || inFlight.cancelled) return;
      showRunProgress({ phase: 'forward', done: message.layer + 1, total: message.model.layers });
      layerListener(message);
    } else if (['file', 'neuron', 'model', 'ablate', 'predict'].includes(message.type)) {
      replies.get(message.id)?.(message);
      replies.delete(message.id);
    } else if (message.type === 'result' || message.type === 'error') {
      const job = inFlight;
      counts.computed++;
      afterJob();
      if (!job || job.id !== message.id || job.cancelled) return;
      if (message.type === 'error') {
        onFailure();
        if (!inFlight) showError(new Error(message.message));
        return;
      }
      takeResult(job, message.result);
    }
  });
  worker.addEventListener('error', (event) => {
    event.preventDefault();
    showError(new Error(`The worker failed: ${event.message || 'it could not be loaded'}`));
  });
  worker.postMessage({ type: 'init', threads });
}

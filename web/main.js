// The demo page: reads the controls, asks the worker (worker.js, which imports the package's public
// entry exactly as a user would) for attention weights, and draws them on canvases. This file
// wires the views (controls-view, heatmap-view with the neuron view, generation-view, export-view,
// engine-view, model-view, ablation-view) to the request queue (compute.js) and publishes each
// result; an opened model's layers are drawn in the grid as they finish (showLayer).
//
// For tests the page publishes its last result on the DOM: after every update
// `document.body.dataset.state` is 'ready' (or 'busy' while work is outstanding, 'error' on
// failure) and the JSON data block <script type="application/json" id="attention-result"> holds
//   { seq, kind, maskKind, customCells, tokens: [N][n], lengths, heads, shape: [N, H, n, m],
//     grid: { row, col, rowEnd, colEnd, step, rows, cols } (grid.js: the tokens the weights cover,
//     step a cell), weights: [N*H*rows*cols] | null, masked: [N*rows*cols] (1 = masked) | null,
//     outputMaxAbs: [N*n] | null, zoom,
//     fullyMasked: [[b, i]], checks, view, features, build, forwardMs, workerMs, updateMs,
//     requests: { requested, computed }, model: { layers, heads, scores, next, generated,
//     generating } | null, ... }
// (weights, masked and outputMaxAbs are null above 131072 weights, to keep long updates fast; the
// checks are computed over every weight computed: all of them, or the model's window's rows). The heatmap's geometry is in its data-grid
// attribute: { left, top, cell } in CSS px. A JSON data block is never executed, so the CSP
// (no inline scripts) allows it.
import { checkResult } from './checks.js';
import { counts, inputError, isIdle, onLayerPictures, recycle, startWorker } from './compute.js';
import { bindControls, currentRequest, fileName } from './controls-view.js';
import { engineInfo, showFeatures, showTimes } from './engine-view.js';
import { bindExport, forgetDownloads } from './export-view.js';
import { bindGeneration, followQuery, onTyped, showModel, stillGenerating, stopGeneration, syncRepeatButton } from './generation-view.js';
import { bindHeatmap, guide, resetZoom, show, showLayer, viewState, zoomWindow } from './heatmap-view.js';
import { bindModelView } from './model-view.js';
import { bindAblation, showAblation } from './ablation-view.js';
import { $, customCells, setState, showError } from './page.js';

const PUBLISH_LIMIT = 1 << 17;

const published = $('#attention-result');
let shown = null; // the result on screen: the worker's result plus { request, id, updateMs }

function accept(job, result) {
  const previous = shown;
  shown = { ...result, request: job.request, id: job.id };
  if (previous && (previous.kind !== shown.kind || previous.model?.name !== shown.model?.name)) forgetDownloads();
  show(shown);
  // The views now read the new result: a model's last pictures go back to the worker.
  if (previous?.kind === 'model' || previous?.kind === 'opened') recycle(previous.weights);
  shown.updateMs = performance.now() - job.requestedAt;
  showTimes(shown);
  showModel(shown);
  showAblation(shown);
  if (inputError()) {
    showError(inputError());
  } else {
    $('#error').hidden = true;
    $('.view-body').classList.remove('stale');
  }
  // The checks read every weight (33 MB at 512 tokens and 16 heads): they run once the picture has
  // been painted (the task after the next frame), then the result is published and the page is ready.
  // The model's pictures come with the checks the worker made on the weights they were pooled from.
  const drawn = shown;
  requestAnimationFrame(() => setTimeout(() => {
    if (shown !== drawn) return; // a newer result replaced this one
    drawn.checks ??= checkResult(drawn);
    publish();
    if (!inputError() && isIdle()) setState('ready');
  }, 0));
}

function publish() {
  const r = shown;
  const small = r.weights.length <= PUBLISH_LIMIT;
  const { features, build, crossOriginIsolated } = engineInfo();
  const view = viewState();
  published.textContent = JSON.stringify({
    seq: r.id,
    kind: r.kind,
    maskKind: r.request.maskKind,
    causal: r.request.causal,
    padding: r.request.padding,
    customCells: customCells(r.request.custom, r.n),
    tokens: r.tokens,
    lengths: r.lengths,
    extraKeys: r.extraKeys,
    heads: r.H,
    embedDim: r.embedDim,
    shape: [r.N, r.H, r.n, r.m],
    grid: r.grid,
    zoom: view.zoom,
    weights: small ? Array.from(r.weights) : null,
    masked: small ? Array.from(r.masked) : null,
    outputMaxAbs: small && r.outputMaxAbs ? Array.from(r.outputMaxAbs) : null,
    model: r.model ? { ...r.model, generating: stillGenerating() } : null,
    fullyMasked: r.fullyMasked,
    checks: r.checks ?? null, // null until the checks after drawing have run
    weightsShape: r.weightsShape,
    outputShape: r.outputShape,
    call: r.call,
    config: r.request.config,
    seed: r.request.seed,
    weightsSource: r.request.fileId !== null ? `file ${fileName() ?? ''}`.trim() : r.kind === 'sdpa' ? 'none' : 'seeded',
    view: { sentence: view.sentence, head: view.head },
    features,
    build,
    crossOriginIsolated,
    forwardMs: r.forwardMs,
    workerMs: r.workerMs,
    workerPhases: r.phases,
    updateMs: r.updateMs,
    requests: { ...counts },
  });
}

function main() {
  const params = new URLSearchParams(location.search);
  const guided = bindControls(params, {
    onEdit(what) {
      guide(false);
      if (what === 'text') onTyped();
      // A zoom names positions of one kind's tokens (words, characters, a tokenizer's tokens).
      else resetZoom();
      syncRepeatButton();
    },
  });
  bindGeneration();
  bindHeatmap({ onSentence: publish, onQuery: followQuery, guided });
  onLayerPictures(showLayer);
  bindExport();
  bindModelView();
  bindAblation();
  // ?threads=1 compares against the single-threaded build.
  const threads = Number(params.get('threads') ?? 2);
  startWorker({
    threads: Number.isInteger(threads) && threads >= 1 ? threads : 2,
    read: () => currentRequest(zoomWindow()),
    accept,
    failed: stopGeneration,
    onReady: showFeatures,
  });
}

window.addEventListener('unhandledrejection', (event) => showError(event.reason));
main();

// Opening your own model: a Hugging Face model folder (config.json, tokenizer.json and the
// .safetensors weights), chosen with the folder input or dropped on the page (folders or files).
// The worker opens it (runner.js openFolder) and it becomes the kind "Your model": its heads are
// shown as the trained model's are, a layers × heads grid beside the heatmap (heatmap-view.js).
// This view owns the folder field (#model-panel); its data-state is 'empty', 'busy', 'ready' or
// 'error', and its data-memory the worker's package stats() (JSON) once a folder is opened or
// refused.
import { openModel, onModelProgress, requestUpdate } from './compute.js';
import { setOpenedModel } from './controls-view.js';
import { guide, resetZoom } from './heatmap-view.js';
import { $ } from './page.js';

/** Every file under a dropped entry (a folder's files, recursively), as File objects. */
async function filesOf(entry) {
  if (entry.isFile) return [await new Promise((resolve, reject) => entry.file(resolve, reject))];
  const reader = entry.createReader();
  const files = [];
  // readEntries returns a folder's entries in batches, then an empty one.
  for (let batch = await readBatch(reader); batch.length; batch = await readBatch(reader)) {
    for (const child of batch) files.push(...await filesOf(child));
  }
  return files;
}

const readBatch = (reader) => new Promise((resolve, reject) => reader.readEntries(resolve, reject));

/** The files a drop carries: dropped folders are read through their entries. */
async function droppedFiles(dataTransfer) {
  const entries = Array.from(dataTransfer.items ?? [], (item) => item.webkitGetAsEntry?.()).filter(Boolean);
  if (!entries.length) return Array.from(dataTransfer.files);
  return (await Promise.all(entries.map(filesOf))).flat();
}

export function bindModelView() {
  const panel = $('#model-panel');
  const status = $('#model-status');
  const progress = $('#model-progress');
  const input = $('[data-testid="open-model"]');

  const setStatus = (phase, message) => {
    panel.dataset.state = phase;
    status.textContent = message;
    status.classList.toggle('error', phase === 'error');
  };

  onModelProgress(({ phase, done, total }) => {
    progress.hidden = false;
    progress.max = total;
    progress.value = done;
    if (phase === 'loading') setStatus('busy', `Packing the weights: layer ${done} of ${total}`);
    else setStatus('busy', `Reading the weights' headers (${(total / 2 ** 20).toFixed(1)} MiB of weights)`);
  });

  async function open(files) {
    if (!files.length) return;
    setStatus('busy', `Opening ${files.length} files…`);
    // The worker disposes the last model before it reads the next: it is gone either way.
    setOpenedModel(null);
    const reply = await openModel(files);
    progress.hidden = true;
    panel.dataset.memory = JSON.stringify(reply.memory);
    if (!reply.ok) {
      setStatus('error', `This folder cannot be opened: ${reply.message}.`);
    } else {
      const { name, modelType, layers, heads, dtype, streamed } = reply;
      setOpenedModel({ name, modelType, layers, heads, dtype });
      guide(false);
      const read = streamed ? ', read layer by layer from the files at each update' : '';
      setStatus('ready', `${name} (${modelType}, ${dtype}${read}): ${layers} layers × ${heads} heads. Type your text above.`);
    }
    resetZoom();
    requestUpdate();
  }

  input.addEventListener('change', () => {
    open(Array.from(input.files));
    input.value = '';
  });
  // A folder dropped anywhere on the page.
  document.addEventListener('dragover', (event) => {
    if (!event.dataTransfer.types.includes('Files')) return;
    event.preventDefault();
    document.body.classList.add('dropping');
  });
  document.addEventListener('dragleave', (event) => {
    if (event.relatedTarget === null) document.body.classList.remove('dropping');
  });
  document.addEventListener('drop', async (event) => {
    if (!event.dataTransfer.types.includes('Files')) return;
    event.preventDefault();
    document.body.classList.remove('dropping');
    open(await droppedFiles(event.dataTransfer));
  });
  setStatus('empty', 'No model open yet.');
}

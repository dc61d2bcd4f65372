// `node bench/page.mjs --model FOLDER | NAME`: a checkpoint folder opened in the demo page's viewer
// in Chromium, timed as a user sees it, beside the model bench's roofline (bench/open.mjs). The
// header of bench/page.mjs says what it measures and docs/performance.md how to run it.
import { copyFile, mkdtemp, open, readdir, readFile, rm, statfs } from 'node:fs/promises';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Tokenizer } from '@huggingface/tokenizers';

import { openBrowser, openDemo } from '../tests/browser/chromium.js';
import { CONFIGS, linearGflops, paramsOf, partsOf, readRate, rooflineMs, sizesOf, writeCheckpoint } from './open.mjs';
import { columnTable, report } from './report.mjs';

const MIB = 2 ** 20;
// The goals of issue #36 (docs/performance.md): 200 words from the folder's input to the first
// layer's cells and to the whole grid; a run within 1.5 × the roofline; the renderer under 2 GiB.
const FIRST_LAYER_GOAL_MS = 5_000, GRID_GOAL_MS = 60_000, ROOFLINE_GOAL = 1.5, PSS_GOAL_MIB = 2048;
// The viewer's limit on an opened model's text (web/embeddings.js's OPENED_MAX_TOKENS).
const LONG_TOKENS = 2048;
// Where a generated checkpoint takes its tokenizer: a fixture's (the viewer pads the vocabulary past it).
const TOKENIZER_FIXTURE = fileURLToPath(new URL('../tests/fixtures/models/llama-gqa/', import.meta.url));
// Linear's rate is taken over this many rows, as the model bench's (bench/open.mjs) is.
const LINEAR_ROWS = 256;

/**
 * The tensors of a folder's safetensors files as bench/open.mjs's writeCheckpoint describes them
 * (name → { shape, kind, dtype, layer, begin, end }), for partsOf; and its largest file, for readRate.
 */
async function folderTensors(folder) {
  const tensors = new Map();
  let largest = { file: null, size: -1 };
  for (const name of (await readdir(folder)).filter((file) => file.endsWith('.safetensors')).sort()) {
    const file = path.join(folder, name);
    const handle = await open(file, 'r');
    try {
      const size = Buffer.alloc(8);
      await handle.read(size, 0, 8, 0);
      const headerBytes = Number(size.readBigUInt64LE(0));
      const json = Buffer.alloc(headerBytes);
      await handle.read(json, 0, headerBytes, 8);
      const { __metadata__: _, ...header } = JSON.parse(json.toString('utf8'));
      for (const [tensor, { dtype, shape, data_offsets: [begin, end] }] of Object.entries(header)) {
        const layer = /\.layers\.(\d+)\./.exec(tensor);
        const kind = shape.length === 2 ? (tensor.endsWith('embed_tokens.weight') ? 'embedding' : 'matrix') : tensor.endsWith('bias') ? 'bias' : 'norm';
        tensors.set(tensor, { shape, kind, dtype, layer: layer ? Number(layer[1]) : null, begin: 8 + headerBytes + begin, end: 8 + headerBytes + end });
      }
      const { size: bytes } = await handle.stat();
      if (bytes > largest.size) largest = { file, size: bytes };
    } finally {
      await handle.close();
    }
  }
  return { tensors, file: largest.file };
}

/**
 * `count` words drawn (seeded) from the tokenizer's whole-word tokens (a space marker and letters),
 * so that a word is a token whatever the tokenizer: 200 words are about 200 tokens, as with a real
 * model's tokenizer, where a test fixture's small vocabulary would split ordinary prose into letters.
 */
function wordsOf(tokenizerJson, count, seed) {
  const vocab = Object.keys(tokenizerJson.model?.vocab ?? {}).filter((token) => /^[Ġ▁][a-z]{2,}$/.test(token)).map((token) => token.slice(1)).sort();
  const pool = vocab.length >= 8 ? vocab : ['the', 'cat', 'sat', 'on', 'mat', 'and', 'dog', 'saw', 'rug', 'came'];
  let state = seed;
  return Array.from({ length: count }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return pool[state % pool.length];
  });
}

/** Chromium's renderer processes under this process (their workers run inside them). */
function rendererPids() {
  const children = new Map();
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(Number(pid));
    } catch {
      // gone since the listing
    }
  }
  const renderers = [];
  for (const stack = [...(children.get(process.pid) ?? [])]; stack.length;) {
    const pid = stack.pop();
    stack.push(...(children.get(pid) ?? []));
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) renderers.push(pid);
    } catch {
      // gone since the listing
    }
  }
  return renderers;
}

// Σ over the renderers of the kB figure `pattern` finds in /proc/PID/`file`, in MiB.
function rendererMib(file, pattern) {
  let kib = 0;
  for (const pid of rendererPids()) {
    try {
      kib += Number(pattern.exec(readFileSync(`/proc/${pid}/${file}`, 'utf8'))[1]);
    } catch {
      // gone since the listing
    }
  }
  return kib / 1024;
}

/** Σ PSS (MiB) of the renderers now (smaps_rollup: a walk of their page tables, ~30 ms here). */
const rendererPssMib = () => rendererMib('smaps_rollup', /^Pss:\s+(\d+) kB$/m);

// The renderers' peak RSS is the kernel's own count (VmHWM, restarted through clear_refs before a
// run), read once after it: it bounds their PSS from above and costs the run nothing. PSS, the
// goal's measure, is sampled every 2 s: a walk of the page tables every 250 ms took 11 % of a
// core from a 2-core machine.
function restartRendererPeaks() {
  for (const pid of rendererPids()) {
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, '5');
    } catch {
      // gone since the listing
    }
  }
}

/** Σ peak RSS (MiB) of the renderers since restartRendererPeaks. */
const rendererPeakRssMib = () => rendererMib('status', /^VmHWM:\s+(\d+) kB$/m);

// The rate (GB/s) at which the page reads `file` as a File: Blob slices of 16 MiB through
// byte-stream readers into one buffer (bindings/models/source.js), up to 1 GiB of it.
async function pageReadRate(page, file) {
  await page.evaluate(() => {
    const input = document.createElement('input');
    input.type = 'file';
    input.id = 'bench-read-rate';
    input.hidden = true;
    document.body.append(input);
  });
  await page.setInputFiles('#bench-read-rate', file);
  return page.evaluate(async () => {
    const input = document.getElementById('bench-read-rate');
    const [blob] = input.files;
    const chunk = 16 * 2 ** 20, size = Math.min(blob.size, 2 ** 30);
    let buffer = new ArrayBuffer(chunk);
    const started = performance.now();
    for (let begin = 0; begin < size; begin += chunk) {
      const length = Math.min(chunk, size - begin);
      const reader = blob.slice(begin, begin + length).stream().getReader({ mode: 'byob' });
      for (let done = 0; done < length;) {
        const { value, done: ended } = await reader.read(new Uint8Array(buffer, done, length - done));
        if (ended) break;
        buffer = value.buffer;
        done += value.length;
      }
      reader.releaseLock();
    }
    const gbps = size / ((performance.now() - started) * 1e6);
    input.remove();
    return gbps;
  });
}

// In the page: each change of the grid's layers drawn and each published result, with Date.now().
function recordFill() {
  window.__fill = [];
  const heads = document.querySelector('#heads');
  new MutationObserver(() => window.__fill.push({ at: Date.now(), layers: Number(heads.dataset.layersDone) }))
    .observe(heads, { attributes: true, attributeFilter: ['data-layers-done'] });
  new MutationObserver(() => window.__fill.push({ at: Date.now(), result: true }))
    .observe(document.getElementById('attention-result'), { childList: true, characterData: true, subtree: true });
}

/**
 * Runs `start()` (which changes the page and returns Date.now() at the change) and waits for the
 * opened model's result on `text` with every layer drawn, and the renderers' memory over it: peak
 * PSS (sampled) and peak RSS. → { first_layer_ms, grid_ms, result_ms, pss_mib, rss_mib, result }
 */
async function timedRun(page, text, layers, start, timeoutMs) {
  await page.evaluate(() => { window.__fill.length = 0; });
  restartRendererPeaks();
  let pss = rendererPssMib();
  const sampler = setInterval(() => { pss = Math.max(pss, rendererPssMib()); }, 2000);
  let t0;
  try {
    t0 = await start();
    await page.waitForFunction(({ text, layers }) => {
      const { state } = document.body.dataset;
      if (state === 'error') return true;
      const block = document.getElementById('attention-result').textContent;
      return state === 'ready' && Number(document.querySelector('#heads').dataset.layersDone) === layers && block !== '' && JSON.parse(block).model?.text === text;
    }, { text, layers }, { timeout: timeoutMs, polling: 250 });
  } finally {
    clearInterval(sampler);
  }
  pss = Math.max(pss, rendererPssMib());
  const rss = rendererPeakRssMib();
  if ((await page.evaluate(() => document.body.dataset.state)) === 'error') throw new Error(`the page failed: ${await page.textContent('#error')}`);
  const fill = await page.evaluate(() => window.__fill);
  const firstLayer = fill.find((event) => event.layers >= 1);
  const grid = fill.find((event) => event.layers === layers);
  const published = fill.find((event) => event.result && event.at >= grid.at);
  const result = JSON.parse(await page.textContent('#attention-result'));
  return { first_layer_ms: firstLayer.at - t0, grid_ms: grid.at - t0, result_ms: published.at - t0, pss_mib: pss, rss_mib: rss, result };
}

/**
 * The bench: `target` a folder (config.json, safetensors, tokenizer.json) or a name of
 * bench/open.mjs's CONFIGS (a random-weight bf16 checkpoint of that shape, written under
 * os.tmpdir() and removed at the end). → rows, printed with the goals (report.mjs).
 */
export async function pageModelBench({ model: target, quick, skipLong, json }) {
  const named = Object.hasOwn(CONFIGS, target);
  const words = quick ? 20 : 200;
  const longTokens = quick ? 600 : LONG_TOKENS; // quick: past 512, the pooled pictures' path
  const root = named ? await mkdtemp(path.join(os.tmpdir(), 'attention-wasm-page-')) : null;
  const cleanUp = () => (root ? rm(root, { recursive: true, force: true }) : Promise.resolve());
  for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => cleanUp().finally(() => process.exit(130)));
  const rows = [], goals = [], notes = [];
  try {
    let folder, config, tensors, file;
    if (named) {
      config = quick ? { ...CONFIGS[target], num_hidden_layers: 2 } : CONFIGS[target];
      // bf16: 2 bytes a parameter, and a gigabyte of margin, as bench/open.mjs asks.
      const { bavail, bsize } = await statfs(root);
      const need = 2 * paramsOf(config) + 2 ** 30;
      if (bavail * bsize < need) throw new Error(`${target}'s checkpoint needs ${(need / 1e9).toFixed(1)} GB with a margin; ${os.tmpdir()} has ${(bavail * bsize / 1e9).toFixed(1)} GB free`);
      folder = path.join(root, target);
      const checkpoint = await writeCheckpoint(folder, config);
      for (const name of ['tokenizer.json', 'tokenizer_config.json']) await copyFile(path.join(TOKENIZER_FIXTURE, name), path.join(folder, name));
      ({ tensors, file } = checkpoint);
      console.log(`${target}${quick ? ' (2 layers)' : ''}: random bf16 weights, ${(checkpoint.bytes / 1e9).toFixed(2)} GB written in ${root} (removed at the end), tokenizer.json of ${path.relative(process.cwd(), TOKENIZER_FIXTURE)}`);
    } else {
      folder = path.resolve(target);
      const text = await readFile(path.join(folder, 'config.json'), 'utf8').catch(() => null);
      if (text === null) throw new Error(`--model: expected a checkpoint folder (with config.json) or one of ${Object.keys(CONFIGS).join(', ')}, got ${JSON.stringify(target)}`);
      config = JSON.parse(text);
      ({ tensors, file } = await folderTensors(folder));
    }
    const label = named ? `${target}${quick ? ' (2 layers)' : ''}` : path.basename(folder);
    const tokenizerJson = JSON.parse(await readFile(path.join(folder, 'tokenizer.json'), 'utf8'));
    const tokenizerConfig = JSON.parse(await readFile(path.join(folder, 'tokenizer_config.json'), 'utf8').catch(() => '{}'));
    const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    const text = (count, seed) => wordsOf(tokenizerJson, count, seed).join(' ');
    const [openText, runText] = [text(words, 1), text(words, 2)];
    let longWords = longTokens;
    while (tokenizer.encode(text(longWords, 3)).ids.length < longTokens) longWords += 64;
    const longText = text(longWords, 3);

    // The roofline's rates, measured before Chromium starts: the read rate of the (largest)
    // safetensors file and our Linear's rate on the model's MLP, on the page's 2 threads.
    // partsOf reads the Llama layout's sizes and names (bench/open.mjs's checkpoints).
    const roofline = Boolean(config.hidden_size && config.intermediate_size && tensors.has(sizesOf(config).tied ? 'model.embed_tokens.weight' : 'lm_head.weight'));
    let gbps = null, gflops = null;
    if (roofline) {
      gbps = await readRate(file);
      const { init } = await import('../dist/index.mjs');
      const attn = await init({ threads: 2 });
      const { hidden, inner } = sizesOf(config);
      // The dtype the viewer holds the matrices in: as stored (writeCheckpoint's are BF16).
      const stored = [...tensors.values()].find((tensor) => tensor.kind === 'matrix').dtype ?? 'BF16';
      const dtype = { F32: 'f32', F16: 'f16', BF16: 'bf16' }[stored];
      gflops = linearGflops(attn, { hidden, inner, dtype, tokens: LINEAR_ROWS, runs: quick ? 1 : 3 });
      attn.dispose();
      console.log(`read rate ${gbps.toFixed(2)} GB/s; our Linear ${gflops.toFixed(1)} GFLOP/s (${dtype}, ${LINEAR_ROWS} rows, 2 threads)`);
    } else {
      notes.push(`${label}: no roofline (partsOf needs the Llama layout's config keys and tensor names)`);
    }

    const browser = await openBrowser();
    try {
      const { page } = browser;
      // The package's warnings (a Blob read started again, say) belong beside the figures.
      page.on('console', (message) => {
        if (message.type() === 'warning' && message.text().startsWith('attention-wasm')) notes.push(`page warning: ${message.text()}`);
      });
      await openDemo(page, browser.server);
      const pageGbps = roofline ? await pageReadRate(page, file) : null;
      if (roofline) console.log(`the page reads ${path.basename(file)} as a File at ${pageGbps.toFixed(2)} GB/s`);
      await page.fill('[data-testid="text"]', openText);
      await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 60_000 });
      await page.evaluate(recordFill);
      const layers = config.num_hidden_layers ?? config.n_layer;
      const timeoutMs = 60 * 60_000;
      const setText = (value) => () => page.evaluate((value) => {
        const input = document.querySelector('[data-testid="text"]');
        input.value = value;
        input.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertFromPaste' }));
        return Date.now();
      }, value);
      const scenarios = [
        ['open', openText, async () => {
          const t0 = Date.now();
          await page.setInputFiles('[data-testid="open-model"]', folder);
          return t0;
        }],
        ['text', runText, setText(runText)],
        ...(skipLong ? [] : [['text-long', longText, setText(longText)]]),
      ];
      for (const [scenario, value, start] of scenarios) {
        const run = await timedRun(page, value, layers, start, timeoutMs);
        const tokens = run.result.shape[2];
        const row = {
          impl: 'page-opened-model', model: label, scenario, tokens, threads: 2, layers, heads: run.result.model.heads,
          streamed: run.result.model.streamed ?? null, first_layer_ms: run.first_layer_ms, grid_ms: run.grid_ms, result_ms: run.result_ms,
          pss_mib: run.pss_mib, rss_mib: run.rss_mib, read_gbps: gbps, linear_gflops: gflops,
          roofline_ms: roofline ? rooflineMs(partsOf(config, tensors, tokens), gbps, gflops) : null,
          page_read_gbps: pageGbps, page_roofline_ms: roofline ? rooflineMs(partsOf(config, tensors, tokens), pageGbps, gflops) : null,
        };
        rows.push(row);
        console.log(`  ${scenario}: ${tokens} tokens, first layer ${row.first_layer_ms} ms, grid ${row.grid_ms} ms, renderer PSS ${row.pss_mib.toFixed(0)} MiB, peak RSS ${row.rss_mib.toFixed(0)} MiB`);
      }
      if (browser.errors.length) notes.push(`page errors: ${browser.errors.join('; ')}`);
    } finally {
      await browser.close();
    }

    const table = columnTable([
      ['scenario', 9, (r) => r.scenario, 'left'], ['tokens', 6, (r) => r.tokens], ['streamed', 8, (r) => (r.streamed ? 'yes' : 'no')],
      ['1st layer ms', 12, (r) => r.first_layer_ms.toFixed(0)], ['grid ms', 8, (r) => r.grid_ms.toFixed(0)], ['result ms', 9, (r) => r.result_ms.toFixed(0)],
      ['roofline', 8, (r) => r.roofline_ms?.toFixed(0) ?? '-'], ['÷ roof', 6, (r) => (r.roofline_ms ? (r.grid_ms / r.roofline_ms).toFixed(2) : '-')],
      ['page roof', 9, (r) => r.page_roofline_ms?.toFixed(0) ?? '-'], ['÷ page', 6, (r) => (r.page_roofline_ms ? (r.grid_ms / r.page_roofline_ms).toFixed(2) : '-')],
      ['PSS MiB', 8, (r) => r.pss_mib.toFixed(0)], ['RSS MiB', 8, (r) => r.rss_mib.toFixed(0)],
    ]);
    console.log(`\n${label} in the viewer (Chromium, 2 threads): open = from the folder input (the text of ${words} words; the result comes`);
    console.log('after the heads are scored on the standard sequence); text, text-long = a new text pasted on the open model (from its input');
    console.log('event; a paste runs at once, typing after a 250 ms pause);');
    console.log('grid = every layer drawn; roofline = bench/open.mjs\'s for that many tokens; page roof = the same at the page\'s File read rate;');
    console.log('PSS = the renderers\' peak PSS (their workers inside), sampled every 2 s; RSS = their peak RSS (VmHWM), which bounds PSS from above');
    console.log(table.header());
    for (const row of rows) console.log(table.row(row));
    for (const row of rows) {
      const what = `${label}, ${row.scenario} (${row.tokens} tokens)`;
      if (row.scenario === 'open') {
        goals.push(`${what}: first layer's cells ${row.first_layer_ms} ms after the folder input (goal <= ${FIRST_LAYER_GOAL_MS} ms): ${row.first_layer_ms <= FIRST_LAYER_GOAL_MS ? 'met' : 'missed'}`);
        goals.push(`${what}: whole grid ${row.grid_ms} ms after the folder input (goal <= ${GRID_GOAL_MS} ms): ${row.grid_ms <= GRID_GOAL_MS ? 'met' : 'missed'}`);
      } else if (row.roofline_ms) {
        const ratio = row.grid_ms / row.roofline_ms;
        goals.push(`${what}: whole grid ${row.grid_ms} ms = ${ratio.toFixed(2)} × roofline ${row.roofline_ms.toFixed(0)} ms (goal <= ${ROOFLINE_GOAL}): ${ratio <= ROOFLINE_GOAL ? 'met' : 'missed'}`);
      }
      goals.push(`${what}: renderer PSS ${row.pss_mib.toFixed(0)} MiB (goal < ${PSS_GOAL_MIB} MiB): ${row.pss_mib < PSS_GOAL_MIB ? 'met' : 'missed'}; peak RSS ${row.rss_mib.toFixed(0)} MiB`);
    }
    if (!skipLong && rows.at(-1).tokens < longTokens) notes.push(`text-long: ${rows.at(-1).tokens} tokens, not ${longTokens} (the model's max_position_embeddings?)`);
    goals.push(...notes.map((note) => `note: ${note}`));
  } finally {
    await cleanUp();
  }
  await report(goals, rows, json);
  return rows;
}

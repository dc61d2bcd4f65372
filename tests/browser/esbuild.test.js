// A page bundled with esbuild, as the guide says ("Bundlers and workers"): esbuild copies none of
// the files the package names by new URL('./x', import.meta.url), so the bundle alone cannot fetch
// its wasm; with the package's `attention-*` files copied beside it, the page runs, two threads
// included (scripts/serve.mjs makes it cross-origin isolated). tests/js/esbuild.test.js does the
// same for Node.
import assert from 'node:assert/strict';
import { copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { build } from 'esbuild';

import { openBrowser } from './chromium.js';
import { REPO_ROOT } from '../js/helpers.js';

// Served by the test server, which serves the repository.
const OUT = join(REPO_ROOT, 'build/esbuild-page');

const APP = `import { init } from 'attention-wasm';

const show = (result) => {
  document.getElementById('result').textContent = JSON.stringify(result);
  document.body.dataset.state = result.error ? 'error' : 'ready';
};
try {
  const attn = await init({ threads: 2 });
  const x = { shape: [2, 1], data: Float32Array.of(1, 2) };
  const { output } = attn.scaledDotProductAttention(x, x, x, { isCausal: true });
  show({ build: attn.build, threads: attn.features.threads, output: [...output.data] });
  attn.dispose();
} catch (error) {
  show({ error: error.message });
}
`;

const PAGE = `<!doctype html>
<html lang="en">
  <head><meta charset="utf-8" /><title>esbuild</title><link rel="icon" href="data:," /><script type="module" src="./app.js"></script></head>
  <body data-state="loading"><pre id="result"></pre></body>
</html>
`;

/** Bundles the app into `folder` (under OUT), with the package's run-time files copied beside it or not. */
async function bundle(folder, { copy }) {
  const dir = join(OUT, folder);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'main.mjs'), APP);
  await writeFile(join(dir, 'index.html'), PAGE);
  await build({ entryPoints: [join(dir, 'main.mjs')], bundle: true, platform: 'browser', format: 'esm', outfile: join(dir, 'app.js'), logLevel: 'silent' });
  if (copy) {
    const dist = join(REPO_ROOT, 'dist');
    for (const file of await readdir(dist)) if (file.startsWith('attention-')) await copyFile(join(dist, file), join(dir, file));
  }
}

let browser;

before(async () => {
  await rm(OUT, { recursive: true, force: true });
  await bundle('bare', { copy: false });
  await bundle('copied', { copy: true });
  browser = await openBrowser();
}, { timeout: 60_000 });

after(async () => {
  await browser?.close();
});

async function open(folder) {
  const { page } = browser;
  await page.goto(`${browser.server.url}build/esbuild-page/${folder}/`, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.state !== 'loading', null, { timeout: 60_000 });
  return JSON.parse(await page.textContent('#result'));
}

test('bundled without its files, the page cannot fetch the wasm, and the error names the URL', { timeout: 90_000 }, async () => {
  const { error } = await open('bare');
  assert.match(error ?? '', /could not load attention-\S+\.wasm from http:\/\/\S+\/build\/esbuild-page\/bare\/attention-\S+\.wasm/);
  browser.errors.length = 0; // the failed fetch is logged
});

test('with the attention-* files beside the bundle, the page computes on two threads', { timeout: 90_000 }, async () => {
  const result = await open('copied');
  assert.equal(result.error, undefined, result.error);
  assert.equal(result.threads, 2);
  assert.match(result.build, /^threads/);
  const e2 = Math.exp(2);
  assert.deepEqual(result.output.map((v) => +v.toFixed(5)), [1, +((1 + 2 * e2) / (1 + e2)).toFixed(5)]);
  assert.deepEqual(browser.errors, []);
});

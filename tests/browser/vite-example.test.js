// examples/vite-app built by Vite 7 against the packed tarball (exactly what npm users get), served
// with COOP/COEP and a strict CSP, and checked in headless Chromium: the page and a module worker
// each compute SDPA with init({ threads: 2 }) from Vite's hashed assets.
//
// Vite comes from the npm registry: `npm install` runs in examples/vite-app (its node_modules is
// git-ignored) only when Vite is missing there, so later runs need no network. The app is copied
// to a temp folder whose node_modules holds that Vite (a symlink) and the unpacked tarball.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, rename, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startServer } from '../../scripts/serve.mjs';
import { openBrowser, STEP_TIMEOUT } from './chromium.js';

const run = promisify(execFile);
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = join(REPO_ROOT, 'examples/vite-app');
const NPM_ENV = { ...process.env, npm_config_update_notifier: 'false', npm_config_loglevel: 'error' };

let workDir;
let appDir;
let buildLog;
let browser;
let server;

const exists = (path) => stat(path).then(() => true, () => false);

before(async () => {
  if (!(await exists(join(EXAMPLE, 'node_modules/vite/package.json')))) {
    await run('npm', ['install', '--no-audit', '--no-fund'], { cwd: EXAMPLE, env: NPM_ENV, timeout: 300_000 });
  }
  workDir = await mkdtemp(join(tmpdir(), 'attention-wasm-vite-'));
  const { stdout } = await run('npm', ['pack', '--pack-destination', workDir, '--json'], { cwd: REPO_ROOT, env: NPM_ENV });
  const [{ filename }] = JSON.parse(stdout);

  appDir = join(workDir, 'app');
  await mkdir(join(appDir, 'node_modules'), { recursive: true });
  for (const entry of ['index.html', 'vite.config.js', 'package.json', 'src']) {
    await cp(join(EXAMPLE, entry), join(appDir, entry), { recursive: true });
  }
  await symlink(join(EXAMPLE, 'node_modules/vite'), join(appDir, 'node_modules/vite'), 'dir');
  await run('tar', ['-xzf', join(workDir, filename), '-C', join(appDir, 'node_modules')]);
  await rename(join(appDir, 'node_modules/package'), join(appDir, 'node_modules/attention-wasm'));

  const vite = join(appDir, 'node_modules/vite/bin/vite.js');
  const built = await run(process.execPath, [vite, 'build'], { cwd: appDir, env: { ...process.env, NO_COLOR: '1' }, timeout: 120_000 });
  buildLog = built.stdout + built.stderr;

  server = await startServer({ port: 0, root: join(appDir, 'dist') });
  browser = await openBrowser();
}, { timeout: 400_000 });

after(async () => {
  await browser?.close();
  await server?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

// Emscripten 3.1.6's threads glue still holds its own `new Worker(new URL('attention-threads.worker.js',
// import.meta.url))` (unused: init() passes locateFile). Vite bundles that worker too, and warns that
// its Node-only require('worker_threads') / require('fs') were "externalized". Harmless (that copy
// is never loaded); linking the glue with -sUSE_ES6_IMPORT_META=0 removes the pattern.
const KNOWN_GLUE_WARNING = /^\s*\[plugin vite:resolve\] Module "(worker_threads|fs)" has been externalized for browser compatibility, imported by "[^"]*\/attention-threads\.worker\.js"/;

test('vite build bundles the package without warnings and emits its wasm, worker and glue as assets', async () => {
  const unexpected = buildLog.split('\n').filter((line) => /warn|externalized|error/i.test(line) && !KNOWN_GLUE_WARNING.test(line));
  assert.deepEqual(unexpected, [], `vite build printed:\n${buildLog}`);
  const assets = await readdir(join(appDir, 'dist/assets'));
  for (const name of ['attention-simd', 'attention-scalar', 'attention-threads']) {
    assert.ok(assets.some((file) => file.startsWith(`${name}-`) && file.endsWith('.wasm')), `${name}.wasm emitted: ${assets}`);
  }
  // Copied as files (not inlined as data: URLs): the pthread worker and the glue it imports.
  assert.ok(assets.some((file) => /^attention-threads\.worker-.*\.js$/.test(file)), `worker emitted: ${assets}`);
  assert.ok(assets.some((file) => /^attention-threads-.*\.mjs$/.test(file)), `glue for the worker emitted: ${assets}`);
});

test('the built app computes SDPA in the page and in a module worker, SIMD on 2 threads', { timeout: 40_000 }, async () => {
  const { page, errors } = browser;
  const failed = [];
  page.on('response', (response) => {
    if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
  });
  await page.goto(`${server.url}index.html`, { waitUntil: 'load' });
  await page.waitForFunction(
    () => document.getElementById('page-result').textContent && document.getElementById('worker-result').textContent,
    null,
    { timeout: STEP_TIMEOUT },
  );
  for (const where of ['page', 'worker']) {
    const outcome = JSON.parse(await page.textContent(`#${where}-result`));
    assert.equal(outcome.error, undefined, `${where}: ${outcome.error}`);
    const { result } = outcome;
    assert.equal(result.crossOriginIsolated, true, `${where} is cross-origin isolated`);
    assert.equal(result.features.simd, true, `${where}: features.simd`);
    assert.equal(result.features.threads, 2, `${where}: init({ threads: 2 }) runs 2 threads`);
    for (const name of ['output', 'weights']) {
      result[name].forEach((x, i) => {
        const want = result.expected[name][i];
        assert.ok(Math.abs(x - want) / (1 + Math.abs(want)) <= 2e-5, `${where} ${name}[${i}]: got ${x}, want ${want}`);
      });
    }
  }
  assert.deepEqual(failed, [], 'no failed requests');
  assert.deepEqual(errors, [], 'no console or page errors');
});

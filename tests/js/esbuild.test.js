// An app bundled with esbuild (a devDependency) runs in Node as the guide says ("Bundlers and
// workers"): esbuild copies none of the files the package names by new URL('./x',
// import.meta.url), so the bundle alone fails to find its wasm; the guide's build script, which
// copies the package's run-time files beside the bundle, gives a folder that runs anywhere, two
// threads included; and leaving the package out of the bundle (`external`) works from a project.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';

import { build } from 'esbuild';

import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);

// The guide's build script: its one ```js block that imports esbuild.
async function guideBuildScript() {
  const guide = await readFile(join(REPO_ROOT, 'docs/guide.md'), 'utf8');
  const blocks = [...guide.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]).filter((code) => /from 'esbuild'/.test(code));
  assert.equal(blocks.length, 1, "docs/guide.md has one JS block that imports 'esbuild'");
  return blocks[0];
}

let project; // a user's project: 'attention-wasm' and esbuild installed, "type": "module"

before(async () => {
  project = await mkdtemp(join(tmpdir(), 'attention-wasm-esbuild-'));
  await mkdir(join(project, 'node_modules'));
  await symlink(REPO_ROOT, join(project, 'node_modules/attention-wasm'), 'dir');
  await symlink(join(REPO_ROOT, 'node_modules/esbuild'), join(project, 'node_modules/esbuild'), 'dir');
  // "type": "module" above the bundle is the case where a pthread worker script needs the
  // package's own package.json beside it.
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  await mkdir(join(project, 'examples'));
  await cp(join(REPO_ROOT, 'examples/node.mjs'), join(project, 'examples/node.mjs'));
});

after(async () => {
  if (project) await rm(project, { recursive: true, force: true });
});

/** Runs `script` with Node in `cwd`: { code, stdout, stderr }. */
const node = (args, cwd) => run(process.execPath, args, { cwd, timeout: 60_000 }).then((r) => ({ code: 0, ...r }), (error) => error);

test('bundled without its files, the app cannot find the wasm, and the error says what to pass', { timeout: 60_000 }, async () => {
  await build({ absWorkingDir: project, entryPoints: ['examples/node.mjs'], bundle: true, platform: 'node', format: 'esm', outfile: 'bare/app.mjs', logLevel: 'silent' });
  const { code, stderr } = await node(['bare/app.mjs'], project);
  assert.notEqual(code, 0);
  assert.match(stderr, /could not load attention-\S+\.wasm from file:\/\/\S+\/bare\/attention-\S+\.wasm: ENOENT/);
  assert.match(stderr, /init\(\{ wasmBaseUrl \}\) or init\(\{ wasmBinary \}\)/);
});

test("the guide's build script bundles examples/node.mjs into a folder that runs anywhere, on two threads", { timeout: 120_000 }, async () => {
  const script = join(project, 'build.mjs');
  await writeFile(script, await guideBuildScript());
  const built = await node([script], project);
  assert.equal(built.code, 0, built.stderr);

  // Deployed: the output folder alone, away from node_modules.
  const deployed = await mkdtemp(join(tmpdir(), 'attention-wasm-deployed-'));
  try {
    await cp(join(project, 'build/esbuild-app'), deployed, { recursive: true });
    const bundled = await node(['app.mjs', '--json'], deployed);
    assert.equal(bundled.code, 0, bundled.stderr);
    const unbundled = await node(['examples/node.mjs', '--json'], REPO_ROOT);
    assert.equal(unbundled.code, 0, unbundled.stderr);
    const got = JSON.parse(bundled.stdout);
    assert.equal(got.features.threads, 2, 'the pthread workers started from the copied files');
    assert.deepEqual(got, JSON.parse(unbundled.stdout), 'the bundle computes what the example computes');
  } finally {
    await rm(deployed, { recursive: true, force: true });
  }
});

test("external: ['attention-wasm'] (or packages: 'external') leaves the package to node_modules, where its files are", { timeout: 60_000 }, async () => {
  for (const [folder, options] of [['external', { external: ['attention-wasm'] }], ['packages', { packages: 'external' }]]) {
    await build({ absWorkingDir: project, entryPoints: ['examples/node.mjs'], bundle: true, platform: 'node', format: 'esm', outfile: `${folder}/app.mjs`, logLevel: 'silent', ...options });
    const { code, stdout, stderr } = await node([`${folder}/app.mjs`, '--json'], project);
    assert.equal(code, 0, `${folder}: ${stderr}`);
    assert.equal(JSON.parse(stdout).features.threads, 2, folder);
  }
});

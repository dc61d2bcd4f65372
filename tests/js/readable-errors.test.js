// An uncaught error stays readable. Node prints the line of the bundle an uncaught error was thrown
// from, whole: when dist/index.mjs was minified to one line, that was 54 KB of stderr for any
// uncaught AttentionError (a failing docs block showed the whole bundle). scripts/bundle.mjs keeps
// both bundles in short lines (esbuild's lineLimit; the sizes of the options are measured there).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';

import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);
// esbuild breaks lines at about 160 characters where it can (not inside a string).
const LONGEST_LINE = 1000;

for (const bundle of ['dist/index.mjs', 'dist/models.mjs']) {
  test(`${bundle} is in lines of at most ${LONGEST_LINE} characters`, () => {
    const lines = readFileSync(join(REPO_ROOT, bundle), 'utf8').split('\n');
    assert.ok(lines.length > 100, `${lines.length} lines`);
    const long = lines.map((line, i) => [i + 1, line.length]).filter(([, length]) => length > LONGEST_LINE);
    assert.deepEqual(long, [], 'lines (number, length) longer than the bound');
  });
}

// Scripts that let an AttentionError escape, thrown in each bundle.
const UNCAUGHT = {
  'dist/index.mjs': `import { init } from 'attention-wasm';
const attn = await init();
const t = (...shape) => ({ shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)) });
attn.scaledDotProductAttention(t(2, 4, 64), t(2, 7, 32), t(2, 7, 64));
`,
  'dist/models.mjs': `import { init } from 'attention-wasm';
import { openModel } from 'attention-wasm/models';
await openModel(await init(), 42);
`,
};

for (const [bundle, script] of Object.entries(UNCAUGHT)) {
  test(`an uncaught error thrown in ${bundle} prints a few lines, not the bundle`, { timeout: 30_000 }, async () => {
    // Inside the repository, so that 'attention-wasm' resolves to the package itself.
    const dir = join(REPO_ROOT, 'build/readable-errors');
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `${bundle.replace(/\W/g, '-')}.mjs`);
    writeFileSync(path, script);
    const { code, stderr } = await run(process.execPath, [path], { cwd: REPO_ROOT }).catch((error) => error);
    assert.equal(code, 1);
    assert.match(stderr, /AttentionError: (key|source): expected/);
    assert.match(stderr, new RegExp(`${bundle.replace('.', '\\.')}:\\d+`), 'the bundle is named with a line number');
    assert.ok(stderr.length < 3000, `${stderr.length} bytes of stderr:\n${stderr.slice(0, 500)}`);
  });
}

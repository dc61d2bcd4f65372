// The documentation runs. Every ```js, ```javascript, ```mjs and ```ts block in README.md and
// docs/*.md is one test, named by file and line: it is written to build/doctest/ (inside the
// repository, so `import … from 'attention-wasm'` resolves through the package's own name to
// dist/, as a user's import would) and run with `node`, the repository root as its working
// directory (so data paths such as 'examples/llama_attention.safetensors' work). TypeScript
// blocks are type-checked with the repository's typescript against dist/index.d.mts, then
// stripped of their types (esbuild) and run the same way.
//
// The convention (CONTRIBUTING.md, "Documentation"):
// - A ```text block that follows a code block, with nothing but blank lines between, is that
//   block's output: stdout must equal it (trailing whitespace ignored, line by line).
// - `<!-- excerpt of: path -->` on the line right before a fence: the block is part of that
//   repository file, word for word (checked here), and runs where the file runs: for what Node
//   cannot run as a script, browser-only code (a Worker) and bundler configuration, whose example
//   apps the browser tests run.
//
// JS blocks must also be syntax that Node 20 (the package's floor, engines.node) parses, whichever
// Node runs this test: api.md once said, in prose that nothing ran, that `using attn = await
// init()` disposes, which is a SyntaxError in Node 20's JavaScript; the one block with `using`
// is TypeScript, which passes because its compiler (tsc, and esbuild here) turns `using` into
// try/finally. esbuild, asked for the floor, rewrites the syntax the floor lacks (conservatively:
// a regular expression with the v flag too, which Node 20 has).
//
// It also checks what the docs promise about themselves: the README's length and its two
// commands, and that every link and every file they name stays inside the repository.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, relative, resolve } from 'node:path';
import { before, describe, test } from 'node:test';
import { promisify } from 'node:util';

import { transformSync } from 'esbuild';

import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);
// The oldest Node the package supports, as esbuild names it: 'node20'.
const FLOOR = `node${/\d+/.exec(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).engines.node)[0]}`;
const OUT = join(REPO_ROOT, 'build/doctest');
const RUN_LANGS = new Set(['js', 'javascript', 'mjs', 'ts']);
const EXCERPT = /^<!--\s*excerpt of:\s*(\S+)\s*-->$/;

const DOCS = ['README.md', ...readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
// Files whose links and file names are checked (the docs, and the other top-level pages).
const PAGES = [...DOCS, 'CONTRIBUTING.md', 'CHANGELOG.md'];

/** The fenced blocks of a Markdown file: { lang, line (1-based, the fence), code, excerptOf, output }. */
function codeBlocks(markdown) {
  const lines = markdown.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body = [];
    let j = i + 1;
    while (j < lines.length && !lines[j].trimStart().startsWith(fence)) body.push(lines[j++].slice(indent.length));
    let before = i - 1;
    while (before >= 0 && lines[before].trim() === '') before--;
    const excerptOf = before >= 0 ? EXCERPT.exec(lines[before].trim())?.[1] ?? null : null;
    blocks.push({ lang: lang.toLowerCase(), line: i + 1, code: body.join('\n') + '\n', excerptOf, end: j });
    i = j;
  }
  // A text block right after a code block (blank lines between) is its output.
  for (let k = 0; k + 1 < blocks.length; k++) {
    const [block, next] = [blocks[k], blocks[k + 1]];
    const between = lines.slice(block.end + 1, next.line - 1);
    if (RUN_LANGS.has(block.lang) && next.lang === 'text' && between.every((l) => l.trim() === '')) block.output = next.code;
  }
  return blocks;
}

const trimLines = (text) => text.split('\n').map((l) => l.trimEnd()).join('\n').trimEnd();

// Every runnable block, by file.
const SUITES = DOCS.map((file) => {
  const blocks = codeBlocks(readFileSync(join(REPO_ROOT, file), 'utf8')).filter((b) => RUN_LANGS.has(b.lang));
  const slug = file.replace(/\.md$/, '').replace(/[^\w]+/g, '-');
  return { file, blocks: blocks.map((b) => ({ ...b, name: `${slug}-L${b.line}` })) };
});

before(() => {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
});

// The TypeScript blocks are checked together, once: one tsc run for all of them.
let typeCheck;
function checkTypes() {
  typeCheck ??= (async () => {
    const blocks = SUITES.flatMap((s) => s.blocks.filter((b) => b.lang === 'ts' && !b.excerptOf));
    if (blocks.length === 0) return '';
    const files = blocks.map((b) => {
      const path = join(OUT, `${b.name}.ts`);
      // `export {}` keeps each block a module of its own (top-level await, no shared names).
      writeFileSync(path, `${b.code}\nexport {};\n`);
      return `${b.name}.ts`;
    });
    writeFileSync(join(OUT, 'tsconfig.json'), JSON.stringify({
      extends: '../../tests/types/tsconfig.json',
      compilerOptions: { lib: ['ES2022', 'DOM', 'esnext.disposable'] },
      files,
    }));
    const result = await run('npx', ['--no', '--', 'tsc', '-p', join(OUT, 'tsconfig.json')], {
      cwd: REPO_ROOT,
      env: { ...process.env, npm_config_update_notifier: 'false', npm_config_loglevel: 'error' },
    }).catch((error) => error);
    return result.code ? `${result.stdout}${result.stderr}` : '';
  })();
  return typeCheck;
}

/** The lines of `code` (JavaScript, as esbuild prints it) that esbuild rewrites for the floor: none if it has their syntax. */
function beyondFloor(code) {
  const asIs = transformSync(code, { format: 'esm', target: 'esnext' }).code;
  const lowered = new Set(transformSync(code, { format: 'esm', target: FLOOR }).code.split('\n'));
  return asIs.split('\n').filter((line) => !lowered.has(line));
}

async function script(block) {
  if (block.lang !== 'ts') {
    assert.deepEqual(beyondFloor(block.code), [], `uses syntax ${FLOOR} (engines.node) does not have`);
    return block.code;
  }
  const errors = await checkTypes();
  const own = errors.split('\n').filter((line) => line.includes(`${block.name}.ts`));
  assert.deepEqual(own, [], `tsc:\n${own.join('\n')}`);
  // Compiled for the floor, as tsc compiles for its target (`using` included).
  return transformSync(block.code, { loader: 'ts', format: 'esm', target: FLOOR }).code;
}

for (const { file, blocks } of SUITES) {
  describe(file, { concurrency: 2 }, () => {
    for (const block of blocks) {
      if (block.excerptOf) {
        test(`${file}:${block.line} (${block.lang}) is part of ${block.excerptOf}, word for word`, () => {
          const path = join(REPO_ROOT, block.excerptOf);
          assert.ok(existsSync(path), `${block.excerptOf} exists`);
          assert.ok(readFileSync(path, 'utf8').includes(block.code.trimEnd()), `${file}:${block.line} differs from ${block.excerptOf}`);
        });
        continue;
      }
      test(`${file}:${block.line} (${block.lang})`, { timeout: 60_000 }, async () => {
        const path = join(OUT, `${block.name}.mjs`);
        writeFileSync(path, await script(block));
        const result = await run(process.execPath, [path], { cwd: REPO_ROOT, timeout: 60_000 }).catch((error) => error);
        assert.equal(result.code ?? 0, 0, `${file}:${block.line} failed:\n${result.stderr}`);
        if (block.output !== undefined) assert.equal(trimLines(result.stdout), trimLines(block.output), `${file}:${block.line} printed other output`);
      });
    }
  });
}

test('every JS block in README.md and docs/ runs, or is part of an example that the browser tests run', () => {
  const all = SUITES.flatMap((s) => s.blocks.map((b) => ({ ...b, file: s.file })));
  assert.ok(all.length >= 20, `${all.length} blocks`);
  for (const b of all.filter((b) => b.excerptOf)) assert.match(b.excerptOf, /^examples\/(vite-app|worker|browser)\//, `${b.file}:${b.line}: ${b.excerptOf}`);
  assert.ok(all.filter((b) => b.excerptOf).length <= 6, 'excerpts are for a few blocks only');
});

test('README.md is at most 150 lines, and names the two commands', () => {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  assert.ok(readme.trimEnd().split('\n').length <= 150, `README.md has ${readme.trimEnd().split('\n').length} lines`);
  assert.match(readme, /npm start/);
  assert.match(readme, /npm test/);
});

// GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens.
function anchors(markdown) {
  const out = new Set();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (heading) out.add(heading[1].trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'));
  }
  return out;
}

for (const page of PAGES) {
  test(`${page}: every link and every file it names stays inside the repository and exists`, () => {
    const text = readFileSync(join(REPO_ROOT, page), 'utf8');
    const external = text.match(/\bhttps?:\/\/[^\s)>`'"]+/g)?.filter((url) => !/^http:\/\/(127\.0\.0\.1|localhost)[:/]/.test(url)) ?? [];
    assert.deepEqual(external, [], 'no link leaves the repository');
    const here = dirname(join(REPO_ROOT, page));
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const [path, hash] = target.split('#');
      const file = path ? resolve(here, path) : join(REPO_ROOT, page);
      assert.ok(!relative(REPO_ROOT, file).startsWith('..'), `${target} leaves the repository`);
      assert.ok(existsSync(file), `${target}: no such file`);
      if (hash && file.endsWith('.md')) assert.ok(anchors(readFileSync(file, 'utf8')).has(hash), `${target}: no such heading`);
    }
    // Markdown pages named in the text (`docs/guide.md`, CONTRIBUTING.md) are the repository's own.
    for (const [name] of text.matchAll(/[\w./-]*[\w-]+\.md\b/g)) {
      const candidates = [resolve(here, name), join(REPO_ROOT, normalize(name)), join(REPO_ROOT, 'docs', name)]
        .filter((c) => !relative(REPO_ROOT, c).startsWith('..'));
      assert.ok(candidates.some((c) => existsSync(c)), `${page} names ${name}, which is not in the repository`);
    }
  });
}

// Bundles the ESM layer (bindings/*.js and wasm-feature-detect) into dist/index.mjs, and the
// whole-model layer (bindings/models/) into dist/models.mjs ('attention-wasm/models', which the main
// entry never loads), so that the package imports in browsers and workers with no import map, and
// copies their types beside them.
import { build } from 'esbuild';
import { copyFile, readFile, writeFile } from 'node:fs/promises';

const root = new URL('../', import.meta.url);
const { version } = JSON.parse(await readFile(new URL('package.json', root), 'utf8'));

const options = {
  absWorkingDir: new URL('.', root).pathname,
  bundle: true,
  format: 'esm',
  platform: 'neutral',
  target: 'es2022',
  // The Emscripten glue stays a separate file beside the bundle; node: modules load only in Node.
  external: ['./attention-*.mjs', 'node:*'],
  define: { __ATTENTION_VERSION__: JSON.stringify(version) },
  // Part of the one-thread page's size budget (errors.js's keepClassNames keeps the names users see).
  minify: true,
  // Lines of at most about 160 characters, not one line of 50 KB: Node prints the line an uncaught
  // error was thrown from, whole. Measured (gzipped, level 9), against one line: lineLimit 80
  // +1246 bytes, 120 +967, 160 +727, 200 +605, 500 +278; keeping the whitespace
  // (minifySyntax + minifyIdentifiers) +5.9 KB. Source maps leave the page as it is but add
  // 117 KB to the tarball (45 KB without sourcesContent), past its budget, and Node uses them only
  // with --enable-source-maps.
  lineLimit: 160,
  logLevel: 'warning',
};
for (const [entry, outfile] of [['bindings/index.js', 'dist/index.mjs'], ['bindings/models/index.js', 'dist/models.mjs'], ['bindings/models/reader_worker.js', 'dist/models-reader.mjs']]) {
  await build({ ...options, entryPoints: [entry], outfile });
  // lineLimit breaks long strings with line continuations (a backslash, then a line break) and
  // lines between tokens, and a bundler finds `new URL('./attention-x.wasm', import.meta.url)` only
  // on one line (Vite missed files): the strings and those calls are joined back.
  const path = new URL(outfile, root);
  const code = (await readFile(path, 'utf8')).replaceAll('\\\n', '')
    .replace(/new URL\(\s*("[^"\n]*")\s*,\s*import\s*\.\s*meta\s*\.\s*url\s*\)/g, 'new URL($1,import.meta.url)');
  await writeFile(path, code);
}
await copyFile(new URL('bindings/index.d.ts', root), new URL('dist/index.d.mts', root));
await copyFile(new URL('bindings/models/index.d.ts', root), new URL('dist/models.d.mts', root));
// CommonJS require() gets an error that says the package is ESM only.
await copyFile(new URL('bindings/require.cjs', root), new URL('dist/index.cjs', root));

// `node scripts/minify-glue.mjs FILE.mjs`: minifies an Emscripten glue file in place with esbuild,
// as scripts/bundle.mjs does the bundle. Without Closure (Debian's emscripten has none that runs),
// emcc leaves the glue's names and much of its whitespace: minified, the SIMD build's glue goes
// from 10,000 to about 7,330 bytes gzipped (level 9). Its long line stays long (it was one line of
// 37 KB; esbuild's lineLimit 160 would add 232 bytes): the JS layer checks every value before it
// reaches the glue, so nothing a user does throws there. esbuild renames only the glue's own
// variables, never a property: the wasm exports and the module's options are reached through
// properties, and the glue runs no eval or new Function (-sDYNAMIC_EXECUTION=0).
// CMakeLists.txt runs it after linking each one-thread build.
import { transform } from 'esbuild';
import { readFile, writeFile } from 'node:fs/promises';

const [file] = process.argv.slice(2);
if (!file?.endsWith('.mjs')) {
  console.error('usage: node scripts/minify-glue.mjs FILE.mjs');
  process.exit(2);
}
const { code } = await transform(await readFile(file, 'utf8'), { minify: true, format: 'esm', target: 'es2022' });
await writeFile(file, code);

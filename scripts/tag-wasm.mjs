// `node scripts/tag-wasm.mjs FILE.wasm BUILD`: makes a build say which it is. Right after the
// module's 8-byte header goes a custom section named "attention-wasm" whose payload is the build's
// name ('simd', 'relaxed', 'scalar', 'threads' or 'threads-relaxed'); engines ignore it. The
// builds' imports can agree (the scalar build's module links with the SIMD build's glue), so
// bindings/loader.js reads this section to refuse `init({ wasmBinary })` bytes of another build.
// It runs after every other step that rewrites the file (relax-wasm.mjs drops custom sections),
// and again on a tagged file it replaces the tag.
import { readFileSync, writeFileSync } from 'node:fs';

const NAME = 'attention-wasm';
const BUILDS = ['simd', 'relaxed', 'scalar', 'threads', 'threads-relaxed'];

const [file, build] = process.argv.slice(2);
if (!file || !BUILDS.includes(build)) {
  console.error(`usage: node scripts/tag-wasm.mjs FILE.wasm BUILD (one of ${BUILDS.join(', ')})`);
  process.exit(2);
}

const bytes = readFileSync(file);
if (bytes.readUInt32LE(0) !== 0x6d736100) throw new Error(`${file} is not WebAssembly`);
const encoder = new TextEncoder();
const name = encoder.encode(NAME);
const payload = encoder.encode(build);
const content = [name.length, ...name, ...payload];
// Every size fits one LEB128 byte: the loader reads the section at fixed offsets.
if (content.length >= 128) throw new Error('the tag must stay under 128 bytes');
const section = Uint8Array.from([0, content.length, ...content]);

// An earlier tag (the same file tagged again) is replaced, not stacked.
let rest = bytes.subarray(8);
if (rest[0] === 0 && rest[1] < 128 && rest[2] === name.length &&
    Buffer.from(rest.subarray(3, 3 + name.length)).equals(Buffer.from(name))) {
  rest = rest.subarray(2 + rest[1]);
}
writeFileSync(file, Buffer.concat([bytes.subarray(0, 8), section, rest]));

// native-decode-*: bench/decode.mjs's step built natively (build/native/attention_bench_decode_native,
// bench/decode_native.cpp), a child process that answers one command a line, so that its steps
// are timed in alternation with the wasm rows. Each step reports its own time, measured in the
// child: the pipe's round trip is not part of it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const NATIVE_DECODE_BINARY = fileURLToPath(new URL('../../build/native/attention_bench_decode_native', import.meta.url));

export class NativeDecoder {
  static available() {
    return existsSync(NATIVE_DECODE_BINARY);
  }

  constructor() {
    this.child = spawn(NATIVE_DECODE_BINARY, [], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.answers = [];
    this.waiting = [];
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const resolve = this.waiting.shift();
      if (resolve) resolve(line);
      else this.answers.push(line);
    });
  }

  call(command) {
    this.child.stdin.write(`${command}\n`);
    return this.answers.length ? Promise.resolve(this.answers.shift()) : new Promise((resolve) => this.waiting.push(resolve));
  }

  async ok(command) {
    const answer = await this.call(command);
    if (answer !== 'ok') throw new Error(`native decode: ${command}: ${answer}`);
  }

  /** GB/s of the best sequential read of 64 MiB, natively. */
  async readGbps() {
    return Number(await this.call('read'));
  }

  async threads(count) {
    return Number(await this.call(`threads ${count}`));
  }

  /** A cache `name` of `dtype` holding `past` keys and values; the step appends `step` and attends `query`. */
  async load(name, dtype, context, file, arrays) {
    await writeFile(file, Buffer.concat(arrays.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength))));
    await this.ok(`load ${name} ${dtype} ${context} ${file}`);
  }

  /** One step; resolves to { ownMs } (what measureAlternating records for it). */
  async step(name) {
    const answer = await this.call(`step ${name}`);
    const ownMs = Number(answer);
    if (!Number.isFinite(ownMs)) throw new Error(`native decode: step ${name}: ${answer}`);
    return { ownMs };
  }

  async output(name) {
    return Float32Array.from((await this.call(`output ${name}`)).trim().split(' '), Number);
  }

  async free(name) {
    await this.ok(`free ${name}`);
  }

  close() {
    this.child.stdin.end();
  }
}

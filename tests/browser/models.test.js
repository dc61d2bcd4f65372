// attention-wasm/models in Chromium, where a folder arrives as Files: reads of a megabyte and more
// go through the model's reused read buffers by Blob byte streams (BYOB readers, which transfer
// the buffer from read to read), in a reader worker of the model's own, terminated when the model
// is disposed, or on the calling thread where no worker can start. A model read from Files must
// give what the same bytes give from memory, resident and streamed, call after call.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { browserForFile } from './chromium.js';

const CONFIG = JSON.parse(readFileSync(new URL('../fixtures/models/llama-gqa/config.json', import.meta.url), 'utf8'));

const browser = browserForFile();

test('Files read through byte streams into reused buffers give the bytes\' results, resident and streamed', { timeout: 120_000 }, async () => {
  browser.errors.length = 0;
  // Any page of the server's origin: the package and the writer are imported from it.
  await browser.page.goto(`${browser.server.url}tests/fixtures/models/llama-gqa/config.json`);
  const results = await browser.page.evaluate(async (config) => {
    const { init } = await import('/dist/index.mjs');
    const { openModel } = await import('/dist/models.mjs');
    const { largeLlamaFolder } = await import('/tests/js/checkpoint-writer.js');
    // Counts the byte stream reads made on this thread, and the workers started and ended.
    let byobReads = 0;
    const read = ReadableStreamBYOBReader.prototype.read;
    ReadableStreamBYOBReader.prototype.read = function counted(...args) {
      byobReads++;
      return read.apply(this, args);
    };
    const PageWorker = globalThis.Worker;
    const workers = { started: 0, ended: 0 };
    globalThis.Worker = class CountedWorker extends PageWorker {
      constructor(...args) {
        super(...args);
        workers.started++;
      }
      terminate() {
        workers.ended++;
        super.terminate();
      }
    };
    const attn = await init();
    const bytes = largeLlamaFolder(config);
    const files = [...bytes].map(([name, data]) => new File([data], name));
    const ids = Array.from({ length: 24 }, (_, i) => (i * 7919) % 20000);
    const run = async (source, residentBytes) => {
      const model = await openModel(attn, source, { residentBytes });
      const calls = [];
      for (let call = 0; call < 2; call++) {
        const { logits, attentions } = await model.forward(ids, { outputAttentions: true, logits: 'last' });
        calls.push({ logits: Array.from(logits.data), attentions: attentions.map((a) => Array.from(a.data)) });
      }
      const streamed = model.streamed;
      await model.dispose();
      return { streamed, calls, workers: { ...workers }, byobReads };
    };
    const want = await run(bytes, undefined);
    const got = [await run(files, undefined), await run(files, 0)];
    // Where no worker can start, this thread reads: without Worker, and with a reader script that
    // does not load (a bundler that left it behind), whose worker is ended.
    globalThis.Worker = undefined;
    got.push(await run(files, 0));
    globalThis.Worker = class MissingScriptWorker extends PageWorker {
      constructor(url, opts) {
        super(new URL('/dist/no-such-reader.mjs', location.href), opts);
        workers.started++;
      }
      terminate() {
        workers.ended++;
        super.terminate();
      }
    };
    got.push(await run(files, 0));
    globalThis.Worker = PageWorker;
    attn.dispose();
    return { want, got };
  }, CONFIG);
  assert.deepEqual(results.got.map((r) => r.streamed), [false, true, true, true]);
  // One reader worker a model, ended by dispose() (or when its script fails to load); no byte
  // stream read on this thread while it reads.
  assert.deepEqual(results.got.map((r) => r.workers), [{ started: 1, ended: 1 }, { started: 2, ended: 2 }, { started: 2, ended: 2 }, { started: 3, ended: 3 }]);
  assert.deepEqual(results.got.map((r) => r.byobReads), [0, 0, results.got[2].byobReads, results.got[3].byobReads]);
  assert.ok(results.got[2].byobReads > 0 && results.got[3].byobReads > results.got[2].byobReads, 'this thread read without a worker');
  for (const [i, { calls }] of results.got.entries())
    for (const [call, result] of calls.entries()) assert.deepEqual(result, results.want.calls[0], `model ${i}, call ${call}`);
  assert.deepEqual(browser.errors.filter((error) => error.startsWith('pageerror')), []);
});

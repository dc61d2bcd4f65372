// attention-wasm/models in Chromium, where a folder arrives as Files: reads of a megabyte and more
// go through the model's reused read buffers by Blob byte streams (BYOB readers, which transfer
// the buffer from read to read). A model read from Files must give what the same bytes give from
// memory, resident and streamed, call after call.
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
    // Counts the byte stream reads the model makes.
    let byobReads = 0;
    const read = ReadableStreamBYOBReader.prototype.read;
    ReadableStreamBYOBReader.prototype.read = function counted(...args) {
      byobReads++;
      return read.apply(this, args);
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
      return { streamed, calls };
    };
    const want = await run(bytes, undefined);
    const got = [await run(files, undefined), await run(files, 0)];
    attn.dispose();
    return { byobReads, want, got };
  }, CONFIG);
  assert.ok(results.byobReads > 0, 'the Files were read by byte streams');
  assert.deepEqual(results.got.map((r) => r.streamed), [false, true]);
  for (const [i, { calls }] of results.got.entries())
    for (const [call, result] of calls.entries()) assert.deepEqual(result, results.want.calls[0], `model ${i}, call ${call}`);
  assert.deepEqual(browser.errors.filter((error) => error.startsWith('pageerror')), []);
});

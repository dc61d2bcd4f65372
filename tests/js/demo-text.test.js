// The viewer's running text of a model's tokens (web/page.js tokensAsText) against what the npm
// tokenizer's decode writes for the same ids, for WordPiece (BERT) and byte-level BPE (GPT-2).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { Tokenizer } from '@huggingface/tokenizers';

import { tokensAsText } from '../../web/page.js';

const tokenizerOf = (name) => {
  const read = (file) => JSON.parse(readFileSync(new URL(`../fixtures/models/${name}/${file}`, import.meta.url), 'utf8'));
  return new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
};
const TEXTS = ['The cat sat on the mat. Then the cat sat on the', "Don't stop, it's fine! Really? Yes: 'quoted' words."];

for (const [name, wordPiece] of [['bert', true], ['gpt2', false]]) {
  test(`${name}: the tokens' running text is the tokenizer's decode`, () => {
    const tokenizer = tokenizerOf(name);
    for (const text of TEXTS) {
      const { ids, tokens } = tokenizer.encode(text);
      assert.equal(tokensAsText(tokens, wordPiece).join(''), tokenizer.decode(ids, { skip_special_tokens: false }), text);
    }
  });
}

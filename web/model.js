// The demo's trained model (scripts/train_demo_model.py, web/model/): a two-layer, character-level
// decoder in the Llama layout, opened with the package's openModel like any Hugging Face folder.
// Its tokenizer is its config's `vocab`, one character a token. No DOM: the tests run this file
// under Node.
import { openModel } from '../dist/models.mjs';

export class TrainedModel {
  /** Opens the folder `source` (openModel's: a path, Files or a Map of name → bytes) on `attn`. */
  static async open(attn, source) {
    return new TrainedModel(await openModel(attn, source));
  }

  constructor(model) {
    this.model = model;
    this.vocab = model.config.vocab;
  }

  /** Token ids of `text`: one per character; characters outside the vocabulary become '?'. */
  encode(text) {
    const unknown = this.vocab.indexOf('?');
    return Int32Array.from(text, (c) => {
      const id = this.vocab.indexOf(c);
      return id < 0 ? unknown : id;
    });
  }

  decode(ids) {
    return Array.from(ids, (id) => this.vocab[id]).join('');
  }

  dispose() {
    return this.model.dispose();
  }
}

// The Hugging Face architectures the viewer runs, by config.json's model_type: the decoders
// fromConfig knows (Llama layout, Gemma's sandwich norms, Phi-3's fused MLP, OLMo 2's post-norms),
// GPT-2 and BERT. Each model is made from its parsed config.json and loadSafetensors'
// map, and has forward(ids, { needWeights, logits: 'all' | 'last' | 'none', needInputs,
// weightsInto }) → { logits [t, vocab] (or the last row, or null), attentions: per layer
// [heads, t, t] (views of weightsInto [layers · heads, t, t] when given) | null,
// attentionInputs: per layer [t, width] | null }, attentionParts(input, layer) (the q, k, v the
// layer's attention reads and how it scores them: the neuron view's) and dispose(). No DOM.
import { BertModel } from './bert.js';
import { DECODER_TYPES, DecoderModel } from './decoder.js';
import { Gpt2Model } from './gpt2.js';

export const MODEL_TYPES = [...DECODER_TYPES, 'gpt2', 'bert'];

/** The model `config` describes, its weights from `tensors`; throws naming what it cannot run. */
export function createModel(attn, config, tensors) {
  const type = config?.model_type;
  if (DECODER_TYPES.includes(type)) return new DecoderModel(attn, config, tensors);
  if (type === 'gpt2') return new Gpt2Model(attn, config, tensors);
  if (type === 'bert') return new BertModel(attn, config, tensors);
  throw new Error(`config.json's model_type ${JSON.stringify(type)} is not one the viewer runs (${MODEL_TYPES.join(', ')})`);
}

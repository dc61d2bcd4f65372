// GroupedQueryAttention.fromConfig: a parsed Hugging Face config.json as the block's constructor
// arguments, field by field as transformers (v5) reads them for each family's attention: its
// configuration_*.py defaults and __post_init__, modeling_rope_utils.py's standardize_rope_params,
// and the *Attention class of modeling_*.py. A field that would change attention in a way the
// block cannot follow is an error naming it. Fields passed on as they are, the block checks (and
// fromConfig names its errors by the fields: configError); where config.json has no value, the
// block's own default applies: Hugging Face's (rope_theta's, rms_norm_eps's).
import { AttentionError, describe } from './errors.js';
import { checkNumber, checkOptions } from './validate.js';

// Each family's choices and its config class's defaults (for fields absent from config.json).
const FAMILIES = {
  llama: { bias: 'attention_bias' },
  mistral: { slidingWindow: 'all', defaults: { sliding_window: 4096 } },
  qwen2: { bias: 'qkv', slidingWindow: 'qwen' },
  qwen3: { bias: 'attention_bias', slidingWindow: 'qwen', qkNorm: 'head', defaults: { head_dim: 128 } },
  gemma: { bias: 'attention_bias', defaults: { head_dim: 256 } },
  gemma2: {
    bias: 'attention_bias', slidingWindow: 'alternate', gemma: true, softcap: true,
    defaults: { head_dim: 256, sliding_window: 4096, attn_logit_softcapping: 50.0, query_pre_attn_scalar: 256 },
  },
  gemma3_text: {
    bias: 'attention_bias', slidingWindow: 'pattern', gemma: true, qkNorm: 'head', unitOffset: true,
    defaults: { head_dim: 256, sliding_window: 4096, query_pre_attn_scalar: 256, rope_theta: 1e6, rope_local_base_freq: 1e4 },
  },
  phi3: { slidingWindow: 'all', fused: true, defaults: { original_max_position_embeddings: 4096 } },
  olmo2: { bias: 'attention_bias', qkNorm: 'all', defaults: { rms_norm_eps: 1e-5 } },
};
export const MODEL_TYPES = Object.keys(FAMILIES);

function integer(config, key, min = 1) {
  return checkNumber(config[key], `config.${key}`, { min, max: 2 ** 31 - 1, integer: true });
}

// Which attention layer `layer` is: 'sliding_attention' or 'full_attention'.
function layerType(config, family, layer) {
  const kind = family.slidingWindow;
  const hasWindow = config.sliding_window !== undefined && config.sliding_window !== null;
  // Qwen2/3 keep sliding_window only with use_sliding_window: no window, no sliding layer.
  if (!kind || (kind === 'qwen' && !(hasWindow && config.use_sliding_window === true))) return 'full_attention';
  if (kind === 'all') return hasWindow ? 'sliding_attention' : 'full_attention';
  if (Array.isArray(config.layer_types)) {
    const type = config.layer_types[layer];
    if (type !== 'sliding_attention' && type !== 'full_attention')
      throw new AttentionError(`config.layer_types[${layer}]`, "'sliding_attention' or 'full_attention'", describe(type));
    return type;
  }
  if (kind === 'alternate') return layer % 2 === 0 ? 'sliding_attention' : 'full_attention';
  if (kind === 'pattern') {
    const pattern = config.sliding_window_pattern ?? 6;
    return (layer + 1) % pattern !== 0 ? 'sliding_attention' : 'full_attention';
  }
  return layer >= (config.max_window_layers ?? 28) ? 'sliding_attention' : 'full_attention';  // qwen
}

// The layer's rope_parameters as v5 standardises them: { rope_type, rope_theta, ... } from the
// nested v5 form, its flat form, or the older rope_theta + rope_scaling.
// `where` names the scaling's fields, `theta` the base.
function ropeParameters(config, type) {
  const nested = config.rope_parameters && (config.rope_parameters.full_attention || config.rope_parameters.sliding_attention);
  const at = (where) => ({ where, theta: `${where}.rope_theta` });
  if (nested) return { parameters: { ...config.rope_parameters[type] }, ...at(`config.rope_parameters.${type}`) };
  if (config.rope_parameters) return { parameters: { ...config.rope_parameters }, ...at('config.rope_parameters') };
  // Gemma 3's sliding layers: default RoPE at rope_local_base_freq; rope_scaling is the global layers'.
  if (config.model_type === 'gemma3_text' && type === 'sliding_attention')
    return { parameters: { rope_theta: config.rope_local_base_freq }, where: 'config.rope_local_base_freq', theta: 'config.rope_local_base_freq' };
  return { parameters: { ...config.rope_scaling, rope_theta: config.rope_theta }, where: 'config.rope_scaling', theta: 'config.rope_theta' };
}

function ropeOptions(config, family, type) {
  const { parameters, where, theta: thetaName } = ropeParameters(config, type);
  const { rope_theta: theta, partial_rotary_factor: innerFactor, ...scaling } = parameters;
  let ropeType = scaling.rope_type ?? scaling.type ?? 'default';
  // Phi-3's configuration renames its legacy 'su' and 'yarn' to 'longrope'.
  if (family.fused && (ropeType === 'su' || ropeType === 'yarn')) ropeType = 'longrope';
  delete scaling.type;
  const options = { ropeBase: theta ?? config.rope_theta };
  if (ropeType !== 'default' || Object.keys(scaling).some((key) => key !== 'rope_type')) {
    options.ropeScaling = { ...scaling, rope_type: ropeType };
    // A top-level original_max_position_embeddings wins (Phi-3 and Phi-4-mini keep theirs there).
    const original = config.original_max_position_embeddings ?? family.defaults?.original_max_position_embeddings;
    if (['llama3', 'yarn', 'longrope'].includes(ropeType) && original !== undefined)
      options.ropeScaling.original_max_position_embeddings = original;
  }
  return { options, partialRotaryFactor: innerFactor ?? config.partial_rotary_factor, names: { ropeScaling: where, ropeBase: thetaName } };
}

// The block's arguments as config.json names them.
const CONFIG_NAMES = {
  hiddenSize: 'config.hidden_size', numHeads: 'config.num_attention_heads', numKeyValueHeads: 'config.num_key_value_heads',
  headDim: 'config.head_dim', rotaryDim: 'config.partial_rotary_factor', slidingWindow: 'config.sliding_window',
  softcap: 'config.attn_logit_softcapping', scale: 'config.query_pre_attn_scalar', maxPositionEmbeddings: 'config.max_position_embeddings',
  'qkNorm.eps': 'config.rms_norm_eps',
};

/** `error`, from the block configArguments' `names` describe, with its argument named by config.json's field. */
export function configError(error, names) {
  if (!(error instanceof AttentionError)) return error;
  const [head, ...rest] = error.argument.split('.');
  const name = names[error.argument] ?? (names[head] && [names[head], ...rest].join('.'));
  return name ? new AttentionError(name, error.expected, error.got, { code: error.code }) : error;
}

/**
 * [hiddenSize, numHeads, numKeyValueHeads, opts, names] for layer `opts.layer` of the model `config`
 * describes (the text model's part of a multimodal one); `opts.dtype` goes to the constructor.
 * `names`: the config.json field of each argument, for configError.
 */
export function configArguments(config, opts) {
  if (config === null || typeof config !== 'object' || Array.isArray(config))
    throw new AttentionError('config', "a parsed config.json (JSON.parse of the file's text)", describe(config));
  opts = checkOptions(opts, ['layer', 'dtype']);
  if (config.text_config && typeof config.text_config === 'object') config = config.text_config;
  const family = FAMILIES[config.model_type];
  if (!family)
    throw new AttentionError('config.model_type', `one of ${MODEL_TYPES.map((t) => `'${t}'`).join(', ')}`, describe(config.model_type));
  config = { ...family.defaults, ...Object.fromEntries(Object.entries(config).filter(([, v]) => v !== undefined)) };
  const layers = config.num_hidden_layers === undefined ? undefined : integer(config, 'num_hidden_layers');
  const layer = opts.layer === undefined ? 0 : checkNumber(opts.layer, 'layer', { min: 0, max: layers === undefined ? 2 ** 31 - 1 : layers - 1, integer: true });
  if (config.use_bidirectional_attention)
    throw new AttentionError('config.use_bidirectional_attention', 'false (GroupedQueryAttention is causal)', describe(config.use_bidirectional_attention));

  const hiddenSize = integer(config, 'hidden_size');
  const numHeads = integer(config, 'num_attention_heads');
  const numKeyValueHeads = config.num_key_value_heads === undefined || config.num_key_value_heads === null
    ? numHeads : integer(config, 'num_key_value_heads');
  const headDim = config.head_dim === undefined || config.head_dim === null ? Math.floor(hiddenSize / numHeads) : integer(config, 'head_dim');
  const type = layerType(config, family, layer);
  const { options: rope, partialRotaryFactor, names } = ropeOptions(config, family, type);
  const options = { headDim, ...rope };
  if (opts.dtype !== undefined) options.dtype = opts.dtype;
  if (config.max_position_embeddings !== undefined && config.max_position_embeddings !== null)
    options.maxPositionEmbeddings = config.max_position_embeddings;
  // Only Phi-3 rotates part of each head; the other families' default RoPE ignores the factor, and
  // their scaled types would fail on it in Hugging Face's code.
  const partial = partialRotaryFactor !== undefined && partialRotaryFactor !== null && partialRotaryFactor !== 1;
  if (partial && !family.fused && options.ropeScaling)
    throw new AttentionError('config.partial_rotary_factor', `1 with rope_type '${options.ropeScaling.rope_type}' (${config.model_type} rotates whole heads)`, describe(partialRotaryFactor));
  if (partial && family.fused) {
    const factor = checkNumber(partialRotaryFactor, 'config.partial_rotary_factor', { min: 0, max: 1 });
    const rotaryDim = Math.trunc(headDim * factor);
    if (rotaryDim % 2 !== 0)
      throw new AttentionError('config.partial_rotary_factor', `a factor that leaves an even number of rotated dims of head_dim ${headDim}`, `${factor} (${rotaryDim} dims)`);
    options.rotaryDim = rotaryDim;
  }
  if (family.bias === 'qkv') options.qkvBias = true;
  if (family.bias === 'attention_bias' && config.attention_bias === true) options.qkvBias = options.outputBias = true;
  if (type === 'sliding_attention' && config.sliding_window !== null) options.slidingWindow = integer(config, 'sliding_window');
  if (family.gemma) options.scale = checkNumber(config.query_pre_attn_scalar, 'config.query_pre_attn_scalar', { min: Number.MIN_VALUE }) ** -0.5;
  if (family.softcap && config.attn_logit_softcapping !== null) options.softcap = config.attn_logit_softcapping;
  if (family.qkNorm) options.qkNorm = { scope: family.qkNorm, eps: config.rms_norm_eps ?? undefined, unitOffset: family.unitOffset === true };
  return [hiddenSize, numHeads, numKeyValueHeads, options, { ...CONFIG_NAMES, ...names }];
}

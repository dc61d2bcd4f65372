// Safetensors files and checkpoint folders written in memory, for the Node tests and for pages
// (it imports nothing, so a browser test loads it from the test server as it is).

/**
 * The bytes of a .safetensors file holding `tensors` ({ name: { data: Float32Array, shape } }) as
 * F32, in the format's layout: the 8-byte header size, the JSON header padded with spaces to 8
 * bytes, then the data.
 */
export function safetensorsBytes(tensors, metadata) {
  const header = metadata ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  json = Uint8Array.from([...json, ...new Array((8 - (json.length % 8)) % 8).fill(32)]);
  const bytes = new Uint8Array(8 + json.length + offset);
  new DataView(bytes.buffer).setBigUint64(0, BigInt(json.length), true);
  bytes.set(json, 8);
  let at = 8 + json.length;
  for (const t of Object.values(tensors)) {
    bytes.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), at);
    at += t.data.byteLength;
  }
  return bytes;
}

/**
 * A Llama-layout checkpoint whose layers (4.3 MB each) and tied head (20 MB: two blocks of
 * vocabulary rows) are large enough that openModel reads them through its reused read buffers:
 * a Map of 'config.json' and 'model.safetensors' → bytes, with `config` the llama-gqa fixture's
 * config.json, widened.
 */
export function largeLlamaFolder(config) {
  const [hidden, inner, q, kv, vocab] = [256, 1024, 256, 128, 20000];
  config = { ...config, hidden_size: hidden, intermediate_size: inner, head_dim: 64, vocab_size: vocab, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2 };
  const shapes = { 'model.embed_tokens.weight': [vocab, hidden], 'model.norm.weight': [hidden] };
  for (const layer of [0, 1]) {
    const p = `model.layers.${layer}.`;
    Object.assign(shapes, {
      [`${p}input_layernorm.weight`]: [hidden], [`${p}post_attention_layernorm.weight`]: [hidden],
      [`${p}self_attn.q_proj.weight`]: [q, hidden], [`${p}self_attn.k_proj.weight`]: [kv, hidden], [`${p}self_attn.v_proj.weight`]: [kv, hidden],
      [`${p}self_attn.o_proj.weight`]: [hidden, q], [`${p}mlp.gate_proj.weight`]: [inner, hidden], [`${p}mlp.up_proj.weight`]: [inner, hidden],
      [`${p}mlp.down_proj.weight`]: [hidden, inner],
    });
  }
  // Norm weights near 1, matrices near 1/sqrt(in), deterministic.
  const tensors = Object.fromEntries(Object.entries(shapes).sort().map(([name, shape], n) => [name, {
    shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b) }, (_, i) => (shape.length === 1 ? 1 : 0) + Math.sin(0.37 * i + n) / Math.sqrt(shape.at(-1))),
  }]));
  return new Map([['config.json', new TextEncoder().encode(JSON.stringify(config))], ['model.safetensors', safetensorsBytes(tensors)]]);
}

// A minimal ONNX protobuf writer (no Python, no protobufjs): just the ModelProto fields the bench's
// graphs need. Protobuf wire format: each field is a varint key (field << 3 | wire type) followed
// by a varint (wire type 0), 4 little-endian bytes (type 5) or a varint length and bytes (type 2).
// Field numbers are those of onnx/onnx.proto.

const encoder = new TextEncoder();

// Data types (TensorProto.DataType) and attribute types (AttributeProto.AttributeType).
export const FLOAT = 1;
export const INT32 = 6;
export const INT64 = 7;
const ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_INTS = 7;

/** Accumulates the bytes of one message. */
class Writer {
  #chunks = [];
  #length = 0;

  #push(bytes) {
    this.#chunks.push(bytes);
    this.#length += bytes.length;
  }

  // Varints of up to 2^53 (dims and ints are small; negative int64 take 10 bytes, as protobuf says).
  #varint(value) {
    const bytes = [];
    if (value < 0) {
      let big = BigInt.asUintN(64, BigInt(value));
      while (big >= 0x80n) {
        bytes.push(Number(big & 0x7fn) | 0x80);
        big >>= 7n;
      }
      bytes.push(Number(big));
    } else {
      while (value >= 0x80) {
        bytes.push((value % 0x80) | 0x80);
        value = Math.floor(value / 0x80);
      }
      bytes.push(value);
    }
    this.#push(Uint8Array.from(bytes));
  }

  int(field, value) {
    this.#varint(field * 8 + 0);
    this.#varint(value);
    return this;
  }

  float(field, value) {
    this.#varint(field * 8 + 5);
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setFloat32(0, value, true);
    this.#push(bytes);
    return this;
  }

  bytes(field, bytes) {
    this.#varint(field * 8 + 2);
    this.#varint(bytes.length);
    this.#push(bytes);
    return this;
  }

  string(field, text) {
    return this.bytes(field, encoder.encode(text));
  }

  message(field, writer) {
    return this.bytes(field, writer.finish());
  }

  finish() {
    const out = new Uint8Array(this.#length);
    let offset = 0;
    for (const chunk of this.#chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    return out;
  }
}

/**
 * TensorProto: dims = 1, data_type = 2, name = 8, raw_data = 9 (little-endian values); or, for
 * `external: { location, offset, length }`, external_data = 13 (StringStringEntryProto: key = 1,
 * value = 2) and data_location = 14 (EXTERNAL = 1): the values lie in the file `location` (beside
 * the model, raw little-endian) at `offset`, as ONNX's external data format keeps tensors over 2 GB.
 */
function tensorProto(name, { type, dims, data, external }) {
  const w = new Writer();
  for (const d of dims) w.int(1, d);
  w.int(2, type);
  w.string(8, name);
  if (external) {
    for (const [key, value] of [['location', external.location], ['offset', String(external.offset)], ['length', String(external.length)]])
      w.message(13, new Writer().string(1, key).string(2, value));
    return w.int(14, 1);
  }
  const raw = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);  // x86 and wasm are little-endian
  return w.bytes(9, raw);
}

/**
 * ValueInfoProto { name = 1, type = 2: TypeProto { tensor_type = 1: { elem_type = 1, shape = 2 } } }.
 * `dims` null leaves the shape to ORT's inference.
 */
function valueInfo({ name, type = FLOAT, dims }) {
  const tensorType = new Writer().int(1, type);
  if (dims) {
    const shape = new Writer();
    for (const d of dims) shape.message(1, new Writer().int(1, d));  // Dimension.dim_value = 1
    tensorType.message(2, shape);
  }
  return new Writer().string(1, name).message(2, new Writer().message(1, tensorType));
}

/** AttributeProto: name = 1, f = 2, i = 3, ints = 8, type = 20. Integers become INT, others FLOAT. */
function attribute(name, value) {
  const w = new Writer().string(1, name);
  if (Array.isArray(value)) {
    for (const v of value) w.int(8, v);
    return w.int(20, ATTR_INTS);
  }
  if (Number.isInteger(value)) return w.int(3, value).int(20, ATTR_INT);
  return w.float(2, value).int(20, ATTR_FLOAT);
}

/** NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7. */
function nodeProto({ op, inputs, outputs, attrs = {}, domain = '' }, index) {
  const w = new Writer();
  for (const i of inputs) w.string(1, i);
  for (const o of outputs) w.string(2, o);
  w.string(3, `${op}_${index}`).string(4, op);
  for (const [name, value] of Object.entries(attrs)) w.message(5, attribute(name, value));
  if (domain) w.string(7, domain);
  return w;
}

/**
 * Serializes a model. `nodes`: { op, inputs, outputs, attrs?, domain? } (an empty input name
 * leaves an optional input out); `initializers`: name -> { type, dims, data (typed array) } or
 * { type, dims, external: { location, offset, length } }; `inputs` / `outputs`: { name, dims, type? };
 * `opsets`: domain -> version ('' is ai.onnx). Returns the ModelProto bytes.
 */
export function encodeModel({ nodes, initializers = {}, inputs, outputs, opsets = { '': 23 }, irVersion = 11 }) {
  const graph = new Writer();
  nodes.forEach((node, i) => graph.message(1, nodeProto(node, i)));  // GraphProto.node = 1
  graph.string(2, 'bench');                                          // name = 2
  for (const [name, tensor] of Object.entries(initializers)) graph.message(5, tensorProto(name, tensor));
  for (const v of inputs) graph.message(11, valueInfo(v));
  for (const v of outputs) graph.message(12, valueInfo(v));

  const model = new Writer().int(1, irVersion).string(2, 'attention-wasm bench');  // ir_version, producer_name
  model.message(7, graph);                                                          // graph = 7
  for (const [domain, version] of Object.entries(opsets))                           // opset_import = 8
    model.message(8, new Writer().string(1, domain).int(2, version));
  return model.finish();
}

/** A float32 initializer. */
export const floats = (dims, data) => ({ type: FLOAT, dims, data });
/** An int64 initializer (shapes for Reshape). */
export const int64s = (values) => ({ type: INT64, dims: [values.length], data: BigInt64Array.from(values, BigInt) });

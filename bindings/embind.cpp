// Embind glue: marshalling only. The public API, its validation and its errors live in the ESM
// layer (index.js). Every entry point returns a Status object or null; no C++ exception exists
// in the core, so none can cross into JS (TOOLCHAIN.md, pitfall 4).
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>
#include <cstdint>

#include "attention.h"
#include "parallel.h"

namespace {

using emscripten::val;

// Shapes travel in an int32 block the JS layer owns: for each tensor, its rank followed by
// kMaxRank dimension slots.
constexpr int kShapeSlots = 1 + attn::kMaxRank;

attn::Shape read_shape(uintptr_t shapes, int index) {
  const int32_t* slots = reinterpret_cast<const int32_t*>(shapes) + index * kShapeSlots;
  attn::Shape shape;
  shape.rank = slots[0];
  for (int axis = 0; axis < shape.rank; ++axis) shape[axis] = slots[1 + axis];
  return shape;
}

attn::MaskView read_mask(uintptr_t shapes, int index, int type, uintptr_t data, bool true_means_masked) {
  attn::MaskView mask;
  mask.type = static_cast<attn::MaskType>(type);
  if (!mask.present()) return mask;
  mask.data = reinterpret_cast<const void*>(data);
  mask.shape = read_shape(shapes, index);
  mask.true_means_masked = true_means_masked;
  return mask;
}

val to_js(const attn::Status& status) {
  if (status.ok()) return val::null();
  val error = val::object();
  error.set("argument", status.argument);
  error.set("expected", status.expected);
  error.set("got", status.got);
  error.set("outOfMemory", status.out_of_memory);
  return error;
}

// Slots 0..3 of `shapes`: query, key, value, attnMask. `scale` NaN means the default 1/sqrt(d).
attn::SdpaOptions read_sdpa_options(uintptr_t shapes, int mask_type, uintptr_t mask, bool causal, double scale,
                                    double dropout_p, double seed) {
  attn::SdpaOptions options;
  options.attn_mask = read_mask(shapes, 3, mask_type, mask, /*true_means_masked=*/false);
  options.is_causal = causal;
  if (!std::isnan(scale)) options.scale = static_cast<float>(scale);
  options.dropout_p = static_cast<float>(dropout_p);
  options.seed = static_cast<uint64_t>(seed);
  return options;
}

val sdpa_check(uintptr_t shapes, int mask_type, bool causal, double scale, double dropout_p) {
  const attn::SdpaOptions options = read_sdpa_options(shapes, mask_type, 0, causal, scale, dropout_p, 0);
  return to_js(attn::check_scaled_dot_product_attention(read_shape(shapes, 0), read_shape(shapes, 1),
                                                        read_shape(shapes, 2), options));
}

val sdpa(uintptr_t shapes, uintptr_t query, uintptr_t key, uintptr_t value, int mask_type, uintptr_t mask,
         bool causal, double scale, double dropout_p, double seed, uintptr_t output, uintptr_t weights) {
  const attn::SdpaOptions options = read_sdpa_options(shapes, mask_type, mask, causal, scale, dropout_p, seed);
  return to_js(attn::scaled_dot_product_attention(
      {reinterpret_cast<const float*>(query), read_shape(shapes, 0)},
      {reinterpret_cast<const float*>(key), read_shape(shapes, 1)},
      {reinterpret_cast<const float*>(value), read_shape(shapes, 2)}, options, reinterpret_cast<float*>(output),
      reinterpret_cast<float*>(weights)));
}

}  // namespace

EMSCRIPTEN_BINDINGS(attention) {
  emscripten::constant("_maxRank", attn::kMaxRank);
  emscripten::function("_setThreadCount", &attn::set_thread_count);
  emscripten::function("_sdpaCheck", &sdpa_check);
  emscripten::function("_sdpa", &sdpa);
}

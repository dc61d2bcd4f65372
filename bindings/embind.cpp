// Embind glue: marshalling only. The public API, its validation and its errors live in the ESM
// layer (index.js and friends). Every entry point returns a Status object or null (or a value);
// no C++ exception exists in the core, so none can cross into JS (TOOLCHAIN.md, pitfall 4).
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "additive_attention.h"
#include "attention.h"
#include "grouped_query_attention.h"
#include "kv_cache.h"
#include "mask.h"
#include "multihead_attention.h"
#include "parallel.h"
#include "relative_attention.h"
#include "self_attention.h"

namespace {

using emscripten::typed_memory_view;
using emscripten::val;

// Shapes travel in an int32 block the JS layer owns: per slot, a rank followed by kMaxRank
// dimensions. Slot order per entry point: query, key, value, then the masks.
constexpr int kShapeSlots = 1 + attn::kMaxRank;

attn::Shape read_shape(uintptr_t shapes, int index) {
  const int32_t* slots = reinterpret_cast<const int32_t*>(shapes) + index * kShapeSlots;
  attn::Shape shape;
  shape.rank = slots[0];
  for (int axis = 0; axis < shape.rank; ++axis) shape[axis] = slots[1 + axis];
  return shape;
}

attn::TensorView read_tensor(uintptr_t shapes, int index, uintptr_t data) {
  return {reinterpret_cast<const float*>(data), read_shape(shapes, index)};
}

// type: 0 none, 1 boolean (uint8), 2 additive (float32), as attn::MaskType.
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

val to_js(const attn::Shape& shape) {
  val dims = val::array();
  for (int axis = 0; axis < shape.rank; ++axis) dims.call<void>("push", static_cast<double>(shape[axis]));
  return dims;
}

// A passed check: { output: dims, weights: dims | null }.
val shapes_to_js(const attn::Shape& output, const attn::Shape& weights) {
  val result = val::object();
  result.set("output", to_js(output));
  result.set("weights", weights.rank ? to_js(weights) : val::null());
  return result;
}

// ---- scaled dot-product attention ----------------------------------------------------------

// The v2 options of scaledDotProductAttention, as the JS layer passes them: `window` 0 and
// `softcap` NaN mean none; alibi 0 none, 1 Press et al.'s slopes, 2 the `slope_count` slopes given;
// documents 0 none, 1 one documentIds for queries and keys, 2 queryDocumentIds and keyDocumentIds.
struct SdpaExtras {
  bool enable_gqa;
  double window, softcap;
  int alibi;
  uintptr_t slopes;
  double slope_count;
  int documents;
  uintptr_t query_ids, key_ids;
};

// Slots: query, key, value, attnMask, query ids, key ids. `scale` NaN means the default 1/sqrt(d);
// causal: 0 none, 1 upper-left, 2 lower-right (attn::Causal).
attn::SdpaOptions read_sdpa_options(uintptr_t shapes, int mask_type, uintptr_t mask, int causal, double scale,
                                    double dropout_p, double seed, const SdpaExtras& extras) {
  attn::SdpaOptions options;
  options.attn_mask = read_mask(shapes, 3, mask_type, mask, /*true_means_masked=*/false);
  options.causal = static_cast<attn::Causal>(causal);
  if (!std::isnan(scale)) options.scale = static_cast<float>(scale);
  options.dropout_p = static_cast<float>(dropout_p);
  options.seed = static_cast<uint64_t>(seed);
  options.enable_gqa = extras.enable_gqa;
  if (extras.window != 0) options.window = static_cast<int64_t>(extras.window);
  if (!std::isnan(extras.softcap)) options.softcap = static_cast<float>(extras.softcap);
  options.alibi = extras.alibi != 0;
  if (extras.alibi == 2) {
    options.alibi_slopes = reinterpret_cast<const float*>(extras.slopes);
    options.alibi_slope_count = static_cast<int64_t>(extras.slope_count);
  }
  if (extras.documents != 0) {
    options.query_document_ids = {reinterpret_cast<const int32_t*>(extras.query_ids), read_shape(shapes, 4)};
    options.key_document_ids = {reinterpret_cast<const int32_t*>(extras.key_ids), read_shape(shapes, 5)};
    options.shared_document_ids = extras.documents == 1;
  }
  return options;
}

SdpaExtras read_extras(bool enable_gqa, double window, double softcap, int alibi, uintptr_t slopes, double slope_count,
                       int documents, uintptr_t query_ids, uintptr_t key_ids) {
  return {enable_gqa, window, softcap, alibi, slopes, slope_count, documents, query_ids, key_ids};
}

val sdpa_check(uintptr_t shapes, int mask_type, int causal, double scale, double dropout_p, bool enable_gqa,
               double window, double softcap, int alibi, double slope_count, int documents) {
  const attn::SdpaOptions options = read_sdpa_options(
      shapes, mask_type, 0, causal, scale, dropout_p, 0,
      read_extras(enable_gqa, window, softcap, alibi, 0, slope_count, documents, 0, 0));
  return to_js(attn::check_scaled_dot_product_attention(read_shape(shapes, 0), read_shape(shapes, 1),
                                                        read_shape(shapes, 2), options));
}

val sdpa(uintptr_t shapes, uintptr_t query, uintptr_t key, uintptr_t value, int mask_type, uintptr_t mask,
         int causal, double scale, double dropout_p, double seed, bool enable_gqa, double window, double softcap,
         int alibi, uintptr_t slopes, double slope_count, int documents, uintptr_t query_ids, uintptr_t key_ids,
         uintptr_t output, uintptr_t weights) {
  const attn::SdpaOptions options = read_sdpa_options(
      shapes, mask_type, mask, causal, scale, dropout_p, seed,
      read_extras(enable_gqa, window, softcap, alibi, slopes, slope_count, documents, query_ids, key_ids));
  return to_js(attn::scaled_dot_product_attention(read_tensor(shapes, 0, query), read_tensor(shapes, 1, key),
                                                  read_tensor(shapes, 2, value), options,
                                                  reinterpret_cast<float*>(output), reinterpret_cast<float*>(weights)));
}

// ---- rope ----------------------------------------------------------------------------------

// Slots: x. `position_count` -1 means offset, offset + 1, … instead of positions; `rotary_dim` -1
// means d.
attn::RopeOptions read_rope_options(uintptr_t positions, double position_count, double offset, double base,
                                    double rotary_dim, bool interleaved) {
  attn::RopeOptions options;
  options.positions = reinterpret_cast<const int32_t*>(positions);
  options.position_count = static_cast<int64_t>(position_count);
  options.offset = static_cast<int64_t>(offset);
  options.base = base;
  if (rotary_dim >= 0) options.rotary_dim = static_cast<int64_t>(rotary_dim);
  options.interleaved = interleaved;
  return options;
}

val rope_check(uintptr_t shapes, double position_count, double base, double rotary_dim, bool interleaved) {
  return to_js(attn::check_rope(read_shape(shapes, 0), read_rope_options(0, position_count, 0, base, rotary_dim, interleaved)));
}

val rope(uintptr_t shapes, uintptr_t x, uintptr_t positions, double position_count, double offset, double base,
         double rotary_dim, bool interleaved, uintptr_t output) {
  return to_js(attn::rope(read_tensor(shapes, 0, x),
                          read_rope_options(positions, position_count, offset, base, rotary_dim, interleaved),
                          reinterpret_cast<float*>(output)));
}

// ---- modules -------------------------------------------------------------------------------
// A module handle is its attn::Module* as an integer; the JS layer owns its lifetime.

attn::Module* module_of(uintptr_t handle) { return reinterpret_cast<attn::Module*>(handle); }
template <class T>
T* as(uintptr_t handle) {
  return static_cast<T*>(module_of(handle));
}

// The handle as a number, or the Status that refused the configuration.
template <class T, class Config>
val create(const Config& config) {
  std::unique_ptr<T> module;
  const attn::Status s = T::create(config, &module);
  if (!s.ok()) return to_js(s);
  return val(static_cast<double>(reinterpret_cast<uintptr_t>(static_cast<attn::Module*>(module.release()))));
}

void destroy(uintptr_t handle) { delete module_of(handle); }
void set_training(uintptr_t handle, bool training) { module_of(handle)->set_training(training); }

// names: JS array of strings; pointers: JS array of heap addresses; shapes: one slot per entry.
val load_state_dict(uintptr_t handle, val names, val pointers, uintptr_t shapes) {
  std::vector<attn::NamedTensor> state_dict;
  const int count = names["length"].as<int>();
  for (int i = 0; i < count; ++i)
    state_dict.push_back({names[i].as<std::string>(), read_tensor(shapes, i, pointers[i].as<uintptr_t>())});
  return to_js(module_of(handle)->load_state_dict(state_dict));
}

val mha_create(double embed_dim, double num_heads, bool bias, bool add_bias_kv, bool add_zero_attn, double kdim,
               double vdim, bool batch_first, double dropout) {
  return create<attn::MultiheadAttention>(attn::MultiheadAttentionConfig{
      static_cast<int64_t>(embed_dim), static_cast<int64_t>(num_heads), bias, add_bias_kv, add_zero_attn,
      static_cast<int64_t>(kdim), static_cast<int64_t>(vdim), batch_first, static_cast<float>(dropout)});
}

// Slots: query, key, value, attnMask, keyPaddingMask.
attn::MultiheadAttentionOptions read_mha_options(uintptr_t shapes, int attn_mask_type, uintptr_t attn_mask,
                                                 int padding_type, uintptr_t padding, bool need_weights, bool average,
                                                 bool causal, double seed) {
  attn::MultiheadAttentionOptions options;
  options.attn_mask = read_mask(shapes, 3, attn_mask_type, attn_mask, /*true_means_masked=*/true);
  options.key_padding_mask = read_mask(shapes, 4, padding_type, padding, /*true_means_masked=*/true);
  options.need_weights = need_weights;
  options.average_attn_weights = average;
  options.is_causal = causal;
  options.seed = static_cast<uint64_t>(seed);
  return options;
}

val mha_check(uintptr_t handle, uintptr_t shapes, int attn_mask_type, int padding_type, bool need_weights,
              bool average) {
  const auto options = read_mha_options(shapes, attn_mask_type, 0, padding_type, 0, need_weights, average, false, 0);
  attn::Shape output, weights;
  const attn::Status s = as<attn::MultiheadAttention>(handle)->check_forward(
      read_shape(shapes, 0), read_shape(shapes, 1), read_shape(shapes, 2), options, &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

// A Float32Array outside the heap, given by the JS wrapper for long inputs: the forward keeps its
// attention output there while it runs (attn::SpillStore). Called on the calling thread only.
class ArraySpill : public attn::SpillStore {
 public:
  explicit ArraySpill(val array) : array_(std::move(array)) {}
  void write(int64_t offset, const float* data, int64_t count) override {
    array_.call<void>("set", val(typed_memory_view(static_cast<size_t>(count), data)), static_cast<double>(offset));
  }
  void read(int64_t offset, float* data, int64_t count) const override {
    const val source = array_.call<val>("subarray", static_cast<double>(offset), static_cast<double>(offset + count));
    val(typed_memory_view(static_cast<size_t>(count), data)).call<void>("set", source);
  }

 private:
  val array_;
};

val mha_forward(uintptr_t handle, uintptr_t shapes, uintptr_t query, uintptr_t key, uintptr_t value,
                int attn_mask_type, uintptr_t attn_mask, int padding_type, uintptr_t padding, bool need_weights,
                bool average, bool causal, double seed, uintptr_t output, uintptr_t weights, val spill_array) {
  const auto options = read_mha_options(shapes, attn_mask_type, attn_mask, padding_type, padding, need_weights,
                                        average, causal, seed);
  ArraySpill spill(spill_array);
  return to_js(as<attn::MultiheadAttention>(handle)->forward(
      read_tensor(shapes, 0, query), read_tensor(shapes, 1, key), read_tensor(shapes, 2, value), options,
      reinterpret_cast<float*>(output), reinterpret_cast<float*>(weights), spill_array.isNull() ? nullptr : &spill));
}

val self_attention_create(double embed_dim, double key_size, double value_size, double dropout) {
  return create<attn::SelfAttention>(attn::SelfAttentionConfig{static_cast<int64_t>(embed_dim),
                                                               static_cast<int64_t>(key_size),
                                                               static_cast<int64_t>(value_size),
                                                               static_cast<float>(dropout)});
}

// Slots: x, attnMask.
val self_attention_check(uintptr_t handle, uintptr_t shapes, int mask_type) {
  attn::Shape output, weights;
  const attn::Status s = as<attn::SelfAttention>(handle)->check_forward(
      read_shape(shapes, 0), read_mask(shapes, 1, mask_type, 0, true), &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val self_attention_forward(uintptr_t handle, uintptr_t shapes, uintptr_t x, int mask_type, uintptr_t mask,
                           double seed, uintptr_t output, uintptr_t weights) {
  return to_js(as<attn::SelfAttention>(handle)->forward(read_tensor(shapes, 0, x),
                                                        read_mask(shapes, 1, mask_type, mask, true),
                                                        static_cast<uint64_t>(seed), reinterpret_cast<float*>(output),
                                                        reinterpret_cast<float*>(weights)));
}

val additive_create(double query_size, double key_size, double hidden_size, double dropout) {
  return create<attn::AdditiveAttention>(attn::AdditiveAttentionConfig{static_cast<int64_t>(query_size),
                                                                       static_cast<int64_t>(key_size),
                                                                       static_cast<int64_t>(hidden_size),
                                                                       static_cast<float>(dropout)});
}

// Modules whose check_forward and forward take (query, key, value, mask[, seed], options...):
// AdditiveAttention (boolean 1 = masked out) and RelativeMultiHeadAttention (boolean 0 = masked
// out; its option says whether the weights come heads first). Slots: query, key, value, mask.
template <class Module, bool kTrueMeansMasked, class... Options>
val check_with_mask(uintptr_t handle, uintptr_t shapes, int mask_type, Options... options) {
  attn::Shape output, weights;
  const attn::Status s = as<Module>(handle)->check_forward(
      read_shape(shapes, 0), read_shape(shapes, 1), read_shape(shapes, 2),
      read_mask(shapes, 3, mask_type, 0, kTrueMeansMasked), options..., &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

template <class Module, bool kTrueMeansMasked, class... Options>
val forward_with_mask(uintptr_t handle, uintptr_t shapes, uintptr_t query, uintptr_t key, uintptr_t value,
                      int mask_type, uintptr_t mask, double seed, Options... options, uintptr_t output,
                      uintptr_t weights) {
  return to_js(as<Module>(handle)->forward(
      read_tensor(shapes, 0, query), read_tensor(shapes, 1, key), read_tensor(shapes, 2, value),
      read_mask(shapes, 3, mask_type, mask, kTrueMeansMasked), static_cast<uint64_t>(seed), options...,
      reinterpret_cast<float*>(output), reinterpret_cast<float*>(weights)));
}

val relative_create(double heads, double d_model, double P, double dropout) {
  return create<attn::RelativeMultiHeadAttention>(attn::RelativeAttentionConfig{
      static_cast<int64_t>(heads), static_cast<int64_t>(d_model), static_cast<int64_t>(P), static_cast<float>(dropout)});
}

// ---- KV cache ------------------------------------------------------------------------------
// A cache handle is its attn::KVCache* as an integer; the JS layer owns its lifetime.

attn::KVCache* cache_of(uintptr_t handle) { return reinterpret_cast<attn::KVCache*>(handle); }

// `value_dim` 0 means head_dim, `window` 0 none; dtype 0 f32, 1 f16 (attn::CacheDtype).
val cache_create(double batch, double heads, double head_dim, double value_dim, double max_length, int dtype,
                 double window) {
  attn::KVCacheConfig config;
  config.batch = static_cast<int64_t>(batch);
  config.heads = static_cast<int64_t>(heads);
  config.head_dim = static_cast<int64_t>(head_dim);
  config.value_dim = static_cast<int64_t>(value_dim);
  config.max_length = static_cast<int64_t>(max_length);
  config.dtype = static_cast<attn::CacheDtype>(dtype);
  if (window != 0) config.window = static_cast<int64_t>(window);
  std::unique_ptr<attn::KVCache> cache;
  const attn::Status s = attn::KVCache::create(config, &cache);
  if (!s.ok()) return to_js(s);
  return val(static_cast<double>(reinterpret_cast<uintptr_t>(cache.release())));
}

void cache_destroy(uintptr_t handle) { delete cache_of(handle); }

// Slots: key, value.
val cache_append_check(uintptr_t handle, uintptr_t shapes) {
  return to_js(cache_of(handle)->check_append(read_shape(shapes, 0), read_shape(shapes, 1)));
}

val cache_append(uintptr_t handle, uintptr_t shapes, uintptr_t key, uintptr_t value) {
  return to_js(cache_of(handle)->append(read_tensor(shapes, 0, key), read_tensor(shapes, 1, value)));
}

// `scale`, `softcap` NaN and `window` 0 mean the defaults; alibi as SdpaExtras. Slots: query,
// attnMask (boolean 1 = may attend, or additive).
attn::CacheAttendOptions read_cache_options(uintptr_t shapes, bool causal, double scale, double softcap, int alibi,
                                            uintptr_t slopes, double slope_count, double window, int mask_type,
                                            uintptr_t mask) {
  attn::CacheAttendOptions options;
  options.causal = causal;
  if (!std::isnan(scale)) options.scale = static_cast<float>(scale);
  if (!std::isnan(softcap)) options.softcap = static_cast<float>(softcap);
  options.alibi = alibi != 0;
  if (alibi == 2) {
    options.alibi_slopes = reinterpret_cast<const float*>(slopes);
    options.alibi_slope_count = static_cast<int64_t>(slope_count);
  }
  if (window != 0) options.window = static_cast<int64_t>(window);
  options.attn_mask = read_mask(shapes, 1, mask_type, mask, /*true_means_masked=*/false);
  return options;
}

val cache_attend_check(uintptr_t handle, uintptr_t shapes, bool causal, double scale, double softcap, int alibi,
                       double slope_count, double window, int mask_type) {
  attn::Shape output, weights;
  const attn::Status s = cache_of(handle)->check_attend(
      read_shape(shapes, 0), read_cache_options(shapes, causal, scale, softcap, alibi, 0, slope_count, window, mask_type, 0),
      &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val cache_attend(uintptr_t handle, uintptr_t shapes, uintptr_t query, bool causal, double scale, double softcap,
                 int alibi, uintptr_t slopes, double slope_count, double window, int mask_type, uintptr_t mask,
                 uintptr_t output, uintptr_t weights) {
  return to_js(cache_of(handle)->attend(
      read_tensor(shapes, 0, query),
      read_cache_options(shapes, causal, scale, softcap, alibi, slopes, slope_count, window, mask_type, mask),
      reinterpret_cast<float*>(output), reinterpret_cast<float*>(weights)));
}

val cache_truncate(uintptr_t handle, double length) {
  return to_js(cache_of(handle)->truncate(static_cast<int64_t>(length)));
}
void cache_reset(uintptr_t handle) { cache_of(handle)->reset(); }
double cache_length(uintptr_t handle) { return static_cast<double>(cache_of(handle)->length()); }
double cache_position(uintptr_t handle) { return static_cast<double>(cache_of(handle)->position()); }
void cache_keys(uintptr_t handle, uintptr_t out) { cache_of(handle)->copy_keys(reinterpret_cast<float*>(out)); }
void cache_values(uintptr_t handle, uintptr_t out) { cache_of(handle)->copy_values(reinterpret_cast<float*>(out)); }

// ---- GroupedQueryAttention -----------------------------------------------------------------

// `head_dim` 0 and `rotary_dim` -1 mean the defaults, `sliding_window` 0 none, `softcap` and
// `scale` NaN the defaults.
val gqa_create(double hidden_size, double num_heads, double num_kv_heads, double head_dim, bool qkv_bias,
               bool output_bias, double rope_base, bool rope_interleaved, double rotary_dim, double sliding_window,
               double softcap, double scale) {
  attn::GroupedQueryAttentionConfig config;
  config.hidden_size = static_cast<int64_t>(hidden_size);
  config.num_heads = static_cast<int64_t>(num_heads);
  config.num_key_value_heads = static_cast<int64_t>(num_kv_heads);
  config.head_dim = static_cast<int64_t>(head_dim);
  config.qkv_bias = qkv_bias;
  config.output_bias = output_bias;
  config.rope_base = rope_base;
  config.rope_interleaved = rope_interleaved;
  if (rotary_dim >= 0) config.rotary_dim = static_cast<int64_t>(rotary_dim);
  if (sliding_window != 0) config.sliding_window = static_cast<int64_t>(sliding_window);
  if (!std::isnan(softcap)) config.softcap = static_cast<float>(softcap);
  if (!std::isnan(scale)) config.scale = static_cast<float>(scale);
  return create<attn::GroupedQueryAttention>(config);
}

// Slots: x, positions (rank 0: none), attnMask. `cache` 0: none.
attn::GroupedQueryAttentionOptions read_gqa_options(uintptr_t shapes, uintptr_t positions, int mask_type,
                                                    uintptr_t mask, uintptr_t cache) {
  attn::GroupedQueryAttentionOptions options;
  const attn::Shape positions_shape = read_shape(shapes, 1);
  if (positions_shape.rank > 0) options.positions = {reinterpret_cast<const int32_t*>(positions), positions_shape};
  options.attn_mask = read_mask(shapes, 2, mask_type, mask, /*true_means_masked=*/false);
  options.cache = cache_of(cache);
  return options;
}

val gqa_check(uintptr_t handle, uintptr_t shapes, int mask_type, uintptr_t cache) {
  attn::Shape output, weights;
  const attn::Status s = as<attn::GroupedQueryAttention>(handle)->check_forward(
      read_shape(shapes, 0), read_gqa_options(shapes, 0, mask_type, 0, cache), &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val gqa_forward(uintptr_t handle, uintptr_t shapes, uintptr_t x, uintptr_t positions, int mask_type, uintptr_t mask,
                uintptr_t cache, uintptr_t output, uintptr_t weights) {
  return to_js(as<attn::GroupedQueryAttention>(handle)->forward(
      read_tensor(shapes, 0, x), read_gqa_options(shapes, positions, mask_type, mask, cache),
      reinterpret_cast<float*>(output), reinterpret_cast<float*>(weights)));
}

// ---- masks.merge ---------------------------------------------------------------------------

// Slots: attnMask, keyPaddingMask.
val merge_check(uintptr_t shapes, int attn_mask_type, int padding_type, double heads) {
  attn::Shape merged;
  const attn::Status s = attn::check_merge_masks(read_mask(shapes, 0, attn_mask_type, 0, true),
                                                 read_mask(shapes, 1, padding_type, 0, true),
                                                 static_cast<int64_t>(heads), &merged);
  return s.ok() ? to_js(merged) : to_js(s);
}

val merge(uintptr_t shapes, int attn_mask_type, uintptr_t attn_mask, int padding_type, uintptr_t padding,
          double heads, uintptr_t output) {
  return to_js(attn::merge_masks(read_mask(shapes, 0, attn_mask_type, attn_mask, true),
                                 read_mask(shapes, 1, padding_type, padding, true), static_cast<int64_t>(heads),
                                 reinterpret_cast<float*>(output)));
}

}  // namespace

EMSCRIPTEN_BINDINGS(attention) {
  using emscripten::function;
  emscripten::constant("_maxRank", attn::kMaxRank);
  function("_setThreadCount", &attn::set_thread_count);
  function("_sdpaCheck", &sdpa_check);
  function("_sdpa", &sdpa);
  function("_ropeCheck", &rope_check);
  function("_rope", &rope);
  function("_moduleDestroy", &destroy);
  function("_moduleSetTraining", &set_training);
  function("_moduleLoadStateDict", &load_state_dict);
  function("_mhaCreate", &mha_create);
  function("_mhaCheck", &mha_check);
  function("_mhaForward", &mha_forward);
  function("_selfAttentionCreate", &self_attention_create);
  function("_selfAttentionCheck", &self_attention_check);
  function("_selfAttentionForward", &self_attention_forward);
  function("_additiveCreate", &additive_create);
  function("_additiveCheck", &check_with_mask<attn::AdditiveAttention, true>);
  function("_additiveForward", &forward_with_mask<attn::AdditiveAttention, true>);
  function("_relativeCreate", &relative_create);
  function("_relativeCheck", &check_with_mask<attn::RelativeMultiHeadAttention, false, bool>);
  function("_relativeForward", &forward_with_mask<attn::RelativeMultiHeadAttention, false, bool>);
  function("_cacheCreate", &cache_create);
  function("_cacheDestroy", &cache_destroy);
  function("_cacheAppendCheck", &cache_append_check);
  function("_cacheAppend", &cache_append);
  function("_cacheAttendCheck", &cache_attend_check);
  function("_cacheAttend", &cache_attend);
  function("_cacheTruncate", &cache_truncate);
  function("_cacheReset", &cache_reset);
  function("_cacheLength", &cache_length);
  function("_cachePosition", &cache_position);
  function("_cacheKeys", &cache_keys);
  function("_cacheValues", &cache_values);
  function("_gqaCreate", &gqa_create);
  function("_gqaCheck", &gqa_check);
  function("_gqaForward", &gqa_forward);
  function("_mergeCheck", &merge_check);
  function("_merge", &merge);
}

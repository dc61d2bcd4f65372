// Embind glue: marshalling only. The public API, its validation and its errors live in the ESM
// layer (index.js and friends). Every entry point returns a Status object or null (or a value);
// no C++ exception exists in the core, so none can cross into JS (each one that escapes leaks 48
// bytes of the C stack, and the module traps after ~100k). The options of SDPA, RoPE, the KV cache
// and GroupedQueryAttention cross as the core's own structs (value_object, enum_), as CanvasKit
// passes its style objects: an option added later touches the JS API, the struct and the engine.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
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

// ---- options as structs ---------------------------------------------------------------------
// JS sees pointers, 64-bit integers and shapes as numbers and arrays, and an absent optional as
// undefined; these setters convert each field, so that value_object takes the core's structs as
// they are. The structs only ever travel from JS, so no field needs a getter of its own: one that
// reads nothing serves them all (each real getter cost the page about 60 bytes).

template <class Member>
struct MemberOf;
template <class Struct_, class Type_>
struct MemberOf<Type_ Struct_::*> {
  using Struct = Struct_;
  using Type = Type_;
};

template <auto member>
struct Field {
  using S = typename MemberOf<decltype(member)>::Struct;
  using T = typename MemberOf<decltype(member)>::Type;

  static void set_number(S& s, double value) { s.*member = static_cast<T>(value); }
  static void set_pointer(S& s, double value) { s.*member = reinterpret_cast<T>(static_cast<uintptr_t>(value)); }
  static void set_optional(S& s, val value) {
    if (value.isUndefined() || value.isNull())
      (s.*member).reset();
    else
      s.*member = static_cast<typename T::value_type>(value.as<double>());
  }
  static void set_shape(S& s, val dims) {
    attn::Shape& shape = s.*member;
    // The JS layer refuses ranks past kMaxRank, naming the argument; this only keeps the array whole.
    shape.rank = std::min(dims["length"].as<int>(), attn::kMaxRank);
    for (int axis = 0; axis < shape.rank; ++axis) shape[axis] = static_cast<int64_t>(dims[axis].as<double>());
  }
};

// value_object<S> with a method per kind of field; registered when it goes out of scope.
template <class S>
class Struct {
 public:
  explicit Struct(const char* name) : object_(name) {}
  // bool, enum_ and value_object fields, as they are.
  template <auto member>
  Struct& plain(const char* name) {
    object_.field(name, member);
    return *this;
  }
  template <auto member>
  Struct& number(const char* name) { return field(name, &Field<member>::set_number); }
  template <auto member>
  Struct& pointer(const char* name) { return field(name, &Field<member>::set_pointer); }
  template <auto member>
  Struct& optional(const char* name) { return field(name, &Field<member>::set_optional); }
  template <auto member>
  Struct& shape(const char* name) { return field(name, &Field<member>::set_shape); }

 private:
  static val unread(const S&) { return val::undefined(); }
  template <class Setter>
  Struct& field(const char* name, Setter set) {
    object_.field(name, &unread, set);
    return *this;
  }

  emscripten::value_object<S> object_;
};

void register_structs() {
  using emscripten::enum_;
  using attn::TensorView, attn::MaskView, attn::IdsView, attn::SdpaOptions, attn::RopeOptions;
  enum_<attn::MaskType>("_MaskType")
      .value("none", attn::MaskType::none)
      .value("boolean", attn::MaskType::boolean)
      .value("additive", attn::MaskType::additive);
  enum_<attn::Causal>("_Causal")
      .value("none", attn::Causal::none)
      .value("upperLeft", attn::Causal::upper_left)
      .value("lowerRight", attn::Causal::lower_right);
  enum_<attn::CacheDtype>("_CacheDtype").value("f32", attn::CacheDtype::f32).value("f16", attn::CacheDtype::f16);
  Struct<TensorView>("_Tensor").pointer<&TensorView::data>("data").shape<&TensorView::shape>("shape");
  Struct<MaskView>("_Mask")
      .plain<&MaskView::type>("type")
      .pointer<&MaskView::data>("data")
      .shape<&MaskView::shape>("shape")
      .plain<&MaskView::true_means_masked>("trueMeansMasked");
  Struct<IdsView>("_Ids").pointer<&IdsView::data>("data").shape<&IdsView::shape>("shape");
  Struct<SdpaOptions>("_SdpaOptions")
      .plain<&SdpaOptions::attn_mask>("attnMask")
      .plain<&SdpaOptions::causal>("causal")
      .optional<&SdpaOptions::scale>("scale")
      .number<&SdpaOptions::dropout_p>("dropoutP")
      .number<&SdpaOptions::seed>("seed")
      .plain<&SdpaOptions::enable_gqa>("enableGqa")
      .optional<&SdpaOptions::window>("window")
      .optional<&SdpaOptions::softcap>("softcap")
      .plain<&SdpaOptions::alibi>("alibi")
      .pointer<&SdpaOptions::alibi_slopes>("alibiSlopes")
      .number<&SdpaOptions::alibi_slope_count>("alibiSlopeCount")
      .plain<&SdpaOptions::query_document_ids>("queryDocumentIds")
      .plain<&SdpaOptions::key_document_ids>("keyDocumentIds")
      .plain<&SdpaOptions::shared_document_ids>("sharedDocumentIds");
  using attn::RopeScaling, attn::RopeType;
  enum_<RopeType>("_RopeType")
      .value("default", RopeType::standard)
      .value("linear", RopeType::linear)
      .value("dynamic", RopeType::dynamic)
      .value("yarn", RopeType::yarn)
      .value("longrope", RopeType::longrope)
      .value("llama3", RopeType::llama3)
      .value("given", RopeType::given);
  Struct<RopeScaling>("_RopeScaling")
      .plain<&RopeScaling::type>("type")
      .optional<&RopeScaling::factor>("factor")
      .optional<&RopeScaling::attention_factor>("attentionFactor")
      .optional<&RopeScaling::beta_fast>("betaFast")
      .optional<&RopeScaling::beta_slow>("betaSlow")
      .optional<&RopeScaling::mscale>("mscale")
      .optional<&RopeScaling::mscale_all_dim>("mscaleAllDim")
      .plain<&RopeScaling::truncate>("truncate")
      .optional<&RopeScaling::low_freq_factor>("lowFreqFactor")
      .optional<&RopeScaling::high_freq_factor>("highFreqFactor")
      .optional<&RopeScaling::original_max_position_embeddings>("originalMaxPositionEmbeddings")
      .optional<&RopeScaling::max_position_embeddings>("maxPositionEmbeddings")
      .pointer<&RopeScaling::short_factor>("shortFactor")
      .pointer<&RopeScaling::long_factor>("longFactor")
      .number<&RopeScaling::factor_count>("factorCount")
      .pointer<&RopeScaling::inv_freq>("invFreq")
      .number<&RopeScaling::inv_freq_count>("invFreqCount")
      .number<&RopeScaling::attention_scaling>("attentionScaling");
  Struct<RopeOptions>("_RopeOptions")
      .plain<&RopeOptions::positions>("positions")
      .number<&RopeOptions::offset>("offset")
      .number<&RopeOptions::base>("base")
      .optional<&RopeOptions::rotary_dim>("rotaryDim")
      .plain<&RopeOptions::interleaved>("interleaved")
      .plain<&RopeOptions::scaling>("scaling");
  using attn::KVCacheConfig, attn::CacheAttendOptions;
  Struct<KVCacheConfig>("_KVCacheConfig")
      .number<&KVCacheConfig::batch>("batch")
      .number<&KVCacheConfig::heads>("heads")
      .number<&KVCacheConfig::head_dim>("headDim")
      .number<&KVCacheConfig::value_dim>("valueDim")
      .number<&KVCacheConfig::max_length>("maxLength")
      .plain<&KVCacheConfig::dtype>("dtype")
      .optional<&KVCacheConfig::window>("window");
  Struct<CacheAttendOptions>("_CacheAttendOptions")
      .plain<&CacheAttendOptions::causal>("causal")
      .optional<&CacheAttendOptions::scale>("scale")
      .optional<&CacheAttendOptions::softcap>("softcap")
      .plain<&CacheAttendOptions::alibi>("alibi")
      .pointer<&CacheAttendOptions::alibi_slopes>("alibiSlopes")
      .number<&CacheAttendOptions::alibi_slope_count>("alibiSlopeCount")
      .optional<&CacheAttendOptions::window>("window")
      .plain<&CacheAttendOptions::attn_mask>("attnMask");
  using attn::GroupedQueryAttentionConfig, attn::GroupedQueryAttentionOptions, attn::QkNorm, attn::QkNormScope;
  using attn::WeightDtype;
  enum_<WeightDtype>("_WeightDtype")
      .value("f32", WeightDtype::f32)
      .value("f16", WeightDtype::f16)
      .value("bf16", WeightDtype::bf16);
  enum_<QkNormScope>("_QkNormScope")
      .value("none", QkNormScope::none)
      .value("head", QkNormScope::head)
      .value("all", QkNormScope::all);
  Struct<QkNorm>("_QkNorm")
      .plain<&QkNorm::scope>("scope")
      .number<&QkNorm::eps>("eps")
      .plain<&QkNorm::unit_offset>("unitOffset");
  Struct<GroupedQueryAttentionConfig>("_GroupedQueryAttentionConfig")
      .number<&GroupedQueryAttentionConfig::hidden_size>("hiddenSize")
      .number<&GroupedQueryAttentionConfig::num_heads>("numHeads")
      .number<&GroupedQueryAttentionConfig::num_key_value_heads>("numKeyValueHeads")
      .number<&GroupedQueryAttentionConfig::head_dim>("headDim")
      .plain<&GroupedQueryAttentionConfig::qkv_bias>("qkvBias")
      .plain<&GroupedQueryAttentionConfig::output_bias>("outputBias")
      .number<&GroupedQueryAttentionConfig::rope_base>("ropeBase")
      .plain<&GroupedQueryAttentionConfig::rope_interleaved>("ropeInterleaved")
      .optional<&GroupedQueryAttentionConfig::rotary_dim>("rotaryDim")
      .optional<&GroupedQueryAttentionConfig::sliding_window>("slidingWindow")
      .optional<&GroupedQueryAttentionConfig::softcap>("softcap")
      .optional<&GroupedQueryAttentionConfig::scale>("scale")
      .plain<&GroupedQueryAttentionConfig::rope_scaling>("ropeScaling")
      .plain<&GroupedQueryAttentionConfig::qk_norm>("qkNorm")
      .plain<&GroupedQueryAttentionConfig::dtype>("dtype");
  using attn::LinearConfig, attn::LinearWeights;
  Struct<LinearConfig>("_LinearConfig")
      .number<&LinearConfig::in_features>("inFeatures")
      .number<&LinearConfig::out_features>("outFeatures")
      .plain<&LinearConfig::bias>("bias")
      .plain<&LinearConfig::dtype>("dtype");
  Struct<LinearWeights>("_LinearWeights")
      .pointer<&LinearWeights::weight>("weight")
      .plain<&LinearWeights::weight_dtype>("weightDtype")
      .shape<&LinearWeights::weight_shape>("weightShape")
      .pointer<&LinearWeights::bias>("bias")
      .shape<&LinearWeights::bias_shape>("biasShape");
  Struct<GroupedQueryAttentionOptions>("_GroupedQueryAttentionOptions")
      .plain<&GroupedQueryAttentionOptions::positions>("positions")
      .plain<&GroupedQueryAttentionOptions::attn_mask>("attnMask")
      .plain<&GroupedQueryAttentionOptions::attention_mask>("attentionMask")
      .pointer<&GroupedQueryAttentionOptions::cache>("cache")
      .plain<&GroupedQueryAttentionOptions::head_mask>("headMask");
}

// ---- scaled dot-product attention, rope ----------------------------------------------------

val sdpa_check(const attn::TensorView& query, const attn::TensorView& key, const attn::TensorView& value,
               const attn::SdpaOptions& options) {
  return to_js(attn::check_scaled_dot_product_attention(query.shape, key.shape, value.shape, options));
}

val sdpa(const attn::TensorView& query, const attn::TensorView& key, const attn::TensorView& value,
         const attn::SdpaOptions& options, uintptr_t output, uintptr_t weights) {
  return to_js(attn::scaled_dot_product_attention(query, key, value, options, reinterpret_cast<float*>(output),
                                                  reinterpret_cast<float*>(weights)));
}

val rope_check(const attn::TensorView& x, const attn::RopeOptions& options) {
  return to_js(attn::check_rope(x.shape, options));
}

val rope(const attn::TensorView& x, const attn::RopeOptions& options, uintptr_t output) {
  return to_js(attn::rope(x, options, reinterpret_cast<float*>(output)));
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

// names: JS array of strings; pointers: JS array of heap addresses; shapes: one slot per entry;
// dtypes: JS array of _WeightDtype values, what each entry holds.
val load_state_dict(uintptr_t handle, val names, val pointers, uintptr_t shapes, val dtypes) {
  std::vector<attn::NamedTensor> state_dict;
  const int count = names["length"].as<int>();
  for (int i = 0; i < count; ++i)
    state_dict.push_back({names[i].as<std::string>(), read_tensor(shapes, i, pointers[i].as<uintptr_t>()),
                          dtypes[i].as<attn::WeightDtype>()});
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

val cache_create(const attn::KVCacheConfig& config) {
  std::unique_ptr<attn::KVCache> cache;
  const attn::Status s = attn::KVCache::create(config, &cache);
  if (!s.ok()) return to_js(s);
  return val(static_cast<double>(reinterpret_cast<uintptr_t>(cache.release())));
}

void cache_destroy(uintptr_t handle) { delete cache_of(handle); }

val cache_append_check(uintptr_t handle, const attn::TensorView& key, const attn::TensorView& value,
                       const attn::MaskView& mask) {
  return to_js(cache_of(handle)->check_append(key.shape, value.shape, mask));
}

val cache_append(uintptr_t handle, const attn::TensorView& key, const attn::TensorView& value,
                 const attn::MaskView& mask) {
  return to_js(cache_of(handle)->append(key, value, mask));
}

val cache_attend_check(uintptr_t handle, const attn::TensorView& query, const attn::CacheAttendOptions& options) {
  attn::Shape output, weights;
  const attn::Status s = cache_of(handle)->check_attend(query.shape, options, &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val cache_attend(uintptr_t handle, const attn::TensorView& query, const attn::CacheAttendOptions& options,
                 uintptr_t output, uintptr_t weights) {
  return to_js(cache_of(handle)->attend(query, options, reinterpret_cast<float*>(output),
                                        reinterpret_cast<float*>(weights)));
}

val cache_truncate(uintptr_t handle, double length) {
  return to_js(cache_of(handle)->truncate(static_cast<int64_t>(length)));
}
void cache_reset(uintptr_t handle) { cache_of(handle)->reset(); }
double cache_length(uintptr_t handle) { return static_cast<double>(cache_of(handle)->length()); }
double cache_position(uintptr_t handle) { return static_cast<double>(cache_of(handle)->position()); }
void cache_keys(uintptr_t handle, uintptr_t out) { cache_of(handle)->copy_keys(reinterpret_cast<float*>(out)); }
void cache_values(uintptr_t handle, uintptr_t out) { cache_of(handle)->copy_values(reinterpret_cast<float*>(out)); }
void cache_mask(uintptr_t handle, uintptr_t out) { cache_of(handle)->copy_mask(reinterpret_cast<uint8_t*>(out)); }

// ---- GroupedQueryAttention -----------------------------------------------------------------

val gqa_create(const attn::GroupedQueryAttentionConfig& config) { return create<attn::GroupedQueryAttention>(config); }

val gqa_check(uintptr_t handle, const attn::TensorView& x, const attn::GroupedQueryAttentionOptions& options) {
  attn::Shape output, weights;
  const attn::Status s = as<attn::GroupedQueryAttention>(handle)->check_forward(x.shape, options, &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val gqa_forward(uintptr_t handle, const attn::TensorView& x, const attn::GroupedQueryAttentionOptions& options,
                uintptr_t output, uintptr_t weights) {
  return to_js(as<attn::GroupedQueryAttention>(handle)->forward(x, options, reinterpret_cast<float*>(output),
                                                                reinterpret_cast<float*>(weights)));
}

val gqa_project_check(uintptr_t handle, const attn::TensorView& x, const attn::GroupedQueryAttentionOptions& options) {
  attn::Shape query, key;
  const attn::Status s = as<attn::GroupedQueryAttention>(handle)->check_project(x.shape, options, &query, &key);
  if (!s.ok()) return to_js(s);
  val result = val::object();
  result.set("query", to_js(query));
  result.set("key", to_js(key));
  return result;
}

val gqa_project(uintptr_t handle, const attn::TensorView& x, const attn::GroupedQueryAttentionOptions& options,
                uintptr_t query, uintptr_t key, uintptr_t value) {
  return to_js(as<attn::GroupedQueryAttention>(handle)->project(
      x, options, reinterpret_cast<float*>(query), reinterpret_cast<float*>(key), reinterpret_cast<float*>(value)));
}

// ---- Linear --------------------------------------------------------------------------------

val linear_create(const attn::LinearConfig& config) { return create<attn::Linear>(config); }

val linear_load(uintptr_t handle, const attn::LinearWeights& weights) {
  return to_js(as<attn::Linear>(handle)->load(weights));
}

val linear_check(uintptr_t handle, const attn::TensorView& x) {
  attn::Shape output;
  const attn::Status s = as<attn::Linear>(handle)->check_forward(x.shape, &output);
  return s.ok() ? shapes_to_js(output, {}) : to_js(s);
}

val linear_forward(uintptr_t handle, const attn::TensorView& x, uintptr_t output) {
  return to_js(as<attn::Linear>(handle)->forward(x, reinterpret_cast<float*>(output)));
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
  register_structs();
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
  function("_cacheMask", &cache_mask);
  function("_gqaCreate", &gqa_create);
  function("_gqaCheck", &gqa_check);
  function("_gqaForward", &gqa_forward);
  function("_gqaProjectCheck", &gqa_project_check);
  function("_gqaProject", &gqa_project);
  function("_linearCreate", &linear_create);
  function("_linearLoad", &linear_load);
  function("_linearCheck", &linear_check);
  function("_linearForward", &linear_forward);
  function("_mergeCheck", &merge_check);
  function("_merge", &merge);
}

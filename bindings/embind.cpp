// Embind glue: marshalling only. The public API, its validation and its errors live in the ESM
// layer (index.js and friends). Every entry point returns a Status object or null (or a value);
// no C++ exception exists in the core, so none can cross into JS (each one that escapes leaks 48
// bytes of the C stack, and the module traps after ~100k). Every entry point takes the core's own
// structs (value_object, enum_), as CanvasKit passes its style objects: tensors and masks as
// views, a module's configuration and each call's options as the structs its engine reads. A
// field JS leaves undefined keeps the struct's default, so each default is stated once, in the
// core, and a created module reports its configuration back as the core resolved it. An option
// added later touches the JS API, the struct (here, its one registration line) and the engine.
#include <emscripten/bind.h>
#include <emscripten/emscripten.h>
#include <emscripten/val.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "additive_attention.h"
#include "attention.h"
#include "feed_forward.h"
#include "grouped_query_attention.h"
#include "kv_cache.h"
#include "mask.h"
#include "multihead_attention.h"
#include "parallel.h"
#include "relative_attention.h"
#include "self_attention.h"

// A JS array of dimensions into `dims` in one call (through emval, each dimension took some five
// calls across the boundary); its length, at most `capacity`.
EM_JS(int, read_dims, (emscripten::EM_VAL handle, double* dims, int capacity), {
  var array = Emval.toValue(handle);
  var rank = Math.min(array.length, capacity);
  for (var axis = 0; axis < rank; ++axis) HEAPF64[(dims >> 3) + axis] = array[axis];
  return rank;
});

namespace {

using emscripten::val;

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

// ---- the core's structs ---------------------------------------------------------------------
// JS sees pointers, 64-bit integers, enums and shapes as numbers and arrays, and an absent
// optional as undefined; the accessors below convert each field, so that value_object takes the
// core's structs as they are. Every field is named in the object JS gives (Embind requires it),
// and a number field JS leaves undefined arrives as NaN and keeps the struct's default: each
// default is stated once, in the core (JS sends booleans and enum values as numbers too, for
// that). Options only travel from JS, so their fields are never read; a configuration travels
// back once its module exists (create()), its `read_` fields giving what JS did not: the
// defaults and what the core derived.
//
// One accessor per kind and storage type serves every struct: the context Embind hands it is
// the field's offset (a per-field accessor would cost the page some 20 bytes a field).

namespace field {

using emscripten::internal::BindingType;
using emscripten::EM_VAL;

template <class T>
T& at(size_t offset, char* s) {
  return *reinterpret_cast<T*>(s + offset);
}
template <class T>
const T& at(size_t offset, const char* s) {
  return *reinterpret_cast<const T*>(s + offset);
}

// Bool, enum_ and value_object fields, as Embind's own.
template <class T>
typename BindingType<T>::WireType get_plain(size_t offset, const char* s) {
  return BindingType<T>::toWireType(at<T>(offset, s));
}
template <class T>
void set_plain(size_t offset, char* s, typename BindingType<T>::WireType value) {
  at<T>(offset, s) = BindingType<T>::fromWireType(value);
}

template <class T>
void set_number(size_t offset, char* s, double value) {
  if (value != value) return;  // undefined: the default
  if constexpr (std::is_enum_v<T>)
    at<T>(offset, s) = static_cast<T>(static_cast<int>(value));
  else if constexpr (std::is_pointer_v<T>)
    at<T>(offset, s) = reinterpret_cast<T>(static_cast<uintptr_t>(value));
  else
    at<T>(offset, s) = static_cast<T>(value);
}
// Booleans as booleans, enums as their values, other numbers as doubles.
template <class T>
auto get_number(size_t offset, const char* s) {
  const T& value = at<T>(offset, s);
  if constexpr (std::is_same_v<T, bool>)
    return value;
  else if constexpr (std::is_enum_v<T>)
    return static_cast<int>(value);
  else
    return static_cast<double>(value);
}

// std::optional<T>: undefined or null is none.
template <class T>
void set_optional(size_t offset, char* s, EM_VAL handle) {
  const val value = val::take_ownership(handle);
  std::optional<T>& field = at<std::optional<T>>(offset, s);
  if (value.isUndefined() || value.isNull())
    field.reset();
  else
    field = static_cast<T>(value.as<double>());
}
template <class T>
EM_VAL get_optional(size_t offset, const char* s) {
  const std::optional<T>& field = at<std::optional<T>>(offset, s);
  return BindingType<val>::toWireType(field ? val(static_cast<double>(*field)) : val::null());
}

void set_shape(size_t offset, char* s, EM_VAL handle) {
  attn::Shape& shape = at<attn::Shape>(offset, s);
  double dims[attn::kMaxRank];
  // The JS layer refuses ranks past kMaxRank, naming the argument; this only keeps the array whole.
  shape.rank = read_dims(handle, dims, attn::kMaxRank);
  for (int axis = 0; axis < shape.rank; ++axis) shape[axis] = static_cast<int64_t>(dims[axis]);
  val::take_ownership(handle);  // released
}

EM_VAL unread(size_t, const char*) { return BindingType<val>::toWireType(val::undefined()); }

}  // namespace field

template <class Member>
struct MemberOf;
template <class Struct_, class Type_>
struct MemberOf<Type_ Struct_::*> {
  using Type = Type_;
};
template <auto member>
using TypeOf = typename MemberOf<decltype(member)>::Type;
template <class T>
struct OptionalOf;
template <class T>
struct OptionalOf<std::optional<T>> {
  using Type = T;
};

// value_object<S> with a method per kind of field; registered when it goes out of scope.
template <class S>
class Struct {
 public:
  explicit Struct(const char* name) : object_(name) {}
  // Enum values JS always gives, booleans whose default is false, and value_object fields.
  template <auto member>
  Struct& plain(const char* name) {
    using T = TypeOf<member>;
    return field<T, T>(name, offset<member>(), &field::get_plain<T>, &field::set_plain<T>);
  }
  template <auto member>
  Struct& number(const char* name) {
    return field<val, double>(name, offset<member>(), &field::unread, &field::set_number<TypeOf<member>>);
  }
  template <auto member>
  Struct& pointer(const char* name) { return number<member>(name); }
  template <auto member>
  Struct& optional(const char* name) {
    return field<val, val>(name, offset<member>(), &field::unread,
                           &field::set_optional<typename OptionalOf<TypeOf<member>>::Type>);
  }
  template <auto member>
  Struct& shape(const char* name) {
    return field<val, val>(name, offset<member>(), &field::unread, &field::set_shape);
  }
  template <auto member>
  Struct& read_number(const char* name) {
    using T = TypeOf<member>;
    using R = decltype(field::get_number<T>(0, nullptr));
    return field<R, double>(name, offset<member>(), &field::get_number<T>, &field::set_number<T>);
  }
  template <auto member>
  Struct& read_optional(const char* name) {
    using T = typename OptionalOf<TypeOf<member>>::Type;
    return field<val, val>(name, offset<member>(), &field::get_optional<T>, &field::set_optional<T>);
  }

 private:
  // The member's offset, from the address arithmetic alone (constant once compiled).
  template <auto member>
  static size_t offset() {
    alignas(S) char storage[sizeof(S)];
    const S* s = reinterpret_cast<const S*>(storage);
    return static_cast<size_t>(reinterpret_cast<const char*>(&(s->*member)) - storage);
  }
  template <class Read, class Written, class Getter, class Setter>
  Struct& field(const char* name, size_t offset, Getter get, Setter set) {
    using namespace emscripten::internal;
    void* context = reinterpret_cast<void*>(offset);
    _embind_register_value_object_field(TypeID<S>::get(), name, TypeID<Read>::get(), getSignature(get),
                                        reinterpret_cast<GenericFunction>(get), context, TypeID<Written>::get(),
                                        getSignature(set), reinterpret_cast<GenericFunction>(set), context);
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
  enum_<attn::CacheDtype>("_CacheDtype")
      .value("f32", attn::CacheDtype::f32)
      .value("f16", attn::CacheDtype::f16)
      .value("q8", attn::CacheDtype::q8);
  Struct<TensorView>("_Tensor").pointer<&TensorView::data>("data").shape<&TensorView::shape>("shape");
  Struct<MaskView>("_Mask")
      .plain<&MaskView::type>("type")
      .pointer<&MaskView::data>("data")
      .shape<&MaskView::shape>("shape")
      .plain<&MaskView::true_means_masked>("trueMeansMasked");
  Struct<IdsView>("_Ids").pointer<&IdsView::data>("data").shape<&IdsView::shape>("shape");
  Struct<SdpaOptions>("_SdpaOptions")
      .plain<&SdpaOptions::attn_mask>("attnMask")
      .number<&SdpaOptions::causal>("causal")
      .optional<&SdpaOptions::scale>("scale")
      .number<&SdpaOptions::dropout_p>("dropoutP")
      .number<&SdpaOptions::seed>("seed")
      .number<&SdpaOptions::enable_gqa>("enableGqa")
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
      .number<&RopeScaling::type>("type")
      .optional<&RopeScaling::factor>("factor")
      .optional<&RopeScaling::attention_factor>("attentionFactor")
      .optional<&RopeScaling::beta_fast>("betaFast")
      .optional<&RopeScaling::beta_slow>("betaSlow")
      .optional<&RopeScaling::mscale>("mscale")
      .optional<&RopeScaling::mscale_all_dim>("mscaleAllDim")
      .number<&RopeScaling::truncate>("truncate")
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
      .number<&RopeOptions::interleaved>("interleaved")
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
  enum_<attn::Activation>("_Activation")
      .value("silu", attn::Activation::silu)
      .value("gelu", attn::Activation::gelu)
      .value("gelu_tanh", attn::Activation::gelu_tanh);
  enum_<QkNormScope>("_QkNormScope")
      .value("none", QkNormScope::none)
      .value("head", QkNormScope::head)
      .value("all", QkNormScope::all);
  Struct<QkNorm>("_QkNorm")
      .read_number<&QkNorm::scope>("scope")
      .read_number<&QkNorm::eps>("eps")
      .read_number<&QkNorm::unit_offset>("unitOffset");
  Struct<GroupedQueryAttentionConfig>("_GroupedQueryAttentionConfig")
      .number<&GroupedQueryAttentionConfig::hidden_size>("hiddenSize")
      .number<&GroupedQueryAttentionConfig::num_heads>("numHeads")
      .number<&GroupedQueryAttentionConfig::num_key_value_heads>("numKeyValueHeads")
      .read_number<&GroupedQueryAttentionConfig::head_dim>("headDim")
      .read_number<&GroupedQueryAttentionConfig::qkv_bias>("qkvBias")
      .read_number<&GroupedQueryAttentionConfig::output_bias>("outputBias")
      .read_number<&GroupedQueryAttentionConfig::rope_base>("ropeBase")
      .read_number<&GroupedQueryAttentionConfig::rope_interleaved>("ropeInterleaved")
      .read_optional<&GroupedQueryAttentionConfig::rotary_dim>("rotaryDim")
      .read_optional<&GroupedQueryAttentionConfig::sliding_window>("slidingWindow")
      .read_optional<&GroupedQueryAttentionConfig::softcap>("softcap")
      .read_optional<&GroupedQueryAttentionConfig::scale>("scale")
      .plain<&GroupedQueryAttentionConfig::rope_scaling>("ropeScaling")
      .plain<&GroupedQueryAttentionConfig::qk_norm>("qkNorm")
      .read_number<&GroupedQueryAttentionConfig::dtype>("dtype");
  using attn::LinearConfig, attn::LinearWeights;
  Struct<LinearConfig>("_LinearConfig")
      .number<&LinearConfig::in_features>("inFeatures")
      .number<&LinearConfig::out_features>("outFeatures")
      .read_number<&LinearConfig::bias>("bias")
      .read_number<&LinearConfig::dtype>("dtype");
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
  using attn::MultiheadAttentionConfig, attn::MultiheadAttentionOptions;
  Struct<MultiheadAttentionConfig>("_MultiheadAttentionConfig")
      .number<&MultiheadAttentionConfig::embed_dim>("embedDim")
      .number<&MultiheadAttentionConfig::num_heads>("numHeads")
      .read_number<&MultiheadAttentionConfig::bias>("bias")
      .read_number<&MultiheadAttentionConfig::add_bias_kv>("addBiasKV")
      .read_number<&MultiheadAttentionConfig::add_zero_attn>("addZeroAttn")
      .read_number<&MultiheadAttentionConfig::kdim>("kdim")
      .read_number<&MultiheadAttentionConfig::vdim>("vdim")
      .read_number<&MultiheadAttentionConfig::batch_first>("batchFirst")
      .read_number<&MultiheadAttentionConfig::dropout>("dropout");
  Struct<MultiheadAttentionOptions>("_MultiheadAttentionOptions")
      .plain<&MultiheadAttentionOptions::attn_mask>("attnMask")
      .plain<&MultiheadAttentionOptions::key_padding_mask>("keyPaddingMask")
      .number<&MultiheadAttentionOptions::need_weights>("needWeights")
      .number<&MultiheadAttentionOptions::average_attn_weights>("averageAttnWeights")
      .number<&MultiheadAttentionOptions::is_causal>("isCausal")
      .number<&MultiheadAttentionOptions::seed>("seed");
  using attn::SelfAttentionConfig, attn::SelfAttentionOptions;
  Struct<SelfAttentionConfig>("_SelfAttentionConfig")
      .number<&SelfAttentionConfig::embed_dim>("embedDim")
      .number<&SelfAttentionConfig::key_size>("keySize")
      .number<&SelfAttentionConfig::value_size>("valueSize")
      .read_number<&SelfAttentionConfig::dropout>("dropout");
  Struct<SelfAttentionOptions>("_SelfAttentionOptions")
      .plain<&SelfAttentionOptions::attn_mask>("attnMask")
      .number<&SelfAttentionOptions::seed>("seed");
  using attn::AdditiveAttentionConfig, attn::AdditiveAttentionOptions;
  Struct<AdditiveAttentionConfig>("_AdditiveAttentionConfig")
      .number<&AdditiveAttentionConfig::query_size>("querySize")
      .number<&AdditiveAttentionConfig::key_size>("keySize")
      .number<&AdditiveAttentionConfig::hidden_size>("hiddenSize")
      .read_number<&AdditiveAttentionConfig::dropout>("dropout");
  Struct<AdditiveAttentionOptions>("_AdditiveAttentionOptions")
      .plain<&AdditiveAttentionOptions::attn_mask>("attnMask")
      .number<&AdditiveAttentionOptions::seed>("seed");
  using attn::RelativeAttentionConfig, attn::RelativeAttentionOptions;
  Struct<RelativeAttentionConfig>("_RelativeAttentionConfig")
      .number<&RelativeAttentionConfig::heads>("heads")
      .number<&RelativeAttentionConfig::d_model>("dModel")
      .read_number<&RelativeAttentionConfig::P>("P")
      .read_number<&RelativeAttentionConfig::dropout>("dropout");
  Struct<RelativeAttentionOptions>("_RelativeAttentionOptions")
      .plain<&RelativeAttentionOptions::mask>("mask")
      .number<&RelativeAttentionOptions::seed>("seed")
      .number<&RelativeAttentionOptions::heads_first>("headsFirst");
  using attn::NamedTensor, attn::MergeMasksOptions;
  Struct<NamedTensor>("_NamedTensor")
      .plain<&NamedTensor::name>("name")
      .plain<&NamedTensor::tensor>("tensor")
      .plain<&NamedTensor::dtype>("dtype");
  Struct<MergeMasksOptions>("_MergeMasksOptions")
      .plain<&MergeMasksOptions::attn_mask>("attnMask")
      .plain<&MergeMasksOptions::key_padding_mask>("keyPaddingMask")
      .number<&MergeMasksOptions::heads>("heads");
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

// { handle, config: the configuration as the core resolved it }, or the Status that refused it.
template <class T, class Config>
val create(const Config& requested) {
  std::unique_ptr<T> module;
  const attn::Status s = T::create(requested, &module);
  if (!s.ok()) return to_js(s);
  val made = val::object();
  made.set("config", val(module->config()));
  made.set("handle", static_cast<double>(reinterpret_cast<uintptr_t>(static_cast<attn::Module*>(module.release()))));
  return made;
}

void destroy(uintptr_t handle) { delete module_of(handle); }
void set_training(uintptr_t handle, bool training) { module_of(handle)->set_training(training); }

// entries: a JS array of _NamedTensor.
val load_state_dict(uintptr_t handle, val entries) {
  return to_js(module_of(handle)->load_state_dict(emscripten::vecFromJSArray<attn::NamedTensor>(entries)));
}

// A Float32Array outside the heap, given by the JS wrapper for long inputs: the forward keeps its
// attention output there while it runs (attn::SpillStore). Called on the calling thread only.
class ArraySpill : public attn::SpillStore {
 public:
  explicit ArraySpill(val array) : array_(std::move(array)) {}
  void write(int64_t offset, const float* data, int64_t count) override {
    array_.call<void>("set", val(emscripten::typed_memory_view(static_cast<size_t>(count), data)),
                      static_cast<double>(offset));
  }
  void read(int64_t offset, float* data, int64_t count) const override {
    const val source = array_.call<val>("subarray", static_cast<double>(offset), static_cast<double>(offset + count));
    val(emscripten::typed_memory_view(static_cast<size_t>(count), data)).call<void>("set", source);
  }

 private:
  val array_;
};

val mha_check(uintptr_t handle, const attn::TensorView& query, const attn::TensorView& key,
              const attn::TensorView& value, const attn::MultiheadAttentionOptions& options) {
  attn::Shape output, weights;
  const attn::Status s = as<attn::MultiheadAttention>(handle)->check_forward(query.shape, key.shape, value.shape,
                                                                            options, &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val mha_forward(uintptr_t handle, const attn::TensorView& query, const attn::TensorView& key,
                const attn::TensorView& value, const attn::MultiheadAttentionOptions& options, uintptr_t output,
                uintptr_t weights, val spill_array) {
  ArraySpill spill(spill_array);
  return to_js(as<attn::MultiheadAttention>(handle)->forward(query, key, value, options,
                                                             reinterpret_cast<float*>(output),
                                                             reinterpret_cast<float*>(weights),
                                                             spill_array.isNull() ? nullptr : &spill));
}

val self_attention_check(uintptr_t handle, const attn::TensorView& x, const attn::SelfAttentionOptions& options) {
  attn::Shape output, weights;
  const attn::Status s = as<attn::SelfAttention>(handle)->check_forward(x.shape, options, &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

val self_attention_forward(uintptr_t handle, const attn::TensorView& x, const attn::SelfAttentionOptions& options,
                           uintptr_t output, uintptr_t weights) {
  return to_js(as<attn::SelfAttention>(handle)->forward(x, options, reinterpret_cast<float*>(output),
                                                        reinterpret_cast<float*>(weights)));
}

// AdditiveAttention and RelativeMultiHeadAttention: forward(query, key, value, options).
template <class Module, class Options>
val qkv_check(uintptr_t handle, const attn::TensorView& query, const attn::TensorView& key,
              const attn::TensorView& value, const Options& options) {
  attn::Shape output, weights;
  const attn::Status s =
      as<Module>(handle)->check_forward(query.shape, key.shape, value.shape, options, &output, &weights);
  return s.ok() ? shapes_to_js(output, weights) : to_js(s);
}

template <class Module, class Options>
val qkv_forward(uintptr_t handle, const attn::TensorView& query, const attn::TensorView& key,
                const attn::TensorView& value, const Options& options, uintptr_t output, uintptr_t weights) {
  return to_js(as<Module>(handle)->forward(query, key, value, options, reinterpret_cast<float*>(output),
                                           reinterpret_cast<float*>(weights)));
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

// ---- feedForward ---------------------------------------------------------------------------
// The parts are Linear handles, 0 where absent.

attn::FeedForwardParts feed_forward_parts(const val& parts) {
  const auto linear = [&](const char* name) {
    const auto handle = parts[name].as<uintptr_t>();
    return handle ? static_cast<const attn::Linear*>(as<attn::Linear>(handle)) : nullptr;
  };
  return {linear("gate"), linear("up"), linear("gateUp"), linear("down"), parts["activation"].as<attn::Activation>()};
}

val feed_forward_check(const val& parts, const attn::TensorView& x) {
  attn::Shape output;
  const attn::Status s = attn::check_feed_forward(feed_forward_parts(parts), x.shape, &output);
  return s.ok() ? shapes_to_js(output, {}) : to_js(s);
}

val feed_forward(const val& parts, const attn::TensorView& x, uintptr_t output) {
  return to_js(attn::feed_forward(feed_forward_parts(parts), x, reinterpret_cast<float*>(output)));
}

// ---- masks.merge ---------------------------------------------------------------------------

val merge_check(const attn::MergeMasksOptions& options) {
  attn::Shape merged;
  const attn::Status s = attn::check_merge_masks(options, &merged);
  return s.ok() ? to_js(merged) : to_js(s);
}

val merge(const attn::MergeMasksOptions& options, uintptr_t output) {
  return to_js(attn::merge_masks(options, reinterpret_cast<float*>(output)));
}

}  // namespace

EMSCRIPTEN_BINDINGS(attention) {
  using emscripten::function;
  using attn::AdditiveAttention, attn::AdditiveAttentionOptions, attn::RelativeMultiHeadAttention,
      attn::RelativeAttentionOptions;
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
  function("_mhaCreate", &create<attn::MultiheadAttention, attn::MultiheadAttentionConfig>);
  function("_mhaCheck", &mha_check);
  function("_mhaForward", &mha_forward);
  function("_selfAttentionCreate", &create<attn::SelfAttention, attn::SelfAttentionConfig>);
  function("_selfAttentionCheck", &self_attention_check);
  function("_selfAttentionForward", &self_attention_forward);
  function("_additiveCreate", &create<AdditiveAttention, attn::AdditiveAttentionConfig>);
  function("_additiveCheck", &qkv_check<AdditiveAttention, AdditiveAttentionOptions>);
  function("_additiveForward", &qkv_forward<AdditiveAttention, AdditiveAttentionOptions>);
  function("_relativeCreate", &create<RelativeMultiHeadAttention, attn::RelativeAttentionConfig>);
  function("_relativeCheck", &qkv_check<RelativeMultiHeadAttention, RelativeAttentionOptions>);
  function("_relativeForward", &qkv_forward<RelativeMultiHeadAttention, RelativeAttentionOptions>);
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
  function("_gqaCreate", &create<attn::GroupedQueryAttention, attn::GroupedQueryAttentionConfig>);
  function("_gqaCheck", &gqa_check);
  function("_gqaForward", &gqa_forward);
  function("_gqaProjectCheck", &gqa_project_check);
  function("_gqaProject", &gqa_project);
  function("_linearCreate", &create<attn::Linear, attn::LinearConfig>);
  function("_linearLoad", &linear_load);
  function("_linearCheck", &linear_check);
  function("_linearForward", &linear_forward);
  function("_feedForwardCheck", &feed_forward_check);
  function("_feedForward", &feed_forward);
  function("_mergeCheck", &merge_check);
  function("_merge", &merge);
}

#include "grouped_query_attention.h"

#include <cmath>
#include <string>

#include "attend.h"
#include "attention.h"
#include "buffer.h"
#include "kernels/kernels.h"
#include "mask.h"

namespace attn {
namespace {

// [N, A, B, inner] → [N, B, A, inner]: tokens × heads to heads × tokens and back.
void swap_middle(const float* from, int64_t N, int64_t A, int64_t B, int64_t inner, float* to) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(from + ((n * A + a) * B + b) * inner, inner, to + ((n * B + b) * A + a) * inner);
}

// RMSNorm in place of each run of `width` floats in x[size], as Hugging Face's Qwen3RMSNorm and
// Gemma3RMSNorm: x · rsqrt(mean(x²) + eps) · w, or · (1 + w), with w of `width`.
void rms_norm(float* x, int64_t size, int64_t width, const float* w, const QkNorm& norm) {
  for (int64_t start = 0; start < size; start += width) {
    float* v = x + start;
    double squares = 0.0;
    for (int64_t e = 0; e < width; ++e) squares += static_cast<double>(v[e]) * v[e];
    const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(width) + norm.eps);
    for (int64_t e = 0; e < width; ++e)
      v[e] = static_cast<float>(v[e] * inverse) * (norm.unit_offset ? 1.0f + w[e] : w[e]);
  }
}

bool has_head_mask(const GroupedQueryAttentionOptions& options) {
  return options.head_mask.data || options.head_mask.shape.rank > 0;
}

}  // namespace

GroupedQueryAttention::GroupedQueryAttention(const GroupedQueryAttentionConfig& config) : config_(config) {
  const GroupedQueryAttentionConfig& c = config_;
  const int64_t q_size = c.num_heads * c.head_dim, kv_size = c.num_key_value_heads * c.head_dim;
  // The projections stay 16-bit, if so given, until packed.
  q_proj_weight_ = parameters_.declare("q_proj.weight", {q_size, c.hidden_size}, true);
  k_proj_weight_ = parameters_.declare("k_proj.weight", {kv_size, c.hidden_size}, true);
  v_proj_weight_ = parameters_.declare("v_proj.weight", {kv_size, c.hidden_size}, true);
  o_proj_weight_ = parameters_.declare("o_proj.weight", {c.hidden_size, q_size}, true);
  if (c.qkv_bias) {
    q_proj_bias_ = parameters_.declare("q_proj.bias", {q_size});
    k_proj_bias_ = parameters_.declare("k_proj.bias", {kv_size});
    v_proj_bias_ = parameters_.declare("v_proj.bias", {kv_size});
  }
  if (c.output_bias) o_proj_bias_ = parameters_.declare("o_proj.bias", {c.hidden_size});
  if (c.qk_norm.scope != QkNormScope::none) {
    const bool per_head = c.qk_norm.scope == QkNormScope::head;
    q_norm_weight_ = parameters_.declare("q_norm.weight", {per_head ? c.head_dim : q_size});
    k_norm_weight_ = parameters_.declare("k_norm.weight", {per_head ? c.head_dim : kv_size});
  }
}

Status GroupedQueryAttention::create(const GroupedQueryAttentionConfig& config,
                                     std::unique_ptr<GroupedQueryAttention>* out) {
  Status s = first_failure({check_size("hiddenSize", config.hidden_size), check_size("numHeads", config.num_heads),
                            check_size("numKeyValueHeads", config.num_key_value_heads)});
  if (!s.ok()) return s;
  GroupedQueryAttentionConfig c = config;
  if (c.num_heads % c.num_key_value_heads != 0)
    return Status::invalid("numKeyValueHeads", "a divisor of numHeads (" + std::to_string(c.num_heads) + ")",
                           std::to_string(c.num_key_value_heads));
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_heads != 0)
      return Status::invalid("hiddenSize", "a multiple of numHeads (" + std::to_string(c.num_heads) + "), or headDim given",
                             std::to_string(c.hidden_size));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  s = check_size("headDim", c.head_dim);
  if (!s.ok()) return s;
  const int64_t rotary = c.rotary_dim.value_or(c.head_dim);
  if (rotary < 0 || rotary > c.head_dim || rotary % 2 != 0)
    return Status::invalid(c.rotary_dim ? "rotaryDim" : "headDim",
                           c.rotary_dim ? "an even integer in [0, " + std::to_string(c.head_dim) + "] (headDim)"
                                        : "an even head size for RoPE (or rotaryDim given)",
                           std::to_string(rotary));
  c.rotary_dim = rotary;  // config() reports the size resolved
  if (!(c.rope_base > 0.0 && std::isfinite(c.rope_base)))
    return Status::invalid("ropeBase", "a positive finite number", number_string(c.rope_base));
  if (c.sliding_window) {
    s = check_size("slidingWindow", *c.sliding_window);
    if (!s.ok()) return s;
  }
  if (c.softcap && !(*c.softcap > 0.0f && std::isfinite(*c.softcap)))
    return Status::invalid("softcap", "a positive finite number", number_string(*c.softcap));
  if (c.scale && !std::isfinite(*c.scale)) return Status::invalid("scale", "a finite number", number_string(*c.scale));
  if (c.qk_norm.scope != QkNormScope::none && !(c.qk_norm.eps >= 0.0 && std::isfinite(c.qk_norm.eps)))
    return Status::invalid("qkNorm.eps", "a finite number, at least 0", number_string(c.qk_norm.eps));
  std::unique_ptr<GroupedQueryAttention> module(new GroupedQueryAttention(c));
  s = module->frequencies_.prepare(c.rope_scaling, c.rope_base, rotary);
  if (!s.ok()) return s;
  // The module keeps its own copies of the scheme's arrays, in frequencies_.
  RopeScaling& kept = module->config_.rope_scaling;
  kept.short_factor = kept.long_factor = kept.inv_freq = nullptr;
  *out = std::move(module);
  return Status::success();
}

Status GroupedQueryAttention::prepare() {
  const GroupedQueryAttentionConfig& c = config_;
  const int64_t q_size = c.num_heads * c.head_dim, kv_size = c.num_key_value_heads * c.head_dim;
  // Each loaded as floats or 16-bit words, each held as config_.dtype.
  const auto pack = [&](PackedWeight& weight, int index, int64_t out, int64_t in) {
    const LoadedWeight loaded = parameters_.weight(index);
    return weight.pack(loaded.data, loaded.dtype, out, in, c.dtype);
  };
  Status s = first_failure({pack(q_weight_, q_proj_weight_, q_size, c.hidden_size),
                            pack(k_weight_, k_proj_weight_, kv_size, c.hidden_size),
                            pack(v_weight_, v_proj_weight_, kv_size, c.hidden_size),
                            pack(o_weight_, o_proj_weight_, c.hidden_size, q_size)});
  // Forward reads the packed projections only: the loaded copies would double the block's memory.
  if (s.ok())
    for (int index : {q_proj_weight_, k_proj_weight_, v_proj_weight_, o_proj_weight_}) parameters_.release(index);
  return s;
}

KVCacheConfig GroupedQueryAttention::cache_config(int64_t max_length, int64_t batch, CacheDtype dtype) const {
  KVCacheConfig cache;
  cache.batch = batch;
  cache.heads = config_.num_key_value_heads;
  cache.head_dim = cache.value_dim = config_.head_dim;
  cache.max_length = max_length;
  cache.dtype = dtype;
  cache.window = config_.sliding_window;
  return cache;
}

Status GroupedQueryAttention::check_cache(const Shape& x, const KVCache& cache) const {
  const KVCacheConfig& c = cache.config();
  const GroupedQueryAttentionConfig& g = config_;
  if (c.batch != x[0] || c.heads != g.num_key_value_heads || c.head_dim != g.head_dim || c.value_dim != g.head_dim ||
      c.window != g.sliding_window)
    return Status::invalid(
        "cache",
        "a KVCache of batch " + std::to_string(x[0]) + ", " + std::to_string(g.num_key_value_heads) + " heads of " +
            std::to_string(g.head_dim) + (g.sliding_window ? ", window " + std::to_string(*g.sliding_window) : "") +
            " (createCache gives one)",
        "batch " + std::to_string(c.batch) + ", " + std::to_string(c.heads) + " heads of " +
            std::to_string(c.head_dim) + (c.value_dim != c.head_dim ? " / " + std::to_string(c.value_dim) : "") +
            (c.window ? ", window " + std::to_string(*c.window) : ""));
  return Status::success();
}

Status GroupedQueryAttention::check_room(const Shape& x, const KVCache& cache) const {
  const KVCacheConfig& c = cache.config();
  const GroupedQueryAttentionConfig& g = config_;
  const Shape key{x[0], g.num_key_value_heads, x[1], g.head_dim};
  if (!cache.check_append(key, key).ok())
    return Status::invalid("x",
                           "[" + std::to_string(x[0]) + ", t ≤ " + std::to_string(c.max_length - cache.length()) +
                               ", " + std::to_string(g.hidden_size) + "] (opts.cache holds " +
                               std::to_string(cache.length()) + " of maxLength " + std::to_string(c.max_length) +
                               ": truncate() or reset() it, or createCache() a larger one)",
                           x.str());
  return Status::success();
}

Status GroupedQueryAttention::check_project(const Shape& x, const GroupedQueryAttentionOptions& options,
                                            Shape* query_shape, Shape* key_shape) const {
  const GroupedQueryAttentionConfig& c = config_;
  if (x.rank != 3 || x[2] != c.hidden_size || !x.non_negative())
    return Status::invalid("x", "[N, t, " + std::to_string(c.hidden_size) + "]", x.str());
  const int64_t N = x[0], t = x[1];
  const Shape& p = options.positions.shape;
  if (options.positions.present() && !((p.rank == 1 && p[0] == t) || (p.rank == 2 && p[0] == N && p[1] == t)))
    return Status::invalid("positions", "[" + std::to_string(t) + "] or [" + std::to_string(N) + ", " + std::to_string(t) + "]",
                           p.str());
  const MaskView& tokens = options.attention_mask;
  if (tokens.present() && (tokens.type != MaskType::boolean || tokens.shape.rank != 2 || tokens.shape[0] != N ||
                           tokens.shape[1] != t))
    return Status::invalid("attentionMask",
                           "a boolean [" + std::to_string(N) + ", " + std::to_string(t) +
                               "] (N, t: Hugging Face's attention_mask, 1 a token, 0 padding)",
                           (tokens.type == MaskType::additive ? "a float " : "") + tokens.shape.str());
  if (options.cache) {
    Status s = check_cache(x, *options.cache);
    if (!s.ok()) return s;
  }
  *query_shape = Shape{N, c.num_heads, t, c.head_dim};
  *key_shape = Shape{N, c.num_key_value_heads, t, c.head_dim};
  return Status::success();
}

Status GroupedQueryAttention::check_forward(const Shape& x, const GroupedQueryAttentionOptions& options,
                                            Shape* output_shape, Shape* weights_shape) const {
  Shape query, key;
  Status s = check_project(x, options, &query, &key);
  if (!s.ok()) return s;
  if (options.cache) {
    s = check_room(x, *options.cache);
    if (!s.ok()) return s;
  }
  const int64_t N = x[0], t = x[1];
  const int64_t m = options.cache ? options.cache->length_after_append(t) : t;
  const Shape scores{N, config_.num_heads, t, m};
  if (options.attn_mask.present()) {
    s = BroadcastMask::check(options.attn_mask, scores, "attnMask");
    if (!s.ok()) return s;
  }
  const Shape& head_mask = options.head_mask.shape;
  if (has_head_mask(options) && head_mask != Shape{config_.num_heads})
    return Status::invalid("headMask", "[" + std::to_string(config_.num_heads) + "] (numHeads)", head_mask.str());
  *output_shape = x;
  *weights_shape = scores;
  return Status::success();
}

Status GroupedQueryAttention::project(const TensorView& x, const GroupedQueryAttentionOptions& options, float* query,
                                      float* key, float* value) const {
  Shape query_shape, key_shape;
  Status s = first_failure({require_loaded("GroupedQueryAttention"), check_project(x.shape, options, &query_shape, &key_shape),
                            check_data(x, "x"), check_data(options.positions, "positions"),
                            check_data(options.attention_mask, "attentionMask")});
  return s.ok() ? projections(x, options, query, key, value) : s;
}

Status GroupedQueryAttention::projections(const TensorView& x, const GroupedQueryAttentionOptions& options,
                                          float* query, float* key, float* value) const {
  const GroupedQueryAttentionConfig& c = config_;
  const int64_t N = x.shape[0], t = x.shape[1], rows = N * t, hd = c.head_dim;
  const int64_t q_size = c.num_heads * hd, kv_size = c.num_key_value_heads * hd;
  FloatBuffer projected;
  Buffer<int32_t> default_positions;
  Status s = first_failure({projected.allocate(rows * q_size, "GroupedQueryAttention projections"),
                            default_positions.allocate(rows, "GroupedQueryAttention positions")});
  if (!s.ok()) return s;
  const auto bias = [&](int index) { return index >= 0 ? parameters_.get(index) : nullptr; };
  // Each projection [N, t, heads, hd], QK-normed, goes to [N, heads, t, hd], the layout of
  // attention's blocks.
  const QkNorm& norm = c.qk_norm;
  s = q_weight_.apply(rows, x.data, bias(q_proj_bias_), projected.data());
  if (!s.ok()) return s;
  if (norm.scope != QkNormScope::none)
    rms_norm(projected.data(), rows * q_size, parameters_.shape(q_norm_weight_)[0], parameters_.get(q_norm_weight_), norm);
  swap_middle(projected.data(), N, t, c.num_heads, hd, query);
  s = k_weight_.apply(rows, x.data, bias(k_proj_bias_), projected.data());
  if (!s.ok()) return s;
  if (norm.scope != QkNormScope::none)
    rms_norm(projected.data(), rows * kv_size, parameters_.shape(k_norm_weight_)[0], parameters_.get(k_norm_weight_), norm);
  swap_middle(projected.data(), N, t, c.num_key_value_heads, hd, key);
  s = v_weight_.apply(rows, x.data, bias(v_proj_bias_), projected.data());
  if (!s.ok()) return s;
  swap_middle(projected.data(), N, t, c.num_key_value_heads, hd, value);

  // RoPE at the given positions ([t] for every row, or [N, t]), else at generate()'s: each row's
  // tokens counted on from those the cache holds, padding at 0.
  IdsView positions = options.positions;
  if (!positions.present()) {
    const uint8_t* mask = static_cast<const uint8_t*>(options.attention_mask.data);
    for (int64_t n = 0; n < N; ++n) {
      int64_t next = options.cache ? options.cache->tokens(n) : 0;
      for (int64_t i = 0; i < t; ++i) {
        const bool token = !mask || mask[n * t + i];
        default_positions.data()[n * t + i] = static_cast<int32_t>(token ? next : 0);
        next += token;
      }
    }
    positions = {default_positions.data(), {N, t}};
  }
  return apply_rope({{query, {N, c.num_heads, t, hd}}, {key, {N, c.num_key_value_heads, t, hd}}}, frequencies_, positions,
                    0, c.rope_interleaved);
}

Status GroupedQueryAttention::forward(const TensorView& x, const GroupedQueryAttentionOptions& options, float* output,
                                      float* weights) const {
  Shape output_shape, weights_shape;
  Status s = first_failure({require_loaded("GroupedQueryAttention"),
                            check_forward(x.shape, options, &output_shape, &weights_shape), check_data(x, "x"),
                            check_data(options.positions, "positions"), check_data(options.attn_mask, "attnMask"),
                            check_data(options.attention_mask, "attentionMask"),
                            has_head_mask(options) ? check_data(options.head_mask, "headMask") : Status::success()});
  if (!s.ok()) return s;
  const GroupedQueryAttentionConfig& c = config_;
  const int64_t N = x.shape[0], t = x.shape[1], rows = N * t, hd = c.head_dim;
  const int64_t q_size = c.num_heads * hd, kv_size = c.num_key_value_heads * hd;
  FloatBuffer q, k, v;
  s = first_failure({q.allocate(rows * q_size, "GroupedQueryAttention queries"),
                     k.allocate(rows * kv_size, "GroupedQueryAttention keys"),
                     v.allocate(rows * kv_size, "GroupedQueryAttention values")});
  if (!s.ok()) return s;
  s = projections(x, options, q.data(), k.data(), v.data());
  if (!s.ok()) return s;

  // Attention [N, numHeads, t, hd], then heads merged into the queries' buffer.
  FloatBuffer attended;
  s = attended.allocate(rows * q_size, "GroupedQueryAttention attention output");
  if (!s.ok()) return s;
  const TensorView queries{q.data(), {N, c.num_heads, t, hd}};
  if (options.cache) {
    KVCache& cache = *options.cache;
    s = cache.append({k.data(), {N, c.num_key_value_heads, t, hd}}, {v.data(), {N, c.num_key_value_heads, t, hd}},
                     options.attention_mask);
    if (!s.ok()) return s;
    CacheAttendOptions attend;
    attend.scale = c.scale;
    attend.softcap = c.softcap;
    attend.attn_mask = options.attn_mask;
    s = cache.attend(queries, attend, attended.data(), weights);
    if (!s.ok()) {
      cache.truncate(cache.length() - t);  // only out of memory gets here: take the positions back
      return s;
    }
  } else {
    SdpaOptions sdpa;
    sdpa.attn_mask = options.attn_mask;
    sdpa.causal = Causal::lower_right;
    sdpa.scale = c.scale;
    sdpa.enable_gqa = true;
    sdpa.window = c.sliding_window;
    sdpa.softcap = c.softcap;
    const Shape kv_shape{N, c.num_key_value_heads, t, hd};
    SdpaPlan plan;
    s = plan.prepare(queries, kv_shape, kv_shape, sdpa);
    if (!s.ok()) return s;
    if (options.attention_mask.present()) {
      const int64_t strides[] = {t, 0, 0, 1};
      plan.add_mask(BroadcastMask::with_strides(options.attention_mask, {N, c.num_heads, t, t}, strides));
    }
    plan.blocks.key = {k.data(), nullptr, BlockLayout::contiguous(t, hd)};
    plan.blocks.value = {v.data(), nullptr, BlockLayout::contiguous(t, hd)};
    s = attend(plan.blocks, attended.data(), weights);
    if (!s.ok()) return s;
  }
  if (has_head_mask(options)) {
    // Scaling a head's weights scales its attention output alike.
    const kernels::KernelSet& k = kernels::active_kernels();
    const int64_t m = weights_shape[3];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < c.num_heads; ++h) {
        const float factor = options.head_mask.data[h];
        const int64_t plane = n * c.num_heads + h;
        k.scale(attended.data() + plane * t * hd, static_cast<size_t>(t * hd), factor);
        if (weights) k.scale(weights + plane * t * m, static_cast<size_t>(t * m), factor);
      }
  }
  swap_middle(attended.data(), N, c.num_heads, t, hd, q.data());
  return o_weight_.apply(rows, q.data(), o_proj_bias_ >= 0 ? parameters_.get(o_proj_bias_) : nullptr, output);
}

}  // namespace attn

#include "multihead_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attend.h"
#include "buffer.h"
#include "linear.h"
#include "mask.h"

namespace attn {
namespace {

// The batched view of an input: unbatched (L, E) is treated as (L, 1, E).
struct Geometry {
  int64_t batch, queries, keys, extra_keys;  // N, n, m, and the bias_k / zero-attention rows

  int64_t all_keys() const { return keys + extra_keys; }
};

std::string dims(std::initializer_list<std::string> parts) {
  std::string s = "[";
  for (const std::string& p : parts) s += (s.size() > 1 ? ", " : "") + p;
  return s + "]";
}

std::string num(int64_t v) { return std::to_string(v); }

// Where token (position t, batch element b) of an input with `rows` positions sits, in rows.
BlockLayout token_layout(bool batch_first, int64_t batch, int64_t rows, int64_t heads, int64_t width) {
  const int64_t head_dim = width / heads;
  if (batch_first) return {heads, rows * width, head_dim, width};
  return {heads, width, head_dim, batch * width};
}

}  // namespace

MultiheadAttention::MultiheadAttention(const MultiheadAttentionConfig& config) : config_(config) {
  const int64_t E = config.embed_dim;
  if (config.kdim == E && config.vdim == E) {
    in_proj_weight_ = parameters_.declare("in_proj_weight", {3 * E, E});
  } else {
    q_proj_weight_ = parameters_.declare("q_proj_weight", {E, E});
    k_proj_weight_ = parameters_.declare("k_proj_weight", {E, config.kdim});
    v_proj_weight_ = parameters_.declare("v_proj_weight", {E, config.vdim});
  }
  if (config.bias) in_proj_bias_ = parameters_.declare("in_proj_bias", {3 * E});
  if (config.add_bias_kv) {
    bias_k_ = parameters_.declare("bias_k", {1, 1, E});
    bias_v_ = parameters_.declare("bias_v", {1, 1, E});
  }
  out_proj_weight_ = parameters_.declare("out_proj.weight", {E, E});
  if (config.bias) out_proj_bias_ = parameters_.declare("out_proj.bias", {E});
}

Status MultiheadAttention::create(const MultiheadAttentionConfig& requested, std::unique_ptr<MultiheadAttention>* out) {
  MultiheadAttentionConfig config = requested;
  if (config.kdim == 0) config.kdim = config.embed_dim;
  if (config.vdim == 0) config.vdim = config.embed_dim;
  Status s = first_failure({check_size("embedDim", config.embed_dim), check_size("numHeads", config.num_heads),
                             check_size("kdim", config.kdim), check_size("vdim", config.vdim),
                             check_dropout(config.dropout)});
  if (!s.ok()) return s;
  if (config.embed_dim % config.num_heads != 0)
    return Status::invalid("embedDim", "a multiple of numHeads (" + num(config.num_heads) + ")", num(config.embed_dim));
  out->reset(new MultiheadAttention(config));
  return Status::success();
}

Status MultiheadAttention::prepare() {
  const int64_t E = config_.embed_dim;
  // in_proj_weight stacks the query, key and value projections; separate weights when kdim or vdim differ.
  const auto slice = [&](int separate, int slot) {
    return separate >= 0 ? parameters_.get(separate) : parameters_.get(in_proj_weight_) + slot * E * E;
  };
  return first_failure({q_weight_.pack(slice(q_proj_weight_, 0), E, E), k_weight_.pack(slice(k_proj_weight_, 1), E, config_.kdim),
                        v_weight_.pack(slice(v_proj_weight_, 2), E, config_.vdim),
                        out_weight_.pack(parameters_.get(out_proj_weight_), E, E)});
}

Status MultiheadAttention::check_forward(const Shape& query, const Shape& key, const Shape& value,
                                         const MultiheadAttentionOptions& options, Shape* output_shape,
                                         Shape* weights_shape) const {
  const MultiheadAttentionConfig& c = config_;
  const std::string E = num(c.embed_dim), H = num(c.num_heads);
  const std::string layout = c.batch_first ? "(N, L, E)" : "(L, N, E)";
  if (query.rank != 2 && query.rank != 3)
    return Status::invalid("query", layout + " = " + (c.batch_first ? dims({"N", "L", E}) : dims({"L", "N", E})) +
                                        " or unbatched [L, " + E + "]",
                           query.str());
  for (const auto& [argument, shape] : {std::pair{"query", query}, {"key", key}, {"value", value}})
    if (!shape.non_negative()) return Status::invalid(argument, "non-negative dimensions", shape.str());
  const bool batched = query.rank == 3;
  const int64_t N = batched ? query[c.batch_first ? 0 : 1] : 1;
  const int64_t n = query[batched && c.batch_first ? 1 : 0];
  if (query.at_end(1) != c.embed_dim)
    return Status::invalid("query", batched ? (c.batch_first ? dims({num(N), "L", E}) : dims({"L", num(N), E})) : dims({"L", E}),
                           query.str());
  // key and value: same batching and batch size as the query, kdim / vdim features, equal lengths.
  const auto expected_kv = [&](const std::string& features, const std::string& rows) {
    if (!batched) return dims({rows, features});
    return c.batch_first ? dims({num(N), rows, features}) : dims({rows, num(N), features});
  };
  const auto fits = [&](const Shape& s, int64_t features) {
    if (s.rank != query.rank || s.at_end(1) != features) return false;
    return !batched || s[c.batch_first ? 0 : 1] == N;
  };
  if (!fits(key, c.kdim)) return Status::invalid("key", expected_kv(num(c.kdim), "m"), key.str());
  const int64_t m = key[batched && c.batch_first ? 1 : 0];
  if (!fits(value, c.vdim) || value[batched && c.batch_first ? 1 : 0] != m)
    return Status::invalid("value", expected_kv(num(c.vdim), num(m)), value.str());

  const MaskView& kpm = options.key_padding_mask;
  if (kpm.present() && kpm.shape != (batched ? Shape{N, m} : Shape{m}))
    return Status::invalid("keyPaddingMask", batched ? dims({num(N), num(m)}) + " (N, m)" : dims({num(m)}) + " (m)",
                           kpm.shape.str());
  const MaskView& am = options.attn_mask;
  const Shape per_head = batched ? Shape{N * c.num_heads, n, m} : Shape{c.num_heads, n, m};
  Shape per_head_all_queries = per_head;  // masks.merge's result without an attention mask
  per_head_all_queries[1] = 1;
  if (am.present() && am.shape != Shape{n, m} && am.shape != per_head && am.shape != per_head_all_queries)
    return Status::invalid("attnMask",
                           dims({num(n), num(m)}) + " (n, m) or " + per_head.str() +
                               (batched ? " (N*numHeads, n, m)" : " (numHeads, n, m)"),
                           am.shape.str());

  const int64_t all_keys = m + (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  *output_shape = query;
  *weights_shape = Shape();
  if (options.need_weights) {
    *weights_shape = options.average_attn_weights ? Shape{N, n, all_keys} : Shape{N, c.num_heads, n, all_keys};
    if (!batched) {  // the N dimension is dropped for unbatched input, as in PyTorch
      for (int a = 1; a < weights_shape->rank; ++a) (*weights_shape)[a - 1] = (*weights_shape)[a];
      --weights_shape->rank;
    }
  }
  return Status::success();
}

Status MultiheadAttention::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                                   const MultiheadAttentionOptions& options, float* output, float* weights) const {
  Shape output_shape, weights_shape;
  Status status = first_failure(
      {require_loaded("MultiheadAttention"),
       check_forward(query.shape, key.shape, value.shape, options, &output_shape, &weights_shape),
       check_data(query, "query"), check_data(key, "key"), check_data(value, "value"),
       check_data(options.attn_mask, "attnMask"), check_data(options.key_padding_mask, "keyPaddingMask")});
  if (!status.ok()) return status;
  const MultiheadAttentionConfig& c = config_;
  const bool batched = query.shape.rank == 3;
  const bool batch_first = batched && c.batch_first;
  Geometry g{batched ? query.shape[c.batch_first ? 0 : 1] : 1, query.shape[batch_first ? 1 : 0],
             key.shape[batch_first ? 1 : 0], (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0)};
  const int64_t E = c.embed_dim, H = c.num_heads, head_dim = E / H;

  // Input projections, in each input's own token order. Key and value rows get their extra rows
  // (bias_k / bias_v, then zeros) appended per batch element.
  const float* in_bias = in_proj_bias_ >= 0 ? parameters_.get(in_proj_bias_) : nullptr;
  const auto bias = [&](int slot) { return in_bias ? in_bias + slot * E : nullptr; };
  const BlockLayout kv_layout = token_layout(batch_first, g.batch, g.all_keys(), H, E);
  const auto project_keys = [&](const TensorView& input, int64_t features, const PackedWeight& w, const float* b,
                                int extra_parameter, FloatBuffer& out) {
    if (batch_first) {
      for (int64_t n = 0; n < g.batch; ++n)
        linear(g.keys, input.data + n * g.keys * features, features, w, b, out.data() + n * g.all_keys() * E, E);
    } else {
      linear(g.keys * g.batch, input.data, features, w, b, out.data(), E);
    }
    for (int64_t n = 0; n < g.batch; ++n) {
      int64_t row = g.keys;
      const auto row_of = [&](int64_t position) {
        return out.data() + (batch_first ? (n * g.all_keys() + position) : (position * g.batch + n)) * E;
      };
      if (c.add_bias_kv) std::memcpy(row_of(row++), parameters_.get(extra_parameter), E * sizeof(float));
      if (c.add_zero_attn) std::fill(row_of(row), row_of(row) + E, 0.0f);
    }
  };

  // Masks, viewed against the scores [N, H, n, m] of the m given keys.
  ScoreMask mask;
  MaskView attn_mask = options.attn_mask, padding = options.key_padding_mask;
  const Shape scores{g.batch, H, g.queries, g.keys};
  if (attn_mask.present()) {
    if (attn_mask.shape.rank == 3) attn_mask.shape = {g.batch, H, attn_mask.shape[1], g.keys};
    mask.add(BroadcastMask(attn_mask, scores));
  }
  if (padding.present()) {
    padding.shape = {g.batch, 1, 1, g.keys};
    mask.add(BroadcastMask(padding, scores));
  }
  mask.set_causal(options.is_causal);
  mask.set_width(g.keys);
  const Dropout dropout(training_ ? c.dropout : 0.0f, options.seed);

  AttentionBlocks blocks;
  blocks.batch = g.batch * H;
  blocks.n = g.queries;
  blocks.m = g.all_keys();
  blocks.d = blocks.dv = head_dim;
  blocks.query_layout = blocks.output_layout = token_layout(batch_first, g.batch, g.queries, H, E);
  blocks.key_layout = blocks.value_layout = kv_layout;
  blocks.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  blocks.mask = &mask;
  blocks.dropout = &dropout;

  // Keys, then values, are projected into one buffer and packed from it, so that the projections
  // never hold more than one L x E buffer beside the packed operands. The attention output
  // overwrites the projected queries (attend() allows it).
  PackedOperands packed;
  FloatBuffer projection, all_head_weights;
  status = first_failure({packed.allocate(blocks),
                          projection.allocate(g.all_keys() * g.batch * E, "MultiheadAttention key projection")});
  if (!status.ok()) return status;
  project_keys(key, c.kdim, k_weight_, bias(1), bias_k_, projection);
  blocks.key = projection.data();
  packed.pack_keys(blocks);
  project_keys(value, c.vdim, v_weight_, bias(2), bias_v_, projection);
  blocks.value = projection.data();
  packed.pack_values(blocks);
  status = projection.allocate(g.queries * g.batch * E, "MultiheadAttention query projection");
  if (!status.ok()) return status;
  float* q = projection.data();
  linear(g.queries * g.batch, query.data, E, q_weight_, bias(0), q, E);
  blocks.query = q;

  // Per-head weights go straight to the caller; averaged ones need the per-head ones first.
  const bool average = options.need_weights && options.average_attn_weights;
  float* head_weights = options.need_weights ? weights : nullptr;
  if (average) {
    status = all_head_weights.allocate(blocks.batch * blocks.n * blocks.m, "attention weights");
    if (!status.ok()) return status;
    head_weights = all_head_weights.data();
  }
  status = attend(blocks, q, head_weights, &packed);
  if (!status.ok()) return status;
  if (average) {
    const int64_t plane = blocks.n * blocks.m;
    for (int64_t n = 0; n < g.batch; ++n) {
      float* out = weights + n * plane;
      std::fill(out, out + plane, 0.0f);
      for (int64_t h = 0; h < H; ++h) {
        const float* in = head_weights + (n * H + h) * plane;
        for (int64_t i = 0; i < plane; ++i) out[i] += in[i];
      }
      for (int64_t i = 0; i < plane; ++i) out[i] /= static_cast<float>(H);
    }
  }
  linear(g.queries * g.batch, q, E, out_weight_, out_proj_bias_ >= 0 ? parameters_.get(out_proj_bias_) : nullptr,
         output, E);
  return Status::success();
}

}  // namespace attn

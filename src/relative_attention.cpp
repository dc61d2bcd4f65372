#include "relative_attention.h"

#include <algorithm>
#include <cmath>

#include "attend.h"
#include "kernels/kernels.h"
#include "linear.h"
#include "mask.h"

namespace attn {
namespace {

// Query rows whose positional terms one GEMM computes; the engine hands out tiles of at most 32.
constexpr int64_t kQueryTileRows = 32;

}  // namespace

RelativeMultiHeadAttention::RelativeMultiHeadAttention(const RelativeAttentionConfig& config)
    : config_(config), d_k_(config.d_model / config.heads) {
  const int64_t H = config.heads, D = config.d_model, P = config.P;
  query_weight_ = parameters_.declare("query.linear.weight", {H * d_k_, D});
  key_weight_ = parameters_.declare("key.linear.weight", {H * d_k_, D});
  value_weight_ = parameters_.declare("value.linear.weight", {H * d_k_, D});
  value_bias_ = parameters_.declare("value.linear.bias", {H * d_k_});
  output_weight_ = parameters_.declare("output.weight", {D, H * d_k_});
  output_bias_ = parameters_.declare("output.bias", {D});
  key_pos_embeddings_ = parameters_.declare("key_pos_embeddings", {2 * P, H, d_k_});
  key_pos_bias_ = parameters_.declare("key_pos_bias", {2 * P, H});
  query_pos_bias_ = parameters_.declare("query_pos_bias", {H, d_k_});
}

Status RelativeMultiHeadAttention::create(const RelativeAttentionConfig& config,
                                          std::unique_ptr<RelativeMultiHeadAttention>* out) {
  Status s = first_failure({check_size("heads", config.heads), check_size("dModel", config.d_model),
                            check_size("P", config.P), check_dropout(config.dropout)});
  if (!s.ok()) return s;
  if (config.d_model % config.heads != 0)
    return Status::invalid("dModel", "a multiple of heads (" + std::to_string(config.heads) + ")",
                           std::to_string(config.d_model));
  out->reset(new RelativeMultiHeadAttention(config));
  return Status::success();
}

Status RelativeMultiHeadAttention::prepare() {
  const int64_t width = config_.heads * d_k_, D = config_.d_model;
  return first_failure({query_packed_.pack(parameters_.get(query_weight_), width, D),
                        key_packed_.pack(parameters_.get(key_weight_), width, D),
                        value_packed_.pack(parameters_.get(value_weight_), width, D),
                        output_packed_.pack(parameters_.get(output_weight_), D, width)});
}

Status RelativeMultiHeadAttention::check_forward(const Shape& query, const Shape& key, const Shape& value,
                                                 const RelativeAttentionOptions& options, Shape* output_shape,
                                                 Shape* weights_shape) const {
  const MaskView& mask = options.mask;
  const std::string D = std::to_string(config_.d_model), P = std::to_string(config_.P);
  if (query.rank != 3 || query[2] != config_.d_model || !query.non_negative())
    return Status::invalid("query", "[n, B, " + D + "]", query.str());
  const int64_t n = query[0], B = query[1];
  if (n > config_.P) return Status::invalid("query", "at most P = " + P + " queries", query.str());
  const std::string kv = "[m, " + std::to_string(B) + ", " + D + "]";
  if (key.rank != 3 || key[1] != B || key[2] != config_.d_model || !key.non_negative())
    return Status::invalid("key", kv, key.str());
  const int64_t m = key[0];
  if (m > config_.P) return Status::invalid("key", "at most P = " + P + " keys", key.str());
  if (value.rank != 3 || value[0] != m || value[1] != B || value[2] != config_.d_model)
    return Status::invalid("value", "[" + std::to_string(m) + ", " + std::to_string(B) + ", " + D + "]", value.str());
  if (mask.present()) {
    const Shape& s = mask.shape;
    const bool fits = s.rank == 3 && (s[0] == n || s[0] == 1) && s[1] == m && (s[2] == B || s[2] == 1);
    const auto dim_or_one = [](int64_t dim) { return dim == 1 ? std::string("1") : std::to_string(dim) + " or 1"; };
    if (!fits)
      return Status::invalid("mask", "[" + dim_or_one(n) + ", " + std::to_string(m) + ", " + dim_or_one(B) + "]", s.str());
    if (mask.type != MaskType::boolean) return Status::invalid("mask", "a boolean mask (0 = masked out)", "an additive one");
  }
  *output_shape = query;
  *weights_shape = options.heads_first ? Shape{B, config_.heads, n, m} : Shape{n, m, B, config_.heads};
  return Status::success();
}

Status RelativeMultiHeadAttention::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                                           const RelativeAttentionOptions& options, float* output,
                                           float* weights) const {
  const MaskView& mask = options.mask;
  const bool heads_first = options.heads_first;
  Shape output_shape, weights_shape;
  Status s = first_failure({require_loaded("RelativeMultiHeadAttention"),
                            check_forward(query.shape, key.shape, value.shape, options, &output_shape, &weights_shape),
                            check_data(query, "query"), check_data(key, "key"), check_data(value, "value"),
                            check_data(mask, "mask")});
  if (!s.ok()) return s;
  const int64_t n = query.shape[0], B = query.shape[1], m = key.shape[0];
  const int64_t H = config_.heads, D = config_.d_model, dk = d_k_, width = H * dk, P = config_.P;

  // The engine writes weights [B, H, n, m]: straight into `weights` when that is the layout asked for.
  // The attention output overwrites q + u (attend() allows it).
  FloatBuffer q, q_biased, k, v, head_weights;
  for (auto [buffer, count] : {std::pair{&q, n * B * width}, {&q_biased, n * B * width}, {&k, m * B * width},
                               {&v, m * B * width}, {&head_weights, heads_first || !weights ? 0 : B * H * n * m}}) {
    s = buffer->allocate(count, "RelativeMultiHeadAttention activations");
    if (!s.ok()) return s;
  }
  linear(n * B, query.data, D, query_packed_, nullptr, q.data(), width);
  linear(m * B, key.data, D, key_packed_, nullptr, k.data(), width);
  linear(m * B, value.data, D, value_packed_, parameters_.get(value_bias_), v.data(), width);
  const float* u = parameters_.get(query_pos_bias_);  // [H, d_k]
  for (int64_t token = 0; token < n * B; ++token)
    for (int64_t c = 0; c < width; ++c) q_biased.data()[token * width + c] = q.data()[token * width + c] + u[c];

  // Block b = (batch element, head); token (t, batch) sits at row t * B + batch.
  const BlockLayout layout{H, width, dk, B * width};
  const float* R = parameters_.get(key_pos_embeddings_);  // [2P, H, d_k]
  const float* pos_bias = parameters_.get(key_pos_bias_);  // [2P, H]
  // The engine computes (q + u)·k from packed keys; this adds the positional term.
  const ScoreFunction positional = [&](int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* out,
                                       size_t ld) {
    const kernels::KernelSet& kern = kernels::active_kernels();
    const int64_t offset = layout.offset(b), h = b % H;
    // The positional term: key j of query i uses relative position P + j - i - (m - n), so along
    // a tile's diagonals it is constant. One GEMM of the tile's queries against the rows + cols - 1
    // positions the tile spans gives every term; query r reads its row from offset rows - 1 - r.
    constexpr int64_t kChunk = 128;
    float terms[kQueryTileRows * (kQueryTileRows + kChunk - 1)];
    float biases[kQueryTileRows + kChunk - 1];
    for (int64_t r0 = 0; r0 < rows; r0 += kQueryTileRows) {
      const int64_t tile_rows = std::min(kQueryTileRows, rows - r0);
      for (int64_t c0 = 0; c0 < cols; c0 += kChunk) {
        const int64_t count = std::min(kChunk, cols - c0), span = tile_rows + count - 1;
        const int64_t first = P + (j0 + c0) - (i0 + r0 + tile_rows - 1) - (m - n);  // last query, first key
        kern.gemm_nt(tile_rows, span, dk, q.data() + offset + (i0 + r0) * layout.row_stride, layout.row_stride,
                     R + first * width + h * dk, width, terms, span);
        for (int64_t t = 0; t < span; ++t) biases[t] = pos_bias[(first + t) * H + h];
        for (int64_t r = r0; r < r0 + tile_rows; ++r) {
          const int64_t shift = tile_rows - 1 - (r - r0);
          const float* term = terms + (r - r0) * span + shift;
          const float* bias = biases + shift;
          float* row = out + r * ld + c0;
          for (int64_t c = 0; c < count; ++c) row[c] += term[c] + bias[c];
        }
      }
    }
  };

  // The mask [n|1, m, B|1] read against the scores [B, H, n, m].
  ScoreMask score_mask;
  if (mask.present()) {
    const Shape scores_shape{B, H, n, m};
    const int64_t mask_batch = mask.shape[2];
    const int64_t strides[4] = {mask_batch == 1 ? 0 : 1, 0, mask.shape[0] == 1 ? 0 : m * mask_batch, mask_batch};
    MaskView keep = mask;
    keep.true_means_masked = false;
    score_mask.add(BroadcastMask::with_strides(keep, scores_shape, strides));
  }
  const Dropout dropout(training_ ? config_.dropout : 0.0f, options.seed);
  AttentionBlocks blocks;
  blocks.batch = B * H;
  blocks.n = n;
  blocks.m = m;
  blocks.d = blocks.dv = dk;
  blocks.query = q_biased.data();
  blocks.key = {k.data(), nullptr, layout};
  blocks.value = {v.data(), nullptr, layout};
  blocks.query_layout = blocks.output_layout = layout;
  blocks.scale = 1.0f / std::sqrt(static_cast<float>(dk));
  blocks.mask = &score_mask;
  blocks.dropout = &dropout;
  blocks.score_term = &positional;
  s = attend(blocks, q_biased.data(), heads_first || !weights ? weights : head_weights.data());
  if (!s.ok()) return s;
  if (!heads_first && weights)  // [B, H, n, m] -> [n, m, B, H], the layout labml returns.
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < m; ++j)
            weights[((i * m + j) * B + b) * H + h] = head_weights.data()[((b * H + h) * n + i) * m + j];
  linear(n * B, q_biased.data(), width, output_packed_, parameters_.get(output_bias_), output, D);
  return Status::success();
}

}  // namespace attn

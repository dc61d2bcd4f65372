#include "additive_attention.h"

#include "attend.h"
#include "kernels/kernels.h"
#include "linear.h"
#include "mask.h"

namespace attn {

AdditiveAttention::AdditiveAttention(const AdditiveAttentionConfig& config) : config_(config) {
  w_q_ = parameters_.declare("W_q.weight", {config.hidden_size, config.query_size});
  w_k_ = parameters_.declare("W_k.weight", {config.hidden_size, config.key_size});
  w_v_ = parameters_.declare("W_v.weight", {1, config.hidden_size});
}

Status AdditiveAttention::create(const AdditiveAttentionConfig& config, std::unique_ptr<AdditiveAttention>* out) {
  Status s = first_failure({check_size("querySize", config.query_size), check_size("keySize", config.key_size),
                            check_size("hiddenSize", config.hidden_size), check_dropout(config.dropout)});
  if (s.ok()) out->reset(new AdditiveAttention(config));
  return s;
}

Status AdditiveAttention::prepare() {
  const AdditiveAttentionConfig& c = config_;
  return first_failure({q_weight_.pack(parameters_.get(w_q_), c.hidden_size, c.query_size),
                        k_weight_.pack(parameters_.get(w_k_), c.hidden_size, c.key_size)});
}

Status AdditiveAttention::check_forward(const Shape& query, const Shape& key, const Shape& value,
                                        const AdditiveAttentionOptions& options, Shape* output_shape,
                                        Shape* weights_shape) const {
  const MaskView& mask = options.attn_mask;
  const std::string dq = std::to_string(config_.query_size), dk = std::to_string(config_.key_size);
  if (query.rank != 3 || query[2] != config_.query_size || !query.non_negative())
    return Status::invalid("query", "[N, n, " + dq + "]", query.str());
  const std::string N = std::to_string(query[0]);
  if (key.rank != 3 || key[0] != query[0] || key[2] != config_.key_size || !key.non_negative())
    return Status::invalid("key", "[" + N + ", m, " + dk + "]", key.str());
  if (value.rank != 3 || value[0] != query[0] || value[1] != key[1] || !value.non_negative())
    return Status::invalid("value", "[" + N + ", " + std::to_string(key[1]) + ", dv]", value.str());
  const Shape scores{query[0], query[1], key[1]};
  if (mask.present()) {
    Status s = BroadcastMask::check(mask, scores, "attnMask");
    if (!s.ok()) return s;
  }
  *output_shape = {query[0], query[1], value[2]};
  *weights_shape = scores;
  return Status::success();
}

Status AdditiveAttention::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                                  const AdditiveAttentionOptions& options, float* output, float* weights) const {
  const MaskView& mask = options.attn_mask;
  Shape output_shape, weights_shape;
  Status s = first_failure({require_loaded("AdditiveAttention"),
                            check_forward(query.shape, key.shape, value.shape, options, &output_shape, &weights_shape),
                            check_data(query, "query"), check_data(key, "key"), check_data(value, "value"),
                            check_data(mask, "attnMask")});
  if (!s.ok()) return s;
  const int64_t N = query.shape[0], n = query.shape[1], m = key.shape[1], dv = value.shape[2];
  const int64_t h = config_.hidden_size;
  FloatBuffer q, k;
  for (auto [buffer, rows] : {std::pair{&q, N * n}, {&k, N * m}}) {
    s = buffer->allocate(rows * h, "AdditiveAttention activations");
    if (!s.ok()) return s;
  }
  linear(N * n, query.data, config_.query_size, q_weight_, nullptr, q.data(), h);
  linear(N * m, key.data, config_.key_size, k_weight_, nullptr, k.data(), h);

  const float* w_v = parameters_.get(w_v_);
  const ScoreFunction scores = [&](int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* out,
                                   size_t ld) {
    kernels::active_kernels().tanh_scores(rows, cols, h, q.data() + (b * n + i0) * h, h, k.data() + (b * m + j0) * h,
                                          h, w_v, out, ld);
  };
  ScoreMask score_mask;
  if (mask.present()) score_mask.add(BroadcastMask(mask, weights_shape));
  const Dropout dropout(training_ ? config_.dropout : 0.0f, options.seed);
  AttentionBlocks blocks;
  blocks.batch = N;
  blocks.n = n;
  blocks.m = m;
  blocks.dv = dv;
  blocks.value = {value.data, nullptr, BlockLayout::contiguous(m, dv)};
  blocks.output_layout = BlockLayout::contiguous(n, dv);
  blocks.scale = 1.0f;
  blocks.mask = &score_mask;
  blocks.dropout = &dropout;
  blocks.score = &scores;
  return attend(blocks, output, weights);
}

}  // namespace attn

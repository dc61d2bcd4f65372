#include "self_attention.h"

#include <cmath>

#include "attend.h"
#include "linear.h"
#include "mask.h"

namespace attn {

SelfAttention::SelfAttention(const SelfAttentionConfig& config) : config_(config) {
  w_q_ = parameters_.declare("W_q.weight", {config.key_size, config.embed_dim});
  w_k_ = parameters_.declare("W_k.weight", {config.key_size, config.embed_dim});
  w_v_ = parameters_.declare("W_v.weight", {config.value_size, config.embed_dim});
}

Status SelfAttention::create(const SelfAttentionConfig& config, std::unique_ptr<SelfAttention>* out) {
  Status s = first_failure({check_size("embedDim", config.embed_dim), check_size("keySize", config.key_size),
                            check_size("valueSize", config.value_size), check_dropout(config.dropout)});
  if (s.ok()) out->reset(new SelfAttention(config));
  return s;
}

Status SelfAttention::prepare() {
  const SelfAttentionConfig& c = config_;
  return first_failure({q_weight_.pack(parameters_.get(w_q_), c.key_size, c.embed_dim),
                        k_weight_.pack(parameters_.get(w_k_), c.key_size, c.embed_dim),
                        v_weight_.pack(parameters_.get(w_v_), c.value_size, c.embed_dim)});
}

Status SelfAttention::check_forward(const Shape& x, const SelfAttentionOptions& options, Shape* output_shape,
                                    Shape* weights_shape) const {
  const MaskView& mask = options.attn_mask;
  if (x.rank != 3 || x[2] != config_.embed_dim || !x.non_negative())
    return Status::invalid("x", "[N, L, " + std::to_string(config_.embed_dim) + "]", x.str());
  const Shape scores{x[0], x[1], x[1]};
  if (mask.present()) {
    Status s = BroadcastMask::check(mask, scores, "attnMask");
    if (!s.ok()) return s;
  }
  *output_shape = {x[0], x[1], config_.value_size};
  *weights_shape = scores;
  return Status::success();
}

Status SelfAttention::forward(const TensorView& x, const SelfAttentionOptions& options, float* output,
                              float* weights) const {
  const MaskView& mask = options.attn_mask;
  Shape output_shape, weights_shape;
  Status s = first_failure({require_loaded("SelfAttention"), check_forward(x.shape, options, &output_shape, &weights_shape),
                            check_data(x, "x"), check_data(mask, "attnMask")});
  if (!s.ok()) return s;
  const int64_t N = x.shape[0], L = x.shape[1], E = config_.embed_dim;
  const int64_t ks = config_.key_size, vs = config_.value_size;
  FloatBuffer q, k, v;
  for (auto [buffer, width] : {std::pair{&q, ks}, {&k, ks}, {&v, vs}}) {
    s = buffer->allocate(N * L * width, "SelfAttention activations");
    if (!s.ok()) return s;
  }
  linear(N * L, x.data, E, q_weight_, nullptr, q.data(), ks);
  linear(N * L, x.data, E, k_weight_, nullptr, k.data(), ks);
  linear(N * L, x.data, E, v_weight_, nullptr, v.data(), vs);

  ScoreMask score_mask;
  if (mask.present()) score_mask.add(BroadcastMask(mask, weights_shape));
  const Dropout dropout(training_ ? config_.dropout : 0.0f, options.seed);
  AttentionBlocks blocks;
  blocks.batch = N;
  blocks.n = blocks.m = L;
  blocks.d = ks;
  blocks.dv = vs;
  blocks.query = q.data();
  blocks.key = {k.data(), nullptr, BlockLayout::contiguous(L, ks)};
  blocks.value = {v.data(), nullptr, BlockLayout::contiguous(L, vs)};
  blocks.query_layout = blocks.key.layout;
  blocks.output_layout = blocks.value.layout;
  blocks.scale = 1.0f / std::sqrt(static_cast<float>(ks));
  blocks.mask = &score_mask;
  blocks.dropout = &dropout;
  return attend(blocks, output, weights);
}

}  // namespace attn

// Additive (Bahdanau) attention: scores = w_v · tanh(W_q q + W_k k), softmax over keys with a
// mask, weights times values.
#pragma once

#include <cstdint>
#include <memory>

#include "linear.h"
#include "module.h"
#include "tensor.h"

namespace attn {

struct AdditiveAttentionConfig {
  int64_t query_size = 0;
  int64_t key_size = 0;
  int64_t hidden_size = 0;
  float dropout = 0.0f;
};

struct AdditiveAttentionOptions {
  MaskView attn_mask;  // broadcastable to [N, n, m]; boolean 1 = masked out, or additive
  uint64_t seed = 0;   // dropout draws, in training mode
};

class AdditiveAttention : public Module {
 public:
  static Status create(const AdditiveAttentionConfig& config, std::unique_ptr<AdditiveAttention>* out);
  const AdditiveAttentionConfig& config() const { return config_; }

  // query [N, n, dq], key [N, m, dk], value [N, m, dv] → output [N, n, dv], weights [N, n, m].
  Status check_forward(const Shape& query, const Shape& key, const Shape& value, const AdditiveAttentionOptions& options,
                       Shape* output_shape, Shape* weights_shape) const;
  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const AdditiveAttentionOptions& options, float* output, float* weights) const;

 private:
  explicit AdditiveAttention(const AdditiveAttentionConfig& config);
  Status prepare() override;
  AdditiveAttentionConfig config_;
  int w_q_, w_k_, w_v_;
  PackedWeight q_weight_, k_weight_;
};

}  // namespace attn

// Single-head self-attention with its own key and value sizes (the textbook module):
// Q = X W_qᵀ, K = X W_kᵀ, V = X W_vᵀ (no bias), softmax(Q Kᵀ / sqrt(keySize) + mask) V.
#pragma once

#include <cstdint>
#include <memory>

#include "linear.h"
#include "module.h"
#include "tensor.h"

namespace attn {

struct SelfAttentionConfig {
  int64_t embed_dim = 0;
  int64_t key_size = 0;
  int64_t value_size = 0;
  float dropout = 0.0f;
};

struct SelfAttentionOptions {
  MaskView attn_mask;  // broadcastable to [N, L, L]; boolean 1 = masked out, or additive
  uint64_t seed = 0;   // dropout draws, in training mode
};

class SelfAttention : public Module {
 public:
  static Status create(const SelfAttentionConfig& config, std::unique_ptr<SelfAttention>* out);
  const SelfAttentionConfig& config() const { return config_; }

  // x [N, L, embedDim] → output [N, L, valueSize], weights [N, L, L].
  Status check_forward(const Shape& x, const SelfAttentionOptions& options, Shape* output_shape,
                       Shape* weights_shape) const;
  Status forward(const TensorView& x, const SelfAttentionOptions& options, float* output, float* weights) const;

 private:
  explicit SelfAttention(const SelfAttentionConfig& config);
  Status prepare() override;
  SelfAttentionConfig config_;
  int w_q_, w_k_, w_v_;
  PackedWeight q_weight_, k_weight_, v_weight_;
};

}  // namespace attn

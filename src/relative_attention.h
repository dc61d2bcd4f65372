// Transformer-XL relative multi-head attention, as in labml.ai's annotated implementation, with
// its shift trick resolved into the index it computes: for r = j - i - (m - n),
//   score[i, j, b, h] = ((q_i + u_h) · k_j + q_i · R[P + r, h] + bias[P + r, h]) / sqrt(d_k).
#pragma once

#include <cstdint>
#include <memory>

#include "linear.h"
#include "module.h"
#include "tensor.h"

namespace attn {

struct RelativeAttentionConfig {
  int64_t heads = 0;
  int64_t d_model = 0;
  int64_t P = 4096;  // relative positions each side
  float dropout = 0.0f;
};

struct RelativeAttentionOptions {
  MaskView mask;             // [n or 1, m, B or 1], boolean 0 = masked out
  uint64_t seed = 0;         // dropout draws, in training mode
  bool heads_first = false;  // weights [B, heads, n, m] (one plane per head) instead of labml's [n, m, B, heads]
};

class RelativeMultiHeadAttention : public Module {
 public:
  static Status create(const RelativeAttentionConfig& config, std::unique_ptr<RelativeMultiHeadAttention>* out);
  const RelativeAttentionConfig& config() const { return config_; }

  // query [n, B, dModel], key and value [m, B, dModel], n <= P and m <= P. Output [n, B, dModel],
  // weights [n, m, B, heads] as labml returns them, or [B, heads, n, m] with `heads_first`;
  // `weights` may be null (the streaming path, no n × m buffer).
  Status check_forward(const Shape& query, const Shape& key, const Shape& value, const RelativeAttentionOptions& options,
                       Shape* output_shape, Shape* weights_shape) const;
  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const RelativeAttentionOptions& options, float* output, float* weights) const;

 private:
  explicit RelativeMultiHeadAttention(const RelativeAttentionConfig& config);
  Status prepare() override;
  RelativeAttentionConfig config_;
  int64_t d_k_;
  int query_weight_, key_weight_, value_weight_, value_bias_, output_weight_, output_bias_;
  int key_pos_embeddings_, key_pos_bias_, query_pos_bias_;
  PackedWeight query_packed_, key_packed_, value_packed_, output_packed_;
};

}  // namespace attn

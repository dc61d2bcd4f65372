// torch.nn.MultiheadAttention: projections, per-head scaled dot-product attention with PyTorch's
// mask rules, and the output projection, loaded from its state_dict().
#pragma once

#include <cstdint>
#include <memory>

#include "linear.h"
#include "module.h"
#include "status.h"
#include "tensor.h"

namespace attn {

struct MultiheadAttentionConfig {
  int64_t embed_dim = 0;
  int64_t num_heads = 0;
  bool bias = true;
  bool add_bias_kv = false;
  bool add_zero_attn = false;
  int64_t kdim = 0;  // 0: embed_dim
  int64_t vdim = 0;  // 0: embed_dim
  bool batch_first = false;
  float dropout = 0.0f;
};

struct MultiheadAttentionOptions {
  MaskView attn_mask;         // [n, m] or [N*numHeads, n, m]; boolean 1 = not allowed, or additive
  MaskView key_padding_mask;  // [N, m] ([m] unbatched); boolean 1 = padding, or additive
  bool need_weights = true;
  bool average_attn_weights = true;
  bool is_causal = false;     // adds a causal mask over the m given keys
  uint64_t seed = 0;          // dropout draws, in training mode
};

// Storage outside the core's memory (the bindings give a JS array) where a forward may keep its
// attention output while it runs, so that long inputs need less memory of their own.
class SpillStore {
 public:
  virtual ~SpillStore() = default;
  virtual void write(int64_t offset, const float* data, int64_t count) = 0;
  virtual void read(int64_t offset, float* data, int64_t count) const = 0;
};

class MultiheadAttention : public Module {
 public:
  static Status create(const MultiheadAttentionConfig& config, std::unique_ptr<MultiheadAttention>* out);

  const MultiheadAttentionConfig& config() const { return config_; }

  // Validates shapes and options and gives the output's and weights' shapes (weights rank 0 when
  // not asked for). query (L, N, E), (N, L, E) with batch_first, or unbatched (L, E); key and
  // value likewise with m rows and kdim, vdim features.
  Status check_forward(const Shape& query, const Shape& key, const Shape& value,
                       const MultiheadAttentionOptions& options, Shape* output_shape, Shape* weights_shape) const;

  // `output` may be query.data (even when key or value share it): keys and values are packed
  // first, then the query is projected, attended and projected out in place, which spares an
  // L x E buffer. The bindings let the output overwrite the query's heap copy.
  //
  // With `spill` (room for the query's numel floats), no weights and the output over the query,
  // heads are taken one at a time: only one head's keys and values are packed (1/H of them), its
  // queries are projected and attended in a buffer of their own, and its output goes to `spill`
  // until every head is done and the query is free to take the output. The results are the same
  // bit for bit.
  Status forward(const TensorView& query, const TensorView& key, const TensorView& value,
                 const MultiheadAttentionOptions& options, float* output, float* weights,
                 SpillStore* spill = nullptr) const;

 private:
  explicit MultiheadAttention(const MultiheadAttentionConfig& config);
  Status prepare() override;

  MultiheadAttentionConfig config_;
  // Parameter indices; -1 where the configuration has no such entry.
  int in_proj_weight_ = -1, q_proj_weight_ = -1, k_proj_weight_ = -1, v_proj_weight_ = -1;
  int in_proj_bias_ = -1, bias_k_ = -1, bias_v_ = -1, out_proj_weight_ = -1, out_proj_bias_ = -1;
  PackedWeight q_weight_, k_weight_, v_weight_, out_weight_;
};

}  // namespace attn

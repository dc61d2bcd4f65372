// The attention block of Hugging Face's Llama, Mistral, Qwen2/3, Gemma 2/3, Phi-3 and OLMo 2 models
// (LlamaAttention and its kin): q/k/v projections, QK-norm, rotary positions with the RoPE scaling
// schemes, grouped key/value heads, lower-right causal attention over a KV cache or the input
// alone, and the output projection, loaded from their state-dict names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "kv_cache.h"
#include "linear.h"
#include "module.h"
#include "rope.h"
#include "tensor.h"

namespace attn {

// RMSNorm of q and k after the projections, before RoPE: over each head's head_dim (Qwen3, Gemma 3)
// or over the whole projection (OLMo 2), scaled by weight, or by 1 + weight (Gemma's RMSNorm).
enum class QkNormScope { none, head, all };
struct QkNorm {
  QkNormScope scope = QkNormScope::none;
  double eps = 1e-6;
  bool unit_offset = false;
};

struct GroupedQueryAttentionConfig {
  int64_t hidden_size = 0, num_heads = 0, num_key_value_heads = 0;
  int64_t head_dim = 0;  // 0: hidden_size / num_heads
  bool qkv_bias = false;     // Qwen2
  bool output_bias = false;
  double rope_base = 10000.0;
  bool rope_interleaved = false;
  std::optional<int64_t> rotary_dim;  // default head_dim (config() holds it resolved)
  std::optional<int64_t> sliding_window;  // Mistral, Gemma 2
  std::optional<float> softcap;           // Gemma 2's attn_logit_softcapping
  std::optional<float> scale;             // default 1 / sqrt(head_dim)
  RopeScaling rope_scaling;               // its arrays are read by create() only
  QkNorm qk_norm;
  WeightDtype dtype = WeightDtype::f32;  // how q/k/v/o_proj's weights are held, whatever was loaded
};

struct GroupedQueryAttentionOptions {
  // RoPE positions [t] or [N, t]; absent: the cache's position + 0 … t - 1, or 0 … t - 1.
  IdsView positions;
  // Broadcastable to [N, numHeads, t, m] (m: the positions attended), boolean 1 = may attend.
  MaskView attn_mask;
  // Hugging Face's attention_mask of the new tokens, [N, t] boolean, 1 = a token, 0 = padding. It
  // hides the padded keys, goes into the cache with them, and sets the default positions as
  // generate() does: each row's tokens counted (cumsum - 1, padding at 0).
  MaskView attention_mask;
  KVCache* cache = nullptr;  // k and v are appended to it and attention covers all it holds
  // Hugging Face's head_mask (forward() only), [numHeads]: each query head's softmax weights are
  // multiplied by its value before the values are summed (0 removes the head). Absent: no data
  // and no shape.
  TensorView head_mask;
};

class GroupedQueryAttention : public Module {
 public:
  static Status create(const GroupedQueryAttentionConfig& config, std::unique_ptr<GroupedQueryAttention>* out);
  const GroupedQueryAttentionConfig& config() const { return config_; }

  // The cache the block's forward() appends to: numKeyValueHeads heads of headDim, its window the
  // sliding window.
  KVCacheConfig cache_config(int64_t max_length, int64_t batch, CacheDtype dtype) const;

  // x [N, t, hiddenSize] → output [N, t, hiddenSize], weights [N, numHeads, t, m].
  Status check_forward(const Shape& x, const GroupedQueryAttentionOptions& options, Shape* output_shape,
                       Shape* weights_shape) const;
  Status forward(const TensorView& x, const GroupedQueryAttentionOptions& options, float* output,
                 float* weights) const;

  // The q, k and v forward()'s attention reads: projected, QK-normed and rotated at the positions
  // forward() would use now (options.cache and options.attention_mask only set those defaults: the
  // cache's next positions; nothing is appended, and a full cache is no error). x [N, t,
  // hiddenSize] → query [N, numHeads, t, headDim], key and value [N, numKeyValueHeads, t, headDim].
  Status check_project(const Shape& x, const GroupedQueryAttentionOptions& options, Shape* query_shape,
                       Shape* key_shape) const;
  Status project(const TensorView& x, const GroupedQueryAttentionOptions& options, float* query, float* key,
                 float* value) const;

 private:
  explicit GroupedQueryAttention(const GroupedQueryAttentionConfig& config);
  Status prepare() override;
  // A cache shaped for the block (createCache's), and one with room for x's t positions (forward's).
  Status check_cache(const Shape& x, const KVCache& cache) const;
  Status check_room(const Shape& x, const KVCache& cache) const;
  // project() once its arguments are checked.
  Status projections(const TensorView& x, const GroupedQueryAttentionOptions& options, float* query, float* key,
                     float* value) const;

  GroupedQueryAttentionConfig config_;
  int q_proj_weight_ = -1, k_proj_weight_ = -1, v_proj_weight_ = -1, o_proj_weight_ = -1;
  int q_proj_bias_ = -1, k_proj_bias_ = -1, v_proj_bias_ = -1, o_proj_bias_ = -1;
  int q_norm_weight_ = -1, k_norm_weight_ = -1;
  PackedWeight q_weight_, k_weight_, v_weight_, o_weight_;
  RopeFrequencies frequencies_;
};

}  // namespace attn

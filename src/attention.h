// The operator set of the attention core, in one header. Shapes use the API's letters: leading
// dims `...`, n queries, m keys, d the query/key size, dv the value size.
//
// Every operator validates its inputs and returns a Status instead of throwing; outputs are
// caller-allocated and sized from the shapes the operator's check function accepts.
#pragma once

#include <cstdint>
#include <optional>

#include "status.h"
#include "tensor.h"

namespace attn {

// torch.nn.functional.scaled_dot_product_attention, with the API contract's differences: a query
// that sees no key gets zeros, and is_causal combines with attn_mask.
struct SdpaOptions {
  // Broadcastable to [..., n, m]. Boolean: 1 = may attend (set true_means_masked = false), as in
  // PyTorch's SDPA; additive: added to the scaled scores, -inf hides the key.
  MaskView attn_mask;
  bool is_causal = false;           // query i sees keys j <= i (top-left aligned)
  std::optional<float> scale;       // default 1 / sqrt(d)
  float dropout_p = 0.0f;           // in [0, 1), applied to the weights
  uint64_t seed = 0;
};

// Checks shapes and options without reading any data, so callers can size outputs first.
// query [..., n, d], key [..., m, d], value [..., m, dv]: same leading dims, rank 2 to kMaxRank.
Status check_scaled_dot_product_attention(const Shape& query, const Shape& key, const Shape& value,
                                          const SdpaOptions& options);

// Writes output [..., n, dv] and, when `weights` is non-null, the attention weights [..., n, m].
// With `weights` null no n x m buffer is allocated (the streaming path).
Status scaled_dot_product_attention(const TensorView& query, const TensorView& key, const TensorView& value,
                                    const SdpaOptions& options, float* output, float* weights);

}  // namespace attn

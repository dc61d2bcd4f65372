// The operator set of the attention core, in one header. Shapes use the API's letters: leading
// dims `...`, n queries, m keys, d the query/key size, dv the value size.
//
// Every operator validates its inputs and returns a Status instead of throwing; outputs are
// caller-allocated and sized from the shapes the operator's check function accepts.
#pragma once

#include <cstdint>
#include <optional>

#include "rope.h"
#include "status.h"
#include "tensor.h"

namespace attn {

// Which keys the causal rule leaves query i: none hidden, j <= i (top-left aligned, PyTorch's
// is_causal), or j <= i + m - n (lower-right: the queries are the last n of the m key positions).
enum class Causal { none, upper_left, lower_right };

// torch.nn.functional.scaled_dot_product_attention, with the API contract's differences (a query
// that sees no key gets zeros, and causal combines with attn_mask) and its v2 options. The query's
// position is p_i = i + m - n under lower-right causal, p_i = i otherwise; h is the query head
// (dimension -3). Order: s = scale·(q·k); softcap; + ALiBi; + additive attn_mask; then every rule
// that hides (boolean mask, causal, window, documents, -inf) hides.
struct SdpaOptions {
  // Broadcastable to [..., n, m]. Boolean: 1 = may attend (set true_means_masked = false), as in
  // PyTorch's SDPA; additive: added to the scaled scores, -inf hides the key.
  MaskView attn_mask;
  Causal causal = Causal::none;
  std::optional<float> scale;       // default 1 / sqrt(d)
  float dropout_p = 0.0f;           // in [0, 1), applied to the weights
  uint64_t seed = 0;
  // key and value [..., Hkv, m, d] with Hq % Hkv == 0: query head h reads head h / (Hq / Hkv).
  bool enable_gqa = false;
  std::optional<int64_t> window;    // key j visible iff |p_i - j| < window
  std::optional<float> softcap;     // s becomes c·tanh(s / c)
  // ALiBi adds slope_h · (j - p_i): the given slopes [Hq], or Press et al.'s when null.
  bool alibi = false;
  const float* alibi_slopes = nullptr;
  int64_t alibi_slope_count = 0;
  // Key j visible to query i iff their ids are equal: ids [..., n] and [..., m], broadcast against
  // the query's leading dims. `shared_document_ids`: both are one documentIds (n == m).
  IdsView query_document_ids, key_document_ids;
  bool shared_document_ids = false;
  // p_i = i + m - n even without the lower-right causal rule, for window and ALiBi: a KV cache's
  // queries are its latest positions whether or not it hides the keys after them.
  bool queries_last = false;
};

// Press et al.'s ALiBi slopes for `heads` heads (any count): for a power of two H,
// 2^(-8(h+1)/H); otherwise, with P = 2^floor(log2 H), the P slopes of P heads followed by the
// slopes of 2P heads at even indices, H - P of them. Writes slopes[heads].
void alibi_slopes(int64_t heads, float* slopes);

// Checks shapes and options without reading any data, so callers can size outputs first.
// query [..., n, d], key [..., m, d], value [..., m, dv]: same leading dims, rank 2 to kMaxRank.
Status check_scaled_dot_product_attention(const Shape& query, const Shape& key, const Shape& value,
                                          const SdpaOptions& options);

// Writes output [..., n, dv] and, when `weights` is non-null, the attention weights [..., n, m].
// With `weights` null no n x m buffer is allocated (the streaming path).
Status scaled_dot_product_attention(const TensorView& query, const TensorView& key, const TensorView& value,
                                    const SdpaOptions& options, float* output, float* weights);

}  // namespace attn

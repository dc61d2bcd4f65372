// Masks broadcast against the score tensor [..., n, m] and folded, one key range at a time, into
// the additive bias the softmax kernel adds to the scores.
#pragma once

#include <algorithm>

#include "status.h"
#include "tensor.h"

namespace attn {

// One mask broadcast (right-aligned, size-1 dimensions stretched) against `scores` [..., n, m].
class BroadcastMask {
 public:
  // Fails, naming `argument`, when the mask cannot broadcast to `scores`. Reads only the shape.
  static Status check(const MaskView& mask, const Shape& scores, const char* argument);
  BroadcastMask() = default;
  // Assumes check() passed.
  BroadcastMask(const MaskView& mask, const Shape& scores);
  // A mask laid out differently from the scores: `strides` gives, for each axis of `scores`, the
  // step in mask elements (0 to broadcast).
  static BroadcastMask with_strides(const MaskView& mask, const Shape& scores, const int64_t* strides);

  const MaskView& view() const { return view_; }
  // Offset of element [batch..., i, 0], where `batch` indexes the flattened leading dimensions.
  int64_t row_offset(int64_t batch, int64_t i) const;
  int64_t key_stride() const { return key_stride_; }
  int64_t query_stride() const { return query_stride_; }

 private:
  void set_strides(const Shape& scores, const int64_t* strides);

  MaskView view_;
  int leading_rank_ = 0;
  int64_t leading_dims_[kMaxRank] = {};
  int64_t leading_strides_[kMaxRank] = {};
  int64_t query_stride_ = 0;
  int64_t key_stride_ = 0;
};

// Everything that can hide a key from a query: up to two broadcast masks (MultiheadAttention
// merges an attention mask with a key padding mask) and the causal rule j <= i. Masks and the
// causal rule cover the first `width` keys; keys past them (the bias_k and zero-attention columns
// MultiheadAttention appends) are always visible.
class ScoreMask {
 public:
  void add(const BroadcastMask& mask);
  void set_causal(bool causal) { causal_ = causal; }
  void set_width(int64_t width) { width_ = width; }

  bool empty() const { return count_ == 0 && !causal_; }
  // True when nothing can hide keys [j0, j1) from query i, so no bias row is needed. Conservative:
  // a false answer only costs a fill_bias.
  bool all_visible(int64_t i, int64_t j0, int64_t j1) const {
    return count_ == 0 && (!causal_ || std::min(j1, width_) - 1 <= i || j1 <= j0);
  }
  // How many of keys [j0, j1), counted from j0, the causal rule leaves query i (all of them
  // without the rule); -1 when the range reaches past the masked width, where the rule is no cut.
  int64_t causal_limit(int64_t i, int64_t j0, int64_t j1) const {
    if (!causal_) return j1 - j0;
    if (j1 > width_) return -1;
    return std::clamp<int64_t>(i + 1 - j0, 0, j1 - j0);
  }
  // Whether any mask tensor was added (beyond the causal rule).
  bool has_tensors() const { return count_ > 0; }
  // Whether the mask tensors give every query of a block the same row (key padding, [1, m] masks).
  bool same_for_every_query() const;
  // True when the causal rule hides keys [j0, j1) from every query up to `last_query`.
  bool hides_keys(int64_t last_query, int64_t j0, int64_t j1) const { return causal_ && j0 > last_query && j1 <= width_; }
  // Writes bias[j - j0] for keys [j0, j1) of query i in leading block `batch`: the sum of the
  // masks, a boolean one counting as -inf where it hides the key (so -inf there, or NaN where an
  // additive mask holds +inf, as PyTorch's merge gives). Returns how many keys stay visible.
  int64_t fill_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const;
  // fill_bias without the causal rule and without the count: the mask tensors alone.
  void fill_tensor_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const;

 private:
  static constexpr int kMaxMasks = 2;
  BroadcastMask masks_[kMaxMasks];
  int count_ = 0;
  bool causal_ = false;
  int64_t width_ = INT64_MAX;
};

// How many of bias[0, keys) are not -inf: the keys a bias row leaves visible.
int64_t count_visible(const float* bias, int64_t keys);

// masks.merge: the single additive mask MultiheadAttention applies, [N*heads, n, m] (n = 1 without
// an attention mask): the sum of both, a boolean mask counting as -inf where it hides the key.
// attn_mask: [n, m] or [N*heads, n, m] (boolean 1 = not allowed); key_padding_mask: [N, m]
// (boolean 1 = padding). check_merge_masks reads shapes only.
Status check_merge_masks(const MaskView& attn_mask, const MaskView& key_padding_mask, int64_t heads, Shape* merged);
Status merge_masks(const MaskView& attn_mask, const MaskView& key_padding_mask, int64_t heads, float* merged);

}  // namespace attn

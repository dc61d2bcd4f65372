// Masks broadcast against the score tensor [..., n, m] and folded, one key range at a time, into
// the additive bias the softmax kernel adds to the scores.
#pragma once

#include "status.h"
#include "tensor.h"

namespace attn {

// One mask broadcast (right-aligned, size-1 dimensions stretched) against `scores` [..., n, m].
class BroadcastMask {
 public:
  // Fails, naming `argument`, when the mask cannot broadcast to `scores`.
  static Status check(const MaskView& mask, const Shape& scores, const char* argument);
  BroadcastMask() = default;
  // Assumes check() passed.
  BroadcastMask(const MaskView& mask, const Shape& scores);

  const MaskView& view() const { return view_; }
  // Offset of element [batch..., i, 0], where `batch` indexes the flattened leading dimensions.
  int64_t row_offset(int64_t batch, int64_t i) const;
  int64_t key_stride() const { return key_stride_; }

 private:
  MaskView view_;
  int leading_rank_ = 0;
  int64_t leading_dims_[kMaxRank] = {};
  int64_t leading_strides_[kMaxRank] = {};
  int64_t query_stride_ = 0;
  int64_t key_stride_ = 0;
};

// Everything that can hide a key from a query: up to two broadcast masks (MultiheadAttention
// merges an attention mask with a key padding mask) and the causal rule j <= i.
class ScoreMask {
 public:
  void add(const BroadcastMask& mask);
  void set_causal(bool causal) { causal_ = causal; }

  bool empty() const { return count_ == 0 && !causal_; }
  bool causal() const { return causal_; }
  // Writes bias[j - j0] for keys [j0, j1) of query i in leading block `batch`: the sum of the
  // additive masks, or -inf where any mask hides the key. Returns how many keys stay visible.
  int64_t fill_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const;

 private:
  static constexpr int kMaxMasks = 2;
  BroadcastMask masks_[kMaxMasks];
  int count_ = 0;
  bool causal_ = false;
};

}  // namespace attn

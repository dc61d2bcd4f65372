#include "mask.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace attn {

Status BroadcastMask::check(const MaskView& mask, const Shape& scores, const char* argument) {
  bool fits = mask.shape.rank <= scores.rank;
  for (int k = 1; fits && k <= mask.shape.rank; ++k) {
    const int64_t dim = mask.shape.at_end(k);
    fits = dim == 1 || dim == scores.at_end(k);
  }
  if (!fits) return Status::invalid(argument, "a shape broadcastable to " + scores.str(), mask.shape.str());
  return Status::success();
}


BroadcastMask::BroadcastMask(const MaskView& mask, const Shape& scores) : view_(mask) {
  if (!mask.present()) return;
  // Strides of the mask as if it had the scores' rank; stretched dimensions get stride 0.
  int64_t strides[kMaxRank] = {};
  int64_t stride = 1;
  for (int k = 1; k <= scores.rank; ++k) {
    const bool own = k <= mask.shape.rank;
    const int64_t dim = own ? mask.shape.at_end(k) : 1;
    strides[scores.rank - k] = (dim == 1) ? 0 : stride;
    stride *= dim;
  }
  set_strides(scores, strides);
}

BroadcastMask BroadcastMask::with_strides(const MaskView& mask, const Shape& scores, const int64_t* strides) {
  BroadcastMask result;
  result.view_ = mask;
  result.set_strides(scores, strides);
  return result;
}

void BroadcastMask::set_strides(const Shape& scores, const int64_t* strides) {
  key_stride_ = strides[scores.rank - 1];
  query_stride_ = strides[scores.rank - 2];
  leading_rank_ = scores.rank - 2;
  for (int a = 0; a < leading_rank_; ++a) {
    leading_dims_[a] = scores[a];
    leading_strides_[a] = strides[a];
  }
}

int64_t BroadcastMask::row_offset(int64_t batch, int64_t i) const {
  int64_t offset = i * query_stride_;
  for (int a = leading_rank_ - 1; a >= 0; --a) {
    offset += (batch % leading_dims_[a]) * leading_strides_[a];
    batch /= leading_dims_[a];
  }
  return offset;
}

void ScoreMask::add(const BroadcastMask& mask) {
  if (mask.view().present()) masks_[count_++] = mask;
}

int64_t ScoreMask::fill_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  for (int64_t j = j0; j < j1; ++j) bias[j - j0] = 0.0f;
  const int64_t masked_end = std::min(j1, width_);  // keys [j0, masked_end) are subject to masks
  for (int k = 0; k < count_; ++k) {
    const BroadcastMask& mask = masks_[k];
    const int64_t stride = mask.key_stride();
    const int64_t base = mask.row_offset(batch, i) + j0 * stride;
    if (mask.view().type == MaskType::boolean) {
      const auto* bytes = static_cast<const uint8_t*>(mask.view().data) + base;
      const bool masked_value = mask.view().true_means_masked;
      for (int64_t j = 0; j < masked_end - j0; ++j)
        if ((bytes[j * stride] != 0) == masked_value) bias[j] = kMasked;
    } else {
      const float* values = static_cast<const float*>(mask.view().data) + base;
      for (int64_t j = 0; j < masked_end - j0; ++j) bias[j] += values[j * stride];
    }
  }
  if (causal_)
    for (int64_t j = std::max(j0, i + 1); j < masked_end; ++j) bias[j - j0] = kMasked;
  int64_t visible = 0;
  for (int64_t j = 0; j < j1 - j0; ++j) visible += bias[j] != kMasked;
  return visible;
}

}  // namespace attn

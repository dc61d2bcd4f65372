#include "mask.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

namespace attn {
namespace {

// The bias of a hidden key.
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// bias[j] += term(j · stride) for j < count. A unit stride (a mask row laid out as the scores are)
// gets a loop of its own, which the compiler vectorises.
template <typename Term>
void add_terms(float* bias, int64_t count, int64_t stride, const Term& term) {
  if (stride == 1)
    for (int64_t j = 0; j < count; ++j) bias[j] += term(j);
  else
    for (int64_t j = 0; j < count; ++j) bias[j] += term(j * stride);
}

}  // namespace

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

bool ScoreMask::same_for_every_query() const {
  if (documents_.present()) return false;
  for (int k = 0; k < count_; ++k)
    if (masks_[k].query_stride() != 0) return false;
  return true;
}

void ScoreMask::fill_tensor_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const {
  std::fill(bias, bias + (j1 - j0), 0.0f);
  const int64_t masked_end = std::min(j1, width_);  // keys [j0, masked_end) are subject to masks
  for (int k = 0; k < count_; ++k) {
    const BroadcastMask& mask = masks_[k];
    const int64_t stride = mask.key_stride();
    const int64_t base = mask.row_offset(batch, i) + j0 * stride;
    if (mask.view().type == MaskType::boolean) {
      const auto* bytes = static_cast<const uint8_t*>(mask.view().data) + base;
      const bool masked_value = mask.view().true_means_masked;
      // Added rather than stored, so that the compiler vectorises the loop; as in PyTorch, which
      // adds a boolean mask as -inf to the other, a +inf there gives NaN.
      add_terms(bias, masked_end - j0, stride, [&](int64_t at) { return (bytes[at] != 0) == masked_value ? kMasked : 0.0f; });
    } else {
      const float* values = static_cast<const float*>(mask.view().data) + base;
      add_terms(bias, masked_end - j0, stride, [&](int64_t at) { return values[at]; });
    }
  }
}

int64_t count_visible(const float* bias, int64_t keys) {
  // Counted in 32-bit chunks, which the compiler vectorises (a 64-bit count it does not).
  constexpr int64_t kChunk = INT32_MAX;
  int64_t visible = 0;
  for (int64_t j0 = 0; j0 < keys; j0 += kChunk) {
    int32_t chunk = 0;
    for (int64_t j = j0; j < std::min(keys, j0 + kChunk); ++j) chunk += bias[j] != kMasked;
    visible += chunk;
  }
  return visible;
}

int64_t ScoreMask::fill_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const {
  fill_tensor_bias(batch, i, j0, j1, bias);
  const int64_t masked_end = std::min(j1, width_);
  if (masked_end > j0) {
    const KeyRange visible = position_range(i, j0, masked_end);
    std::fill(bias, bias + (visible.begin - j0), kMasked);
    std::fill(bias + (visible.end - j0), bias + (masked_end - j0), kMasked);
    if (documents_.present()) {
      const int32_t id = documents_.query_id(batch, i);
      const int32_t* keys = documents_.key_ids(batch, j0);
      const int64_t stride = documents_.key_stride();
      add_terms(bias, masked_end - j0, stride, [&](int64_t at) { return keys[at] == id ? 0.0f : kMasked; });
    }
  }
  return count_visible(bias, j1 - j0);
}

Status DocumentMask::check(const Shape& ids, const Shape& scores, bool keys, const char* argument) {
  // [..., n] against the scores' leading dims and n (or [..., m] against them and m).
  Shape target = scores;
  target.rank -= 1;
  if (keys) target[target.rank - 1] = scores.at_end(1);
  bool fits = ids.rank >= 1 && ids.rank <= target.rank && ids.non_negative();
  for (int k = 1; fits && k <= ids.rank; ++k) fits = ids.at_end(k) == 1 || ids.at_end(k) == target.at_end(k);
  if (!fits) return Status::invalid(argument, "a shape broadcastable to " + target.str(), ids.str());
  return Status::success();
}

DocumentMask::DocumentMask(const IdsView& queries, const IdsView& keys, const Shape& scores) {
  // Each as a mask over the scores: queries [..., n, 1], keys [..., 1, m].
  const auto as_mask = [&](const IdsView& ids, bool key_axis) {
    MaskView view;
    view.type = MaskType::additive;  // only its data pointer and shape are read
    view.data = ids.data;
    view.shape = ids.shape;
    view.shape.rank = ids.shape.rank + 1;
    if (key_axis) {
      view.shape[view.shape.rank - 1] = ids.shape.rank ? ids.shape.at_end(1) : 1;
      view.shape[view.shape.rank - 2] = 1;
    } else {
      view.shape[view.shape.rank - 1] = 1;
    }
    return BroadcastMask(view, scores);
  };
  queries_ = as_mask(queries, false);
  keys_ = as_mask(keys, true);
}

bool DocumentMask::disjoint(int64_t batch, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
  const auto range = [](auto id_of, int64_t first, int64_t last) {
    int32_t low = id_of(first), high = low;
    for (int64_t x = first + 1; x <= last; ++x) {
      low = std::min(low, id_of(x));
      high = std::max(high, id_of(x));
    }
    return std::pair{low, high};
  };
  const int32_t* keys = key_ids(batch, j0);
  const auto [query_low, query_high] = range([&](int64_t i) { return query_id(batch, i); }, i0, i1);
  const auto [key_low, key_high] = range([&](int64_t j) { return keys[(j - j0) * key_stride()]; }, j0, j1 - 1);
  return query_high < key_low || key_high < query_low;
}

Status check_merge_masks(const MergeMasksOptions& options, Shape* merged) {
  const MaskView &attn_mask = options.attn_mask, &key_padding_mask = options.key_padding_mask;
  const int64_t heads = options.heads;
  if (heads <= 0) return Status::invalid("numHeads", "a positive integer", std::to_string(heads));
  const Shape& kpm = key_padding_mask.shape;
  if (!key_padding_mask.present() || kpm.rank != 2 || !kpm.non_negative())
    return Status::invalid("keyPaddingMask", "[N, m]", key_padding_mask.present() ? kpm.str() : "none");
  const int64_t N = kpm[0], m = kpm[1];
  int64_t n = 1;
  if (attn_mask.present()) {
    const Shape& am = attn_mask.shape;
    const bool fits = (am.rank == 2 && am[1] == m) || (am.rank == 3 && am[0] == N * heads && am[2] == m);
    if (!fits || !am.non_negative())
      return Status::invalid("attnMask",
                             "[n, " + std::to_string(m) + "] or [" + std::to_string(N * heads) + ", n, " +
                                 std::to_string(m) + "] (N*numHeads, n, m)",
                             am.str());
    n = am.at_end(2);
  }
  *merged = {N * heads, n, m};
  return Status::success();
}

Status merge_masks(const MergeMasksOptions& options, float* merged) {
  const MaskView &attn_mask = options.attn_mask, &key_padding_mask = options.key_padding_mask;
  const int64_t heads = options.heads;
  Shape shape;
  Status s = check_merge_masks(options, &shape);
  if (s.ok()) s = check_data(attn_mask, "attnMask");
  if (s.ok()) s = check_data(key_padding_mask, "keyPaddingMask");
  if (!s.ok()) return s;
  const int64_t N = key_padding_mask.shape[0], n = shape[1], m = shape[2];
  const Shape scores{N, heads, n, m};
  ScoreMask mask;
  if (attn_mask.present()) {
    MaskView am = attn_mask;
    if (am.shape.rank == 3) am.shape = scores;
    mask.add(BroadcastMask(am, scores));
  }
  MaskView padding = key_padding_mask;
  padding.shape = {N, 1, 1, m};
  mask.add(BroadcastMask(padding, scores));
  for (int64_t b = 0; b < N * heads; ++b)
    for (int64_t i = 0; i < n; ++i) mask.fill_bias(b, i, 0, m, merged + (b * n + i) * m);
  return Status::success();
}

}  // namespace attn

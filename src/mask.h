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

// Document ids of the queries [..., n] and of the keys [..., m], each broadcast against the
// scores [..., n, m]: a key is visible to a query iff their ids are equal.
class DocumentMask {
 public:
  // Fails, naming `argument`, when ids [..., n] (or [..., m] for keys) cannot broadcast to the
  // scores' leading dims and their n (m).
  static Status check(const Shape& ids, const Shape& scores, bool keys, const char* argument);
  DocumentMask() = default;
  // Assumes check() passed for both.
  DocumentMask(const IdsView& queries, const IdsView& keys, const Shape& scores);

  bool present() const { return queries_.view().present(); }
  int32_t query_id(int64_t batch, int64_t i) const { return ids(queries_)[queries_.row_offset(batch, i)]; }
  // Key j's id is keys[j * stride] with keys = key_ids(batch, j0) - j0 * stride, for j >= j0.
  const int32_t* key_ids(int64_t batch, int64_t j0) const {
    return ids(keys_) + keys_.row_offset(batch, 0) + j0 * keys_.key_stride();
  }
  int64_t key_stride() const { return keys_.key_stride(); }
  // True when no query of [i0, i1] shares an id with a key of [j0, j1) in block `batch`: compared by
  // the ranges of their ids, which is exact for packed (sorted) documents and safe for any.
  bool disjoint(int64_t batch, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const;

 private:
  static const int32_t* ids(const BroadcastMask& mask) { return static_cast<const int32_t*>(mask.view().data); }

  BroadcastMask queries_, keys_;  // their broadcast strides (the ids as [..., n, 1] and [..., 1, m])
};

// Keys [begin, end): the range the position rules leave a query, or a tile of queries.
struct KeyRange {
  int64_t begin, end;
  bool empty() const { return begin >= end; }
};

// Everything that can hide a key from a query: up to two broadcast masks (MultiheadAttention
// merges an attention mask with a key padding mask), document ids, and the position rules:
// causal (j <= p_i) and a window (|p_i - j| < W), with the query's position p_i = i + offset
// (offset m - n aligns the queries lower-right, as the last n of the m key positions). Masks and
// rules cover the first `width` keys; keys past them (the bias_k and zero-attention columns
// MultiheadAttention appends) are always visible.
class ScoreMask {
 public:
  void add(const BroadcastMask& mask);
  void set_causal(bool causal) { causal_ = causal; }
  void set_window(int64_t window) { window_ = window; }
  void set_position_offset(int64_t offset) { offset_ = offset; }
  void set_documents(const DocumentMask& documents) { documents_ = documents; }
  void set_width(int64_t width) { width_ = width; }

  int64_t position(int64_t i) const { return i + offset_; }
  // True when nothing can hide keys [j0, j1) from query i, so no bias row is needed. Conservative:
  // a false answer only costs a fill_bias.
  bool all_visible(int64_t i, int64_t j0, int64_t j1) const {
    if (count_ > 0 || documents_.present()) return false;
    const int64_t masked_end = std::min(j1, width_);
    if (masked_end <= j0) return true;
    const KeyRange range = position_range(i, j0, masked_end);
    return range.begin == j0 && range.end == masked_end;
  }
  // Whether keys [j0, j1) lie within the masked width, where position_range is exact; past it the
  // rules are left to fill_bias.
  bool within_width(int64_t j1) const { return j1 <= width_; }
  // The keys of [j0, j1) the position rules leave query i (j1 within the width).
  KeyRange position_range(int64_t i, int64_t j0, int64_t j1) const {
    const int64_t p = position(i);
    int64_t begin = j0, end = j1;
    if (window_ > 0) {
      begin = std::max(begin, p - window_ + 1);
      end = std::min(end, p + window_);
    }
    if (causal_) end = std::min(end, p + 1);
    begin = std::min(begin, j1);
    return {begin, std::max(begin, end)};
  }
  // The union of the ranges of queries [i0, i1]: positions grow with i, so the first query's
  // begin and the last one's end (the whole [j0, j1) past the width).
  KeyRange tile_range(int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    if (!within_width(j1)) return {j0, j1};
    return {position_range(i0, j0, j1).begin, position_range(i1, j0, j1).end};
  }
  // True when the rules hide keys [j0, j1) from every query of [i0, i1] in block `batch`.
  bool hides_tile(int64_t batch, int64_t i0, int64_t i1, int64_t j0, int64_t j1) const {
    if (!within_width(j1) || j1 <= j0) return false;
    return tile_range(i0, i1, j0, j1).empty() || (documents_.present() && documents_.disjoint(batch, i0, i1, j0, j1));
  }
  // Whether mask tensors or document ids (anything beyond the position rules) were added.
  bool has_tensors() const { return count_ > 0 || documents_.present(); }
  // Whether the mask tensors give every query of a block the same row (key padding, [1, m] masks).
  bool same_for_every_query() const;
  // Writes bias[j - j0] for keys [j0, j1) of query i in leading block `batch`: the sum of the
  // masks, a boolean one counting as -inf where it hides the key (so -inf there, or NaN where an
  // additive mask holds +inf, as PyTorch's merge gives), and -inf where a rule hides the key.
  // Returns how many keys stay visible.
  int64_t fill_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const;
  // fill_bias without the rules and without the count: the mask tensors alone.
  void fill_tensor_bias(int64_t batch, int64_t i, int64_t j0, int64_t j1, float* bias) const;

 private:
  static constexpr int kMaxMasks = 2;
  BroadcastMask masks_[kMaxMasks];
  int count_ = 0;
  DocumentMask documents_;
  bool causal_ = false;
  int64_t window_ = 0;  // 0: none
  int64_t offset_ = 0;
  int64_t width_ = INT64_MAX;
};

// How many of bias[0, keys) are not -inf: the keys a bias row leaves visible.
int64_t count_visible(const float* bias, int64_t keys);

// masks.merge: the single additive mask MultiheadAttention applies, [N*heads, n, m] (n = 1 without
// an attention mask): the sum of both, a boolean mask counting as -inf where it hides the key.
struct MergeMasksOptions {
  MaskView attn_mask;         // [n, m] or [N*heads, n, m]; boolean 1 = not allowed, or none
  MaskView key_padding_mask;  // [N, m]; boolean 1 = padding
  int64_t heads = 0;
};
// check_merge_masks reads shapes only.
Status check_merge_masks(const MergeMasksOptions& options, Shape* merged);
Status merge_masks(const MergeMasksOptions& options, float* merged);

}  // namespace attn

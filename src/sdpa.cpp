#include <cmath>
#include <utility>

#include "attend.h"
#include "attention.h"
#include "module.h"

namespace attn {
namespace {

// Scores have the query's leading dims and [n, m].
Shape score_shape(const Shape& query, const Shape& key) {
  Shape scores = query;
  scores[scores.rank - 1] = key.at_end(2);
  return scores;
}

bool same_leading_dims(const Shape& s, const Shape& query) {
  if (s.rank != query.rank) return false;
  for (int axis = 0; axis < query.rank - 2; ++axis)
    if (s[axis] != query[axis]) return false;
  return true;
}

// "[2, 3, m, 8]": the query's leading dims followed by `tail`.
std::string with_leading_dims(const Shape& query, const std::string& tail) {
  std::string s = "[";
  for (int axis = 0; axis < query.rank - 2; ++axis) s += std::to_string(query[axis]) + ", ";
  return s + tail + "]";
}

}  // namespace

Status check_scaled_dot_product_attention(const Shape& query, const Shape& key, const Shape& value,
                                          const SdpaOptions& options) {
  if (query.rank < 2 || query.rank > kMaxRank)
    return Status::invalid("query", "rank 2 to " + std::to_string(kMaxRank) + " ([..., n, d])", query.str());
  for (const auto& [argument, shape] : {std::pair{"query", query}, {"key", key}, {"value", value},
                                        {"attnMask", options.attn_mask.shape}})
    if (!shape.non_negative()) return Status::invalid(argument, "non-negative dimensions", shape.str());
  if (!same_leading_dims(key, query) || key.at_end(1) != query.at_end(1))
    return Status::invalid("key", with_leading_dims(query, "m, " + std::to_string(query.at_end(1))), key.str());
  if (!same_leading_dims(value, query) || value.at_end(2) != key.at_end(2))
    return Status::invalid("value", with_leading_dims(query, std::to_string(key.at_end(2)) + ", dv"), value.str());
  if (options.attn_mask.present()) {
    Status s = BroadcastMask::check(options.attn_mask, score_shape(query, key), "attnMask");
    if (!s.ok()) return s;
  }
  if (options.scale && !std::isfinite(*options.scale))
    return Status::invalid("scale", "a finite number", std::to_string(*options.scale));
  if (!(options.dropout_p >= 0.0f && options.dropout_p < 1.0f))
    return Status::invalid("dropoutP", "a number in [0, 1)", std::to_string(options.dropout_p));
  return Status::success();
}

Status scaled_dot_product_attention(const TensorView& query, const TensorView& key, const TensorView& value,
                                    const SdpaOptions& options, float* output, float* weights) {
  Status s = first_failure({check_scaled_dot_product_attention(query.shape, key.shape, value.shape, options),
                            check_data(query, "query"), check_data(key, "key"), check_data(value, "value"),
                            check_data(options.attn_mask, "attnMask")});
  if (!s.ok()) return s;
  const Shape scores = score_shape(query.shape, key.shape);

  ScoreMask mask;
  if (options.attn_mask.present()) mask.add(BroadcastMask(options.attn_mask, scores));
  mask.set_causal(options.is_causal);
  const Dropout dropout(options.dropout_p, options.seed);

  AttentionBlocks blocks;
  blocks.batch = query.shape.leading_numel(2);
  blocks.n = query.shape.at_end(2);
  blocks.d = query.shape.at_end(1);
  blocks.m = key.shape.at_end(2);
  blocks.dv = value.shape.at_end(1);
  blocks.query = query.data;
  blocks.key = key.data;
  blocks.value = value.data;
  blocks.query_layout = BlockLayout::contiguous(blocks.n, blocks.d);
  blocks.key_layout = BlockLayout::contiguous(blocks.m, blocks.d);
  blocks.value_layout = BlockLayout::contiguous(blocks.m, blocks.dv);
  blocks.output_layout = BlockLayout::contiguous(blocks.n, blocks.dv);
  // With d = 0 every score is 0 and 1/sqrt(0) would turn them into 0 * inf = NaN: any finite scale
  // gives the uniform softmax, so take 1 (found by the fuzzer).
  const float default_scale = blocks.d > 0 ? 1.0f / std::sqrt(static_cast<float>(blocks.d)) : 1.0f;
  blocks.scale = options.scale ? *options.scale : default_scale;
  blocks.mask = &mask;
  blocks.dropout = &dropout;
  return attend(blocks, output, weights);
}

}  // namespace attn

#include <cmath>
#include <utility>

#include "attend.h"
#include "attention.h"
#include "buffer.h"
#include "module.h"

namespace attn {
namespace {

// Scores have the query's leading dims and [n, m].
Shape score_shape(const Shape& query, const Shape& key) {
  Shape scores = query;
  scores[scores.rank - 1] = key.at_end(2);
  return scores;
}

// Whether `s` has the query's leading dims, except the head dim (-3) when `heads_may_differ`.
bool same_leading_dims(const Shape& s, const Shape& query, bool heads_may_differ) {
  if (s.rank != query.rank) return false;
  for (int axis = 0; axis < query.rank - 2; ++axis)
    if (s[axis] != query[axis] && !(heads_may_differ && axis == query.rank - 3)) return false;
  return true;
}

// "[2, 3, m, 8]": the query's leading dims (the head dim as `heads` when given) followed by `tail`.
std::string with_leading_dims(const Shape& query, const std::string& tail, const char* heads = nullptr) {
  std::string s = "[";
  for (int axis = 0; axis < query.rank - 2; ++axis)
    s += (heads && axis == query.rank - 3 ? std::string(heads) : std::to_string(query[axis])) + ", ";
  return s + tail + "]";
}

Status check_key_value(const Shape& query, const Shape& key, const Shape& value, bool grouped) {
  const std::string key_tail = "m, " + std::to_string(query.at_end(1));
  if (!same_leading_dims(key, query, grouped) || key.at_end(1) != query.at_end(1)) {
    if (grouped) return Status::invalid("key", with_leading_dims(query, key_tail, "Hkv"), key.str());
    // Key/value heads that could serve the query heads as groups: say what would accept them.
    const bool groups = query.rank >= 3 && same_leading_dims(key, query, true) && key.at_end(1) == query.at_end(1) &&
                        key.at_end(3) > 0 && query.at_end(3) % key.at_end(3) == 0;
    return Status::invalid("key", with_leading_dims(query, key_tail) + (groups ? " (or enableGqa: true)" : ""),
                           key.str());
  }
  if (grouped) {
    const int64_t query_heads = query.at_end(3), kv_heads = key.at_end(3);
    if (kv_heads == 0 ? query_heads != 0 : query_heads % kv_heads != 0)
      return Status::invalid("key",
                             with_leading_dims(query, key_tail, "Hkv") + " with Hkv dividing the query's " +
                                 std::to_string(query_heads) + " heads",
                             key.str());
  }
  if (!same_leading_dims(value, key, false) || value.at_end(2) != key.at_end(2))
    return Status::invalid("value", with_leading_dims(key, std::to_string(key.at_end(2)) + ", dv"), value.str());
  return Status::success();
}

Status check_documents(const SdpaOptions& options, const Shape& scores) {
  const IdsView &queries = options.query_document_ids, &keys = options.key_document_ids;
  if (!queries.present() && !keys.present()) return Status::success();
  if (options.shared_document_ids) {
    const int64_t n = scores.at_end(2), m = scores.at_end(1);
    if (n != m)
      return Status::invalid("documentIds",
                             "queries and keys of one length (n == m; for n != m give queryDocumentIds and keyDocumentIds)",
                             "n = " + std::to_string(n) + ", m = " + std::to_string(m));
    return DocumentMask::check(queries.shape, scores, false, "documentIds");
  }
  if (!keys.present()) return Status::invalid("keyDocumentIds", "ids given with queryDocumentIds", "none");
  if (!queries.present()) return Status::invalid("queryDocumentIds", "ids given with keyDocumentIds", "none");
  return first_failure({DocumentMask::check(queries.shape, scores, false, "queryDocumentIds"),
                        DocumentMask::check(keys.shape, scores, true, "keyDocumentIds")});
}

}  // namespace

void alibi_slopes(int64_t heads, float* slopes) {
  const auto power_of_two_slopes = [](int64_t count, int64_t h) { return std::exp2(-8.0 * (h + 1) / count); };
  int64_t power = 1;
  while (power * 2 <= heads) power *= 2;
  for (int64_t h = 0; h < heads; ++h)
    slopes[h] = static_cast<float>(h < power ? power_of_two_slopes(power, h)
                                             : power_of_two_slopes(2 * power, 2 * (h - power)));
}

Status check_scaled_dot_product_attention(const Shape& query, const Shape& key, const Shape& value,
                                          const SdpaOptions& options) {
  if (query.rank < 2 || query.rank > kMaxRank)
    return Status::invalid("query", "rank 2 to " + std::to_string(kMaxRank) + " ([..., n, d])", query.str());
  for (const auto& [argument, shape] : {std::pair{"query", query}, {"key", key}, {"value", value},
                                        {"attnMask", options.attn_mask.shape}})
    if (!shape.non_negative()) return Status::invalid(argument, "non-negative dimensions", shape.str());
  if (options.enable_gqa && query.rank < 3)
    return Status::invalid("enableGqa", "a query of rank 3 or more ([..., Hq, n, d])", query.str());
  Status s = check_key_value(query, key, value, options.enable_gqa);
  if (!s.ok()) return s;
  const Shape scores = score_shape(query, key);
  if (options.attn_mask.present()) {
    s = BroadcastMask::check(options.attn_mask, scores, "attnMask");
    if (!s.ok()) return s;
  }
  if (options.scale && !std::isfinite(*options.scale))
    return Status::invalid("scale", "a finite number", number_string(*options.scale));
  if (!(options.dropout_p >= 0.0f && options.dropout_p < 1.0f))
    return Status::invalid("dropoutP", "a number in [0, 1)", number_string(options.dropout_p));
  if (options.window && *options.window <= 0)
    return Status::invalid("window", "a positive integer", std::to_string(*options.window));
  if (options.softcap && !(*options.softcap > 0.0f && std::isfinite(*options.softcap)))
    return Status::invalid("softcap", "a positive finite number", number_string(*options.softcap));
  if (options.alibi) {
    if (query.rank < 3) return Status::invalid("alibi", "a query of rank 3 or more ([..., H, n, d])", query.str());
    const int64_t heads = query.at_end(3);
    if (options.alibi_slopes && options.alibi_slope_count != heads)
      return Status::invalid("alibi", "true or " + std::to_string(heads) + " slopes (one per query head)",
                             std::to_string(options.alibi_slope_count) + " slopes");
  }
  return check_documents(options, scores);
}

Status SdpaPlan::prepare(const TensorView& query, const Shape& key, const Shape& value, const SdpaOptions& options) {
  const Shape scores = score_shape(query.shape, key);
  blocks = AttentionBlocks{};
  blocks.batch = query.shape.leading_numel(2);
  blocks.n = query.shape.at_end(2);
  blocks.d = query.shape.at_end(1);
  blocks.m = key.at_end(2);
  blocks.dv = value.at_end(1);

  mask_ = ScoreMask{};
  if (options.attn_mask.present()) mask_.add(BroadcastMask(options.attn_mask, scores));
  mask_.set_causal(options.causal != Causal::none);
  if (options.causal == Causal::lower_right || options.queries_last) mask_.set_position_offset(blocks.m - blocks.n);
  if (options.window) mask_.set_window(*options.window);
  if (options.query_document_ids.present())
    mask_.set_documents(DocumentMask(options.query_document_ids, options.key_document_ids, scores));
  dropout_ = Dropout(options.dropout_p, options.seed);

  if (options.alibi) {
    blocks.alibi_heads = query.shape.at_end(3);
    if (options.alibi_slopes) {
      blocks.alibi_slopes = options.alibi_slopes;
    } else {
      Status s = slopes_.allocate(blocks.alibi_heads, "ALiBi slopes");
      if (!s.ok()) return s;
      alibi_slopes(blocks.alibi_heads, slopes_.data());
      blocks.alibi_slopes = slopes_.data();
    }
  }
  if (options.softcap) blocks.softcap = *options.softcap;
  // No query heads (found by the fuzzer) leave nothing to group: a group of 0 would divide by 0.
  if (options.enable_gqa && query.shape.at_end(3) > 0) blocks.kv_group = query.shape.at_end(3) / key.at_end(3);

  blocks.query = query.data;
  blocks.query_layout = BlockLayout::contiguous(blocks.n, blocks.d);
  blocks.output_layout = BlockLayout::contiguous(blocks.n, blocks.dv);
  // With d = 0 every score is 0 and 1/sqrt(0) would turn them into 0 * inf = NaN: any finite scale
  // gives the uniform softmax, so take 1 (found by the fuzzer).
  const float default_scale = blocks.d > 0 ? 1.0f / std::sqrt(static_cast<float>(blocks.d)) : 1.0f;
  blocks.scale = options.scale ? *options.scale : default_scale;
  blocks.mask = &mask_;
  blocks.dropout = &dropout_;
  return Status::success();
}

Status scaled_dot_product_attention(const TensorView& query, const TensorView& key, const TensorView& value,
                                    const SdpaOptions& options, float* output, float* weights) {
  Status s = first_failure({check_scaled_dot_product_attention(query.shape, key.shape, value.shape, options),
                            check_data(query, "query"), check_data(key, "key"), check_data(value, "value"),
                            check_data(options.attn_mask, "attnMask"),
                            check_data(options.query_document_ids, "queryDocumentIds"),
                            check_data(options.key_document_ids, "keyDocumentIds")});
  if (!s.ok()) return s;
  SdpaPlan plan;
  s = plan.prepare(query, key.shape, value.shape, options);
  if (!s.ok()) return s;
  AttentionBlocks& blocks = plan.blocks;
  blocks.key = {key.data, nullptr, BlockLayout::contiguous(blocks.m, blocks.d)};
  blocks.value = {value.data, nullptr, BlockLayout::contiguous(blocks.m, blocks.dv)};
  return attend(blocks, output, weights);
}

}  // namespace attn

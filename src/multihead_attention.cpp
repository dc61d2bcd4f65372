#include "multihead_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attend.h"
#include "buffer.h"
#include "kernels/packing.h"
#include "linear.h"
#include "mask.h"
#include "parallel.h"

namespace attn {
namespace {

// The batched view of an input: unbatched (L, E) is treated as (L, 1, E).
struct Geometry {
  int64_t batch, queries, keys, extra_keys;  // N, n, m, and the bias_k / zero-attention rows

  int64_t all_keys() const { return keys + extra_keys; }
};

std::string dims(std::initializer_list<std::string> parts) {
  std::string s = "[";
  for (const std::string& p : parts) s += (s.size() > 1 ? ", " : "") + p;
  return s + "]";
}

std::string num(int64_t v) { return std::to_string(v); }

// Where token (position t, batch element b) of an input with `rows` positions sits, in rows.
BlockLayout token_layout(bool batch_first, int64_t batch, int64_t rows, int64_t heads, int64_t width) {
  const int64_t head_dim = width / heads;
  if (batch_first) return {heads, rows * width, head_dim, width};
  return {heads, width, head_dim, batch * width};
}

}  // namespace

MultiheadAttention::MultiheadAttention(const MultiheadAttentionConfig& config) : config_(config) {
  const int64_t E = config.embed_dim;
  if (config.kdim == E && config.vdim == E) {
    in_proj_weight_ = parameters_.declare("in_proj_weight", {3 * E, E});
  } else {
    q_proj_weight_ = parameters_.declare("q_proj_weight", {E, E});
    k_proj_weight_ = parameters_.declare("k_proj_weight", {E, config.kdim});
    v_proj_weight_ = parameters_.declare("v_proj_weight", {E, config.vdim});
  }
  if (config.bias) in_proj_bias_ = parameters_.declare("in_proj_bias", {3 * E});
  if (config.add_bias_kv) {
    bias_k_ = parameters_.declare("bias_k", {1, 1, E});
    bias_v_ = parameters_.declare("bias_v", {1, 1, E});
  }
  out_proj_weight_ = parameters_.declare("out_proj.weight", {E, E});
  if (config.bias) out_proj_bias_ = parameters_.declare("out_proj.bias", {E});
}

Status MultiheadAttention::create(const MultiheadAttentionConfig& requested, std::unique_ptr<MultiheadAttention>* out) {
  MultiheadAttentionConfig config = requested;
  if (config.kdim == 0) config.kdim = config.embed_dim;
  if (config.vdim == 0) config.vdim = config.embed_dim;
  Status s = first_failure({check_size("embedDim", config.embed_dim), check_size("numHeads", config.num_heads),
                             check_size("kdim", config.kdim), check_size("vdim", config.vdim),
                             check_dropout(config.dropout)});
  if (!s.ok()) return s;
  if (config.embed_dim % config.num_heads != 0)
    return Status::invalid("embedDim", "a multiple of numHeads (" + num(config.num_heads) + ")", num(config.embed_dim));
  out->reset(new MultiheadAttention(config));
  return Status::success();
}

Status MultiheadAttention::prepare() {
  const int64_t E = config_.embed_dim;
  // in_proj_weight stacks the query, key and value projections; separate weights when kdim or vdim differ.
  const auto slice = [&](int separate, int slot) {
    return separate >= 0 ? parameters_.get(separate) : parameters_.get(in_proj_weight_) + slot * E * E;
  };
  return first_failure({q_weight_.pack(slice(q_proj_weight_, 0), E, E), k_weight_.pack(slice(k_proj_weight_, 1), E, config_.kdim),
                        v_weight_.pack(slice(v_proj_weight_, 2), E, config_.vdim),
                        out_weight_.pack(parameters_.get(out_proj_weight_), E, E)});
}

Status MultiheadAttention::check_forward(const Shape& query, const Shape& key, const Shape& value,
                                         const MultiheadAttentionOptions& options, Shape* output_shape,
                                         Shape* weights_shape) const {
  const MultiheadAttentionConfig& c = config_;
  const std::string E = num(c.embed_dim), H = num(c.num_heads);
  const std::string layout = c.batch_first ? "(N, L, E)" : "(L, N, E)";
  if (query.rank != 2 && query.rank != 3)
    return Status::invalid("query", layout + " = " + (c.batch_first ? dims({"N", "L", E}) : dims({"L", "N", E})) +
                                        " or unbatched [L, " + E + "]",
                           query.str());
  for (const auto& [argument, shape] : {std::pair{"query", query}, {"key", key}, {"value", value}})
    if (!shape.non_negative()) return Status::invalid(argument, "non-negative dimensions", shape.str());
  const bool batched = query.rank == 3;
  const int64_t N = batched ? query[c.batch_first ? 0 : 1] : 1;
  const int64_t n = query[batched && c.batch_first ? 1 : 0];
  if (query.at_end(1) != c.embed_dim)
    return Status::invalid("query", batched ? (c.batch_first ? dims({num(N), "L", E}) : dims({"L", num(N), E})) : dims({"L", E}),
                           query.str());
  // key and value: same batching and batch size as the query, kdim / vdim features, equal lengths.
  const auto expected_kv = [&](const std::string& features, const std::string& rows) {
    if (!batched) return dims({rows, features});
    return c.batch_first ? dims({num(N), rows, features}) : dims({rows, num(N), features});
  };
  const auto fits = [&](const Shape& s, int64_t features) {
    if (s.rank != query.rank || s.at_end(1) != features) return false;
    return !batched || s[c.batch_first ? 0 : 1] == N;
  };
  if (!fits(key, c.kdim)) return Status::invalid("key", expected_kv(num(c.kdim), "m"), key.str());
  const int64_t m = key[batched && c.batch_first ? 1 : 0];
  if (!fits(value, c.vdim) || value[batched && c.batch_first ? 1 : 0] != m)
    return Status::invalid("value", expected_kv(num(c.vdim), num(m)), value.str());

  const MaskView& kpm = options.key_padding_mask;
  if (kpm.present() && kpm.shape != (batched ? Shape{N, m} : Shape{m}))
    return Status::invalid("keyPaddingMask", batched ? dims({num(N), num(m)}) + " (N, m)" : dims({num(m)}) + " (m)",
                           kpm.shape.str());
  const MaskView& am = options.attn_mask;
  const Shape per_head = batched ? Shape{N * c.num_heads, n, m} : Shape{c.num_heads, n, m};
  Shape per_head_all_queries = per_head;  // masks.merge's result without an attention mask
  per_head_all_queries[1] = 1;
  if (am.present() && am.shape != Shape{n, m} && am.shape != per_head && am.shape != per_head_all_queries)
    return Status::invalid("attnMask",
                           dims({num(n), num(m)}) + " (n, m) or " + per_head.str() +
                               (batched ? " (N*numHeads, n, m)" : " (numHeads, n, m)"),
                           am.shape.str());

  const int64_t all_keys = m + (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  *output_shape = query;
  *weights_shape = Shape();
  if (options.need_weights) {
    *weights_shape = options.average_attn_weights ? Shape{N, n, all_keys} : Shape{N, c.num_heads, n, all_keys};
    if (!batched) {  // the N dimension is dropped for unbatched input, as in PyTorch
      for (int a = 1; a < weights_shape->rank; ++a) (*weights_shape)[a - 1] = (*weights_shape)[a];
      --weights_shape->rank;
    }
  }
  return Status::success();
}

Status MultiheadAttention::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                                   const MultiheadAttentionOptions& options, float* output, float* weights,
                                   SpillStore* spill) const {
  Shape output_shape, weights_shape;
  Status status = first_failure(
      {require_loaded("MultiheadAttention"),
       check_forward(query.shape, key.shape, value.shape, options, &output_shape, &weights_shape),
       check_data(query, "query"), check_data(key, "key"), check_data(value, "value"),
       check_data(options.attn_mask, "attnMask"), check_data(options.key_padding_mask, "keyPaddingMask")});
  if (!status.ok()) return status;
  const MultiheadAttentionConfig& c = config_;
  const bool batched = query.shape.rank == 3;
  const bool batch_first = batched && c.batch_first;
  Geometry g{batched ? query.shape[c.batch_first ? 0 : 1] : 1, query.shape[batch_first ? 1 : 0],
             key.shape[batch_first ? 1 : 0], (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0)};
  const int64_t E = c.embed_dim, H = c.num_heads, head_dim = E / H;

  // Keys and values are projected one tile of kKeyTile positions at a time, into the calling
  // thread's scratch rows, and packed from there, so that their L x E projections never exist.
  const int64_t tile = PackedOperands::kKeyTile;
  FloatBuffer scratch;
  status = scratch.allocate(thread_count() * tile * E, "MultiheadAttention projection scratch");
  if (!status.ok()) return status;
  const auto scratch_rows = [&](int worker) { return scratch.data() + worker * tile * E; };
  const float* in_bias = in_proj_bias_ >= 0 ? parameters_.get(in_proj_bias_) : nullptr;
  // The in-projection bias of slot (query 0, key 1, value 2) from output `first` on.
  const auto bias = [&](int slot, int64_t first) { return in_bias ? in_bias + slot * E + first : nullptr; };
  // Positions [j0, j0 + count) of batch element n's projected keys (or values), outputs
  // [first, first + w.out) alone, into out [count, w.out] (row stride E): the given positions
  // through the projection, then the bias_k (bias_v) row and the zero row.
  const auto project_tile = [&](const TensorView& input, int64_t features, const WeightSlice& w, const float* b,
                                int extra_parameter, int64_t first, int64_t n, int64_t j0, int64_t count, float* out) {
    const int64_t given = std::clamp<int64_t>(g.keys - j0, 0, count);
    if (given > 0)
      linear_rows(given, input.data + (batch_first ? n * g.keys + j0 : j0 * g.batch + n) * features,
                  batch_first ? features : g.batch * features, w, b, out, E);
    for (int64_t t = j0 + given; t < j0 + count; ++t) {
      float* row = out + (t - j0) * E;
      if (c.add_bias_kv && t == g.keys)
        std::memcpy(row, parameters_.get(extra_parameter) + first, w.out * sizeof(float));
      else
        std::fill(row, row + w.out, 0.0f);
    }
  };
  // y = x · Wᵀ + b over the query rows x [queries, E], through the scratch rows in linear()'s work
  // items: columns [skip, skip + width) of each result row go to y (row stride ldy), which may be x.
  static_assert(kLinearRowsPerItem <= PackedOperands::kKeyTile, "a work item's rows fit the scratch rows");
  const int64_t query_rows = g.queries * g.batch, chunk = kLinearRowsPerItem;
  const auto project_rows = [&](const float* x, const WeightSlice& w, const float* b, int64_t skip, int64_t width,
                                float* y, int64_t ldy) {
    parallel_for((query_rows + chunk - 1) / chunk, [&](int64_t item, int worker) {
      const int64_t r0 = item * chunk, count = std::min(chunk, query_rows - r0);
      float* rows = scratch_rows(worker);
      linear_rows(count, x + r0 * E, E, w, b, rows, E);
      for (int64_t r = 0; r < count; ++r)
        std::copy(rows + r * E + skip, rows + r * E + skip + width, y + (r0 + r) * ldy);
    }, 2.0 * chunk * E * w.out);
  };
  // Heads [h0, h0 + heads) own outputs [h0 * head_dim, (h0 + heads) * head_dim) of each projection;
  // a weight slice starts on a panel (8 outputs), so these are projected from `first`, the panel
  // start at or before them, and sit `skip` floats into each projected row.
  struct HeadColumns {
    int64_t first, width, skip;
  };
  const auto head_columns = [&](int64_t h0, int64_t heads) {
    const int64_t panel = static_cast<int64_t>(kernels::kPanel);
    const int64_t first = h0 * head_dim / panel * panel;
    const int64_t end = std::min(E, ((h0 + heads) * head_dim + panel - 1) / panel * panel);
    return HeadColumns{first, end - first, h0 * head_dim - first};
  };

  // Masks, viewed against the scores [N, H, n, m] of the m given keys.
  ScoreMask mask;
  MaskView attn_mask = options.attn_mask, padding = options.key_padding_mask;
  const Shape scores{g.batch, H, g.queries, g.keys};
  if (attn_mask.present()) {
    if (attn_mask.shape.rank == 3) attn_mask.shape = {g.batch, H, attn_mask.shape[1], g.keys};
    mask.add(BroadcastMask(attn_mask, scores));
  }
  if (padding.present()) {
    padding.shape = {g.batch, 1, 1, g.keys};
    mask.add(BroadcastMask(padding, scores));
  }
  mask.set_causal(options.is_causal);
  mask.set_width(g.keys);
  const Dropout dropout(training_ ? c.dropout : 0.0f, options.seed);

  AttentionBlocks blocks;
  blocks.batch = g.batch * H;
  blocks.n = g.queries;
  blocks.m = g.all_keys();
  blocks.d = blocks.dv = head_dim;
  blocks.query_layout = blocks.output_layout = token_layout(batch_first, g.batch, g.queries, H, E);
  blocks.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  blocks.mask = &mask;
  blocks.dropout = &dropout;

  const int64_t tiles = (g.all_keys() + tile - 1) / tile;
  // Keys and values of heads [h0, h0 + heads) into `packed`, where head h of batch element n is
  // block n * heads + h - h0. Items: (batch element, key tile, keys or values).
  const auto pack_keys_values = [&](int64_t h0, int64_t heads, PackedOperands& packed) {
    const HeadColumns columns = head_columns(h0, heads);
    const int64_t first = columns.first, width = columns.width, skip = columns.skip;
    parallel_for(g.batch * tiles * 2, [&](int64_t item, int worker) {
      const int64_t n = item / (2 * tiles), j0 = item / 2 % tiles * tile, count = std::min(tile, g.all_keys() - j0);
      float* rows = scratch_rows(worker);
      if (item % 2 == 0) {
        project_tile(key, c.kdim, k_weight_.slice(first, width), bias(1, first), bias_k_, first, n, j0, count, rows);
        for (int64_t h = 0; h < heads; ++h)
          packed.pack_key_tile(blocks, n * heads + h, j0, rows + skip + h * head_dim, E);
      } else {
        project_tile(value, c.vdim, v_weight_.slice(first, width), bias(2, first), bias_v_, first, n, j0, count, rows);
        for (int64_t h = 0; h < heads; ++h)
          packed.pack_value_tile(blocks, n * heads + h, j0, rows + skip + h * head_dim, E);
      }
    }, 2.0 * tile * width * std::max(c.kdim, c.vdim));
  };
  const float* out_bias = out_proj_bias_ >= 0 ? parameters_.get(out_proj_bias_) : nullptr;
  const bool by_head = spill && !options.need_weights && output == query.data && H > 1;
  if (by_head) {
    AttentionBlocks head = blocks;
    head.batch = g.batch;
    head.block_step = H;
    head.query_layout = head.output_layout = token_layout(batch_first, g.batch, g.queries, 1, head_dim);
    FloatBuffer head_rows;  // one head's projected queries, then its attention output over them
    PackedOperands packed;
    status = first_failure({head_rows.allocate(query_rows * head_dim, "MultiheadAttention head rows"),
                            packed.allocate(head)});
    if (!status.ok()) return status;
    head.query = head_rows.data();
    const int64_t head_size = query_rows * head_dim;
    for (int64_t h = 0; h < H; ++h) {
      head.first_block = h;
      pack_keys_values(h, 1, packed);
      const HeadColumns columns = head_columns(h, 1);
      project_rows(query.data, q_weight_.slice(columns.first, columns.width), bias(0, columns.first), columns.skip,
                   head_dim, head_rows.data(), head_dim);
      status = attend(head, head_rows.data(), nullptr, &packed);
      if (!status.ok()) return status;
      spill->write(h * head_size, head_rows.data(), head_size);
    }
    // Every head's output back into the query's copy, which nothing reads any more, as [rows, E].
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r0 = 0; r0 < query_rows; r0 += tile) {
        const int64_t count = std::min(tile, query_rows - r0);
        float* rows = scratch_rows(0);
        spill->read(h * head_size + r0 * head_dim, rows, count * head_dim);
        for (int64_t r = 0; r < count; ++r)
          std::copy(rows + r * head_dim, rows + (r + 1) * head_dim, output + (r0 + r) * E + h * head_dim);
      }
    project_rows(output, out_weight_, out_bias, 0, E, output, E);
    return Status::success();
  }

  PackedOperands packed;
  status = packed.allocate(blocks);
  if (!status.ok()) return status;
  pack_keys_values(0, H, packed);

  // When the output may overwrite the query (the bindings' heap copy), the query projection, the
  // attention output and the output projection all go over it in place: the query and the packed
  // keys and values are then the only buffers that grow with L. Otherwise the projected queries
  // get a buffer of their own.
  FloatBuffer projection;
  float* q = output;
  if (output == query.data) {
    project_rows(q, q_weight_, bias(0, 0), 0, E, q, E);
  } else {
    status = projection.allocate(query_rows * E, "MultiheadAttention query projection");
    if (!status.ok()) return status;
    q = projection.data();
    linear(query_rows, query.data, E, q_weight_, bias(0, 0), q, E);
  }
  blocks.query = q;

  // Per-head weights go straight to the caller; averaged ones are built a query tile at a time.
  blocks.average_over = options.need_weights && options.average_attn_weights ? H : 1;
  status = attend(blocks, q, options.need_weights ? weights : nullptr, &packed);
  if (!status.ok()) return status;
  if (q == output)
    project_rows(output, out_weight_, out_bias, 0, E, output, E);
  else
    linear(query_rows, q, E, out_weight_, out_bias, output, E);
  return Status::success();
}

}  // namespace attn

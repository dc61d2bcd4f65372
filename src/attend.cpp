#include "attend.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "buffer.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "parallel.h"

namespace attn {
namespace {

// A query tile of 32 rows against a key tile of 128 keys keeps the score tile at 16 KiB.
constexpr int64_t kQueryTile = 32;
constexpr int64_t kKeyTile = PackedOperands::kKeyTile;

// How query i sees keys [j0, j1): softmax over keys [begin, end) (counted from j0) with `bias`
// added (the bias of key begin; null: nothing added); the keys outside are hidden. `visible`
// counts the keys the query sees.
struct RowMask {
  const float* bias;
  int64_t begin, end;
  int64_t visible;
};

// The rows of one query tile of block b against keys [j0, j1). The position rules (causal, window)
// cut each row to a range (the keys outside are neither biased nor exponentiated); when no mask
// tensor depends on the query (key padding, [1, m] masks), their bias row is built once for the
// whole tile, and its visible keys are counted as the rows' ranges grow. A tile reaching past the
// masked width (bias_k and zero-attention keys, which no mask hides) gets one full bias row per
// query instead.
class TileMask {
 public:
  TileMask(const AttentionBlocks& p, int64_t b, int64_t i0, int64_t j0, int64_t j1, float* bias)
      : p_(p), b_(b), j0_(j0), j1_(j1), bias_(bias) {
    shared_ = p.mask && p.mask->has_tensors() && p.mask->same_for_every_query() && p.mask->within_width(j1);
    if (shared_) p.mask->fill_tensor_bias(b, i0, j0, j1, bias);
  }

  RowMask row(int64_t i) {
    const int64_t keys = j1_ - j0_;
    if (!p_.mask || p_.mask->all_visible(i, j0_, j1_)) return {nullptr, 0, keys, keys};
    if (!p_.mask->within_width(j1_)) return {bias_, 0, keys, p_.mask->fill_bias(b_, i, j0_, j1_, bias_)};
    const KeyRange range = p_.mask->position_range(i, j0_, j1_);
    const int64_t begin = range.begin - j0_, end = range.end - j0_;
    if (range.empty() || !p_.mask->has_tensors()) return {nullptr, begin, end, end - begin};
    if (shared_)
      return {bias_ + begin, begin, end, begin == 0 ? visible_in_first(end) : count_visible(bias_ + begin, end - begin)};
    return {bias_ + begin, begin, end, p_.mask->fill_bias(b_, i, range.begin, range.end, bias_ + begin)};
  }

 private:
  // Visible keys among the shared row's first `length`: the causal rows of a tile ask for lengths
  // that grow by one, so the count only extends.
  int64_t visible_in_first(int64_t length) {
    if (length < counted_) counted_ = visible_ = 0;
    visible_ += count_visible(bias_ + counted_, length - counted_);
    counted_ = length;
    return visible_;
  }

  const AttentionBlocks& p_;
  int64_t b_, j0_, j1_;
  float* bias_;
  bool shared_ = false;
  int64_t counted_ = 0, visible_ = 0;
};

// Block b's first rows of Q and the output, and their row strides (keys and values are read packed).
struct Block {
  const float* query;
  float* output;
  size_t ldq, ldo;
};

// Block b's index in the masks, the dropout draws and the score functions.
int64_t mask_index(const AttentionBlocks& p, int64_t b) { return p.first_block + b * p.block_step; }

// The key/value block that query block b reads (grouped heads share one).
int64_t kv_block(const AttentionBlocks& p, int64_t b) { return b / p.kv_group; }

// The keys the position rules leave some query of [i0, i1], and the first of them rounded down to a
// panel of the packed keys (scores are computed from there).
struct TileKeys {
  int64_t first, end;
};
TileKeys tile_keys(const AttentionBlocks& p, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const KeyRange seen = p.mask ? p.mask->tile_range(i0, i1, j0, j1) : KeyRange{j0, j1};
  const int64_t panel = static_cast<int64_t>(kernels::kPanel);
  return {std::max(j0, seen.begin / panel * panel), seen.end};
}

// Scales row s (keys [j, j + n) of query i of block b), adds the score terms and `bias`, and returns
// the row's max (NaN if any score is NaN).
float scale_row(const AttentionBlocks& p, int64_t b, int64_t i, int64_t j, float* s, const float* bias, int64_t n) {
  const float slope = p.alibi_slopes ? p.alibi_slopes[mask_index(p, b) % p.alibi_heads] : 0.0f;
  const int64_t position = p.mask ? p.mask->position(i) : i;
  return kernels::scale_terms_max(kernels::active_kernels(), s, bias, static_cast<size_t>(n),
                                  {p.scale, p.softcap, slope, static_cast<float>(j - position)});
}

Block block_of(const AttentionBlocks& p, int64_t b, float* output) {
  return {p.query + p.query_layout.offset(b), output + p.output_layout.offset(b),
          static_cast<size_t>(p.query_layout.row_stride), static_cast<size_t>(p.output_layout.row_stride)};
}

// Scores of queries [i0, i0 + rows) against keys [j0, j0 + cols) (j0 a multiple of 8): Q·Kᵀ
// through the packed GEMM plus the operator's score_term, or the operator's own score function.
void compute_scores(const AttentionBlocks& p, const Block& block, const PackedOperands& operands, int64_t b, int64_t i0,
                    int64_t rows, int64_t j0, int64_t cols, float* scores, size_t ld) {
  if (p.score) {
    (*p.score)(mask_index(p, b), i0, rows, j0, cols, scores, ld);
    return;
  }
  kernels::active_kernels().gemm_packed(rows, cols, p.d, block.query + i0 * block.ldq, block.ldq,
                                        operands.key_panel(kv_block(p, b), j0, p.d), nullptr, scores, ld);
  if (p.score_term) (*p.score_term)(mask_index(p, b), i0, rows, j0, cols, scores, ld);
}

// out[rows, dv] (row stride ldo) += P[rows, keys [j0, j1)] · V through the packed value tiles
// (`product` is rows x dv scratch). Each panel of a tile is multiplied on its own, so that a tile
// cut at either end (by a window's first key, at the causal diagonal) reads only the keys in
// range: a panel holds the whole tile's depth, one row of kPanel floats per key. With rows ≤ 32,
// gemm_packed's own row block, this is the order gemm_packed walks a whole tile in anyway.
void add_weighted_values(const AttentionBlocks& p, const PackedOperands& operands, int64_t b, const float* P,
                         size_t ldp, int64_t rows, int64_t j0, int64_t j1, float* out, size_t ldo, float* product) {
  const kernels::KernelSet& k = kernels::active_kernels();
  const int64_t panel = static_cast<int64_t>(kernels::kPanel);
  for (int64_t t0 = j0; t0 < j1;) {
    const int64_t tile_start = t0 / kKeyTile * kKeyTile;
    const int64_t depth = std::min(tile_start + kKeyTile, p.m) - tile_start;
    const int64_t used = std::min(j1, tile_start + depth) - t0;
    const float* tile = operands.value_tile(kv_block(p, b), tile_start) + (t0 - tile_start) * panel;
    for (int64_t c0 = 0; c0 < p.dv; c0 += panel)
      k.gemm_packed(rows, std::min(panel, p.dv - c0), used, P + (t0 - j0), ldp, tile + c0 * depth, nullptr,
                    product + c0, p.dv);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < p.dv; ++c) out[r * ldo + c] += product[r * p.dv + c];
    t0 += used;
  }
}

bool dropout_active(const AttentionBlocks& p) { return p.dropout && p.dropout->active(); }

// Zero weights times an infinite value would give NaN; a query that sees no key outputs zeros.
void zero_hidden_rows(const AttentionBlocks& p, const bool* hidden, int64_t rows, float* output_tile, size_t ldo) {
  for (int64_t r = 0; r < rows; ++r)
    if (hidden[r]) std::fill(output_tile + r * ldo, output_tile + r * ldo + p.dv, 0.0f);
}

// Materialising path for queries [i0, i0 + 32) of block b: scores go straight into the tile's
// weight rows W (row stride m), which double as scratch, so the only extra memory is one bias row
// of m floats and one product tile.
void attend_with_weights(const AttentionBlocks& p, const PackedOperands& operands, int64_t b, int64_t i0, float* bias,
                         float* product, float* W, float* output) {
  const kernels::KernelSet& k = kernels::active_kernels();
  const Block block = block_of(p, b, output);
  float* O = block.output;
  const size_t ldo = block.ldo;
  const int64_t rows = std::min(kQueryTile, p.n - i0);
  bool hidden[kQueryTile];
  // Keys the position rules hide from every query of the tile get weight 0 without being scored.
  const TileKeys seen = tile_keys(p, i0, i0 + rows - 1, 0, p.m);
  compute_scores(p, block, operands, b, i0, rows, seen.first, seen.end - seen.first, W + seen.first, p.m);
  TileMask tile_mask(p, mask_index(p, b), i0, seen.first, seen.end, bias);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = W + r * p.m;
    const RowMask mask = tile_mask.row(i0 + r);
    hidden[r] = mask.visible == 0;
    const int64_t begin = hidden[r] ? p.m : seen.first + mask.begin, end = hidden[r] ? p.m : seen.first + mask.end;
    std::fill(row, row + begin, 0.0f);
    std::fill(row + end, row + p.m, 0.0f);
    if (hidden[r]) continue;
    const float max = scale_row(p, b, i0 + r, begin, row + begin, mask.bias, end - begin);
    k.scale(row + begin, end - begin, 1.0f / k.exp_sum(row + begin, end - begin, max));
    if (dropout_active(p)) p.dropout->apply(row, seen.end, (mask_index(p, b) * p.n + i0 + r) * p.m);
  }
  for (int64_t r = 0; r < rows; ++r) std::fill(O + (i0 + r) * ldo, O + (i0 + r) * ldo + p.dv, 0.0f);
  add_weighted_values(p, operands, b, W + seen.first, p.m, rows, seen.first, seen.end, O + i0 * ldo, ldo, product);
  zero_hidden_rows(p, hidden, rows, O + i0 * ldo, ldo);
}

// Streaming path (online softmax, as in FlashAttention) for queries [i0, i0 + 32) of block b: key
// tiles are folded into a running max, a running sum and an unnormalised output tile, which is
// rescaled whenever the max grows. Scratch is one score tile, one bias row, one output tile and one
// product tile, whatever n and m are; the output rows are written once, at the end.
void attend_streaming(const AttentionBlocks& p, const PackedOperands& operands, int64_t b, int64_t i0, float* scores,
                      float* bias, float* out, float* product, float* output) {
  const kernels::KernelSet& k = kernels::active_kernels();
  const Block block = block_of(p, b, output);
  const size_t ldo = p.dv;
  const int64_t rows = std::min(kQueryTile, p.n - i0);
  std::fill(out, out + rows * ldo, 0.0f);
  float running_max[kQueryTile], running_sum[kQueryTile];
  int64_t visible_total[kQueryTile];
  std::fill(running_max, running_max + rows, -std::numeric_limits<float>::infinity());
  std::fill(running_sum, running_sum + rows, 0.0f);
  std::fill(visible_total, visible_total + rows, 0);
  // Key tiles that the position rules (causal, window) or the documents hide from every query of
  // the tile are skipped, and a tile at the edge of the rules' reach is scored only from the
  // panel holding its first visible key to the last visible key: time grows with the visible pairs.
  const int64_t last = i0 + rows - 1;
  const TileKeys reach = tile_keys(p, i0, last, 0, p.m);
  for (int64_t j0 = reach.first / kKeyTile * kKeyTile; j0 < reach.end; j0 += kKeyTile) {
    const int64_t j1 = std::min(j0 + kKeyTile, p.m);
    if (p.mask && p.mask->hides_tile(mask_index(p, b), i0, last, j0, j1)) continue;
    const TileKeys seen = tile_keys(p, i0, last, j0, j1);
    const int64_t cols = seen.end - seen.first;
    compute_scores(p, block, operands, b, i0, rows, seen.first, cols, scores, kKeyTile);
    TileMask tile_mask(p, mask_index(p, b), i0, seen.first, seen.end, bias);
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * kKeyTile;
      const RowMask mask = tile_mask.row(i0 + r);
      // A row that sees none of these keys contributes nothing and must not disturb the running max.
      const int64_t begin = mask.visible == 0 ? 0 : mask.begin, end = mask.visible == 0 ? 0 : mask.end;
      std::fill(s, s + begin, 0.0f);
      std::fill(s + end, s + cols, 0.0f);
      if (begin == end) continue;
      visible_total[r] += mask.visible;
      const float tile_max = scale_row(p, b, i0 + r, seen.first + begin, s + begin, mask.bias, end - begin);
      const float old_max = running_max[r];
      const float new_max = std::isnan(tile_max) ? tile_max : std::max(old_max, tile_max);
      const float tile_sum = k.exp_sum(s + begin, end - begin, new_max);
      if (old_max != new_max) {
        const float rescale = std::exp(old_max - new_max);
        running_sum[r] *= rescale;
        k.scale(out + r * ldo, p.dv, rescale);
      }
      running_sum[r] += tile_sum;
      running_max[r] = new_max;
      if (dropout_active(p)) p.dropout->apply(s, cols, (mask_index(p, b) * p.n + i0 + r) * p.m + seen.first);
    }
    add_weighted_values(p, operands, b, scores, kKeyTile, rows, seen.first, seen.end, out, ldo, product);
  }
  bool hidden[kQueryTile];
  for (int64_t r = 0; r < rows; ++r) {
    hidden[r] = visible_total[r] == 0;
    if (!hidden[r]) k.scale(out + r * ldo, p.dv, 1.0f / running_sum[r]);
  }
  zero_hidden_rows(p, hidden, rows, out, ldo);
  for (int64_t r = 0; r < rows; ++r)
    std::copy(out + r * ldo, out + (r + 1) * ldo, block.output + (i0 + r) * block.ldo);
}

}  // namespace

Status PackedOperands::allocate(const AttentionBlocks& p) {
  keys_size_ = p.score ? 0 : static_cast<int64_t>(kernels::packed_size(p.d, p.m));
  values_width_ = static_cast<int64_t>(kernels::packed_size(1, p.dv));
  values_size_ = p.m * values_width_;
  const int64_t blocks = p.batch / p.kv_group;
  values_offset_ = blocks * keys_size_;
  return storage_.allocate(blocks * (keys_size_ + values_size_), "packed keys and values");
}

void PackedOperands::pack_key_tile(const AttentionBlocks& p, int64_t b, int64_t j0, const float* keys, int64_t stride) {
  if (keys_size_)
    kernels::pack_transposed(p.d, std::min(kKeyTile, p.m - j0), keys, stride, storage_.data() + key_offset(b, j0, p.d));
}

void PackedOperands::pack_value_tile(const AttentionBlocks& p, int64_t b, int64_t j0, const float* values,
                                     int64_t stride) {
  kernels::pack_rows(std::min(kKeyTile, p.m - j0), p.dv, values, stride, storage_.data() + value_offset(b, j0));
}

void PackedOperands::pack(const AttentionBlocks& p) {
  const int64_t tiles = (p.m + kKeyTile - 1) / kKeyTile;
  parallel_for(p.batch / p.kv_group * tiles, [&](int64_t item, int) {
    const int64_t b = item / tiles, j0 = item % tiles * kKeyTile;
    const BlockLayout &keys = p.key_layout, &values = p.value_layout;
    if (!p.score) pack_key_tile(p, b, j0, p.key + keys.offset(b) + j0 * keys.row_stride, keys.row_stride);
    pack_value_tile(p, b, j0, p.value + values.offset(b) + j0 * values.row_stride, values.row_stride);
  }, static_cast<double>(kKeyTile) * (p.d + p.dv));
}

Status attend(const AttentionBlocks& p, float* output, float* weights, const PackedOperands* packed) {
  PackedOperands own;
  if (!packed) {
    Status s = own.allocate(p);
    if (!s.ok()) return s;
    own.pack(p);
  }
  const PackedOperands& operands = packed ? *packed : own;
  // Work items are (block, query tile) pairs, each block's last tile first: under the causal mask
  // later tiles see more keys, and handing out the big items first leaves small ones to even out
  // the threads at the end. Averaged weights take (group of blocks, query tile) items instead, each
  // block's weight rows going through the thread's scratch into the average. Each thread gets its
  // own scratch.
  const int64_t tiles = (p.n + kQueryTile - 1) / kQueryTile;
  const bool average = weights && p.average_over > 1;
  const int64_t bias = weights ? p.m : kKeyTile;
  const int64_t scores = kQueryTile * kKeyTile;
  const int64_t tile = kQueryTile * p.dv;  // an output tile, and the product of one key tile
  const int64_t per_thread = bias + tile + (weights ? (average ? kQueryTile * p.m : 0) : scores + tile);
  const int threads = thread_count();
  FloatBuffer scratch;
  Status status = scratch.allocate(per_thread * threads, "attention scratch");
  if (!status.ok()) return status;
  const int64_t groups = average ? p.batch / p.average_over : p.batch;
  parallel_for(groups * tiles, [&](int64_t item, int worker) {
    const int64_t group = item / tiles, i0 = (tiles - 1 - item % tiles) * kQueryTile;
    float* mine = scratch.data() + worker * per_thread;
    if (!weights) {
      attend_streaming(p, operands, group, i0, mine + bias + tile, mine, mine + bias + tile + scores, mine + bias,
                       output);
      return;
    }
    if (!average) {
      attend_with_weights(p, operands, group, i0, mine, mine + bias, weights + (group * p.n + i0) * p.m, output);
      return;
    }
    // The mean over the group's blocks: their rows summed in block order, then divided by the count.
    const int64_t count = std::min(kQueryTile, p.n - i0) * p.m;
    float* mean = weights + (group * p.n + i0) * p.m;
    float* rows = mine + bias + tile;
    for (int64_t h = 0; h < p.average_over; ++h) {
      attend_with_weights(p, operands, group * p.average_over + h, i0, mine, mine + bias, rows, output);
      if (h == 0)
        std::copy(rows, rows + count, mean);
      else
        for (int64_t e = 0; e < count; ++e) mean[e] += rows[e];
    }
    for (int64_t e = 0; e < count; ++e) mean[e] /= static_cast<float>(p.average_over);
  }, 2.0 * kQueryTile * p.m * (p.d + p.dv) * (average ? p.average_over : 1));
  return Status::success();
}

}  // namespace attn

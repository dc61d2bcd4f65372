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

// How query i sees keys [j0, j1): softmax over the first `length` of them with `bias` added (null:
// nothing added); the keys past `length` are hidden. `visible` counts the keys the query sees.
struct RowMask {
  const float* bias;
  int64_t length;
  int64_t visible;
};

// The rows of one query tile of block b against keys [j0, j1). The causal rule cuts each row short
// (the keys past i are neither biased nor exponentiated); when no mask tensor depends on the query
// (key padding, [1, m] masks), their bias row is built once for the whole tile, and its visible
// keys are counted as the rows' lengths grow. A tile reaching past the masked width (bias_k and
// zero-attention keys, which no mask hides) gets one full bias row per query instead.
class TileMask {
 public:
  TileMask(const AttentionBlocks& p, int64_t b, int64_t i0, int64_t j0, int64_t j1, float* bias)
      : p_(p), b_(b), j0_(j0), j1_(j1), bias_(bias) {
    shared_ = p.mask && p.mask->has_tensors() && p.mask->same_for_every_query() &&
              p.mask->causal_limit(i0, j0, j1) >= 0;
    if (shared_) p.mask->fill_tensor_bias(b, i0, j0, j1, bias);
  }

  RowMask row(int64_t i) {
    const int64_t keys = j1_ - j0_;
    if (!p_.mask || p_.mask->all_visible(i, j0_, j1_)) return {nullptr, keys, keys};
    const int64_t length = p_.mask->causal_limit(i, j0_, j1_);
    if (length < 0) return {bias_, keys, p_.mask->fill_bias(b_, i, j0_, j1_, bias_)};
    if (length == 0 || !p_.mask->has_tensors()) return {nullptr, length, length};
    if (shared_) return {bias_, length, visible_in_first(length)};
    return {bias_, length, p_.mask->fill_bias(b_, i, j0_, j0_ + length, bias_)};
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
                                        operands.key_panel(b, j0, p.d), nullptr, scores, ld);
  if (p.score_term) (*p.score_term)(mask_index(p, b), i0, rows, j0, cols, scores, ld);
}

// out[rows, dv] (row stride ldo) += P[rows, keys [j0, j1)] · V, j0 a multiple of kKeyTile, through
// the packed value tiles (`product` is rows x dv scratch). Each panel of a tile is multiplied on its
// own, so that a tile cut short by j1 (at the causal diagonal) reads only the first keys of each:
// a panel holds the whole tile's depth. With rows ≤ 32, gemm_packed's own row block, this is the
// order gemm_packed walks a whole tile in anyway.
void add_weighted_values(const AttentionBlocks& p, const PackedOperands& operands, int64_t b, const float* P,
                         size_t ldp, int64_t rows, int64_t j0, int64_t j1, float* out, size_t ldo, float* product) {
  const kernels::KernelSet& k = kernels::active_kernels();
  const int64_t panel = static_cast<int64_t>(kernels::kPanel);
  for (int64_t t0 = j0; t0 < j1; t0 += kKeyTile) {
    const int64_t depth = std::min(t0 + kKeyTile, p.m) - t0, used = std::min(j1 - t0, depth);
    const float* tile = operands.value_tile(b, t0);
    for (int64_t c0 = 0; c0 < p.dv; c0 += panel)
      k.gemm_packed(rows, std::min(panel, p.dv - c0), used, P + (t0 - j0), ldp, tile + c0 * depth, nullptr,
                    product + c0, p.dv);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < p.dv; ++c) out[r * ldo + c] += product[r * p.dv + c];
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
  // Keys the causal rule hides from every query of the tile get weight 0 without being scored.
  const int64_t first_hidden = std::min(i0 + rows, p.m);
  const int64_t seen = p.mask && p.mask->hides_keys(i0 + rows - 1, first_hidden, p.m) ? first_hidden : p.m;
  compute_scores(p, block, operands, b, i0, rows, 0, seen, W, p.m);
  TileMask tile_mask(p, mask_index(p, b), i0, 0, seen, bias);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = W + r * p.m;
    const RowMask mask = tile_mask.row(i0 + r);
    hidden[r] = mask.visible == 0;
    const int64_t length = hidden[r] ? 0 : mask.length;
    std::fill(row + length, row + p.m, 0.0f);
    if (hidden[r]) continue;
    const float max = k.scale_bias_max(row, mask.bias, length, p.scale);
    k.scale(row, length, 1.0f / k.exp_sum(row, length, max));
    if (dropout_active(p)) p.dropout->apply(row, seen, (mask_index(p, b) * p.n + i0 + r) * p.m);
  }
  for (int64_t r = 0; r < rows; ++r) std::fill(O + (i0 + r) * ldo, O + (i0 + r) * ldo + p.dv, 0.0f);
  add_weighted_values(p, operands, b, W, p.m, rows, 0, seen, O + i0 * ldo, ldo, product);
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
  for (int64_t j0 = 0; j0 < p.m; j0 += kKeyTile) {
    int64_t cols = std::min(kKeyTile, p.m - j0);
    // Under the causal rule, key tiles past the tile's last query are skipped (half the work), and
    // the tile on the diagonal stops at that query's last key.
    if (p.mask && p.mask->hides_keys(i0 + rows - 1, j0, j0 + cols)) continue;
    const int64_t causal_cols = p.mask ? p.mask->causal_limit(i0 + rows - 1, j0, j0 + cols) : cols;
    if (causal_cols >= 0) cols = causal_cols;
    compute_scores(p, block, operands, b, i0, rows, j0, cols, scores, kKeyTile);
    TileMask tile_mask(p, mask_index(p, b), i0, j0, j0 + cols, bias);
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * kKeyTile;
      const RowMask mask = tile_mask.row(i0 + r);
      // A row that sees none of these keys contributes nothing and must not disturb the running max.
      const int64_t length = mask.visible == 0 ? 0 : mask.length;
      std::fill(s + length, s + cols, 0.0f);
      if (length == 0) continue;
      visible_total[r] += mask.visible;
      const float tile_max = k.scale_bias_max(s, mask.bias, length, p.scale);
      const float old_max = running_max[r];
      const float new_max = std::isnan(tile_max) ? tile_max : std::max(old_max, tile_max);
      const float tile_sum = k.exp_sum(s, length, new_max);
      if (old_max != new_max) {
        const float rescale = std::exp(old_max - new_max);
        running_sum[r] *= rescale;
        k.scale(out + r * ldo, p.dv, rescale);
      }
      running_sum[r] += tile_sum;
      running_max[r] = new_max;
      if (dropout_active(p)) p.dropout->apply(s, cols, (mask_index(p, b) * p.n + i0 + r) * p.m + j0);
    }
    add_weighted_values(p, operands, b, scores, kKeyTile, rows, j0, j0 + cols, out, ldo, product);
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
  values_offset_ = p.batch * keys_size_;
  return storage_.allocate(p.batch * (keys_size_ + values_size_), "packed keys and values");
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
  parallel_for(p.batch * tiles, [&](int64_t item, int) {
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

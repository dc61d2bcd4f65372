// The attention engine every operator ends in: softmax(scale · Q·Kᵀ + mask) · V over B
// independent blocks, either materialising the weights or streaming over key tiles.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "attention.h"
#include "buffer.h"
#include "dropout.h"
#include "mask.h"
#include "status.h"

namespace attn {

// Where each block's rows sit in a buffer. Block b is split into (group, head) = (b / heads,
// b % heads), so that heads interleaved in a [L, N, E] projection are read in place: row r of block
// b starts at group * group_stride + head * head_stride + slot(r) * row_stride. Rows are contiguous.
// A ring buffer (a KV cache's window) keeps row r in slot (ring_start + r) % ring_capacity, so its
// rows are two runs; otherwise slot(r) = r.
struct BlockLayout {
  int64_t heads = 1;
  int64_t group_stride = 0;
  int64_t head_stride = 0;
  int64_t row_stride = 0;
  int64_t ring_capacity = 0;  // 0: no ring
  int64_t ring_start = 0;

  // Blocks of [rows, cols] stored one after the other.
  static BlockLayout contiguous(int64_t rows, int64_t cols) { return {1, rows * cols, 0, cols}; }
  int64_t offset(int64_t block) const { return (block / heads) * group_stride + (block % heads) * head_stride; }
  int64_t slot(int64_t r) const { return ring_capacity ? (ring_start + r) % ring_capacity : r; }
  int64_t row_offset(int64_t block, int64_t r) const { return offset(block) + slot(r) * row_stride; }
  // How many of rows [r, end) follow row r in memory, one row_stride apart (all of them but
  // where the ring wraps).
  int64_t run(int64_t r, int64_t end) const {
    return ring_capacity ? std::min(end - r, ring_capacity - slot(r)) : end - r;
  }
};

// Keys or values where they lie, placed by `layout`: floats, binary16 bits (f16) or q8 bytes
// (kernels/q8.h; their binary16 scales placed by `scale_layout`), whichever is non-null. The
// in-place kernels widen binary16 in registers, which reads Inf and NaN as wrong finite numbers:
// rows that may hold them (`finite` false) are widened exactly instead. q8 rows are always finite.
struct RowOperand {
  const float* f32 = nullptr;
  const uint16_t* f16 = nullptr;
  BlockLayout layout;
  bool finite = true;
  const int8_t* q8 = nullptr;
  const uint16_t* q8_scales = nullptr;
  BlockLayout scale_layout = {};

  bool present() const { return f32 || f16 || q8; }
};

// Unscaled scores of queries [i0, i0 + rows) against keys [j0, j0 + cols) of block b, written to
// (or, as `score_term`, added to) `scores` with row stride `ld`.
using ScoreFunction =
    std::function<void(int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t cols, float* scores, size_t ld)>;

// B blocks of Q [n, d], K [m, d], V [m, dv] and output [n, dv], each placed by its layout.
struct AttentionBlocks {
  int64_t batch = 0, n = 0, m = 0, d = 0, dv = 0;
  const float* query = nullptr;
  RowOperand key, value;
  BlockLayout query_layout, output_layout;
  float scale = 1.0f;
  // Terms of the scaled scores, in this order: a soft cap c > 0 turns s into c·tanh(s / c) (0: none);
  // ALiBi adds slope_h · (j − p_i), h = b % alibi_heads (null: none).
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  int64_t alibi_heads = 1;
  // Grouped heads: each key/value block serves this many consecutive query blocks (block b reads
  // key/value block b / kv_group), and is packed once for all of them.
  int64_t kv_group = 1;
  const ScoreMask* mask = nullptr;
  const Dropout* dropout = nullptr;  // indices run over the weights [B, n, m], row-major
  const ScoreFunction* score = nullptr;       // scores that are not Q·Kᵀ (additive); null: Q·Kᵀ
  const ScoreFunction* score_term = nullptr;  // added to Q·Kᵀ (relative's positional term), or null
  // When > 1, the weights asked of attend() are averaged over each run of this many consecutive
  // blocks (heads): [B / average_over, n, m], built a query tile at a time, so that the per-block
  // weights never exist whole.
  int64_t average_over = 1;
  // Block b is block first_block + b * block_step of the masks, the dropout draws and the score
  // functions, while the buffers and layouts count blocks from 0: a caller that attends one head
  // of H at a time (first_block = h, block_step = H) keeps every block's place in [N, H, n, m].
  int64_t first_block = 0, block_step = 1;
};

// Every block's keys and values packed once for gemm_packed, so that query tiles multiply by them
// without repacking: keys as one Kᵀ operand over all m keys (block b at b * keys_size), values
// as one operand per tile of kKeyTile keys (the tile at j0 starts j0 * values_width floats into the
// block). Read in place, a head's value rows would lie E floats apart in a [L, N, E] projection,
// 2 KiB at E = 512, so a tile's rows would crowd a few L1 sets and evict each other.
// attend() packs them itself from the blocks' keys and values; a caller short of memory projects
// one tile of keys or values at a time and packs it, so that the whole projection never exists,
// and hands attend() the packed operands alone.
class PackedOperands {
 public:
  static constexpr int64_t kKeyTile = 128;  // keys per tile, the unit the tiles are packed in

  // Room for the blocks of `p` (its batch, n, m, d, dv and score).
  Status allocate(const AttentionBlocks& p);
  // Every block, from p.key and p.value where they lie (binary16, q8 and ring rows widened first).
  Status pack(const AttentionBlocks& p);
  // Keys [j0, j0 + min(kKeyTile, m - j0)) of block b, j0 a multiple of kKeyTile, key j (d floats)
  // at keys + (j - j0) * stride. Nothing to do when p.score replaces Q·Kᵀ.
  void pack_key_tile(const AttentionBlocks& p, int64_t b, int64_t j0, const float* keys, int64_t stride);
  // The values of the same keys, dv floats each.
  void pack_value_tile(const AttentionBlocks& p, int64_t b, int64_t j0, const float* values, int64_t stride);

  const float* key_panel(int64_t b, int64_t j0, int64_t d) const { return storage_.data() + key_offset(b, j0, d); }
  const float* value_tile(int64_t b, int64_t j0) const { return storage_.data() + value_offset(b, j0); }

 private:
  int64_t key_offset(int64_t b, int64_t j0, int64_t d) const { return b * keys_size_ + j0 * d; }
  int64_t value_offset(int64_t b, int64_t j0) const { return values_offset_ + b * values_size_ + j0 * values_width_; }

  FloatBuffer storage_;
  int64_t keys_size_ = 0, values_offset_ = 0, values_size_ = 0, values_width_ = 0;
};

// Writes the output blocks and, when `weights` is non-null, weights [B, n, m] (contiguous; averaged
// as blocks.average_over says). A query that can see no key gets zero weights and a zero output.
// The output may be the query buffer itself (with the same layout): each query's row is read in
// full before its output row is written. Three paths, one online softmax:
// - weights asked: each query tile's scores go through the weight rows, materialised;
// - few query rows per key/value block (a decode step: the kv_group heads of one key/value head, n
//   small), Q·Kᵀ only, no dropout: keys and values are read where they lie (f32, binary16 or q8,
//   whose queries are then quantised too; a ring's two runs), chunk by chunk, and long key ranges
//   are split across threads, their partial softmaxes merged at the end (split-K);
// - otherwise streaming over packed key tiles, with scratch that does not depend on n or m.
// Keys and values come from `packed` when given (blocks.key and blocks.value are then not read),
// or are packed here when the path needs them packed.
Status attend(const AttentionBlocks& blocks, float* output, float* weights, const PackedOperands* packed = nullptr);

// A scaled_dot_product_attention call as the engine's blocks: the queries, the mask, the score
// terms and the dropout, everything but the key and value operands, which the caller places
// (contiguous tensors for SDPA, its storage for a KV cache). The blocks point into the plan, which
// is neither copied nor moved.
class SdpaPlan {
 public:
  SdpaPlan() = default;
  SdpaPlan(const SdpaPlan&) = delete;
  SdpaPlan& operator=(const SdpaPlan&) = delete;

  // For query [..., n, d] against keys and values of shapes [..., m, d] and [..., m, dv], with
  // options that check_scaled_dot_product_attention accepted.
  Status prepare(const TensorView& query, const Shape& key, const Shape& value, const SdpaOptions& options);
  // One more mask (a KV cache's padding) beside the options' attnMask.
  void add_mask(const BroadcastMask& mask) { mask_.add(mask); }

  AttentionBlocks blocks;

 private:
  ScoreMask mask_;
  Dropout dropout_{0.0f, 0};
  FloatBuffer slopes_;
};

}  // namespace attn

#include "attend.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "buffer.h"
#include "half.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "kernels/q8.h"
#include "module.h"
#include "parallel.h"

namespace attn {
namespace {

// A query tile of 32 rows against a key tile of 128 keys keeps the score tile at 16 KiB.
constexpr int64_t kQueryTile = 32;
constexpr int64_t kKeyTile = PackedOperands::kKeyTile;
// The in-place path takes up to this many query rows per key/value block: a decode step's group of
// query heads (4 in Llama 3, 7 in Qwen2.5-0.5B) over a position or a few.
constexpr int64_t kInPlaceRows = 16;
// Key ranges that the in-place path splits across threads are at least this long, so that merging
// the partial softmaxes stays negligible.
constexpr int64_t kMinKeysPerSplit = 512;

// The online softmax (FlashAttention) of one query row, the only one in the core: the running max,
// the sum of exponentials against it and the keys seen; the unnormalised output row lives beside it.
struct RunningSoftmax {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  int64_t visible = 0;
};

// max(a, b), NaN when b is NaN (a NaN a is kept by std::max).
float nan_max(float a, float b) { return std::isnan(b) ? b : std::max(a, b); }

// Moves a running softmax and its output row [dv] to a larger max.
void rescale(RunningSoftmax& row, float* out, int64_t dv, float new_max) {
  if (row.max != new_max) {
    const float factor = std::exp(row.max - new_max);
    row.sum *= factor;
    kernels::active_kernels().scale(out, static_cast<size_t>(dv), factor);
  }
  row.max = new_max;
}

// Folds scaled scores s[0, n) whose max is `scores_max`, `visible` of them not hidden, into the
// row: s becomes their exponentials against the running max (unnormalised weights, for the caller
// to add times the values into `out`).
void fold(RunningSoftmax& row, float* out, int64_t dv, float* s, int64_t n, float scores_max, int64_t visible) {
  row.visible += visible;
  rescale(row, out, dv, nan_max(row.max, scores_max));
  row.sum += kernels::active_kernels().exp_sum(s, static_cast<size_t>(n), row.max);
}

// Merges `part` (the same query over other keys) into `total`, output rows included.
void merge(RunningSoftmax& total, float* total_out, RunningSoftmax& part, float* part_out, int64_t dv) {
  if (part.visible == 0) return;
  const float new_max = nan_max(total.max, part.max);
  rescale(total, total_out, dv, new_max);
  rescale(part, part_out, dv, new_max);
  total.sum += part.sum;
  total.visible += part.visible;
  for (int64_t e = 0; e < dv; ++e) total_out[e] += part_out[e];
}

// The query's output row: out / sum, or zeros when it saw no key (zero weights times an infinite
// value would give NaN).
void finish(const RunningSoftmax& row, const float* out, int64_t dv, float* destination) {
  if (row.visible == 0) {
    std::fill(destination, destination + dv, 0.0f);
    return;
  }
  const float inverse = 1.0f / row.sum;
  for (int64_t e = 0; e < dv; ++e) destination[e] = out[e] * inverse;
}

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
  const Block block = block_of(p, b, output);
  const size_t ldo = p.dv;
  const int64_t rows = std::min(kQueryTile, p.n - i0);
  std::fill(out, out + rows * ldo, 0.0f);
  RunningSoftmax softmax[kQueryTile];
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
      const float tile_max = scale_row(p, b, i0 + r, seen.first + begin, s + begin, mask.bias, end - begin);
      fold(softmax[r], out + r * ldo, p.dv, s + begin, end - begin, tile_max, mask.visible);
      if (dropout_active(p)) p.dropout->apply(s, cols, (mask_index(p, b) * p.n + i0 + r) * p.m + seen.first);
    }
    add_weighted_values(p, operands, b, scores, kKeyTile, rows, seen.first, seen.end, out, ldo, product);
  }
  for (int64_t r = 0; r < rows; ++r) finish(softmax[r], out + r * ldo, p.dv, block.output + (i0 + r) * block.ldo);
}

bool reads_in_place(const AttentionBlocks& p, const float* weights, const PackedOperands* packed) {
  const auto widens_in_registers = [](const RowOperand& o) { return o.f32 || o.q8 || o.finite; };
  return !weights && !packed && !p.score && !p.score_term && !dropout_active(p) && p.key.present() &&
         p.value.present() && widens_in_registers(p.key) && widens_in_registers(p.value) && p.n > 0 &&
         p.n * p.kv_group <= kInPlaceRows;
}

// The gathered queries of a work item [rows, d]: as floats, and for q8 keys quantised as q8 too
// (bytes [rows, d], scales [rows, q8_blocks(d)]).
struct GatheredQueries {
  const float* f32;
  const int8_t* q8;
  const float* q8_scales;
};

// scores [rows, cols] (row stride kKeyTile) = queries [rows, d] · keys [j0, j0 + cols) of key/value
// block kv, read where they lie (one run of rows).
void score_in_place(const AttentionBlocks& p, int64_t kv, int64_t j0, int64_t rows, int64_t cols,
                    const GatheredQueries& queries, float* scores) {
  const kernels::KernelSet& k = kernels::active_kernels();
  const int64_t at = p.key.layout.row_offset(kv, j0);
  const size_t ld = static_cast<size_t>(p.key.layout.row_stride);
  if (p.key.f32)
    k.gemm_nt(rows, cols, p.d, queries.f32, p.d, p.key.f32 + at, ld, scores, kKeyTile);
  else if (p.key.f16)
    k.gemm_nt_f16(rows, cols, p.d, queries.f32, p.d, p.key.f16 + at, ld, scores, kKeyTile);
  else
    k.gemm_nt_q8(rows, cols, p.d, queries.q8, queries.q8_scales, p.d, p.key.q8 + at,
                 p.key.q8_scales + p.key.scale_layout.row_offset(kv, j0), ld, scores, kKeyTile);
}

// out [rows, dv] += weights [rows, cols] (row stride kKeyTile) · values [j0, j0 + cols) of block kv.
void add_values_in_place(const AttentionBlocks& p, int64_t kv, int64_t j0, int64_t rows, int64_t cols,
                         const float* weights, float* out) {
  const kernels::KernelSet& k = kernels::active_kernels();
  const int64_t at = p.value.layout.row_offset(kv, j0);
  const size_t ld = static_cast<size_t>(p.value.layout.row_stride);
  if (p.value.f32)
    k.gemm_nn_add(rows, p.dv, cols, weights, kKeyTile, p.value.f32 + at, ld, out, p.dv);
  else if (p.value.f16)
    k.gemm_nn_add_f16(rows, p.dv, cols, weights, kKeyTile, p.value.f16 + at, ld, out, p.dv);
  else
    k.gemm_nn_add_q8(rows, p.dv, cols, weights, kKeyTile, p.value.q8 + at,
                     p.value.q8_scales + p.value.scale_layout.row_offset(kv, j0), ld, out, p.dv);
}

// One load a 64 bytes of the f32 values [j0, j0 + count) of block kv (one run), row after row.
// gemm_nn_add reads a chunk's values eight columns at a time down all its rows (a 256-byte stride
// at dv = 64), which the hardware prefetchers follow badly, and wasm has no prefetch instruction:
// read in order first, just before its keys are scored, the chunk streams in (the f32 step took
// 0.83 to 0.87 times the time in wasm, 0.80 natively; f16 and q8 values, 128 and 68 bytes a row,
// gained nothing). Returns a sum of the bytes loaded, so that the loads are kept.
uint32_t touch_values(const AttentionBlocks& p, int64_t kv, int64_t j0, int64_t count) {
  const float* first = p.value.f32 + p.value.layout.row_offset(kv, j0);
  uint32_t sum = 0;
  // Left rolled: unrolled and vectorised, the loop cost 260 bytes of the page gzipped, 120 so.
#if defined(__clang__)
#pragma clang loop vectorize(disable) unroll(disable)
#endif
  for (int64_t r = 0; r < count; ++r)
#if defined(__clang__)
#pragma clang loop vectorize(disable) unroll(disable)
#endif
    for (int64_t e = 0; e < p.dv; e += 16)
      sum += *reinterpret_cast<const unsigned char*>(first + r * p.value.layout.row_stride + e);
  return sum;
}

// The in-place path. Its rows for key/value block kv are the queries of the kv_group blocks that
// read it, gathered: row r is query r % n of block kv · kv_group + r / n. Work items are (kv, split
// of the keys the position rules leave the queries): with more threads than blocks the keys are
// split too, each split folded into partial softmaxes that are merged at the end.
Status attend_in_place(const AttentionBlocks& p, float* output) {
  const int64_t rows = p.n * p.kv_group, kv_blocks = p.batch / p.kv_group;
  const KeyRange reach = p.mask ? p.mask->tile_range(0, p.n - 1, 0, p.m) : KeyRange{0, p.m};
  const int64_t keys = std::max<int64_t>(0, reach.end - reach.begin);
  const int threads = thread_count();
  const int64_t splits =
      std::max<int64_t>(1, std::min((2 * threads + kv_blocks - 1) / std::max<int64_t>(kv_blocks, 1), keys / kMinKeysPerSplit));
  const int64_t split_keys = (keys + splits - 1) / splits, items = kv_blocks * splits;
  const int64_t scale_count = static_cast<int64_t>(kernels::q8_blocks(p.d));
  const int64_t per_thread = rows * p.d + rows * kKeyTile + kKeyTile + (p.key.q8 ? rows * scale_count : 0);
  const int64_t q8_per_thread = p.key.q8 ? rows * p.d : 0;
  Buffer<RunningSoftmax> partials;
  FloatBuffer partial_outputs, scratch;
  Buffer<int8_t> q8_scratch;
  Status s = first_failure({partials.allocate(items * rows, "partial softmaxes"),
                            partial_outputs.allocate(items * rows * p.dv, "partial outputs"),
                            scratch.allocate(per_thread * threads, "attention scratch"),
                            q8_scratch.allocate(q8_per_thread * threads, "quantised queries")});
  if (!s.ok()) return s;
  parallel_for(items, [&](int64_t item, int worker) {
    const int64_t kv = item / splits;
    const int64_t begin = reach.begin + item % splits * split_keys, end = std::min(begin + split_keys, reach.end);
    RunningSoftmax* softmax = partials.data() + item * rows;
    float* out = partial_outputs.data() + item * rows * p.dv;
    std::fill(softmax, softmax + rows, RunningSoftmax{});
    std::fill(out, out + rows * p.dv, 0.0f);
    float* queries = scratch.data() + worker * per_thread;
    float* scores = queries + rows * p.d;
    float* bias = scores + rows * kKeyTile;
    float* query_scales = bias + kKeyTile;
    int8_t* quantised = q8_scratch.data() + worker * q8_per_thread;
    for (int64_t r = 0; r < rows; ++r) {
      const float* q = p.query + p.query_layout.offset(kv * p.kv_group + r / p.n) + r % p.n * p.query_layout.row_stride;
      std::copy(q, q + p.d, queries + r * p.d);
      if (p.key.q8) kernels::quantize_q8(q, p.d, quantised + r * p.d, query_scales + r * scale_count);
    }
    const GatheredQueries gathered{queries, quantised, query_scales};
    uint32_t touched = 0;
    for (int64_t j0 = begin; j0 < end;) {
      // A chunk never crosses the ring's end, so its keys and values each lie in one run.
      const int64_t cols = std::min({kKeyTile, p.key.layout.run(j0, end), p.value.layout.run(j0, end)});
      if (p.value.f32) touched += touch_values(p, kv, j0, cols);
      score_in_place(p, kv, j0, rows, cols, gathered, scores);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t b = kv * p.kv_group + r / p.n, i = r % p.n;
        float* row = scores + r * kKeyTile;
        TileMask tile_mask(p, mask_index(p, b), i, j0, j0 + cols, bias);
        const RowMask mask = tile_mask.row(i);
        const int64_t first = mask.visible == 0 ? 0 : mask.begin, last = mask.visible == 0 ? 0 : mask.end;
        std::fill(row, row + first, 0.0f);
        std::fill(row + last, row + cols, 0.0f);
        if (first == last) continue;
        const float row_max = scale_row(p, b, i, j0 + first, row + first, mask.bias, last - first);
        fold(softmax[r], out + r * p.dv, p.dv, row + first, last - first, row_max, mask.visible);
      }
      add_values_in_place(p, kv, j0, rows, cols, scores, out);
      j0 += cols;
    }
    bias[0] = static_cast<float>(touched & 1);  // scratch: only so that the loads are kept
  }, 2.0 * rows * (p.d + p.dv) * split_keys);

  // Every row's splits merged into the first, then normalised into the output.
  for (int64_t kv = 0; kv < kv_blocks; ++kv)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t first = kv * splits * rows + r;
      RunningSoftmax& total = partials.data()[first];
      float* total_out = partial_outputs.data() + first * p.dv;
      for (int64_t split = 1; split < splits; ++split) {
        const int64_t part = first + split * rows;
        merge(total, total_out, partials.data()[part], partial_outputs.data() + part * p.dv, p.dv);
      }
      const int64_t b = kv * p.kv_group + r / p.n, i = r % p.n;
      finish(total, total_out, p.dv, output + p.output_layout.offset(b) + i * p.output_layout.row_stride);
    }
  return Status::success();
}

// Rows [j0, j0 + count) of block b of an operand as floats one *stride apart: in place when they
// are floats in one run, otherwise widened (exactly; q8 as q · d) into scratch [count, width].
const float* rows_as_floats(const RowOperand& o, int64_t b, int64_t j0, int64_t count, int64_t width, float* scratch,
                            int64_t* stride) {
  if (o.f32 && o.layout.run(j0, j0 + count) == count) {
    *stride = o.layout.row_stride;
    return o.f32 + o.layout.row_offset(b, j0);
  }
  for (int64_t r = 0; r < count; ++r) {
    const int64_t at = o.layout.row_offset(b, j0 + r);
    if (o.f32)
      std::copy_n(o.f32 + at, width, scratch + r * width);
    else if (o.f16)
      std::transform(o.f16 + at, o.f16 + at + width, scratch + r * width, from_half);
    else
      kernels::dequantize_q8(o.q8 + at, o.q8_scales + o.scale_layout.row_offset(b, j0 + r), width, scratch + r * width);
  }
  *stride = width;
  return scratch;
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

Status PackedOperands::pack(const AttentionBlocks& p) {
  const auto widened = [](const RowOperand& o) { return !o.f32 || o.layout.ring_capacity; };
  const int64_t width = std::max(p.d, p.dv);
  FloatBuffer scratch;
  if (widened(p.key) || widened(p.value)) {
    Status s = scratch.allocate(kKeyTile * width * thread_count(), "keys and values as floats");
    if (!s.ok()) return s;
  }
  const int64_t tiles = (p.m + kKeyTile - 1) / kKeyTile;
  parallel_for(p.batch / p.kv_group * tiles, [&](int64_t item, int worker) {
    const int64_t b = item / tiles, j0 = item % tiles * kKeyTile, count = std::min(kKeyTile, p.m - j0);
    float* rows = scratch.data() + worker * kKeyTile * width;
    int64_t stride = 0;
    if (!p.score) {
      const float* keys = rows_as_floats(p.key, b, j0, count, p.d, rows, &stride);
      pack_key_tile(p, b, j0, keys, stride);
    }
    const float* values = rows_as_floats(p.value, b, j0, count, p.dv, rows, &stride);
    pack_value_tile(p, b, j0, values, stride);
  }, static_cast<double>(kKeyTile) * (p.d + p.dv));
  return Status::success();
}

Status attend(const AttentionBlocks& p, float* output, float* weights, const PackedOperands* packed) {
  if (reads_in_place(p, weights, packed)) return attend_in_place(p, output);
  PackedOperands own;
  if (!packed) {
    Status s = own.allocate(p);
    if (s.ok()) s = own.pack(p);
    if (!s.ok()) return s;
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

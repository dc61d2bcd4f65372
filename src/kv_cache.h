// A KV cache: the keys and values of the positions seen so far, held between decode steps so that
// each step appends only its new positions, and attention of the latest queries over them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "attend.h"
#include "attention.h"
#include "buffer.h"
#include "half.h"
#include "status.h"
#include "tensor.h"

namespace attn {

// How a cache holds its keys and values: floats, binary16, or q8 (kernels/q8.h: llama.cpp's q8_0,
// blocks of 32 along each row with one binary16 scale, the last block shorter when 32 does not
// divide the row; the decode step quantises its queries so and scores in integers).
enum class CacheDtype { f32, f16, q8 };

struct KVCacheConfig {
  int64_t batch = 1, heads = 0, head_dim = 0;
  int64_t value_dim = 0;  // 0: head_dim
  int64_t max_length = 0;
  CacheDtype dtype = CacheDtype::f32;
  // A sliding window W makes the cache a ring buffer of the latest positions: after an append of
  // t >= 1 it holds the latest W - 1 + t (the t new queries each see their W latest keys), so
  // memory is O(W + t) over any number of steps, and max_length is only the first reservation.
  std::optional<int64_t> window;
};

// attend()'s options: those of scaled_dot_product_attention that apply to a cache. Causal means
// lower-right (the n queries are the latest n positions held).
struct CacheAttendOptions {
  bool causal = true;
  std::optional<float> scale;     // default 1 / sqrt(head_dim)
  std::optional<float> softcap;
  bool alibi = false;
  const float* alibi_slopes = nullptr;  // [Hq], or null for Press et al.'s
  int64_t alibi_slope_count = 0;
  std::optional<int64_t> window;  // default: the cache's
  MaskView attn_mask;             // broadcastable to [batch, Hq, n, length]
};

class KVCache {
 public:
  static Status create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out);

  const KVCacheConfig& config() const { return config_; }
  int64_t length() const { return length_; }      // positions held
  int64_t position() const { return position_; }  // positions appended since creation or reset()
  // The positions held once t more are appended (the ring keeps the latest W - 1 + t).
  int64_t length_after_append(int64_t t) const;

  // key [batch, heads, t, head_dim], value [batch, heads, t, value_dim], and optionally Hugging
  // Face's attention_mask of the new positions, mask [batch, t] (boolean, 1 = a token, 0 =
  // padding; absent: all tokens), which the cache keeps: attend() hides padded keys. Refused
  // (nothing changes) past max_length without a window, in an f16 cache for a finite value past
  // binary16's range, and in a q8 cache for a value its scale cannot hold (Inf, NaN, |x| ≥ 127 ·
  // 65520).
  Status check_append(const Shape& key, const Shape& value, const MaskView& mask = {}) const;
  Status append(const TensorView& key, const TensorView& value, const MaskView& mask = {});

  // query [batch, Hq, n, head_dim], Hq a multiple of heads (grouped heads), n <= length(): the
  // latest n positions; a q8 cache rounds it through q8 (kernels::round_q8) first. Writes output [batch, Hq, n, value_dim] and, when non-null, weights
  // [batch, Hq, n, length()] (columns oldest first).
  Status check_attend(const Shape& query, const CacheAttendOptions& options, Shape* output, Shape* weights) const;
  Status attend(const TensorView& query, const CacheAttendOptions& options, float* output, float* weights) const;
  // The scaled_dot_product_attention call over the held keys and values ([batch, heads, length,
  // d], oldest first) that an attend with `options` equals (given a q8 cache's rounded query).
  SdpaOptions as_sdpa(const CacheAttendOptions& options) const;

  // Drops the latest positions, keeping `length` (rollback). A ring (a window W) that has dropped
  // positions keeps at least W - 1 (refused below: the next step would see fewer keys than a cache
  // given the same positions afresh).
  Status truncate(int64_t length);
  void reset();
  // The held keys [batch, heads, length, head_dim] and values [..., value_dim] as floats, oldest
  // first.
  void copy_keys(float* out) const;
  void copy_values(float* out) const;
  // The held mask [batch, length] (1 = a token, 0 = padding), oldest first.
  void copy_mask(uint8_t* out) const;
  // Tokens (not padding) appended to row b since creation or reset(), minus those truncated: the
  // position its next token takes in Hugging Face's generate (cumsum(attention_mask) - 1).
  int64_t tokens(int64_t b) const { return tokens_.data()[b]; }

 private:
  // Keys or values: [batch · heads][capacity][width] elements of the cache's dtype (q8: bytes,
  // and [batch · heads][capacity][q8_blocks(width)] scales).
  struct Rows {
    int64_t width = 0;
    FloatBuffer f32;
    Buffer<Half> f16;
    Buffer<int8_t> q8;
    Buffer<Half> scales;

    int64_t scale_width() const;
  };

  explicit KVCache(const KVCacheConfig& config) : config_(config) {}
  Status reserve(int64_t capacity);
  int64_t slot(int64_t index) const { return (start_ + index) % capacity_; }
  // Held position `index` of block b as a row of the buffers ([batch · heads][capacity]).
  int64_t row(int64_t block, int64_t index) const { return block * capacity_ + slot(index); }
  // Row `from` of `source` to row `to` of `target` (rows as row() numbers them), in the cache's dtype.
  void copy_row(const Rows& source, int64_t from, Rows& target, int64_t to) const;
  void write(Rows& rows, const float* source, int64_t t);
  // f16 caches: refuses a finite value that binary16 would store as ±Inf; q8 caches: a value whose
  // block scale it could not store.
  Status check_range(const TensorView& tensor, const char* argument) const;
  // Held positions [first, first + count) of every block, widened, as [blocks, count, width].
  void copy_out(const Rows& rows, int64_t first, int64_t count, float* out) const;
  // The rows as the attention engine's operand, read in place.
  RowOperand operand(const Rows& rows) const;
  uint8_t& mask_at(int64_t b, int64_t index) { return mask_.data()[b * capacity_ + slot(index)]; }
  uint8_t mask_at(int64_t b, int64_t index) const { return mask_.data()[b * capacity_ + slot(index)]; }

  KVCacheConfig config_;
  Rows keys_, values_;
  Buffer<uint8_t> mask_;   // [batch][capacity], in the ring's slots as the keys
  Buffer<int64_t> tokens_;  // [batch]
  bool padded_ = false;     // whether a held position may be padding (attend() then reads mask_)
  int64_t capacity_ = 0;  // positions each block has room for
  int64_t start_ = 0;     // the slot of the oldest held position
  int64_t length_ = 0, position_ = 0;
  // Set once an Inf or NaN is stored as f16 (until reset()): the engine's register widening is for
  // finite values, so such caches attend through exact widening.
  bool non_finite_ = false;
};

}  // namespace attn

#include "kv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attention.h"
#include "kernels/kernels.h"
#include "mask.h"
#include "module.h"
#include "parallel.h"

namespace attn {
namespace {

// Keys per chunk of a decode step: a chunk's scores for a group of query heads stay in L1.
constexpr int64_t kDecodeChunk = 128;
// Key ranges split across threads are at least this long, so that the merge stays negligible.
constexpr int64_t kMinKeysPerSplit = 512;

std::string dims(std::initializer_list<std::string> parts) {
  std::string s = "[";
  for (const std::string& part : parts) s += (s.size() > 1 ? ", " : "") + part;
  return s + "]";
}

// A query row's online softmax: the running max, the sum of exponentials against it, the keys
// seen; its unnormalised output row lives beside it.
struct RunningSoftmax {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  int64_t visible = 0;
};

// max(a, b), NaN when b is (a NaN a keeps through std::max).
float nan_max(float a, float b) { return std::isnan(b) ? b : std::max(a, b); }

// Moves a running softmax and its output row to a larger max.
void rescale(RunningSoftmax& row, float* output, int64_t dv, float new_max) {
  if (row.max != new_max) {
    const float factor = std::exp(row.max - new_max);
    row.sum *= factor;
    kernels::active_kernels().scale(output, static_cast<size_t>(dv), factor);
  }
  row.max = new_max;
}

}  // namespace

Status KVCache::create(const KVCacheConfig& config, std::unique_ptr<KVCache>* out) {
  Status s = first_failure({check_size("batch", config.batch), check_size("heads", config.heads),
                            check_size("headDim", config.head_dim),
                            config.value_dim == 0 ? Status::success() : check_size("valueDim", config.value_dim),
                            check_size("maxLength", config.max_length),
                            config.window ? check_size("window", *config.window) : Status::success()});
  if (!s.ok()) return s;
  std::unique_ptr<KVCache> cache(new KVCache(config));
  if (cache->config_.value_dim == 0) cache->config_.value_dim = config.head_dim;
  cache->keys_.width = config.head_dim;
  cache->values_.width = cache->config_.value_dim;
  s = cache->reserve(config.window ? std::min(*config.window, config.max_length) : config.max_length);
  if (s.ok()) *out = std::move(cache);
  return s;
}

// Room for `capacity` positions per block, the held ones moved over oldest first (start_ = 0). On
// failure nothing changes.
Status KVCache::reserve(int64_t capacity) {
  const int64_t blocks = config_.batch * config_.heads;
  Rows keys, values;
  for (auto [rows, old] : {std::pair{&keys, &keys_}, {&values, &values_}}) {
    rows->width = old->width;
    const int64_t count = blocks * capacity * rows->width;
    Status s = config_.dtype == CacheDtype::f16 ? rows->f16.allocate(count, "KV cache")
                                                : rows->f32.allocate(count, "KV cache");
    if (!s.ok()) return s;
    for (int64_t block = 0; block < blocks; ++block)
      for (int64_t index = 0; index < length_; ++index) {
        const int64_t from = row_offset(*old, block, index), to = (block * capacity + index) * rows->width;
        if (config_.dtype == CacheDtype::f16)
          std::copy_n(old->f16.data() + from, rows->width, rows->f16.data() + to);
        else
          std::copy_n(old->f32.data() + from, rows->width, rows->f32.data() + to);
      }
  }
  keys_ = std::move(keys);
  values_ = std::move(values);
  capacity_ = capacity;
  start_ = 0;
  return Status::success();
}

int64_t KVCache::length_after_append(int64_t t) const {
  // max(t, 1): appending nothing drops nothing.
  return config_.window ? std::min(length_ + t, *config_.window - 1 + std::max<int64_t>(t, 1)) : length_ + t;
}

Status KVCache::check_append(const Shape& key, const Shape& value) const {
  const KVCacheConfig& c = config_;
  const std::string batch = std::to_string(c.batch), heads = std::to_string(c.heads);
  if (key.rank != 4 || key[0] != c.batch || key[1] != c.heads || key[2] < 0 || key[3] != c.head_dim)
    return Status::invalid("key", dims({batch, heads, "t", std::to_string(c.head_dim)}), key.str());
  if (value.rank != 4 || value[0] != c.batch || value[1] != c.heads || value[2] != key[2] ||
      value[3] != c.value_dim)
    return Status::invalid("value", dims({batch, heads, std::to_string(key[2]), std::to_string(c.value_dim)}),
                           value.str());
  if (!c.window && length_ + key[2] > c.max_length)
    return Status::invalid("key",
                           dims({batch, heads, "t ≤ " + std::to_string(c.max_length - length_),
                                 std::to_string(c.head_dim)}) +
                               " (maxLength " + std::to_string(c.max_length) + ", " + std::to_string(length_) +
                               " held)",
                           key.str());
  return Status::success();
}

void KVCache::write(Rows& rows, const float* source, int64_t t) {
  const int64_t blocks = config_.batch * config_.heads;
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t i = 0; i < t; ++i) {
      const float* from = source + (block * t + i) * rows.width;
      const int64_t to = row_offset(rows, block, length_ + i);
      if (config_.dtype == CacheDtype::f32) {
        std::copy_n(from, rows.width, rows.f32.data() + to);
        continue;
      }
      Half* half = rows.f16.data() + to;
      for (int64_t e = 0; e < rows.width; ++e) {
        half[e] = to_half(from[e]);
        non_finite_ |= (half[e] & 0x7c00u) == 0x7c00u;
      }
    }
}

Status KVCache::append(const TensorView& key, const TensorView& value) {
  Status s = first_failure({check_append(key.shape, value.shape), check_data(key, "key"), check_data(value, "value")});
  if (!s.ok()) return s;
  const int64_t t = key.shape[2], held = length_after_append(t);
  // The ring grows when t new positions and the W - 1 before them outgrow it; otherwise the oldest
  // positions give up their slots.
  const int64_t dropped = length_ + t - held;
  if (held > capacity_) {
    start_ += dropped;
    length_ -= dropped;
    s = reserve(held);
    if (!s.ok()) {
      start_ -= dropped;
      length_ += dropped;
      return s;
    }
  } else if (dropped > 0) {
    start_ = (start_ + dropped) % capacity_;
    length_ -= dropped;
  }
  write(keys_, key.data, t);
  write(values_, value.data, t);
  length_ += t;
  position_ += t;
  return Status::success();
}

Status KVCache::truncate(int64_t length) {
  if (length < 0 || length > length_)
    return Status::invalid("length", "an integer in [0, " + std::to_string(length_) + "] (the positions held)",
                           std::to_string(length));
  position_ -= length_ - length;
  length_ = length;
  return Status::success();
}

void KVCache::reset() {
  length_ = position_ = start_ = 0;
  non_finite_ = false;
}

void KVCache::copy_out(const Rows& rows, int64_t first, int64_t count, float* out) const {
  const int64_t blocks = config_.batch * config_.heads;
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t i = 0; i < count; ++i) {
      const int64_t from = row_offset(rows, block, first + i);
      float* to = out + (block * count + i) * rows.width;
      if (config_.dtype == CacheDtype::f32)
        std::copy_n(rows.f32.data() + from, rows.width, to);
      else
        std::transform(rows.f16.data() + from, rows.f16.data() + from + rows.width, to, from_half);
    }
}

void KVCache::copy_keys(float* out) const { copy_out(keys_, 0, length_, out); }
void KVCache::copy_values(float* out) const { copy_out(values_, 0, length_, out); }

Status KVCache::check_attend(const Shape& query, const CacheAttendOptions& options, Shape* output,
                             Shape* weights) const {
  const KVCacheConfig& c = config_;
  if (query.rank != 4 || query[0] != c.batch || query[1] <= 0 || query[1] % c.heads != 0 || query[2] < 0 ||
      query[2] > length_ || query[3] != c.head_dim)
    return Status::invalid("query",
                           dims({std::to_string(c.batch), "Hq (a multiple of " + std::to_string(c.heads) + ")",
                                 "n ≤ " + std::to_string(length_) + " (the positions held)",
                                 std::to_string(c.head_dim)}),
                           query.str());
  const int64_t query_heads = query[1];
  if (options.scale && !std::isfinite(*options.scale))
    return Status::invalid("scale", "a finite number", std::to_string(*options.scale));
  if (options.softcap && !(*options.softcap > 0.0f && std::isfinite(*options.softcap)))
    return Status::invalid("softcap", "a positive finite number", std::to_string(*options.softcap));
  if (options.window) {
    if (*options.window <= 0) return Status::invalid("window", "a positive integer", std::to_string(*options.window));
    if (c.window && *options.window > *c.window)
      return Status::invalid("window",
                             "at most the cache's window, " + std::to_string(*c.window) + " (it holds no older keys)",
                             std::to_string(*options.window));
  }
  if (options.alibi && options.alibi_slopes && options.alibi_slope_count != query_heads)
    return Status::invalid("alibi", "true or " + std::to_string(query_heads) + " slopes (one per query head)",
                           std::to_string(options.alibi_slope_count) + " slopes");
  const Shape scores{c.batch, query_heads, query[2], length_};
  if (options.attn_mask.present()) {
    Status s = BroadcastMask::check(options.attn_mask, scores, "attnMask");
    if (!s.ok()) return s;
  }
  *output = {c.batch, query_heads, query[2], c.value_dim};
  *weights = scores;
  return Status::success();
}

Status KVCache::attend(const TensorView& query, const CacheAttendOptions& options, float* output,
                       float* weights) const {
  Shape output_shape, weights_shape;
  Status s = first_failure({check_attend(query.shape, options, &output_shape, &weights_shape),
                            check_data(query, "query"), check_data(options.attn_mask, "attnMask")});
  if (!s.ok()) return s;
  if (query.shape[2] == 1 && !weights && !non_finite_) return attend_decode(query, options, output);

  // Prefill (and weights, and Inf/NaN in f16): the held keys and values in order, as floats,
  // through scaled_dot_product_attention with the queries aligned lower-right.
  const KVCacheConfig& c = config_;
  FloatBuffer keys, values;
  const int64_t blocks = c.batch * c.heads;
  s = first_failure({keys.allocate(blocks * length_ * c.head_dim, "KV cache keys as float"),
                     values.allocate(blocks * length_ * c.value_dim, "KV cache values as float")});
  if (!s.ok()) return s;
  copy_out(keys_, 0, length_, keys.data());
  copy_out(values_, 0, length_, values.data());
  return scaled_dot_product_attention(query, {keys.data(), {c.batch, c.heads, length_, c.head_dim}},
                                      {values.data(), {c.batch, c.heads, length_, c.value_dim}}, as_sdpa(options),
                                      output, weights);
}

SdpaOptions KVCache::as_sdpa(const CacheAttendOptions& options) const {
  SdpaOptions sdpa;
  sdpa.attn_mask = options.attn_mask;
  sdpa.causal = options.causal ? Causal::lower_right : Causal::none;
  sdpa.queries_last = true;
  sdpa.scale = options.scale;
  sdpa.enable_gqa = true;
  sdpa.window = options.window ? options.window : config_.window;
  sdpa.softcap = options.softcap;
  sdpa.alibi = options.alibi;
  sdpa.alibi_slopes = options.alibi_slopes;
  sdpa.alibi_slope_count = options.alibi_slope_count;
  return sdpa;
}

// One query per head (n = 1): each group of query heads that share a key/value head reads that
// head's held keys and values once, chunk by chunk where they lie (the ring's two runs), widening
// f16 in registers, with an online softmax. Work items are (block, key range) pairs: with more
// threads than blocks the keys are split too, and the partial softmaxes merged at the end.
Status KVCache::attend_decode(const TensorView& query, const CacheAttendOptions& options, float* output) const {
  const kernels::KernelSet& k = kernels::active_kernels();
  const KVCacheConfig& c = config_;
  const int64_t query_heads = query.shape[1], group = query_heads / c.heads, blocks = c.batch * c.heads;
  const int64_t d = c.head_dim, dv = c.value_dim;
  const std::optional<int64_t> window = options.window ? options.window : c.window;
  // The query is the latest position: causal hides nothing held; a window hides the older keys.
  const int64_t position = length_ - 1;
  const int64_t first_key = window ? std::max<int64_t>(0, length_ - *window) : 0;
  const int64_t keys = length_ - first_key;
  const int threads = thread_count();
  const int64_t splits = std::max<int64_t>(
      1, std::min((2 * threads + blocks - 1) / blocks, keys / kMinKeysPerSplit));
  const int64_t items = blocks * splits, split_keys = (keys + splits - 1) / splits;

  ScoreMask mask;
  if (options.attn_mask.present()) mask.add(BroadcastMask(options.attn_mask, {c.batch, query_heads, 1, length_}));
  FloatBuffer slopes, partial_outputs, scratch;
  Buffer<RunningSoftmax> partials;
  const int64_t per_thread = (group + 1) * kDecodeChunk;
  Status s = first_failure({slopes.allocate(options.alibi ? query_heads : 0, "ALiBi slopes"),
                            partial_outputs.allocate(items * group * dv, "decode partial outputs"),
                            partials.allocate(items * group, "decode partial softmaxes"),
                            scratch.allocate(per_thread * threads, "decode scratch")});
  if (!s.ok()) return s;
  if (options.alibi) {
    if (options.alibi_slopes)
      std::copy_n(options.alibi_slopes, query_heads, slopes.data());
    else
      alibi_slopes(query_heads, slopes.data());
  }
  const float scale = options.scale ? *options.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const float softcap = options.softcap ? *options.softcap : 0.0f;

  parallel_for(items, [&](int64_t item, int worker) {
    const int64_t block = item / splits, batch = block / c.heads, head = block % c.heads;
    const int64_t begin = first_key + item % splits * split_keys, end = std::min(begin + split_keys, length_);
    const int64_t first_query = batch * query_heads + head * group;  // the group's first query head
    const float* q = query.data + first_query * d;
    RunningSoftmax* rows = partials.data() + item * group;
    float* out = partial_outputs.data() + item * group * dv;
    std::fill(rows, rows + group, RunningSoftmax{});
    std::fill(out, out + group * dv, 0.0f);
    float* scores = scratch.data() + worker * per_thread;
    float* bias = scores + group * kDecodeChunk;
    for (int64_t j0 = begin; j0 < end;) {
      // A chunk never crosses the ring's end, so its keys and values are contiguous.
      const int64_t cols = std::min({kDecodeChunk, end - j0, capacity_ - slot(j0)});
      const int64_t key_at = row_offset(keys_, block, j0), value_at = row_offset(values_, block, j0);
      if (c.dtype == CacheDtype::f16)
        k.gemm_nt_f16(group, cols, d, q, d, keys_.f16.data() + key_at, d, scores, kDecodeChunk);
      else
        k.gemm_nt(group, cols, d, q, d, keys_.f32.data() + key_at, d, scores, kDecodeChunk);
      for (int64_t r = 0; r < group; ++r) {
        float* s_row = scores + r * kDecodeChunk;
        const int64_t h = head * group + r;
        const int64_t visible = mask.has_tensors() ? mask.fill_bias(batch * query_heads + h, 0, j0, j0 + cols, bias) : cols;
        if (visible == 0) {
          std::fill(s_row, s_row + cols, 0.0f);
          continue;
        }
        RunningSoftmax& row = rows[r];
        row.visible += visible;
        const float chunk_max = kernels::scale_terms_max(
            k, s_row, mask.has_tensors() ? bias : nullptr, cols,
            {scale, softcap, options.alibi ? slopes.data()[h] : 0.0f, static_cast<float>(j0 - position)});
        rescale(row, out + r * dv, dv, nan_max(row.max, chunk_max));
        row.sum += k.exp_sum(s_row, cols, row.max);
      }
      if (c.dtype == CacheDtype::f16)
        k.gemm_nn_add_f16(group, dv, cols, scores, kDecodeChunk, values_.f16.data() + value_at, dv, out, dv);
      else
        k.gemm_nn_add(group, dv, cols, scores, kDecodeChunk, values_.f32.data() + value_at, dv, out, dv);
      j0 += cols;
    }
  }, 2.0 * group * (d + dv) * split_keys);

  // Each query row: its splits merged into the first, normalised; zeros where no key was visible.
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t r = 0; r < group; ++r) {
      const int64_t first = block * splits;
      RunningSoftmax& total = partials.data()[first * group + r];
      float* sum_out = partial_outputs.data() + (first * group + r) * dv;
      for (int64_t split = 1; split < splits; ++split) {
        RunningSoftmax& part = partials.data()[(first + split) * group + r];
        if (part.visible == 0) continue;
        float* part_out = partial_outputs.data() + ((first + split) * group + r) * dv;
        const float new_max = nan_max(total.max, part.max);
        rescale(total, sum_out, dv, new_max);
        rescale(part, part_out, dv, new_max);
        total.sum += part.sum;
        total.visible += part.visible;
        for (int64_t e = 0; e < dv; ++e) sum_out[e] += part_out[e];
      }
      const int64_t batch = block / c.heads, h = block % c.heads * group + r;
      float* o = output + (batch * query_heads + h) * dv;
      if (total.visible == 0) {
        std::fill(o, o + dv, 0.0f);
        continue;
      }
      const float inverse = 1.0f / total.sum;
      for (int64_t e = 0; e < dv; ++e) o[e] = sum_out[e] * inverse;
    }
  return Status::success();
}

}  // namespace attn

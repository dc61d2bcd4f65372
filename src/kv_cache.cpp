#include "kv_cache.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "attend.h"
#include "attention.h"
#include "kernels/q8.h"
#include "mask.h"
#include "module.h"

namespace attn {
namespace {

std::string dims(std::initializer_list<std::string> parts) {
  std::string s = "[";
  for (const std::string& part : parts) s += (s.size() > 1 ? ", " : "") + part;
  return s + "]";
}

// `text` with each '%' replaced by the next of `numbers`: one loop where chains of + and
// to_string would each cost code in the page.
std::string fill(const char* text, std::initializer_list<int64_t> numbers) {
  std::string s;
  const int64_t* next = numbers.begin();
  for (; *text; ++text) s += *text == '%' ? std::to_string(*next++) : std::string(1, *text);
  return s;
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
  s = cache->tokens_.allocate(config.batch, "KV cache");
  if (!s.ok()) return s;
  std::fill_n(cache->tokens_.data(), config.batch, 0);
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
    Status s;
    switch (config_.dtype) {
      case CacheDtype::f32: s = rows->f32.allocate(count, "KV cache"); break;
      case CacheDtype::f16: s = rows->f16.allocate(count, "KV cache"); break;
      case CacheDtype::q8:
        s = first_failure({rows->q8.allocate(count, "KV cache"),
                           rows->scales.allocate(blocks * capacity * rows->scale_width(), "KV cache scales")});
        break;
    }
    if (!s.ok()) return s;
    for (int64_t block = 0; block < blocks; ++block)
      for (int64_t index = 0; index < length_; ++index) copy_row(*old, row(block, index), *rows, block * capacity + index);
  }
  Buffer<uint8_t> mask;
  Status s = mask.allocate(config_.batch * capacity, "KV cache");
  if (!s.ok()) return s;
  for (int64_t b = 0; b < config_.batch; ++b)
    for (int64_t index = 0; index < length_; ++index) mask.data()[b * capacity + index] = mask_at(b, index);
  keys_ = std::move(keys);
  values_ = std::move(values);
  mask_ = std::move(mask);
  capacity_ = capacity;
  start_ = 0;
  return Status::success();
}

int64_t KVCache::length_after_append(int64_t t) const {
  // max(t, 1): appending nothing drops nothing.
  return config_.window ? std::min(length_ + t, *config_.window - 1 + std::max<int64_t>(t, 1)) : length_ + t;
}

Status KVCache::check_append(const Shape& key, const Shape& value, const MaskView& mask) const {
  const KVCacheConfig& c = config_;
  const std::string batch = std::to_string(c.batch), heads = std::to_string(c.heads);
  if (key.rank != 4 || key[0] != c.batch || key[1] != c.heads || key[2] < 0 || key[3] != c.head_dim)
    return Status::invalid("key", dims({batch, heads, "t", std::to_string(c.head_dim)}), key.str());
  if (value.rank != 4 || value[0] != c.batch || value[1] != c.heads || value[2] != key[2] ||
      value[3] != c.value_dim)
    return Status::invalid("value", dims({batch, heads, std::to_string(key[2]), std::to_string(c.value_dim)}),
                           value.str());
  if (mask.present() && (mask.type != MaskType::boolean || mask.shape.rank != 2 || mask.shape[0] != c.batch ||
                         mask.shape[1] != key[2]))
    return Status::invalid("mask", "a boolean " + dims({batch, std::to_string(key[2])}) + " (batch, t: 1 a token, 0 padding)",
                           (mask.type == MaskType::additive ? "a float " : "") + mask.shape.str());
  if (!c.window && length_ + key[2] > c.max_length)
    return Status::invalid("key",
                           dims({batch, heads, "t ≤ " + std::to_string(c.max_length - length_),
                                 std::to_string(c.head_dim)}) +
                               " (maxLength " + std::to_string(c.max_length) + ", " + std::to_string(length_) +
                               " held; to hold more, truncate() or reset() the cache, or create it with a larger "
                               "maxLength)",
                           key.str());
  return Status::success();
}

int64_t KVCache::Rows::scale_width() const { return static_cast<int64_t>(kernels::q8_blocks(width)); }

void KVCache::copy_row(const Rows& source, int64_t from, Rows& target, int64_t to) const {
  const int64_t width = source.width;
  switch (config_.dtype) {
    case CacheDtype::f32: std::copy_n(source.f32.data() + from * width, width, target.f32.data() + to * width); break;
    case CacheDtype::f16: std::copy_n(source.f16.data() + from * width, width, target.f16.data() + to * width); break;
    case CacheDtype::q8: {
      const int64_t scales = source.scale_width();
      std::copy_n(source.q8.data() + from * width, width, target.q8.data() + to * width);
      std::copy_n(source.scales.data() + from * scales, scales, target.scales.data() + to * scales);
      break;
    }
  }
}

void KVCache::write(Rows& rows, const float* source, int64_t t) {
  const int64_t blocks = config_.batch * config_.heads, width = rows.width;
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t i = 0; i < t; ++i) {
      const float* from = source + (block * t + i) * width;
      const int64_t to = row(block, length_ + i);
      switch (config_.dtype) {
        case CacheDtype::f32: std::copy_n(from, width, rows.f32.data() + to * width); break;
        case CacheDtype::f16: {
          Half* half = rows.f16.data() + to * width;
          for (int64_t e = 0; e < width; ++e) {
            half[e] = to_half(from[e]);
            non_finite_ |= (half[e] & 0x7c00u) == 0x7c00u;
          }
          break;
        }
        case CacheDtype::q8:
          kernels::quantize_q8(from, width, rows.q8.data() + to * width, rows.scales.data() + to * rows.scale_width());
          break;
      }
    }
}

// A finite value binary16 cannot hold (|x| ≥ 65520, which rounds past 65504) would be stored as
// ±Inf, and every attend over it would give NaN: an f16 cache refuses it, naming where it is.
// Infinities and NaN given are kept as they are (they propagate, as in PyTorch). A q8 block
// shares one binary16 scale, max |x| / 127: one Inf or NaN would take its 31 neighbours with it,
// and |x| / 127 ≥ 65520 would make the scale Inf, so a q8 cache refuses those.
Status KVCache::check_range(const TensorView& tensor, const char* argument) const {
  if (config_.dtype == CacheDtype::f32) return Status::success();
  const bool q8 = config_.dtype == CacheDtype::q8;
  const Shape& shape = tensor.shape;  // [batch, heads, t, width]
  for (int64_t i = 0, count = shape.numel(); i < count; ++i) {
    const float x = tensor.data[i];
    const bool refused = q8 ? !(std::fabs(x) / 127.0f < 65520.0f) : std::fabs(x) >= 65520.0f && !std::isinf(x);
    if (!refused) continue;
    const int64_t row = i / shape[3], plane = row / shape[2];
    return Status::invalid(argument,
                           q8 ? "finite values, |x| < 8321040 (127 · 65520: this cache of dtype 'q8' stores each block "
                                "of 32 with the scale max |x| / 127 as binary16; a cache of dtype 'f32' holds any value)"
                              : "values within binary16's range, |x| < 65520 (this cache of dtype 'f16' would store the "
                                "value as ±Infinity; a cache of dtype 'f32' holds it)",
                           number_string(x) + fill(" at batch %, head %, position %, dim %",
                                                   {plane / shape[1], plane % shape[1], position_ + row % shape[2], i % shape[3]}));
  }
  return Status::success();
}

Status KVCache::append(const TensorView& key, const TensorView& value, const MaskView& mask) {
  Status s = first_failure({check_append(key.shape, value.shape, mask), check_data(key, "key"), check_data(value, "value"),
                            check_data(mask, "mask")});
  if (s.ok()) s = check_range(key, "key");
  if (s.ok()) s = check_range(value, "value");
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
  const uint8_t* given = static_cast<const uint8_t*>(mask.data);
  for (int64_t b = 0; b < config_.batch; ++b)
    for (int64_t i = 0; i < t; ++i) {
      const uint8_t token = mask.present() ? given[b * t + i] != 0 : 1;
      mask_at(b, length_ + i) = token;
      tokens_.data()[b] += token;
      padded_ |= !token;
    }
  length_ += t;
  position_ += t;
  return Status::success();
}

Status KVCache::truncate(int64_t length) {
  if (length < 0 || length > length_)
    return Status::invalid("length", "an integer in [0, " + std::to_string(length_) + "] (the positions held)",
                           std::to_string(length));
  // A ring that has dropped its oldest positions can roll back only while it keeps the W - 1 the
  // next position's window sees: with fewer, the next step would silently see fewer keys than a
  // cache that had never gone further.
  const int64_t dropped = position_ - length_;
  if (config_.window && dropped > 0 && length < std::min(*config_.window - 1, length_)) {
    const int64_t least = std::min(*config_.window - 1, length_);
    return Status::invalid("length",
                           fill("an integer in [%, %] (window %: the ring no longer holds the positions before %, and "
                                "the next position must still see the % before it; to roll back further, reset() and "
                                "append again)",
                                {least, length_, *config_.window, dropped, least}),
                           std::to_string(length));
  }
  for (int64_t b = 0; b < config_.batch; ++b)
    for (int64_t index = length; index < length_; ++index) tokens_.data()[b] -= mask_at(b, index);
  position_ -= length_ - length;
  length_ = length;
  return Status::success();
}

void KVCache::reset() {
  length_ = position_ = start_ = 0;
  non_finite_ = padded_ = false;
  std::fill_n(tokens_.data(), config_.batch, 0);
}

void KVCache::copy_out(const Rows& rows, int64_t first, int64_t count, float* out) const {
  const int64_t blocks = config_.batch * config_.heads;
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t i = 0; i < count; ++i) {
      const int64_t from = row(block, first + i), width = rows.width;
      float* to = out + (block * count + i) * width;
      switch (config_.dtype) {
        case CacheDtype::f32: std::copy_n(rows.f32.data() + from * width, width, to); break;
        case CacheDtype::f16:
          std::transform(rows.f16.data() + from * width, rows.f16.data() + (from + 1) * width, to, from_half);
          break;
        case CacheDtype::q8:
          kernels::dequantize_q8(rows.q8.data() + from * width, rows.scales.data() + from * rows.scale_width(), width, to);
          break;
      }
    }
}

void KVCache::copy_keys(float* out) const { copy_out(keys_, 0, length_, out); }
void KVCache::copy_mask(uint8_t* out) const {
  for (int64_t b = 0; b < config_.batch; ++b)
    for (int64_t index = 0; index < length_; ++index) out[b * length_ + index] = mask_at(b, index);
}
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
    return Status::invalid("scale", "a finite number", number_string(*options.scale));
  if (options.softcap && !(*options.softcap > 0.0f && std::isfinite(*options.softcap)))
    return Status::invalid("softcap", "a positive finite number", number_string(*options.softcap));
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
  // The engine reads the held keys and values where they lie: the SDPA call over them that this
  // attend equals, with the storage as its operands. A q8 cache's queries are rounded through q8
  // first, so that every path of the engine (the decode step's integer scores among them) attends
  // with the same queries.
  const KVCacheConfig& c = config_;
  FloatBuffer rounded;
  if (c.dtype == CacheDtype::q8) {
    s = rounded.allocate(query.shape.numel(), "q8 queries");
    if (!s.ok()) return s;
    for (int64_t at = 0; at < query.shape.numel(); at += c.head_dim)
      kernels::round_q8(query.data + at, c.head_dim, rounded.data() + at);
  }
  const TensorView queries = c.dtype == CacheDtype::q8 ? TensorView{rounded.data(), query.shape} : query;
  SdpaPlan plan;
  s = plan.prepare(queries, {c.batch, c.heads, length_, c.head_dim}, {c.batch, c.heads, length_, c.value_dim},
                   as_sdpa(options));
  if (!s.ok()) return s;
  plan.blocks.key = operand(keys_);
  plan.blocks.value = operand(values_);
  // Padded keys hidden by the held mask, laid out oldest first for the engine.
  Buffer<uint8_t> held;
  if (padded_) {
    s = held.allocate(c.batch * length_, "KV cache mask");
    if (!s.ok()) return s;
    copy_mask(held.data());
    MaskView view{MaskType::boolean, held.data(), {c.batch, length_}};
    const int64_t strides[] = {length_, 0, 0, 1};
    plan.add_mask(BroadcastMask::with_strides(view, {c.batch, query.shape[1], query.shape[2], length_}, strides));
  }
  return attn::attend(plan.blocks, output, weights);
}

RowOperand KVCache::operand(const Rows& rows) const {
  RowOperand o;
  switch (config_.dtype) {
    case CacheDtype::f32: o.f32 = rows.f32.data(); break;
    case CacheDtype::f16: o.f16 = rows.f16.data(); break;
    case CacheDtype::q8:
      o.q8 = rows.q8.data();
      o.q8_scales = rows.scales.data();
      o.scale_layout = {1, capacity_ * rows.scale_width(), 0, rows.scale_width(), capacity_, start_};
      break;
  }
  o.layout = {1, capacity_ * rows.width, 0, rows.width, capacity_, start_};
  o.finite = !non_finite_;
  return o;
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

}  // namespace attn

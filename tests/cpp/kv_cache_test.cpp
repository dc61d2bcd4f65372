// The KV cache: its attends (the engine reading the held rows in place for a few queries, packed
// from them for more) against scaled_dot_product_attention's one-pass path over copies of the
// same held keys (itself checked against PyTorch fixtures), the ring buffer's bookkeeping, f16
// storage, threads splitting the keys, and refused calls changing nothing. The PyTorch fixtures of
// kv_cache.json and gqa.json are checked in fixture_decoding_test.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "attention.h"
#include "fixtures.h"
#include "kernels/q8.h"
#include "kv_cache.h"
#include "parallel.h"

namespace {

using attn::CacheDtype;
using attn::KVCache;
using attn::KVCacheConfig;
using attn::Shape;

std::unique_ptr<KVCache> make_cache(KVCacheConfig config) {
  std::unique_ptr<KVCache> cache;
  REQUIRE(KVCache::create(config, &cache).ok());
  return cache;
}

// Appends t random positions; returns nothing, the cache holds them.
void append_random(KVCache& cache, int64_t t, uint32_t seed) {
  const KVCacheConfig& c = cache.config();
  const std::vector<float> key = fixtures::normal_floats(c.batch * c.heads * t * c.head_dim, seed);
  const std::vector<float> value = fixtures::normal_floats(c.batch * c.heads * t * c.value_dim, seed + 1);
  REQUIRE(cache.append({key.data(), {c.batch, c.heads, t, c.head_dim}},
                       {value.data(), {c.batch, c.heads, t, c.value_dim}}).ok());
}

// The query a q8 cache attends with: each row rounded through q8 (float scales).
std::vector<float> q8_rounded(const attn::TensorView& query) {
  const int64_t d = query.shape[3], rows = query.shape.numel() / d;
  std::vector<float> rounded(query.shape.numel());
  for (int64_t r = 0; r < rows; ++r) attn::kernels::round_q8(query.data + r * d, d, rounded.data() + r * d);
  return rounded;
}

// The cache's attend against SDPA over copies of its held keys and values (lower-right causal,
// grouped heads, the cache's window) through the materialising path, which takes every key in one
// pass: they must agree to float rounding. A q8 cache's SDPA is given the query rounded as the
// cache rounds it, on every path (the decode step's integer scores, the packed tiles).
void require_matches_sdpa(const KVCache& cache, const attn::TensorView& given_query,
                          const attn::CacheAttendOptions& options, bool weights) {
  const KVCacheConfig& c = cache.config();
  const std::vector<float> rounded = q8_rounded(given_query);
  const attn::TensorView query = c.dtype == CacheDtype::q8 ? attn::TensorView{rounded.data(), given_query.shape} : given_query;
  Shape output_shape, weights_shape;
  REQUIRE(cache.check_attend(query.shape, options, &output_shape, &weights_shape).ok());
  std::vector<float> keys(c.batch * c.heads * cache.length() * c.head_dim);
  std::vector<float> values(c.batch * c.heads * cache.length() * c.value_dim);
  cache.copy_keys(keys.data());
  cache.copy_values(values.data());
  const attn::SdpaOptions sdpa = cache.as_sdpa(options);
  std::vector<float> want(output_shape.numel()), got(output_shape.numel(), 99.0f);
  std::vector<float> got_weights(weights ? weights_shape.numel() : 0), want_weights(weights_shape.numel());
  REQUIRE(attn::scaled_dot_product_attention(query, {keys.data(), {c.batch, c.heads, cache.length(), c.head_dim}},
                                             {values.data(), {c.batch, c.heads, cache.length(), c.value_dim}}, sdpa,
                                             want.data(), want_weights.data())
              .ok());
  REQUIRE(cache.attend(given_query, options, got.data(), weights ? got_weights.data() : nullptr).ok());
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(2e-6));
  for (size_t i = 0; i < got_weights.size(); ++i) REQUIRE(got_weights[i] == Approx(want_weights[i]).margin(1e-7));
}

}  // namespace

TEST_CASE("attends over the cache equal SDPA over the keys it holds, with every option", "[kv_cache]") {
  const int thread_counts[] = {1, 3};
  // 1 and 2 queries read the rows in place (3 query heads a key/value head: 3 and 6 rows), 6 are
  // packed from them (18 rows). q8 rows of 5 (one short block), 64 (two blocks) and 40 (one and a
  // short one).
  for (const int threads : thread_counts)
    for (const CacheDtype dtype : {CacheDtype::f32, CacheDtype::f16, CacheDtype::q8})
      for (const int64_t head_dim : {5, 64, 40})
        for (const int64_t n : {1, 2, 6}) {
          INFO("threads " << threads << ", dtype " << static_cast<int>(dtype) << ", head_dim " << head_dim << ", n " << n);
          attn::set_thread_count(threads);
          KVCacheConfig config;
          config.batch = 2;
          config.heads = 2;
          config.head_dim = head_dim;
          config.value_dim = 7;
          config.max_length = 1400;
          config.dtype = dtype;
          auto cache = make_cache(config);
          // Long enough for key ranges split across threads (and several 128-key chunks each).
          append_random(*cache, 1300, 1);
          const std::vector<float> q = fixtures::normal_floats(2 * 6 * n * head_dim, 3);
          const attn::TensorView query{q.data(), {2, 6, n, head_dim}};
          attn::CacheAttendOptions options;
          require_matches_sdpa(*cache, query, options, false);
          options.softcap = 2.0f;
          options.alibi = true;
          require_matches_sdpa(*cache, query, options, false);
          options.window = 300;
          require_matches_sdpa(*cache, query, options, false);
          // A boolean mask over [batch, 1, 1, length] hiding every other key of batch 1, all of batch 0.
          std::vector<uint8_t> mask(2 * 1300, 0);
          for (int64_t j = 0; j < 1300; j += 2) mask[1300 + j] = 1;
          options.attn_mask = {attn::MaskType::boolean, mask.data(), {2, 1, 1, 1300}, false};
          require_matches_sdpa(*cache, query, options, false);
          std::vector<float> out(2 * 6 * n * 7, 5.0f);
          REQUIRE(cache->attend(query, options, out.data(), nullptr).ok());
          for (int64_t e = 0; e < 6 * n * 7; ++e) REQUIRE(out[e] == 0.0f);  // batch 0 sees no key
          options.causal = false;
          require_matches_sdpa(*cache, query, options, true);
        }
  attn::set_thread_count(1);
}

TEST_CASE("the ring buffer keeps the latest positions across wraps and growth", "[kv_cache]") {
  KVCacheConfig config;
  config.heads = 1;
  config.head_dim = 3;
  config.max_length = 2;
  config.window = 4;
  auto cache = make_cache(config);
  // Position p's key is (p, p, p): what the cache holds is readable from its keys.
  const auto append_positions = [&](int64_t first, int64_t t) {
    std::vector<float> key;
    for (int64_t p = first; p < first + t; ++p) key.insert(key.end(), 3, static_cast<float>(p));
    REQUIRE(cache->append({key.data(), {1, 1, t, 3}}, {key.data(), {1, 1, t, 3}}).ok());
  };
  const auto held = [&] {
    std::vector<float> keys(cache->length() * 3), first_lanes;
    cache->copy_keys(keys.data());
    for (size_t i = 0; i < keys.size(); i += 3) first_lanes.push_back(keys[i]);
    return first_lanes;
  };
  append_positions(0, 3);  // grows past max_length 2: a window has no length limit
  REQUIRE(held() == std::vector<float>{0, 1, 2});
  for (int64_t p = 3; p < 11; ++p) append_positions(p, 1);
  REQUIRE(held() == std::vector<float>{7, 8, 9, 10});
  REQUIRE(cache->position() == 11);
  append_positions(11, 0);  // nothing appended, nothing dropped
  REQUIRE(held() == std::vector<float>{7, 8, 9, 10});
  append_positions(11, 5);  // 5 new queries each see their window: 3 older keys stay
  REQUIRE(held() == std::vector<float>{8, 9, 10, 11, 12, 13, 14, 15});
  REQUIRE(cache->truncate(6).ok());  // rollback of 2
  REQUIRE(held() == std::vector<float>{8, 9, 10, 11, 12, 13});
  REQUIRE(cache->position() == 14);
  append_positions(14, 1);
  REQUIRE(held() == std::vector<float>{11, 12, 13, 14});
  cache->reset();
  REQUIRE(cache->length() == 0);
  REQUIRE(cache->position() == 0);
  append_positions(0, 2);
  REQUIRE(held() == std::vector<float>{0, 1});
}

TEST_CASE("an f16 cache holding Inf or NaN attends through exact widening", "[kv_cache][f16]") {
  KVCacheConfig config;
  config.heads = 1;
  config.head_dim = 4;
  config.max_length = 8;
  auto f32 = make_cache(config);
  config.dtype = CacheDtype::f16;
  auto f16 = make_cache(config);
  // An Inf given is held as Inf by both (a finite value past binary16's range is refused: below).
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> key = {0.5f, -1.0f, 0.25f, 2.0f, inf, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<float> value = {1.0f, 2.0f, 3.0f, 4.0f, 0.5f, 0.5f, 0.5f, 0.5f, -1.0f, 0.0f, 1.0f, 2.0f};
  REQUIRE(f16->append({key.data(), {1, 1, 3, 4}}, {value.data(), {1, 1, 3, 4}}).ok());
  REQUIRE(f32->append({key.data(), {1, 1, 3, 4}}, {value.data(), {1, 1, 3, 4}}).ok());
  for (const float q0 : {1.0f, -1.0f, 0.0f}) {  // scores +Inf, -Inf and NaN (0 · Inf) for key 1
    const std::vector<float> q = {q0, 0.5f, 0.5f, 0.5f};
    std::vector<float> from_f32(4), from_f16(4);
    REQUIRE(f32->attend({q.data(), {1, 1, 1, 4}}, {}, from_f32.data(), nullptr).ok());
    REQUIRE(f16->attend({q.data(), {1, 1, 1, 4}}, {}, from_f16.data(), nullptr).ok());
    for (int e = 0; e < 4; ++e) {
      INFO("q0 " << q0 << " lane " << e << ": " << from_f32[e] << " vs " << from_f16[e]);
      REQUIRE(std::isnan(from_f32[e]) == std::isnan(from_f16[e]));
      if (!std::isnan(from_f32[e])) REQUIRE(from_f16[e] == Approx(from_f32[e]).margin(1e-6));
    }
  }
}

namespace {

// A value the cache refuses: in the key or the value, its index there, the value, and where the
// error says it is.
struct Refusal {
  bool in_key;
  int64_t index;
  float x;
  const char* got;
};

// A ring of `dtype` (batch 2, heads 2, head dim 3, value dim 2, window 3) that has wrapped, position
// 4 next; then key [2, 2, 2, 3] and value [2, 2, 2, 2] with each refusal's value put in: each
// append is refused naming the argument, `expected` and where, and changes nothing. Then `key` and
// `value` as given append. Returns the cache, holding them.
std::unique_ptr<KVCache> require_refusals(CacheDtype dtype, const std::vector<float>& key, const std::vector<float>& value,
                                          std::initializer_list<Refusal> refusals, const std::string& expected) {
  KVCacheConfig config;
  config.batch = 2;
  config.heads = 2;
  config.head_dim = 3;
  config.value_dim = 2;
  config.max_length = 8;
  config.dtype = dtype;
  config.window = 3;
  auto cache = make_cache(config);
  append_random(*cache, 4, 21);
  const auto snapshot = [&] {
    std::vector<float> held(2 * 2 * cache->length() * 5);
    cache->copy_keys(held.data());
    cache->copy_values(held.data() + 2 * 2 * cache->length() * 3);
    return held;
  };
  const std::vector<float> before = snapshot();
  const int64_t length = cache->length();
  for (const Refusal& c : refusals) {
    std::vector<float> k = key, v = value;
    (c.in_key ? k : v)[c.index] = c.x;
    const attn::Status s = cache->append({k.data(), {2, 2, 2, 3}}, {v.data(), {2, 2, 2, 2}});
    REQUIRE(s.argument == (c.in_key ? "key" : "value"));
    REQUIRE(s.expected == expected);
    REQUIRE(s.got == c.got);
    REQUIRE(cache->length() == length);
    REQUIRE(cache->position() == 4);
    REQUIRE(snapshot() == before);
  }
  REQUIRE(cache->append({key.data(), {2, 2, 2, 3}}, {value.data(), {2, 2, 2, 2}}).ok());
  REQUIRE(cache->position() == 6);
  return cache;
}

// Key index ((b·2 + h)·2 + i)·3 + d and value index ((b·2 + h)·2 + i)·2 + d of require_refusals' appends.
constexpr int64_t key_index(int64_t b, int64_t h, int64_t i, int64_t d) { return ((b * 2 + h) * 2 + i) * 3 + d; }
constexpr int64_t value_index(int64_t b, int64_t h, int64_t i, int64_t d) { return ((b * 2 + h) * 2 + i) * 2 + d; }

}  // namespace

// Issue #35: 70000 was stored as Inf and every later attend returned NaN, without a word.
TEST_CASE("an f16 cache refuses a finite value past binary16's range, naming where it is", "[kv_cache][f16]") {
  // 65519 rounds to 65504 and is held; 65520 rounds to Inf. Inf and NaN as given stay what they are.
  std::vector<float> key(2 * 2 * 2 * 3, 0.5f), value(2 * 2 * 2 * 2, -0.25f);
  key[0] = 65519.0f;
  key[1] = std::numeric_limits<float>::infinity();
  value[3] = std::numeric_limits<float>::quiet_NaN();
  auto cache = require_refusals(CacheDtype::f16, key, value,
                                {{true, key_index(1, 0, 1, 2), 70000.0f, "70000 at batch 1, head 0, position 5, dim 2"},
                                 {true, key_index(0, 1, 0, 1), -65520.0f, "-65520 at batch 0, head 1, position 4, dim 1"},
                                 {false, value_index(1, 1, 1, 0), 1e30f, "1e+30 at batch 1, head 1, position 5, dim 0"}},
                                "values within binary16's range, |x| < 65520 (this cache of dtype 'f16' would store the "
                                "value as ±Infinity; a cache of dtype 'f32' holds it)");
  std::vector<float> held(2 * 2 * cache->length() * 3);
  cache->copy_keys(held.data());
  const int64_t position_4 = (cache->length() - 2) * 3;  // batch 0, head 0: position 4 is the second latest
  REQUIRE(held[position_4] == 65504.0f);
  REQUIRE(std::isinf(held[position_4 + 1]));
}

// A q8 block shares one binary16 scale, max |x| / 127: Inf or NaN would spoil the block's other
// values, and |x| ≥ 127 · 65520 would make the scale Inf.
TEST_CASE("a q8 cache refuses what its block scales cannot hold, naming where it is", "[kv_cache][q8]") {
  std::vector<float> key(2 * 2 * 2 * 3, 0.5f), value(2 * 2 * 2 * 2, -0.25f);
  key[0] = 8321039.0f;  // the largest magnitude whose scale binary16 holds (65504, rounded)
  auto cache = require_refusals(
      CacheDtype::q8, key, value,
      {{true, key_index(1, 0, 1, 2), 8321040.0f, "8321040 at batch 1, head 0, position 5, dim 2"},
       {true, key_index(0, 1, 0, 1), -std::numeric_limits<float>::infinity(), "-Infinity at batch 0, head 1, position 4, dim 1"},
       {false, value_index(1, 1, 1, 0), std::numeric_limits<float>::quiet_NaN(), "NaN at batch 1, head 1, position 5, dim 0"}},
      "finite values, |x| < 8321040 (127 · 65520: this cache of dtype 'q8' stores each block of 32 with the scale "
      "max |x| / 127 as binary16; a cache of dtype 'f32' holds any value)");
  // 8321039 is held as 127 · 65504 and its block's 0.5 as 0 (0.5 / 65504 rounds to 0); a block of
  // 0.5s exactly (scale 0.5 / 127, q = 127).
  std::vector<float> held(2 * 2 * cache->length() * 3);
  cache->copy_keys(held.data());
  const int64_t position_4 = (cache->length() - 2) * 3;
  REQUIRE(held[position_4] == 127.0f * 65504.0f);
  REQUIRE(held[position_4 + 1] == 0.0f);
  REQUIRE(held[position_4 + 3] == 127.0f * attn::from_half(attn::to_half(0.5f / 127.0f)));
}

// Issue #35: a truncate() of a ring that had wrapped was accepted, and the next step saw fewer keys
// than a cache given the same positions afresh (0.23 apart). Every wrap offset and every length:
// a truncate either gives exactly the fresh cache's next step or is refused, changing nothing.
TEST_CASE("truncating a wrapped ring equals a fresh cache, or is refused naming the window", "[kv_cache]") {
  constexpr int64_t W = 4;
  KVCacheConfig config;
  config.heads = 2;
  config.head_dim = 3;
  config.value_dim = 2;
  config.max_length = 2;
  config.window = W;
  // Position p's key and value depend on p alone (`variant` gives a replacement token instead).
  const auto append_positions = [&](KVCache& cache, int64_t first, int64_t t, uint32_t variant = 0) {
    std::vector<float> key, value;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t p = first; p < first + t; ++p) {
        const std::vector<float> k = fixtures::normal_floats(3, static_cast<uint32_t>(1000 * variant + 10 * p + h));
        const std::vector<float> v = fixtures::normal_floats(2, static_cast<uint32_t>(1000 * variant + 10 * p + h + 5));
        key.insert(key.end(), k.begin(), k.end());
        value.insert(value.end(), v.begin(), v.end());
      }
    REQUIRE(cache.append({key.data(), {1, 2, t, 3}}, {value.data(), {1, 2, t, 2}}).ok());
  };
  const auto step = [&](KVCache& cache, int64_t t) {  // t replacement tokens, their attends with weights
    append_positions(cache, cache.position(), t, 7);
    const std::vector<float> q = fixtures::normal_floats(1 * 4 * t * 3, 99);
    std::vector<float> out(4 * t * 2), weights(4 * t * cache.length());
    REQUIRE(cache.attend({q.data(), {1, 4, t, 3}}, {}, out.data(), weights.data()).ok());
    out.insert(out.end(), weights.begin(), weights.end());
    return out;
  };
  int refused = 0, exact = 0;
  for (const CacheDtype dtype : {CacheDtype::f32, CacheDtype::f16, CacheDtype::q8})
    for (const int64_t prefill : {int64_t{1}, int64_t{2}, W, W + 2})
      for (int64_t total = prefill; total <= prefill + 2 * W + 1; ++total) {
        config.dtype = dtype;
        // The ring's state: a prefill, then single steps (each offset of its start comes round).
        const auto replay = [&] {
          auto cache = make_cache(config);
          append_positions(*cache, 0, prefill);
          for (int64_t p = prefill; p < total; ++p) append_positions(*cache, p, 1);
          return cache;
        };
        const int64_t held = replay()->length(), dropped = total - held;
        for (int64_t length = 0; length <= held; ++length)
          for (const int64_t t : {int64_t{1}, int64_t{2}}) {
            INFO("dtype " << static_cast<int>(dtype) << ", prefill " << prefill << ", total " << total << ", held " << held
                        << ", truncate to " << length << ", next t " << t);
            auto cache = replay();
            const attn::Status s = cache->truncate(length);
            if (dropped > 0 && length < W - 1) {
              REQUIRE(s.argument == "length");
              REQUIRE(s.got == std::to_string(length));
              REQUIRE(s.expected == "an integer in [3, " + std::to_string(held) + "] (window 4: the ring no longer holds the positions before " +
                                        std::to_string(dropped) + ", and the next position must still see the 3 before it; to roll back further, reset() and append again)");
              REQUIRE(cache->length() == held);
              REQUIRE(cache->position() == total);
              auto untouched = replay();
              REQUIRE(step(*cache, t) == step(*untouched, t));
              ++refused;
              continue;
            }
            REQUIRE(s.ok());
            const int64_t next = dropped + length;
            REQUIRE(cache->position() == next);
            auto fresh = make_cache(config);
            for (int64_t p = 0; p < next; ++p) append_positions(*fresh, p, 1);
            const std::vector<float> got = step(*cache, t), want = step(*fresh, t);
            REQUIRE(cache->length() == fresh->length());
            REQUIRE(got.size() == want.size());
            for (size_t e = 0; e < want.size(); ++e) REQUIRE(got[e] == Approx(want[e]).margin(1e-6));
            ++exact;
          }
      }
  REQUIRE(refused > 0);
  REQUIRE(exact > 0);
}

TEST_CASE("refused cache calls name the argument and change nothing", "[kv_cache]") {
  KVCacheConfig config;
  config.heads = 2;
  config.head_dim = 4;
  config.max_length = 5;
  auto cache = make_cache(config);
  append_random(*cache, 4, 7);
  std::vector<float> before(2 * 4 * 4), after(before.size());
  cache->copy_keys(before.data());
  const std::vector<float> two(2 * 2 * 4);
  attn::Status s = cache->append({two.data(), {1, 2, 2, 4}}, {two.data(), {1, 2, 2, 4}});
  REQUIRE(s.argument == "key");
  REQUIRE(s.expected ==
          "[1, 2, t ≤ 1, 4] (maxLength 5, 4 held; to hold more, truncate() or reset() the cache, or create it with a "
          "larger maxLength)");
  s = cache->append({two.data(), {1, 2, 1, 4}}, {two.data(), {1, 2, 1, 3}});
  REQUIRE(s.argument == "value");
  REQUIRE(cache->truncate(5).argument == "length");
  REQUIRE(cache->length() == 4);
  cache->copy_keys(after.data());
  REQUIRE(after == before);
  Shape output, weights;
  const std::vector<float> q(1 * 3 * 5 * 4);
  REQUIRE(cache->check_attend({1, 3, 1, 4}, {}, &output, &weights).argument == "query");  // 3 heads over 2
  REQUIRE(cache->check_attend({1, 4, 5, 4}, {}, &output, &weights).expected ==
          "[1, Hq (a multiple of 2), n ≤ 4 (the positions held), 4]");
  KVCacheConfig windowed = config;
  windowed.window = 3;
  auto ring = make_cache(windowed);
  append_random(*ring, 2, 9);
  attn::CacheAttendOptions wide;
  wide.window = 4;
  REQUIRE(ring->check_attend({1, 2, 1, 4}, wide, &output, &weights).argument == "window");
  std::unique_ptr<KVCache> none;
  config.heads = 0;
  REQUIRE(KVCache::create(config, &none).argument == "heads");
  REQUIRE(none == nullptr);
}

// Fuzzer finding: without the causal rule the prefill path placed the queries at positions 0 … n-1
// for window and ALiBi, the decode path at the latest n. Both must take the latest n.
TEST_CASE("attends without the causal rule place the queries at the latest positions (window, ALiBi)", "[kv_cache]") {
  KVCacheConfig config;
  config.heads = 1;
  config.head_dim = 1;
  config.max_length = 3;
  auto cache = make_cache(config);
  const std::vector<float> keys = {1.0f, 2.0f, 3.0f}, values = {10.0f, 20.0f, 30.0f};
  REQUIRE(cache->append({keys.data(), {1, 1, 3, 1}}, {values.data(), {1, 1, 3, 1}}).ok());
  const std::vector<float> q = {0.5f};
  attn::CacheAttendOptions options;
  options.causal = false;
  options.window = 1;  // the query at position 2 sees key 2 alone
  std::vector<float> decoded(1), weights(3), prefilled(1);
  REQUIRE(cache->attend({q.data(), {1, 1, 1, 1}}, options, decoded.data(), nullptr).ok());
  REQUIRE(cache->attend({q.data(), {1, 1, 1, 1}}, options, prefilled.data(), weights.data()).ok());
  REQUIRE(decoded[0] == 30.0f);
  REQUIRE(prefilled[0] == 30.0f);
  REQUIRE(weights == std::vector<float>{0.0f, 0.0f, 1.0f});
  // ALiBi's distances j - p run from -2 to 0 for the latest position: key 0 is the most penalised.
  options.window.reset();
  options.alibi = true;
  const std::vector<float> slope = {8.0f};
  options.alibi_slopes = slope.data();
  options.alibi_slope_count = 1;
  REQUIRE(cache->attend({q.data(), {1, 1, 1, 1}}, options, prefilled.data(), weights.data()).ok());
  REQUIRE(cache->attend({q.data(), {1, 1, 1, 1}}, options, decoded.data(), nullptr).ok());
  // scores 0.5·k + 8·(j − 2): -15.5, -7, 1.5
  const double e0 = std::exp(-17.0), e1 = std::exp(-8.5), total = e0 + e1 + 1.0;
  REQUIRE(weights[0] == Approx(e0 / total).epsilon(1e-5));
  REQUIRE(weights[2] == Approx(1.0 / total).epsilon(1e-6));
  REQUIRE(decoded[0] == Approx((10 * e0 + 20 * e1 + 30) / total).epsilon(1e-6));
  REQUIRE(prefilled[0] == Approx(decoded[0]).epsilon(1e-6));
}

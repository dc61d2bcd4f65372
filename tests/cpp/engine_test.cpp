// The attention engine reading its operands where they lie: a ring's two runs split at every
// offset, binary16 rows, and split-K partials merged across threads, each against the same keys
// and values as contiguous floats through the materialising path (every key in one pass).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "attend.h"
#include "fixtures.h"
#include "half.h"
#include "parallel.h"

namespace {

using attn::AttentionBlocks;
using attn::BlockLayout;
using attn::RowOperand;

// Query [1, Hq, n, d] against key/value blocks of `m` rows each ([1, Hkv, m, d] and [..., dv]).
struct Problem {
  int64_t query_heads, kv_heads, n, m, d, dv;
  attn::SdpaOptions options;

  Problem(int64_t query_heads_, int64_t kv_heads_, int64_t n_, int64_t m_, int64_t d_, int64_t dv_)
      : query_heads(query_heads_), kv_heads(kv_heads_), n(n_), m(m_), d(d_), dv(dv_) {
    options.enable_gqa = true;
    options.causal = attn::Causal::lower_right;
  }
};

struct Result {
  std::vector<float> output, weights;
};

// Runs `problem` with the key and value operands `place` sets, with weights when `weights`.
template <class Place>
Result run(const Problem& problem, const std::vector<float>& query, bool weights, Place place) {
  attn::SdpaPlan plan;
  REQUIRE(plan.prepare({query.data(), {1, problem.query_heads, problem.n, problem.d}},
                       {1, problem.kv_heads, problem.m, problem.d}, {1, problem.kv_heads, problem.m, problem.dv},
                       problem.options)
              .ok());
  place(plan.blocks);
  Result result{std::vector<float>(problem.query_heads * problem.n * problem.dv, 99.0f),
                std::vector<float>(weights ? problem.query_heads * problem.n * problem.m : 0)};
  REQUIRE(attn::attend(plan.blocks, result.output.data(), weights ? result.weights.data() : nullptr).ok());
  return result;
}

// Contiguous float keys [Hkv, m, d] and values [Hkv, m, dv], through the materialising path.
Result one_pass(const Problem& problem, const std::vector<float>& query, const std::vector<float>& keys,
                const std::vector<float>& values) {
  return run(problem, query, true, [&](AttentionBlocks& blocks) {
    blocks.key = {keys.data(), nullptr, BlockLayout::contiguous(problem.m, problem.d)};
    blocks.value = {values.data(), nullptr, BlockLayout::contiguous(problem.m, problem.dv)};
  });
}

void require_close(const std::vector<float>& got, const std::vector<float>& want, double margin) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(margin));
  }
}

// rows [blocks, m, width] moved into a ring of `capacity` slots a block, row j at slot
// (start + j) % capacity; the other slots hold garbage that must never be read.
template <class T>
std::vector<T> as_ring(const std::vector<float>& rows, int64_t blocks, int64_t m, int64_t width, int64_t capacity,
                       int64_t start, T (*convert)(float)) {
  std::vector<T> ring(blocks * capacity * width, convert(1e30f));
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t e = 0; e < width; ++e)
        ring[(b * capacity + (start + j) % capacity) * width + e] = convert(rows[(b * m + j) * width + e]);
  return ring;
}

float same(float x) { return x; }
float round_to_half(float x) { return attn::from_half(attn::to_half(x)); }

}  // namespace

TEST_CASE("the engine reads a ring's two runs at every split, as floats and as binary16", "[engine]") {
  // 4 query heads over 2: one query reads in place (4 rows a key/value block), 9 are packed from
  // the ring (36 rows), and weights take the materialising path from it.
  for (const int64_t n : {1, 9})
    for (const bool weights : {false, true})
      for (const bool f16 : {false, true}) {
        Problem problem(4, 2, n, 150, 12, 5);
        problem.options.window = 140;
        const int64_t capacity = 160;
        const std::vector<float> query = fixtures::normal_floats(4 * n * 12, 1);
        std::vector<float> keys = fixtures::normal_floats(2 * 150 * 12, 2), values = fixtures::normal_floats(2 * 150 * 5, 3);
        if (f16)
          for (std::vector<float>* rows : {&keys, &values})
            for (float& x : *rows) x = round_to_half(x);
        const Result want = one_pass(problem, query, keys, values);
        for (int64_t start = 0; start < capacity; ++start) {
          INFO("n " << n << ", weights " << weights << ", f16 " << f16 << ", ring start " << start);
          BlockLayout key_layout{1, capacity * 12, 0, 12, capacity, start};
          BlockLayout value_layout{1, capacity * 5, 0, 5, capacity, start};
          Result got;
          if (f16) {
            const auto key_ring = as_ring<uint16_t>(keys, 2, 150, 12, capacity, start, attn::to_half);
            const auto value_ring = as_ring<uint16_t>(values, 2, 150, 5, capacity, start, attn::to_half);
            got = run(problem, query, weights, [&](AttentionBlocks& blocks) {
              blocks.key = {nullptr, key_ring.data(), key_layout};
              blocks.value = {nullptr, value_ring.data(), value_layout};
            });
          } else {
            const auto key_ring = as_ring<float>(keys, 2, 150, 12, capacity, start, same);
            const auto value_ring = as_ring<float>(values, 2, 150, 5, capacity, start, same);
            got = run(problem, query, weights, [&](AttentionBlocks& blocks) {
              blocks.key = {key_ring.data(), nullptr, key_layout};
              blocks.value = {value_ring.data(), nullptr, value_layout};
            });
          }
          require_close(got.output, want.output, 2e-6);
          if (weights) require_close(got.weights, want.weights, 1e-7);
        }
      }
}

TEST_CASE("binary16 rows holding Inf or NaN are widened exactly, not in registers", "[engine][f16]") {
  Problem problem(2, 1, 1, 3, 4, 4);
  problem.options.causal = attn::Causal::none;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> keys = {0.5f, -1.0f, 0.25f, 2.0f, inf, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<float> values = {1.0f, 2.0f, 3.0f, 4.0f, 0.5f, 0.5f, 0.5f, 0.5f, -1.0f, 0.0f, 1.0f, 2.0f};
  std::vector<uint16_t> key_bits, value_bits;
  for (const float x : keys) key_bits.push_back(attn::to_half(x));
  for (const float x : values) value_bits.push_back(attn::to_half(x));
  // Query 0 scores key 1 at -Inf (weight 0, a finite output); query 1 at NaN (0 · Inf), which
  // propagates as in PyTorch. Widened in registers, Inf would read as a finite number.
  const std::vector<float> query = {-1.0f, 0.5f, 0.5f, 0.5f, 0.0f, 0.5f, 0.5f, 0.5f};
  const Result want = one_pass(problem, query, keys, values);
  const Result got = run(problem, query, false, [&](AttentionBlocks& blocks) {
    blocks.key = {nullptr, key_bits.data(), BlockLayout::contiguous(3, 4), /*finite=*/false};
    blocks.value = {nullptr, value_bits.data(), BlockLayout::contiguous(3, 4), /*finite=*/false};
  });
  for (int64_t e = 0; e < 8; ++e) {
    INFO("element " << e);
    REQUIRE(std::isnan(want.output[e]) == (e >= 4));
    REQUIRE(std::isnan(got.output[e]) == (e >= 4));
    if (e < 4) REQUIRE(got.output[e] == Approx(want.output[e]).margin(1e-6));
  }
}

TEST_CASE("split-K partials across threads merge to the one-pass result", "[engine][threads]") {
  // 8 query heads over one key/value head: 8 rows in place; 4000 keys give up to 7 splits of at
  // least 512. A mask hides the first 2500 keys from query head 0 (its early splits see nothing)
  // and every key from head 1 (zeros).
  Problem problem(8, 1, 1, 4000, 16, 8);
  problem.options.causal = attn::Causal::none;
  std::vector<uint8_t> mask(8 * 4000, 1);
  std::fill(mask.begin(), mask.begin() + 2500, 0);
  std::fill(mask.begin() + 4000, mask.begin() + 8000, 0);
  problem.options.attn_mask = {attn::MaskType::boolean, mask.data(), {1, 8, 1, 4000}, false};
  const std::vector<float> query = fixtures::normal_floats(8 * 16, 4);
  const std::vector<float> keys = fixtures::normal_floats(4000 * 16, 5), values = fixtures::normal_floats(4000 * 8, 6);
  const Result want = one_pass(problem, query, keys, values);
  for (const int threads : {1, 2, 3, 4}) {
    INFO("threads " << attn::set_thread_count(threads));
    for (const bool softcap : {false, true}) {
      problem.options.softcap = softcap ? std::optional<float>(3.0f) : std::nullopt;
      const Result reference = softcap ? one_pass(problem, query, keys, values) : want;
      const Result got = run(problem, query, false, [&](AttentionBlocks& blocks) {
        blocks.key = {keys.data(), nullptr, BlockLayout::contiguous(4000, 16)};
        blocks.value = {values.data(), nullptr, BlockLayout::contiguous(4000, 8)};
      });
      require_close(got.output, reference.output, 2e-6);
      for (int64_t e = 8; e < 16; ++e) REQUIRE(got.output[e] == 0.0f);
    }
  }
  attn::set_thread_count(1);
}

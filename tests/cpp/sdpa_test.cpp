// scaled_dot_product_attention against the PyTorch fixtures, on both paths, plus what fixtures
// cannot pin down: dropout draws, validation, NaN propagation.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention.h"
#include "fixtures.h"
#include "parallel.h"

namespace {

constexpr double kTolerance = 2e-5;

struct Result {
  attn::Status status;
  std::vector<float> output, weights;
};

Result run(const attn::TensorView& q, const attn::TensorView& k, const attn::TensorView& v,
           const attn::SdpaOptions& options, bool need_weights) {
  Result r;
  const int64_t rows = q.shape.leading_numel(1);
  r.output.assign(rows * v.shape.at_end(1), -1.0f);
  if (need_weights) r.weights.assign(rows * k.shape.at_end(2), -1.0f);
  r.status = attn::scaled_dot_product_attention(q, k, v, options, r.output.data(),
                                                need_weights ? r.weights.data() : nullptr);
  return r;
}

fixtures::Tensor random_tensor(attn::Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  fixtures::Tensor t{shape, std::vector<float>(shape.numel())};
  for (float& x : t.data) x = dist(rng);
  return t;
}

}  // namespace

TEST_CASE("SDPA matches PyTorch on every fixture, on both paths", "[sdpa]") {
  const auto cases = fixtures::load_sdpa_cases();
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO(c.name);
    const attn::SdpaOptions options = c.options();
    const Result with_weights = run(c.query.view(), c.key.view(), c.value.view(), options, true);
    REQUIRE(with_weights.status.message() == "");
    CHECK(fixtures::max_relative_error(with_weights.output, c.output.data) <= kTolerance);
    CHECK(fixtures::max_relative_error(with_weights.weights, c.weights.data) <= kTolerance);

    const Result streaming = run(c.query.view(), c.key.view(), c.value.view(), options, false);
    REQUIRE(streaming.status.message() == "");
    CHECK(fixtures::max_relative_error(streaming.output, c.output.data) <= kTolerance);
  }
}

TEST_CASE("the streaming path matches the weights path across key tiles and causal skipping", "[sdpa]") {
  // n and m span several 32-query and 128-key tiles, with ragged ends.
  const auto q = random_tensor({2, 70, 24}, 1), k = random_tensor({2, 300, 24}, 2), v = random_tensor({2, 300, 9}, 3);
  std::vector<uint8_t> keep(70 * 300);
  std::mt19937 rng(4);
  for (auto& b : keep) b = rng() % 5 != 0;
  for (int i = 0; i < 300; ++i) keep[5 * 300 + i] = 0;  // a query that sees nothing
  for (bool causal : {false, true})
    for (bool masked : {false, true}) {
      INFO("causal=" << causal << " masked=" << masked);
      attn::SdpaOptions options;
      options.causal = causal ? attn::Causal::upper_left : attn::Causal::none;
      if (masked) options.attn_mask = {attn::MaskType::boolean, keep.data(), {70, 300}, false};
      const Result a = run(q.view(), k.view(), v.view(), options, true);
      const Result b = run(q.view(), k.view(), v.view(), options, false);
      REQUIRE(a.status.ok());
      REQUIRE(b.status.ok());
      CHECK(fixtures::max_relative_error(b.output, a.output) <= 1e-6);
      if (masked)
        for (int c = 0; c < 9; ++c) CHECK(b.output[5 * 9 + c] == 0.0f);
    }
}

TEST_CASE("position rules and documents hide exactly what the same rules as a boolean mask hide", "[sdpa]") {
  // The rules skip key tiles and cut rows to ranges; the mask goes through fill_bias key by key.
  // Sizes straddle the 32-query and 128-key tiles; ids make documents that split both.
  const int64_t B = 2;
  for (auto [n, m] : {std::pair<int64_t, int64_t>{70, 300}, {300, 300}, {33, 129}, {129, 33}, {1, 257}})
    for (attn::Causal causal : {attn::Causal::none, attn::Causal::upper_left, attn::Causal::lower_right})
      for (int64_t window : {0, 1, 7, 100, 200})
        for (bool documents : {false, true}) {
          INFO("n=" << n << " m=" << m << " causal=" << int(causal) << " window=" << window << " docs=" << documents);
          const auto q = random_tensor({B, n, 16}, 31), k = random_tensor({B, m, 16}, 32), v = random_tensor({B, m, 5}, 33);
          // Batch 0: sorted documents of odd lengths; batch 1: ids alternating in runs of 3 (unsorted).
          std::vector<int32_t> query_ids(B * n), key_ids(B * m);
          for (int64_t i = 0; i < n; ++i) query_ids[i] = static_cast<int32_t>(i * 4 / std::max<int64_t>(n, 1)), query_ids[n + i] = (i / 3) % 2;
          for (int64_t j = 0; j < m; ++j) key_ids[j] = static_cast<int32_t>(j * 4 / std::max<int64_t>(m, 1)), key_ids[m + j] = (j / 3) % 2;
          attn::SdpaOptions rules;
          rules.causal = causal;
          if (window) rules.window = window;
          if (documents) {
            rules.query_document_ids = {query_ids.data(), {B, n}};
            rules.key_document_ids = {key_ids.data(), {B, m}};
          }
          std::vector<uint8_t> keep(B * n * m);
          const int64_t offset = causal == attn::Causal::lower_right ? m - n : 0;
          for (int64_t b = 0; b < B; ++b)
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < m; ++j) {
                const int64_t p = i + offset;
                bool visible = causal == attn::Causal::none || j <= p;
                visible = visible && (window == 0 || std::abs(p - j) < window);
                visible = visible && (!documents || query_ids[b * n + i] == key_ids[b * m + j]);
                keep[(b * n + i) * m + j] = visible;
              }
          attn::SdpaOptions as_mask;
          as_mask.attn_mask = {attn::MaskType::boolean, keep.data(), {B, n, m}, false};
          for (bool need_weights : {true, false}) {
            const Result got = run(q.view(), k.view(), v.view(), rules, need_weights);
            const Result want = run(q.view(), k.view(), v.view(), as_mask, need_weights);
            REQUIRE(got.status.ok());
            CHECK(fixtures::max_relative_error(got.output, want.output) <= 1e-6);
            CHECK(fixtures::max_relative_error(got.weights, want.weights) <= 1e-6);
          }
        }
}

TEST_CASE("grouped heads equal their key/value heads repeated, bit for bit", "[sdpa]") {
  // Hq = 6 query heads over Hkv = 2 (groups of 3), m across two key tiles.
  const auto q = random_tensor({2, 6, 40, 8}, 41), k = random_tensor({2, 2, 150, 8}, 42),
             v = random_tensor({2, 2, 150, 4}, 43);
  fixtures::Tensor k_repeated{{2, 6, 150, 8}, {}}, v_repeated{{2, 6, 150, 4}, {}};
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 6; ++h) {  // torch's repeat_interleave on dim -3: head h reads h / 3
      const int64_t source = b * 2 + h / 3;
      k_repeated.data.insert(k_repeated.data.end(), k.data.begin() + source * 150 * 8, k.data.begin() + (source + 1) * 150 * 8);
      v_repeated.data.insert(v_repeated.data.end(), v.data.begin() + source * 150 * 4, v.data.begin() + (source + 1) * 150 * 4);
    }
  attn::SdpaOptions grouped;
  grouped.enable_gqa = true;
  grouped.causal = attn::Causal::lower_right;
  attn::SdpaOptions repeated;
  repeated.causal = attn::Causal::lower_right;
  for (bool need_weights : {true, false}) {
    const Result got = run(q.view(), k.view(), v.view(), grouped, need_weights);
    const Result want = run(q.view(), k_repeated.view(), v_repeated.view(), repeated, need_weights);
    REQUIRE(got.status.ok());
    CHECK(got.output == want.output);
    CHECK(got.weights == want.weights);
  }
}

TEST_CASE("ALiBi equals its bias given as an additive mask, with Press et al.'s slopes", "[sdpa]") {
  // H = 6 is not a power of two: slopes of 4 heads, then of 8 heads at even indices.
  std::vector<float> slopes(6);
  attn::alibi_slopes(6, slopes.data());
  const std::vector<double> press = {std::pow(2.0, -2.0), std::pow(2.0, -4.0), std::pow(2.0, -6.0),
                                     std::pow(2.0, -8.0), std::pow(2.0, -1.0), std::pow(2.0, -3.0)};
  for (int h = 0; h < 6; ++h) CHECK(slopes[h] == static_cast<float>(press[h]));
  const int64_t n = 40, m = 170;
  const auto q = random_tensor({1, 6, n, 8}, 51), k = random_tensor({1, 6, m, 8}, 52), v = random_tensor({1, 6, m, 8}, 53);
  attn::SdpaOptions alibi;
  alibi.alibi = true;
  alibi.causal = attn::Causal::lower_right;
  std::vector<float> bias(6 * n * m);
  for (int64_t h = 0; h < 6; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) bias[(h * n + i) * m + j] = static_cast<float>(press[h] * double(j - (i + m - n)));
  attn::SdpaOptions as_mask;
  as_mask.causal = attn::Causal::lower_right;
  as_mask.attn_mask = {attn::MaskType::additive, bias.data(), {6, n, m}, false};
  for (bool need_weights : {true, false}) {
    const Result got = run(q.view(), k.view(), v.view(), alibi, need_weights);
    const Result want = run(q.view(), k.view(), v.view(), as_mask, need_weights);
    REQUIRE(got.status.ok());
    CHECK(fixtures::max_relative_error(got.output, want.output) <= 1e-5);
    CHECK(fixtures::max_relative_error(got.weights, want.weights) <= 1e-5);
  }
}

TEST_CASE("RoPE refuses bad options, naming them", "[rope][errors]") {
  attn::RopeOptions odd;
  odd.rotary_dim = 3;
  CHECK(attn::check_rope({2, 4, 8}, odd).message() == "rotaryDim: expected an even integer in [0, 8] (the head dim d), got 3");
  CHECK(attn::check_rope({2, 4, 7}, {}).message() ==
        "x: expected an even last dimension d, or rotaryDim (even, at most d), got [2, 4, 7]");
  const int32_t positions[3] = {0, 1, 2};
  attn::RopeOptions wrong_length;
  wrong_length.positions = {positions, {3}};
  CHECK(attn::check_rope({2, 4, 8}, wrong_length).message() ==
        "positions: expected [4] (L, one per row of x) or [2, 4] (N, L), got [3]");
  attn::RopeOptions wrong_rows;
  wrong_rows.positions = {positions, {3, 1}};
  CHECK(attn::check_rope({2, 1, 8}, wrong_rows).message() ==
        "positions: expected [1] (L, one per row of x) or [2, 1] (N, L), got [3, 1]");
  attn::RopeOptions bad_base;
  bad_base.base = 0;
  CHECK(attn::check_rope({4, 8}, bad_base).argument == "base");
  CHECK(attn::check_rope({8}, {}).argument == "x");
}

TEST_CASE("dropout is seeded, identical on both paths, and scales survivors by 1/(1-p)", "[sdpa]") {
  const auto q = random_tensor({3, 40, 8}, 5), k = random_tensor({3, 200, 8}, 6), v = random_tensor({3, 200, 8}, 7);
  attn::SdpaOptions plain;
  attn::SdpaOptions dropped;
  dropped.dropout_p = 0.25f;
  dropped.seed = 1234;
  const Result reference = run(q.view(), k.view(), v.view(), plain, true);
  const Result a = run(q.view(), k.view(), v.view(), dropped, true);
  const Result again = run(q.view(), k.view(), v.view(), dropped, true);
  const Result streaming = run(q.view(), k.view(), v.view(), dropped, false);
  REQUIRE(a.weights == again.weights);
  CHECK(fixtures::max_relative_error(streaming.output, a.output) <= 1e-6);

  size_t zeros = 0;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    if (a.weights[i] == 0.0f) {
      ++zeros;
    } else {
      REQUIRE(std::fabs(a.weights[i] - reference.weights[i] / 0.75f) <= 1e-6f);
    }
  }
  const double fraction = double(zeros) / a.weights.size();
  CHECK(fraction > 0.23);
  CHECK(fraction < 0.27);

  dropped.seed = 1235;
  const Result other_seed = run(q.view(), k.view(), v.view(), dropped, true);
  CHECK(other_seed.weights != a.weights);
}

TEST_CASE("invalid shapes and options name the argument and both shapes", "[sdpa][errors]") {
  const auto q = random_tensor({2, 3, 4}, 8), k = random_tensor({2, 5, 4}, 9), v = random_tensor({2, 5, 6}, 10);
  const auto check = [&](attn::Shape qs, attn::Shape ks, attn::Shape vs, attn::SdpaOptions o) {
    return attn::check_scaled_dot_product_attention(qs, ks, vs, o);
  };
  CHECK(check({4}, {5, 4}, {5, 6}, {}).message() == "query: expected rank 2 to 8 ([..., n, d]), got [4]");
  CHECK(check({2, 3, 4}, {2, 5, 3}, {2, 5, 6}, {}).message() == "key: expected [2, m, 4], got [2, 5, 3]");
  CHECK(check({2, 3, 4}, {3, 5, 4}, {2, 5, 6}, {}).message() == "key: expected [2, m, 4], got [3, 5, 4]");
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 4, 6}, {}).message() == "value: expected [2, 5, dv], got [2, 4, 6]");
  CHECK(check({2, 3, 4}, {2, -5, 4}, {2, 5, 6}, {}).argument == "key");

  std::vector<uint8_t> mask(15, 1);
  attn::SdpaOptions o;
  o.attn_mask = {attn::MaskType::boolean, mask.data(), {3, 4}, false};
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, o).message() ==
        "attnMask: expected a shape broadcastable to [2, 3, 5], got [3, 4]");
  o.attn_mask.shape = {1, 2, 3, 5};
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, o).argument == "attnMask");
  o.attn_mask.shape = {3, 5};
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, o).ok());
  o.attn_mask.data = nullptr;  // the shape check reads no data: bindings run it before copying
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, o).ok());

  attn::SdpaOptions bad_scale;
  bad_scale.scale = std::numeric_limits<float>::infinity();
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, bad_scale).argument == "scale");
  attn::SdpaOptions bad_dropout;
  bad_dropout.dropout_p = 1.0f;
  CHECK(check({2, 3, 4}, {2, 5, 4}, {2, 5, 6}, bad_dropout).argument == "dropoutP");

  // The operator itself refuses what check() refuses, and null data.
  std::vector<float> out(2 * 3 * 6);
  CHECK(attn::scaled_dot_product_attention(q.view(), {k.data.data(), {2, 5, 3}}, v.view(), {}, out.data(), nullptr)
            .argument == "key");
  CHECK(attn::scaled_dot_product_attention(q.view(), {nullptr, k.shape}, v.view(), {}, out.data(), nullptr).argument ==
        "key");
}

TEST_CASE("invalid v2 options name the argument, the expected and the given", "[sdpa][errors]") {
  const auto check = [](attn::Shape qs, attn::Shape ks, attn::Shape vs, attn::SdpaOptions o) {
    return attn::check_scaled_dot_product_attention(qs, ks, vs, o).message();
  };
  attn::SdpaOptions gqa;
  CHECK(check({1, 8, 4, 16}, {1, 2, 10, 16}, {1, 2, 10, 16}, gqa) ==
        "key: expected [1, 8, m, 16] (or enableGqa: true), got [1, 2, 10, 16]");
  gqa.enable_gqa = true;
  CHECK(check({1, 8, 4, 16}, {1, 2, 10, 16}, {1, 2, 10, 16}, gqa).empty());
  CHECK(check({1, 8, 4, 16}, {1, 3, 10, 16}, {1, 3, 10, 16}, gqa) ==
        "key: expected [1, Hkv, m, 16] with Hkv dividing the query's 8 heads, got [1, 3, 10, 16]");
  CHECK(check({1, 8, 4, 16}, {1, 2, 10, 16}, {1, 4, 10, 16}, gqa) == "value: expected [1, 2, 10, dv], got [1, 4, 10, 16]");
  CHECK(check({4, 16}, {10, 16}, {10, 16}, gqa) == "enableGqa: expected a query of rank 3 or more ([..., Hq, n, d]), got [4, 16]");

  attn::SdpaOptions window;
  window.window = 0;
  CHECK(check({2, 4, 8}, {2, 6, 8}, {2, 6, 8}, window) == "window: expected a positive integer, got 0");
  attn::SdpaOptions softcap;
  softcap.softcap = std::numeric_limits<float>::quiet_NaN();
  CHECK(check({2, 4, 8}, {2, 6, 8}, {2, 6, 8}, softcap) == "softcap: expected a positive finite number, got NaN");
  softcap.softcap = -1.0f;
  CHECK(check({2, 4, 8}, {2, 6, 8}, {2, 6, 8}, softcap).rfind("softcap: ", 0) == 0);

  const float slopes[3] = {0.5f, 0.25f, 0.125f};
  attn::SdpaOptions alibi;
  alibi.alibi = true;
  CHECK(check({4, 8}, {6, 8}, {6, 8}, alibi) == "alibi: expected a query of rank 3 or more ([..., H, n, d]), got [4, 8]");
  alibi.alibi_slopes = slopes;
  alibi.alibi_slope_count = 3;
  CHECK(check({1, 4, 4, 8}, {1, 4, 6, 8}, {1, 4, 6, 8}, alibi) ==
        "alibi: expected true or 4 slopes (one per query head), got 3 slopes");

  const int32_t ids[6] = {0, 0, 1, 1, 2, 2};
  attn::SdpaOptions documents;
  documents.query_document_ids = documents.key_document_ids = {ids, {6}};
  documents.shared_document_ids = true;
  CHECK(check({2, 4, 8}, {2, 6, 8}, {2, 6, 8}, documents) ==
        "documentIds: expected queries and keys of one length (n == m; for n != m give queryDocumentIds and "
        "keyDocumentIds), got n = 4, m = 6");
  CHECK(check({2, 6, 8}, {2, 6, 8}, {2, 6, 8}, documents).empty());
  documents.query_document_ids.shape = documents.key_document_ids.shape = {3, 6};
  CHECK(check({2, 6, 8}, {2, 6, 8}, {2, 6, 8}, documents) ==
        "documentIds: expected a shape broadcastable to [2, 6], got [3, 6]");
  documents.shared_document_ids = false;
  documents.query_document_ids.shape = {4};
  documents.key_document_ids.shape = {2, 1, 5};
  CHECK(check({2, 4, 8}, {2, 6, 8}, {2, 6, 8}, documents) ==
        "keyDocumentIds: expected a shape broadcastable to [2, 6], got [2, 1, 5]");
  documents.key_document_ids = {};
  CHECK(check({2, 4, 8}, {2, 6, 8}, {2, 6, 8}, documents) ==
        "keyDocumentIds: expected ids given with queryDocumentIds, got none");
}

TEST_CASE("errors quote numbers as JS prints them, to 6 decimals", "[errors]") {
  CHECK(attn::number_string(std::nan("")) == "NaN");
  CHECK(attn::number_string(-std::numeric_limits<double>::infinity()) == "-Infinity");
  CHECK(attn::number_string(0.0) == "0");
  CHECK(attn::number_string(-3.0) == "-3");
  CHECK(attn::number_string(1.5) == "1.5");
  CHECK(attn::number_string(-0.1f) == "-0.1");
  CHECK(attn::number_string(1e-9) == "0");
  CHECK(attn::number_string(123456.0000004) == "123456");
  CHECK(attn::number_string(-2.5e30) == "-2.5e+30");
}

TEST_CASE("grouped heads with no query heads but some key/value heads (fuzzer regression)", "[sdpa][regression]") {
  const auto k = random_tensor({2, 3, 5, 4}, 60), v = random_tensor({2, 3, 5, 4}, 61);
  attn::SdpaOptions options;
  options.enable_gqa = true;
  const Result r = run({nullptr, {2, 0, 4, 4}}, k.view(), v.view(), options, true);
  CHECK(r.status.ok());
}

TEST_CASE("d = 0 gives uniform weights, not 0 * inf = NaN (fuzzer regression)", "[sdpa][regression]") {
  const std::vector<float> none;
  attn::SdpaOptions options;
  std::vector<float> out(2 * 3, -1.0f), weights(2 * 4, -1.0f);
  REQUIRE(attn::scaled_dot_product_attention({none.data(), {2, 0}}, {none.data(), {4, 0}},
                                             {std::vector<float>(4 * 3, 1.0f).data(), {4, 3}}, options, out.data(),
                                             weights.data())
              .ok());
  for (float w : weights) CHECK(w == 0.25f);
  for (float o : out) CHECK(o == 1.0f);
}

TEST_CASE("NaN in the data propagates as in PyTorch; a hidden query still gets zeros", "[sdpa]") {
  auto q = random_tensor({1, 2, 4}, 11), k = random_tensor({1, 3, 4}, 12), v = random_tensor({1, 3, 4}, 13);
  k.data[0] = std::numeric_limits<float>::quiet_NaN();  // key 0 is NaN: every score with it is NaN
  std::vector<uint8_t> mask = {1, 1, 1, 0, 0, 0};       // query 1 sees nothing
  attn::SdpaOptions o;
  o.attn_mask = {attn::MaskType::boolean, mask.data(), {2, 3}, false};
  for (bool need_weights : {true, false}) {
    const Result r = run(q.view(), k.view(), v.view(), o, need_weights);
    REQUIRE(r.status.ok());
    for (int c = 0; c < 4; ++c) {
      CHECK(std::isnan(r.output[c]));
      CHECK(r.output[4 + c] == 0.0f);
    }
  }
}

#if ATTENTION_THREADS
TEST_CASE("threads split the work without changing a bit of the result", "[sdpa][threads]") {
  const auto q = random_tensor({3, 2, 100, 16}, 14), k = random_tensor({3, 2, 150, 16}, 15),
             v = random_tensor({3, 2, 150, 8}, 16);
  attn::SdpaOptions options;
  options.causal = attn::Causal::upper_left;
  options.dropout_p = 0.1f;
  options.seed = 7;
  REQUIRE(attn::set_thread_count(1) == 1);
  const Result one_weights = run(q.view(), k.view(), v.view(), options, true);
  const Result one_streaming = run(q.view(), k.view(), v.view(), options, false);
  REQUIRE(attn::set_thread_count(3) == 3);
  for (int repeat = 0; repeat < 3; ++repeat) {  // the pool is reused across calls
    const Result weights = run(q.view(), k.view(), v.view(), options, true);
    const Result streaming = run(q.view(), k.view(), v.view(), options, false);
    CHECK(weights.output == one_weights.output);
    CHECK(weights.weights == one_weights.weights);
    CHECK(streaming.output == one_streaming.output);
  }
  REQUIRE(attn::set_thread_count(1) == 1);
}
#endif

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

attn::SdpaOptions options_of(const fixtures::SdpaCase& c) {
  attn::SdpaOptions options;
  if (c.attn_mask) options.attn_mask = c.attn_mask->view(/*true_means_masked=*/false);
  options.is_causal = c.is_causal;
  options.scale = c.scale;
  return options;
}

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
    const attn::SdpaOptions options = options_of(c);
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
      options.is_causal = causal;
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
  CHECK(check({2, 3, 4}, {1, 5, 4}, {2, 5, 6}, {}).message() == "key: expected [2, m, 4], got [1, 5, 4]");
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
  options.is_causal = true;
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

// SelfAttention, AdditiveAttention and RelativeMultiHeadAttention against their fixtures.
#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "additive_attention.h"
#include "fixtures.h"
#include "relative_attention.h"
#include "self_attention.h"

namespace {

constexpr double kTolerance = 2e-5;

int64_t size(const fixtures::ModuleCase& c, const char* key) { return static_cast<int64_t>(c.config.at(key)); }

attn::MaskView mask_of(const fixtures::ModuleCase& c, const char* name, bool true_means_masked) {
  return c.masks.count(name) ? c.masks.at(name).view(true_means_masked) : attn::MaskView{};
}

// Runs forward with outputs sized by check_forward and compares both results with the fixture.
template <class Forward>
void check_results(const fixtures::ModuleCase& c, const attn::Shape& output_shape, const attn::Shape& weights_shape,
                   Forward forward) {
  REQUIRE(output_shape == c.tensors.at("output").shape);
  REQUIRE(weights_shape == c.tensors.at("weights").shape);
  std::vector<float> output(output_shape.numel()), weights(weights_shape.numel());
  const attn::Status s = forward(output.data(), weights.data());
  REQUIRE(s.message() == "");
  CHECK(fixtures::max_relative_error(output, c.tensors.at("output").data) <= kTolerance);
  CHECK(fixtures::max_relative_error(weights, c.tensors.at("weights").data) <= kTolerance);
}

}  // namespace

TEST_CASE("SelfAttention matches its fixtures", "[modules]") {
  const auto cases = fixtures::load_module_cases("self_attention.json");
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    INFO(c.name);
    std::unique_ptr<attn::SelfAttention> module;
    REQUIRE(attn::SelfAttention::create({size(c, "embedDim"), size(c, "keySize"), size(c, "valueSize")}, &module).ok());
    REQUIRE(module->load_state_dict(c.named_state_dict()).message() == "");
    const auto& x = c.tensors.at("x");
    const attn::MaskView mask = mask_of(c, "attnMask", true);
    attn::Shape os, ws;
    REQUIRE(module->check_forward(x.shape, mask, &os, &ws).ok());
    check_results(c, os, ws, [&](float* out, float* w) { return module->forward(x.view(), mask, 0, out, w); });
  }
}

TEST_CASE("AdditiveAttention matches its fixtures", "[modules]") {
  const auto cases = fixtures::load_module_cases("additive_attention.json");
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    INFO(c.name);
    std::unique_ptr<attn::AdditiveAttention> module;
    REQUIRE(attn::AdditiveAttention::create({size(c, "querySize"), size(c, "keySize"), size(c, "hiddenSize")}, &module)
                .ok());
    REQUIRE(module->load_state_dict(c.named_state_dict()).message() == "");
    const auto &q = c.tensors.at("query"), &k = c.tensors.at("key"), &v = c.tensors.at("value");
    const attn::MaskView mask = mask_of(c, "attnMask", true);
    attn::Shape os, ws;
    REQUIRE(module->check_forward(q.shape, k.shape, v.shape, mask, &os, &ws).ok());
    check_results(c, os, ws,
                  [&](float* out, float* w) { return module->forward(q.view(), k.view(), v.view(), mask, 0, out, w); });
  }
}

TEST_CASE("RelativeMultiHeadAttention matches the labml reference", "[modules]") {
  const auto cases = fixtures::load_module_cases("relative_attention.json");
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    INFO(c.name);
    std::unique_ptr<attn::RelativeMultiHeadAttention> module;
    REQUIRE(attn::RelativeMultiHeadAttention::create({size(c, "heads"), size(c, "dModel"), size(c, "P")}, &module).ok());
    REQUIRE(module->load_state_dict(c.named_state_dict()).message() == "");
    const auto &q = c.tensors.at("query"), &k = c.tensors.at("key"), &v = c.tensors.at("value");
    const attn::MaskView mask = mask_of(c, "mask", false);
    attn::Shape os, ws;
    REQUIRE(module->check_forward(q.shape, k.shape, v.shape, mask, false, &os, &ws).ok());
    check_results(c, os, ws, [&](float* out, float* w) {
      return module->forward(q.view(), k.view(), v.view(), mask, 0, false, out, w);
    });

    // Heads first: the same weights, [B, H, n, m].
    REQUIRE(module->check_forward(q.shape, k.shape, v.shape, mask, true, &os, &ws).ok());
    const auto& labml = c.tensors.at("weights");  // [n, m, B, H]
    const int64_t n = labml.shape[0], m = labml.shape[1], B = labml.shape[2], H = labml.shape[3];
    REQUIRE(ws == attn::Shape{B, H, n, m});
    std::vector<float> output(os.numel()), weights(ws.numel());
    REQUIRE(module->forward(q.view(), k.view(), v.view(), mask, 0, true, output.data(), weights.data()).ok());
    std::vector<float> expected(weights.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h)
            expected[((b * H + h) * n + i) * m + j] = labml.data[((i * m + j) * B + b) * H + h];
    CHECK(fixtures::max_relative_error(weights, expected) <= kTolerance);
    CHECK(fixtures::max_relative_error(output, c.tensors.at("output").data) <= kTolerance);

    // Fuzzer finding: without a weights buffer the module wrote its transposed weights through a
    // null pointer. Now it streams, in either layout, to the same output.
    for (const bool heads_first : {false, true}) {
      std::fill(output.begin(), output.end(), 0.0f);
      REQUIRE(module->forward(q.view(), k.view(), v.view(), mask, 0, heads_first, output.data(), nullptr).ok());
      CHECK(fixtures::max_relative_error(output, c.tensors.at("output").data) <= kTolerance);
    }
  }
}

TEST_CASE("modules refuse bad sizes and inputs by name", "[modules][errors]") {
  std::unique_ptr<attn::RelativeMultiHeadAttention> relative;
  CHECK(attn::RelativeMultiHeadAttention::create({3, 10, 16}, &relative).message() ==
        "dModel: expected a multiple of heads (3), got 10");
  CHECK(attn::RelativeMultiHeadAttention::create({2, 8, 0}, &relative).argument == "P");
  REQUIRE(attn::RelativeMultiHeadAttention::create({2, 8, 4}, &relative).ok());
  attn::Shape os, ws;
  CHECK(relative->check_forward({5, 1, 8}, {5, 1, 8}, {5, 1, 8}, {}, false, &os, &ws).message() ==
        "query: expected at most P = 4 queries, got [5, 1, 8]");
  std::vector<float> x(3 * 8);
  std::vector<float> out(3 * 8), w(9 * 2);
  CHECK(relative->forward({x.data(), {3, 1, 8}}, {x.data(), {3, 1, 8}}, {x.data(), {3, 1, 8}}, {}, 0, false, out.data(), w.data())
            .message() == "RelativeMultiHeadAttention: expected loadStateDict() before forward(), got no weights loaded");

  std::unique_ptr<attn::SelfAttention> self;
  CHECK(attn::SelfAttention::create({4, 0, 2}, &self).argument == "keySize");
  REQUIRE(attn::SelfAttention::create({4, 3, 2}, &self).ok());
  CHECK(self->check_forward({2, 5, 3}, {}, &os, &ws).message() == "x: expected [N, L, 4], got [2, 5, 3]");

  std::unique_ptr<attn::AdditiveAttention> additive;
  REQUIRE(attn::AdditiveAttention::create({4, 3, 5}, &additive).ok());
  CHECK(additive->check_forward({2, 5, 4}, {2, 6, 3}, {2, 7, 1}, {}, &os, &ws).message() ==
        "value: expected [2, 6, dv], got [2, 7, 1]");
}

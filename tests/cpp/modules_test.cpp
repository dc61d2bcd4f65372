// SelfAttention, AdditiveAttention and RelativeMultiHeadAttention against their fixtures;
// GroupedQueryAttention's binary16 projections against the same weights as floats.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "additive_attention.h"
#include "fixtures.h"
#include "grouped_query_attention.h"
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
    const attn::SelfAttentionOptions options{mask_of(c, "attnMask", true)};
    attn::Shape os, ws;
    REQUIRE(module->check_forward(x.shape, options, &os, &ws).ok());
    check_results(c, os, ws, [&](float* out, float* w) { return module->forward(x.view(), options, out, w); });
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
    const attn::AdditiveAttentionOptions options{mask_of(c, "attnMask", true)};
    attn::Shape os, ws;
    REQUIRE(module->check_forward(q.shape, k.shape, v.shape, options, &os, &ws).ok());
    check_results(c, os, ws,
                  [&](float* out, float* w) { return module->forward(q.view(), k.view(), v.view(), options, out, w); });
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
    REQUIRE(module->check_forward(q.shape, k.shape, v.shape, {mask}, &os, &ws).ok());
    check_results(c, os, ws, [&](float* out, float* w) {
      return module->forward(q.view(), k.view(), v.view(), {mask}, out, w);
    });

    // Heads first: the same weights, [B, H, n, m].
    const attn::RelativeAttentionOptions heads_first{mask, 0, true};
    REQUIRE(module->check_forward(q.shape, k.shape, v.shape, heads_first, &os, &ws).ok());
    const auto& labml = c.tensors.at("weights");  // [n, m, B, H]
    const int64_t n = labml.shape[0], m = labml.shape[1], B = labml.shape[2], H = labml.shape[3];
    REQUIRE(ws == attn::Shape{B, H, n, m});
    std::vector<float> output(os.numel()), weights(ws.numel());
    REQUIRE(module->forward(q.view(), k.view(), v.view(), heads_first, output.data(), weights.data()).ok());
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
    for (const bool first : {false, true}) {
      std::fill(output.begin(), output.end(), 0.0f);
      REQUIRE(module->forward(q.view(), k.view(), v.view(), {mask, 0, first}, output.data(), nullptr).ok());
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
  CHECK(relative->check_forward({5, 1, 8}, {5, 1, 8}, {5, 1, 8}, {}, &os, &ws).message() ==
        "query: expected at most P = 4 queries, got [5, 1, 8]");
  std::vector<float> x(3 * 8);
  std::vector<float> out(3 * 8), w(9 * 2);
  CHECK(relative->forward({x.data(), {3, 1, 8}}, {x.data(), {3, 1, 8}}, {x.data(), {3, 1, 8}}, {}, out.data(), w.data())
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

TEST_CASE("GroupedQueryAttention holds 16-bit projections and gives the bits of the same weights as floats",
          "[modules][f16][bf16]") {
  attn::GroupedQueryAttentionConfig config;
  config.hidden_size = 40;  // 5 panels: the last work chunk is ragged
  config.num_heads = 4;
  config.num_key_value_heads = 2;
  config.qkv_bias = true;
  config.qk_norm.scope = attn::QkNormScope::head;
  const int64_t q = 40, kv = 20;
  const std::vector<std::pair<std::string, attn::Shape>> entries = {
      {"q_proj.weight", {q, 40}}, {"k_proj.weight", {kv, 40}}, {"v_proj.weight", {kv, 40}}, {"o_proj.weight", {40, q}},
      {"q_proj.bias", {q}},       {"k_proj.bias", {kv}},       {"v_proj.bias", {kv}},       {"q_norm.weight", {10}},
      {"k_norm.weight", {10}}};
  const std::vector<float> x = [] {
    std::vector<float> v(2 * 3 * 40);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11f * static_cast<float>(i));
    return v;
  }();
  for (const auto words : {attn::WeightDtype::f16, attn::WeightDtype::bf16}) {
    // Each entry as 16-bit words and as the floats those are exactly.
    std::vector<std::vector<attn::Half>> halves;
    std::vector<std::vector<float>> floats;
    for (const auto& [name, shape] : entries) {
      halves.emplace_back();
      floats.emplace_back();
      for (int64_t i = 0; i < shape.numel(); ++i) {
        halves.back().push_back(attn::narrow(0.3f * std::sin(0.37f * static_cast<float>(i + 7 * halves.size())), words));
        floats.back().push_back(attn::widen(halves.back().back(), words));
      }
    }
    // mask: which entries go as words.
    const auto state_dict = [&](unsigned mask) {
      std::vector<attn::NamedTensor> sd;
      for (size_t i = 0; i < entries.size(); ++i) {
        const bool as_words = (mask >> i) & 1u;
        const float* data = as_words ? reinterpret_cast<const float*>(halves[i].data()) : floats[i].data();
        sd.push_back({entries[i].first, {data, entries[i].second}, as_words ? words : attn::WeightDtype::f32});
      }
      return sd;
    };
    const auto run = [&](attn::WeightDtype dtype, unsigned mask) {
      attn::GroupedQueryAttentionConfig c = config;
      c.dtype = dtype;
      std::unique_ptr<attn::GroupedQueryAttention> block;
      REQUIRE(attn::GroupedQueryAttention::create(c, &block).ok());
      REQUIRE(block->load_state_dict(state_dict(mask)).message() == "");
      std::vector<float> output(x.size()), weights(2 * 4 * 3 * 3);
      REQUIRE(block->forward({x.data(), {2, 3, 40}}, {}, output.data(), weights.data()).message() == "");
      output.insert(output.end(), weights.begin(), weights.end());
      return output;
    };
    const std::vector<float> want = run(attn::WeightDtype::f32, 0);
    for (const auto dtype : {words, attn::WeightDtype::f32})
      for (const unsigned mask : {0x1ffu, 0x0fu, 0x1f0u, 0x55u}) {
        INFO("words " << static_cast<int>(words) << ", dtype " << static_cast<int>(dtype) << ", as words " << mask);
        const std::vector<float> got = run(dtype, mask);
        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
      }
  }
}

TEST_CASE("GroupedQueryAttention's head mask scales each head's weights and its share of the output",
          "[modules][head_mask]") {
  attn::GroupedQueryAttentionConfig config;
  config.hidden_size = 16;
  config.num_heads = 4;
  config.num_key_value_heads = 2;
  config.output_bias = true;
  config.sliding_window = 2;
  config.softcap = 5.0f;
  std::unique_ptr<attn::GroupedQueryAttention> block;
  REQUIRE(attn::GroupedQueryAttention::create(config, &block).ok());
  const auto values = [](int64_t n, float phase) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = 0.4f * std::sin(0.23f * static_cast<float>(i) + phase);
    return v;
  };
  const std::vector<float> q = values(16 * 16, 1), k = values(8 * 16, 2), v = values(8 * 16, 3), o = values(16 * 16, 4),
                           bias = values(16, 5), x = values(2 * 3 * 16, 6);
  REQUIRE(block->load_state_dict({{"q_proj.weight", {q.data(), {16, 16}}}, {"k_proj.weight", {k.data(), {8, 16}}},
                                  {"v_proj.weight", {v.data(), {8, 16}}}, {"o_proj.weight", {o.data(), {16, 16}}},
                                  {"o_proj.bias", {bias.data(), {16}}}})
              .message() == "");
  // Output, then weights [2, 4, 3, 3], with the given head mask (none when empty).
  const auto run = [&](const std::vector<float>& mask) {
    attn::GroupedQueryAttentionOptions options;
    if (!mask.empty()) options.head_mask = {mask.data(), {static_cast<int64_t>(mask.size())}};
    std::vector<float> output(x.size()), weights(2 * 4 * 3 * 3);
    REQUIRE(block->forward({x.data(), {2, 3, 16}}, options, output.data(), weights.data()).message() == "");
    return std::make_pair(output, weights);
  };
  const auto [output, weights] = run({});
  // Ones change nothing; the weights scale by the mask exactly; zeros leave o_proj its bias.
  const auto ones = run({1, 1, 1, 1});
  CHECK(ones.first == output);
  CHECK(ones.second == weights);
  const std::vector<float> mask = {0, 1, 0.25f, 1};
  const auto masked = run(mask);
  for (size_t i = 0; i < weights.size(); ++i) CHECK(masked.second[i] == weights[i] * mask[i / 9 % 4]);
  CHECK(masked.first != output);
  const auto zeros = run({0, 0, 0, 0});
  for (size_t i = 0; i < output.size(); ++i) CHECK(zeros.first[i] == bias[i % 16]);

  attn::GroupedQueryAttentionOptions options;
  const std::vector<float> three = {1, 1, 1};
  options.head_mask = {three.data(), {3}};
  attn::Shape os, ws;
  CHECK(block->check_forward({2, 3, 16}, options, &os, &ws).message() == "headMask: expected [4] (numHeads), got [3]");
}

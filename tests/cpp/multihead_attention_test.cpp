// MultiheadAttention against torch.nn.MultiheadAttention fixtures, on both attention paths.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "fixtures.h"
#include "multihead_attention.h"

namespace {

constexpr double kTolerance = 2e-5;

attn::MultiheadAttentionConfig config_of(const fixtures::ModuleCase& c) {
  attn::MultiheadAttentionConfig config;
  config.embed_dim = static_cast<int64_t>(c.config.at("embedDim"));
  config.num_heads = static_cast<int64_t>(c.config.at("numHeads"));
  config.bias = c.config.at("bias") != 0;
  config.add_bias_kv = c.config.at("addBiasKV") != 0;
  config.add_zero_attn = c.config.at("addZeroAttn") != 0;
  config.kdim = static_cast<int64_t>(c.config.at("kdim"));
  config.vdim = static_cast<int64_t>(c.config.at("vdim"));
  config.batch_first = c.config.at("batchFirst") != 0;
  return config;
}

attn::MultiheadAttentionOptions options_of(const fixtures::ModuleCase& c, bool need_weights) {
  attn::MultiheadAttentionOptions options;
  if (c.masks.count("attnMask")) options.attn_mask = c.masks.at("attnMask").view(/*true_means_masked=*/true);
  if (c.masks.count("keyPaddingMask")) options.key_padding_mask = c.masks.at("keyPaddingMask").view(true);
  options.is_causal = c.flags.at("isCausal");
  options.need_weights = need_weights;
  options.average_attn_weights = c.flags.at("averageAttnWeights");
  return options;
}

std::unique_ptr<attn::MultiheadAttention> loaded_module(const fixtures::ModuleCase& c) {
  std::unique_ptr<attn::MultiheadAttention> module;
  REQUIRE(attn::MultiheadAttention::create(config_of(c), &module).ok());
  REQUIRE(module->load_state_dict(c.named_state_dict()).message() == "");
  return module;
}

}  // namespace

TEST_CASE("MultiheadAttention matches PyTorch on every fixture, with and without weights", "[mha]") {
  const auto cases = fixtures::load_module_cases("mha.json");
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO(c.name);
    const auto module = loaded_module(c);
    const auto& q = c.tensors.at("query");
    const auto& k = c.tensors.at("key");
    const auto& v = c.tensors.at("value");
    const auto& expected = c.tensors.at("output");
    for (bool need_weights : {true, false}) {
      INFO("needWeights=" << need_weights);
      const auto options = options_of(c, need_weights);
      attn::Shape output_shape, weights_shape;
      REQUIRE(module->check_forward(q.shape, k.shape, v.shape, options, &output_shape, &weights_shape).ok());
      CHECK(output_shape == expected.shape);
      std::vector<float> output(output_shape.numel()), weights(need_weights ? weights_shape.numel() : 0);
      const attn::Status s =
          module->forward(q.view(), k.view(), v.view(), options, output.data(), need_weights ? weights.data() : nullptr);
      REQUIRE(s.message() == "");
      CHECK(fixtures::max_relative_error(output, expected.data) <= kTolerance);
      if (need_weights && c.has("weights")) {
        CHECK(weights_shape == c.tensors.at("weights").shape);
        CHECK(fixtures::max_relative_error(weights, c.tensors.at("weights").data) <= kTolerance);
      }
    }
    // The output written over the query, as the bindings do, with the query also serving as key
    // and value where the shapes allow (self-attention).
    std::vector<float> query_and_output = q.data;
    const attn::TensorView query{query_and_output.data(), q.shape};
    const bool self = k.shape == q.shape && v.shape == q.shape;
    const attn::Status s = module->forward(query, self ? query : k.view(), self ? query : v.view(),
                                           options_of(c, false), query_and_output.data(), nullptr);
    REQUIRE(s.message() == "");
    if (self) {  // against the same module on separate buffers holding the query three times
      std::vector<float> separate(q.data.size());
      REQUIRE(module->forward(q.view(), q.view(), q.view(), options_of(c, false), separate.data(), nullptr).ok());
      CHECK(query_and_output == separate);
    } else {
      CHECK(fixtures::max_relative_error(query_and_output, expected.data) <= kTolerance);
    }
  }
}

TEST_CASE("MultiheadAttention refuses bad configurations, state dicts and inputs by name", "[mha][errors]") {
  std::unique_ptr<attn::MultiheadAttention> module;
  attn::MultiheadAttentionConfig config;
  config.embed_dim = 10;
  config.num_heads = 3;
  CHECK(attn::MultiheadAttention::create(config, &module).message() == "embedDim: expected a multiple of numHeads (3), got 10");
  config.num_heads = 0;
  CHECK(attn::MultiheadAttention::create(config, &module).argument == "numHeads");
  config.num_heads = 2;
  REQUIRE(attn::MultiheadAttention::create(config, &module).ok());

  std::vector<float> in_proj(30 * 10), in_bias(30), out_w(100), out_b(10);
  std::vector<attn::NamedTensor> sd = {{"in_proj_weight", {in_proj.data(), {30, 10}}},
                                       {"in_proj_bias", {in_bias.data(), {30}}},
                                       {"out_proj.weight", {out_w.data(), {10, 10}}}};
  CHECK(module->load_state_dict(sd).message() == "stateDict['out_proj.bias']: expected [10], got a missing entry");
  sd.push_back({"out_proj.bias", {out_b.data(), {10}}});
  sd.push_back({"bias_k", {out_b.data(), {1, 1, 10}}});
  CHECK(module->load_state_dict(sd).argument == "stateDict['bias_k']");
  sd.pop_back();
  sd[0].tensor.shape = {10, 30};
  CHECK(module->load_state_dict(sd).message() == "stateDict['in_proj_weight']: expected [30, 10], got [10, 30]");

  std::vector<float> x(4 * 2 * 10), out(4 * 2 * 10);
  attn::MultiheadAttentionOptions options;
  CHECK(module->forward({x.data(), {4, 2, 10}}, {x.data(), {4, 2, 10}}, {x.data(), {4, 2, 10}}, options, out.data(),
                        nullptr)
            .argument == "MultiheadAttention");
  sd[0].tensor.shape = {30, 10};
  REQUIRE(module->load_state_dict(sd).ok());
  attn::Shape os, ws;
  CHECK(module->check_forward({4, 2, 9}, {4, 2, 10}, {4, 2, 10}, options, &os, &ws).message() ==
        "query: expected [L, 2, 10], got [4, 2, 9]");
  CHECK(module->check_forward({4, 2, 10}, {5, 3, 10}, {5, 3, 10}, options, &os, &ws).message() ==
        "key: expected [m, 2, 10], got [5, 3, 10]");
  CHECK(module->check_forward({4, 2, 10}, {5, 2, 10}, {6, 2, 10}, options, &os, &ws).message() ==
        "value: expected [5, 2, 10], got [6, 2, 10]");
  std::vector<uint8_t> mask(2 * 6);
  options.key_padding_mask = {attn::MaskType::boolean, mask.data(), {2, 6}, true};
  CHECK(module->check_forward({4, 2, 10}, {5, 2, 10}, {5, 2, 10}, options, &os, &ws).message() ==
        "keyPaddingMask: expected [2, 5] (N, m), got [2, 6]");
  options.key_padding_mask = {};
  options.attn_mask = {attn::MaskType::boolean, mask.data(), {4, 3}, true};
  CHECK(module->check_forward({4, 2, 10}, {5, 2, 10}, {5, 2, 10}, options, &os, &ws).message() ==
        "attnMask: expected [4, 5] (n, m) or [4, 4, 5] (N*numHeads, n, m), got [4, 3]");
}

TEST_CASE("a MultiheadAttention query that sees no key outputs out_proj.bias on both paths", "[mha]") {
  attn::MultiheadAttentionConfig config;
  config.embed_dim = 8;
  config.num_heads = 2;
  std::unique_ptr<attn::MultiheadAttention> module;
  REQUIRE(attn::MultiheadAttention::create(config, &module).ok());
  std::vector<float> in_proj(24 * 8), in_bias(24, 0.5f), out_w(64), out_b(8);
  for (size_t i = 0; i < in_proj.size(); ++i) in_proj[i] = std::sin(float(i));
  for (size_t i = 0; i < out_w.size(); ++i) out_w[i] = std::cos(float(i));
  for (size_t i = 0; i < out_b.size(); ++i) out_b[i] = 0.1f * float(i);
  REQUIRE(module->load_state_dict({{"in_proj_weight", {in_proj.data(), {24, 8}}},
                                   {"in_proj_bias", {in_bias.data(), {24}}},
                                   {"out_proj.weight", {out_w.data(), {8, 8}}},
                                   {"out_proj.bias", {out_b.data(), {8}}}})
              .ok());
  std::vector<float> x(3 * 2 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * float(i));
  std::vector<uint8_t> padding = {1, 1, 1, 0, 0, 1};  // batch 0 sees no key; batch 1 sees keys 0, 1
  attn::MultiheadAttentionOptions options;
  options.key_padding_mask = {attn::MaskType::boolean, padding.data(), {2, 3}, true};
  for (bool need_weights : {true, false}) {
    options.need_weights = need_weights;
    std::vector<float> out(x.size()), weights(2 * 3 * 3, -1.0f);
    REQUIRE(module->forward({x.data(), {3, 2, 8}}, {x.data(), {3, 2, 8}}, {x.data(), {3, 2, 8}}, options, out.data(),
                            need_weights ? weights.data() : nullptr)
                .ok());
    for (int l = 0; l < 3; ++l)
      for (int e = 0; e < 8; ++e) {
        CHECK(out[(l * 2 + 0) * 8 + e] == out_b[e]);  // token (l, batch 0)
        CHECK(std::isfinite(out[(l * 2 + 1) * 8 + e]));
      }
    if (need_weights)
      for (int i = 0; i < 9; ++i) CHECK(weights[i] == 0.0f);
  }
}

namespace {

// A SpillStore over a vector, counting what goes through it.
class VectorSpill : public attn::SpillStore {
 public:
  explicit VectorSpill(size_t size) : data_(size, std::numeric_limits<float>::quiet_NaN()) {}
  void write(int64_t offset, const float* data, int64_t count) override {
    REQUIRE(offset >= 0);
    REQUIRE(static_cast<size_t>(offset + count) <= data_.size());
    std::copy(data, data + count, data_.begin() + offset);
    written += count;
  }
  void read(int64_t offset, float* data, int64_t count) const override {
    REQUIRE(offset >= 0);
    REQUIRE(static_cast<size_t>(offset + count) <= data_.size());
    std::copy(data_.begin() + offset, data_.begin() + offset + count, data);
  }
  int64_t written = 0;

 private:
  std::vector<float> data_;
};

}  // namespace

TEST_CASE("MultiheadAttention one head at a time through a spill store gives the same bits", "[mha]") {
  const auto cases = fixtures::load_module_cases("mha.json");
  int by_head = 0;
  for (const auto& c : cases) {
    INFO(c.name);
    for (float dropout : {0.0f, 0.25f}) {
      INFO("dropout " << dropout);
      attn::MultiheadAttentionConfig config = config_of(c);
      config.dropout = dropout;
      std::unique_ptr<attn::MultiheadAttention> module;
      REQUIRE(attn::MultiheadAttention::create(config, &module).ok());
      REQUIRE(module->load_state_dict(c.named_state_dict()).message() == "");
      module->set_training(dropout > 0);
      auto options = options_of(c, false);
      options.seed = 7;
      const auto& q = c.tensors.at("query");
      const bool self = c.tensors.at("key").shape == q.shape && c.tensors.at("value").shape == q.shape;
      // Both runs write over the query, as the bindings do; the spill store gets the query's size.
      const auto run = [&](VectorSpill* spill) {
        std::vector<float> x = q.data;
        const attn::TensorView query{x.data(), q.shape};
        const attn::Status s = module->forward(query, self ? query : c.tensors.at("key").view(),
                                               self ? query : c.tensors.at("value").view(), options, x.data(),
                                               nullptr, spill);
        REQUIRE(s.message() == "");
        return x;
      };
      VectorSpill spill(q.data.size());
      const std::vector<float> whole = run(nullptr), head_by_head = run(&spill);
      CHECK(head_by_head == whole);
      if (config.num_heads > 1) {
        CHECK(spill.written == static_cast<int64_t>(q.data.size()));  // every head's output went through it
        ++by_head;
      } else {
        CHECK(spill.written == 0);  // one head: nothing to save
      }
      if (dropout == 0.0f && !self)
        CHECK(fixtures::max_relative_error(head_by_head, c.tensors.at("output").data) <= kTolerance);
    }
  }
  CHECK(by_head >= 60);
}

// PyTorch reference fixtures (tests/fixtures/*.json, written by tests/fixtures/generate.py).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensor.h"

namespace fixtures {

struct Tensor {
  attn::Shape shape;
  std::vector<float> data;
  attn::TensorView view() const { return {data.data(), shape}; }
};

struct Mask {
  attn::MaskType type = attn::MaskType::none;
  attn::Shape shape;
  std::vector<uint8_t> bools;
  std::vector<float> floats;
  attn::MaskView view(bool true_means_masked) const;
};

struct SdpaCase {
  std::string name;
  Tensor query, key, value, output, weights;
  std::optional<Mask> attn_mask;
  bool is_causal = false;
  std::optional<float> scale;
};

std::vector<SdpaCase> load_sdpa_cases();

// max |got - want| / (1 + |want|), the contract's error measure; NaN matches NaN only.
double max_relative_error(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace fixtures

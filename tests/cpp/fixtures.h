// PyTorch reference fixtures (tests/fixtures/*.json, written by tests/fixtures/generate.py).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attention.h"
#include "parameters.h"
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

struct Ids {
  attn::Shape shape;
  std::vector<int32_t> data;
  attn::IdsView view() const { return {data.data(), shape}; }
};

struct SdpaCase {
  std::string name;
  Tensor query, key, value, output, weights;
  std::optional<Mask> attn_mask;
  attn::Causal causal = attn::Causal::none;
  std::optional<float> scale;
  bool enable_gqa = false;
  std::optional<int64_t> window;
  std::optional<float> softcap;
  bool alibi = false;
  std::vector<float> alibi_slopes;  // empty: Press et al.'s
  std::optional<Ids> query_document_ids, key_document_ids;  // the same ids when shared
  bool shared_document_ids = false;

  attn::SdpaOptions options() const;
};

// A rope.json case: x, its RoPE options and the expected output.
struct RopeCase {
  std::string name;
  Tensor x, output;
  std::vector<int32_t> positions;  // empty: the default positions
  bool has_positions = false;
  attn::RopeOptions stored_options;  // all but the positions, which point into this case
  attn::RopeOptions options() const;
};

std::vector<RopeCase> load_rope_cases();

std::vector<SdpaCase> load_sdpa_cases();

// A module case: constructor config, state dict, named inputs and masks, expected results. Masks
// and optional results are absent when the fixture holds null.
struct ModuleCase {
  std::string name;
  std::map<std::string, double> config;  // numbers and booleans (as 0/1)
  std::vector<std::pair<std::string, Tensor>> state_dict;
  std::map<std::string, Tensor> tensors;  // inputs and expected results
  std::map<std::string, Mask> masks;
  std::map<std::string, bool> flags;       // isCausal, needWeights, averageAttnWeights

  std::vector<attn::NamedTensor> named_state_dict() const;
  bool has(const std::string& tensor) const { return tensors.count(tensor) > 0; }
};

// Reads tests/fixtures/<file>: every top-level case field that is a tensor, mask or flag.
std::vector<ModuleCase> load_module_cases(const std::string& file);

// max |got - want| / (1 + |want|), the contract's error measure; NaN matches NaN only.
double max_relative_error(const std::vector<float>& got, const std::vector<float>& want);

// n draws of a standard normal, from a seeded generator: the same on every build.
std::vector<float> normal_floats(int64_t n, uint32_t seed);

}  // namespace fixtures

#include "fixtures.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace fixtures {
namespace {

using nlohmann::json;

// JSON has no literal for non-finite numbers: the generator writes them as strings.
double number(const json& value) {
  if (!value.is_string()) return value.get<double>();
  const std::string s = value.get<std::string>();
  if (s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  throw std::runtime_error("fixture: unexpected number " + s);
}

attn::Shape shape_of(const json& t) {
  attn::Shape shape;
  for (const json& dim : t.at("shape")) shape[shape.rank++] = dim.get<int64_t>();
  return shape;
}

Tensor tensor_of(const json& t) {
  Tensor out{shape_of(t), {}};
  for (const json& v : t.at("data")) out.data.push_back(static_cast<float>(number(v)));
  return out;
}

Mask mask_of(const json& m) {
  Mask mask;
  mask.shape = shape_of(m);
  const bool boolean = m.at("dtype") == "bool";
  mask.type = boolean ? attn::MaskType::boolean : attn::MaskType::additive;
  for (const json& v : m.at("data")) {
    if (boolean)
      mask.bools.push_back(static_cast<uint8_t>(v.get<int>()));
    else
      mask.floats.push_back(static_cast<float>(number(v)));
  }
  return mask;
}

json read(const std::string& file) {
  std::ifstream in(std::string(FIXTURES_DIR) + "/" + file);
  if (!in) throw std::runtime_error("cannot open fixture " + file);
  return json::parse(in);
}

}  // namespace

attn::MaskView Mask::view(bool true_means_masked) const {
  attn::MaskView v;
  v.type = type;
  v.shape = shape;
  v.true_means_masked = true_means_masked;
  v.data = type == attn::MaskType::boolean ? static_cast<const void*>(bools.data())
                                           : static_cast<const void*>(floats.data());
  return v;
}

std::vector<SdpaCase> load_sdpa_cases() {
  std::vector<SdpaCase> cases;
  const json file = read("sdpa.json");
  for (const json& c : file.at("cases")) {
    SdpaCase sc;
    sc.name = c.at("name");
    sc.query = tensor_of(c.at("query"));
    sc.key = tensor_of(c.at("key"));
    sc.value = tensor_of(c.at("value"));
    sc.output = tensor_of(c.at("output"));
    sc.weights = tensor_of(c.at("weights"));
    if (!c.at("attnMask").is_null()) sc.attn_mask = mask_of(c.at("attnMask"));
    sc.is_causal = c.at("isCausal");
    if (!c.at("scale").is_null()) sc.scale = c.at("scale").get<float>();
    cases.push_back(std::move(sc));
  }
  return cases;
}

std::vector<attn::NamedTensor> ModuleCase::named_state_dict() const {
  std::vector<attn::NamedTensor> named;
  for (const auto& [name, tensor] : state_dict) named.push_back({name, tensor.view()});
  return named;
}

std::vector<ModuleCase> load_module_cases(const std::string& name) {
  std::vector<ModuleCase> cases;
  const json file = read(name);
  for (const json& c : file.at("cases")) {
    ModuleCase mc;
    mc.name = c.at("name");
    for (const auto& [key, value] : c.at("config").items()) mc.config[key] = value.is_boolean() ? value.get<bool>() : number(value);
    for (const auto& [key, value] : c.at("stateDict").items()) mc.state_dict.emplace_back(key, tensor_of(value));
    for (const auto& [key, value] : c.items()) {
      if (key == "name" || key == "config" || key == "stateDict" || value.is_null()) continue;
      if (value.is_boolean())
        mc.flags[key] = value.get<bool>();
      else if (value.contains("dtype"))
        mc.masks[key] = mask_of(value);
      else
        mc.tensors[key] = tensor_of(value);
    }
    cases.push_back(std::move(mc));
  }
  return cases;
}

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {  // non-finite values must match exactly
      const bool same = (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i];
      if (!same) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])) / (1.0 + std::fabs(double(want[i]))));
  }
  return worst;
}

}  // namespace fixtures

#include "fixtures.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
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

Ids ids_of(const json& t) {
  Ids out{shape_of(t), {}};
  for (const json& v : t.at("data")) out.data.push_back(v.get<int32_t>());
  return out;
}

// A case field that may be absent (older fixture files) or null.
const json& optional_field(const json& c, const char* name) {
  static const json null_value;
  return c.contains(name) ? c.at(name) : null_value;
}

attn::Causal causal_of(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? attn::Causal::upper_left : attn::Causal::none;
  if (value == "upperLeft") return attn::Causal::upper_left;
  if (value == "lowerRight") return attn::Causal::lower_right;
  throw std::runtime_error("fixture: unexpected isCausal " + value.dump());
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
    sc.causal = causal_of(c.at("isCausal"));
    if (!c.at("scale").is_null()) sc.scale = c.at("scale").get<float>();
    sc.enable_gqa = optional_field(c, "enableGqa").is_boolean() && c.at("enableGqa").get<bool>();
    if (const json& window = optional_field(c, "window"); !window.is_null()) sc.window = window.get<int64_t>();
    if (const json& softcap = optional_field(c, "softcap"); !softcap.is_null()) sc.softcap = softcap.get<float>();
    if (const json& alibi = optional_field(c, "alibi"); !alibi.is_null()) {
      sc.alibi = true;
      if (!alibi.is_boolean()) sc.alibi_slopes = tensor_of(alibi).data;
    }
    if (const json& ids = optional_field(c, "documentIds"); !ids.is_null()) {
      sc.query_document_ids = sc.key_document_ids = ids_of(ids);
      sc.shared_document_ids = true;
    }
    if (const json& ids = optional_field(c, "queryDocumentIds"); !ids.is_null()) sc.query_document_ids = ids_of(ids);
    if (const json& ids = optional_field(c, "keyDocumentIds"); !ids.is_null()) sc.key_document_ids = ids_of(ids);
    cases.push_back(std::move(sc));
  }
  return cases;
}

attn::SdpaOptions SdpaCase::options() const {
  attn::SdpaOptions options;
  if (attn_mask) options.attn_mask = attn_mask->view(/*true_means_masked=*/false);
  options.causal = causal;
  options.scale = scale;
  options.enable_gqa = enable_gqa;
  options.window = window;
  options.softcap = softcap;
  options.alibi = alibi;
  if (!alibi_slopes.empty()) {
    options.alibi_slopes = alibi_slopes.data();
    options.alibi_slope_count = static_cast<int64_t>(alibi_slopes.size());
  }
  if (query_document_ids) options.query_document_ids = query_document_ids->view();
  if (key_document_ids) options.key_document_ids = key_document_ids->view();
  options.shared_document_ids = shared_document_ids;
  return options;
}

std::vector<RopeCase> load_rope_cases() {
  std::vector<RopeCase> cases;
  const json file = read("rope.json");
  for (const json& c : file.at("cases")) {
    RopeCase rc;
    rc.name = c.at("name");
    rc.x = tensor_of(c.at("x"));
    rc.output = tensor_of(c.at("output"));
    if (!c.at("positions").is_null()) {
      rc.has_positions = true;
      for (const json& p : c.at("positions")) rc.positions.push_back(p.get<int32_t>());
    }
    attn::RopeOptions& o = rc.stored_options;
    if (!c.at("offset").is_null()) o.offset = c.at("offset").get<int64_t>();
    if (!c.at("base").is_null()) o.base = number(c.at("base"));
    if (!c.at("rotaryDim").is_null()) o.rotary_dim = c.at("rotaryDim").get<int64_t>();
    o.interleaved = c.at("interleaved").get<bool>();
    cases.push_back(std::move(rc));
  }
  return cases;
}

attn::RopeOptions RopeCase::options() const {
  attn::RopeOptions o = stored_options;
  if (has_positions) {
    o.positions = {positions.data(), {static_cast<int64_t>(positions.size())}};
  }
  return o;
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

std::vector<float> normal_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace fixtures

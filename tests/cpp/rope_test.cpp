// RoPE frequency schemes (Hugging Face's ROPE_INIT_FUNCTIONS in RopeFrequencies) against
// tests/fixtures/rope_scaling.json, written by tests/fixtures/rope_scaling_fixture.py from a float64
// transcription of modeling_rope_utils.py: the inverse frequencies and attention factor of every
// case at its seq_len, attn::rope's output with each scheme, how dynamic and longrope follow the
// sequence length, and the schemes check() refuses, in the core's words.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.h"
#include "rope.h"

namespace {

using attn::RopeFrequencies;
using attn::RopeScaling;
using attn::RopeType;
using nlohmann::json;

constexpr double kSameFrequencies = 1e-12;  // two float64 computations of the same frequencies
constexpr double kTolerance = 2e-5;         // the contract's, against the float64 reference
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A rope_scaling.json case: the options as attn::RopeOptions, with the arrays they point into.
struct ScalingCase {
  std::string name;
  fixtures::Tensor x, output;
  std::vector<int32_t> positions;
  attn::Shape positions_shape;
  bool has_positions = false;
  int64_t offset = 0;
  double base = 10000.0;
  std::optional<int64_t> rotary_dim;
  bool interleaved = false;
  std::vector<double> short_factor, long_factor, given_inv_freq;
  RopeScaling scaling;  // its arrays point into this case: copies are made by load() only
  int64_t seq_len = 0;
  std::vector<double> inv_freq;  // the reference's at seq_len
  double attention_scaling = 1.0;

  int64_t rotary() const { return rotary_dim.value_or(x.shape.at_end(1)); }
  attn::RopeOptions options() const {
    attn::RopeOptions o;
    if (has_positions) o.positions = {positions.data(), positions_shape};
    o.offset = offset;
    o.base = base;
    o.rotary_dim = rotary_dim;
    o.interleaved = interleaved;
    o.scaling = scaling;
    return o;
  }
};

fixtures::Tensor tensor_of(const json& t) {
  fixtures::Tensor out;
  for (const json& dim : t.at("shape")) out.shape[out.shape.rank++] = dim.get<int64_t>();
  for (const json& v : t.at("data")) out.data.push_back(static_cast<float>(v.get<double>()));
  return out;
}

std::optional<double> optional_number(const json& object, const char* key) {
  if (!object.contains(key) || object.at(key).is_null()) return std::nullopt;
  return object.at(key).get<double>();
}

RopeType type_of(const std::string& name) {
  if (name == "default") return RopeType::standard;
  if (name == "linear") return RopeType::linear;
  if (name == "dynamic") return RopeType::dynamic;
  if (name == "yarn") return RopeType::yarn;
  if (name == "longrope") return RopeType::longrope;
  if (name == "llama3") return RopeType::llama3;
  throw std::runtime_error("fixture: unknown rope_type " + name);
}

// The cases of tests/fixtures/rope_scaling.json (fixtures.cpp's reading, for this file's layout).
const std::vector<ScalingCase>& load() {
  static std::vector<ScalingCase> cases;
  if (!cases.empty()) return cases;
  std::ifstream in(std::string(FIXTURES_DIR) + "/rope_scaling.json");
  if (!in) throw std::runtime_error("cannot open fixture rope_scaling.json");
  const json fixture = json::parse(in);
  cases.reserve(fixture.at("cases").size());  // the scaling pointers must not move
  for (const json& c : fixture.at("cases")) {
    ScalingCase& k = cases.emplace_back();
    const json& o = c.at("options");
    k.name = c.at("name").get<std::string>();
    k.x = tensor_of(c.at("x"));
    k.output = tensor_of(c.at("output"));
    if (o.contains("positions")) {
      k.has_positions = true;
      const json& p = o.at("positions");
      if (p.is_array()) {
        k.positions = p.get<std::vector<int32_t>>();
        k.positions_shape = {static_cast<int64_t>(k.positions.size())};
      } else {
        k.positions = p.at("data").get<std::vector<int32_t>>();
        for (const json& dim : p.at("shape")) k.positions_shape[k.positions_shape.rank++] = dim.get<int64_t>();
      }
    }
    k.offset = o.value("offset", int64_t{0});
    k.base = o.value("base", 10000.0);
    if (o.contains("rotaryDim")) k.rotary_dim = o.at("rotaryDim").get<int64_t>();
    k.interleaved = o.value("interleaved", false);
    RopeScaling& s = k.scaling;
    if (o.contains("maxPositionEmbeddings")) s.max_position_embeddings = o.at("maxPositionEmbeddings").get<int64_t>();
    if (o.contains("invFreq")) {
      s.type = RopeType::given;
      k.given_inv_freq = o.at("invFreq").get<std::vector<double>>();
      s.inv_freq = k.given_inv_freq.data();
      s.inv_freq_count = static_cast<int64_t>(k.given_inv_freq.size());
      s.attention_scaling = o.value("attentionScaling", 1.0);
    } else if (o.contains("ropeScaling")) {
      const json& r = o.at("ropeScaling");
      s.type = type_of(r.contains("rope_type") ? r.at("rope_type").get<std::string>() : r.value("type", "default"));
      s.factor = optional_number(r, "factor");
      s.attention_factor = optional_number(r, "attention_factor");
      s.beta_fast = optional_number(r, "beta_fast");
      s.beta_slow = optional_number(r, "beta_slow");
      s.mscale = optional_number(r, "mscale");
      s.mscale_all_dim = optional_number(r, "mscale_all_dim");
      s.truncate = r.value("truncate", true);
      s.low_freq_factor = optional_number(r, "low_freq_factor");
      s.high_freq_factor = optional_number(r, "high_freq_factor");
      if (r.contains("original_max_position_embeddings"))
        s.original_max_position_embeddings = r.at("original_max_position_embeddings").get<int64_t>();
      if (r.contains("short_factor")) {
        k.short_factor = r.at("short_factor").get<std::vector<double>>();
        k.long_factor = r.at("long_factor").get<std::vector<double>>();
        s.short_factor = k.short_factor.data();
        s.long_factor = k.long_factor.data();
        s.factor_count = static_cast<int64_t>(k.short_factor.size());
      }
    }
    k.seq_len = c.at("seqLen").get<int64_t>();
    k.inv_freq = c.at("invFreq").get<std::vector<double>>();
    k.attention_scaling = c.at("attentionScaling").get<double>();
  }
  return cases;
}

const ScalingCase& named(const std::string& name) {
  for (const ScalingCase& c : load())
    if (c.name == name) return c;
  throw std::runtime_error("no case named " + name + " in rope_scaling.json");
}

double relative(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

// max |got - want| / |want| (|want| where it is not 0; |got - want| there).
double max_relative(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, want[i] == 0.0 ? std::fabs(got[i]) : relative(got[i], want[i]));
  return worst;
}

RopeFrequencies prepared(const RopeScaling& scaling, double base, int64_t rotary_dim) {
  RopeFrequencies f;
  const attn::Status s = f.prepare(scaling, base, rotary_dim);
  INFO(s.message());
  REQUIRE(s.ok());
  return f;
}

// compute(sequence_length): (inverse frequencies, attention factor).
std::pair<std::vector<double>, double> compute(const RopeFrequencies& f, int64_t sequence_length) {
  std::vector<double> inv(static_cast<size_t>(f.half()), kNaN);
  const double attention = f.compute(sequence_length, inv.data());
  return {inv, attention};
}

std::string check_message(const RopeScaling& s, double base = 10000.0, int64_t rotary_dim = 8) {
  return RopeFrequencies::check(s, base, rotary_dim).message();
}

RopeScaling of_type(RopeType type) {
  RopeScaling s;
  s.type = type;
  return s;
}

}  // namespace

TEST_CASE("RoPE schemes give Hugging Face's inverse frequencies and attention factors", "[rope]") {
  const auto& cases = load();
  REQUIRE(cases.size() >= 16);
  for (const ScalingCase& c : cases) {
    INFO(c.name);
    REQUIRE(RopeFrequencies::check(c.scaling, c.base, c.rotary()).ok());
    const RopeFrequencies f = prepared(c.scaling, c.base, c.rotary());
    REQUIRE(f.half() == c.rotary() / 2);
    REQUIRE(static_cast<int64_t>(c.inv_freq.size()) == f.half());
    const auto [inv, attention] = compute(f, c.seq_len);
    CHECK(max_relative(inv, c.inv_freq) <= kSameFrequencies);
    CHECK(relative(attention, c.attention_scaling) <= kSameFrequencies);
  }
}

// Each case's attn::rope against its reference output, into a new buffer and in place (the same
// values): the RoPE fixtures of PyTorch's rotate-half and of every scaling scheme alike.
template <class Case>
void check_rope_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    INFO(c.name);
    std::vector<float> out(c.x.data.size(), -1.0f);
    REQUIRE(attn::rope(c.x.view(), c.options(), out.data()).message() == "");
    CHECK(fixtures::max_relative_error(out, c.output.data) <= kTolerance);
    std::vector<float> in_place = c.x.data;
    REQUIRE(attn::rope({in_place.data(), c.x.shape}, c.options(), in_place.data()).ok());
    CHECK(in_place == out);
  }
}

TEST_CASE("RoPE matches PyTorch on every fixture, and in place", "[rope]") {
  check_rope_cases(fixtures::load_rope_cases());
}

TEST_CASE("attn::rope with each scheme matches the float64 reference, and in place", "[rope]") {
  check_rope_cases(load());
}

TEST_CASE("dynamic and longrope follow the sequence length; the other schemes do not", "[rope]") {
  SECTION("dynamic: the default frequencies up to maxPositionEmbeddings, a larger base past it") {
    const ScalingCase& below = named("dynamic_below_max");
    const ScalingCase& at = named("dynamic_at_max_offset");
    const RopeFrequencies f = prepared(below.scaling, below.base, below.rotary());
    RopeScaling standard;
    const RopeFrequencies plain = prepared(standard, below.base, below.rotary());
    for (int64_t length : {int64_t{1}, int64_t{41}, int64_t{64}})
      CHECK(compute(f, length).first == compute(plain, length).first);
    CHECK(max_relative(compute(f, at.seq_len).first, at.inv_freq) <= kSameFrequencies);
    // Past the maximum every frequency but the first (1) shrinks, more with each length.
    const auto past = compute(f, 65).first, further = compute(f, 200).first, base = compute(plain, 65).first;
    CHECK(past[0] == 1.0);
    for (size_t k = 1; k < past.size(); ++k) {
      CHECK(past[k] < base[k]);
      CHECK(further[k] < past[k]);
    }
  }
  SECTION("longrope: short factors up to original_max_position_embeddings, long ones past it") {
    const ScalingCase& short_case = named("longrope_short_factor_from_max");
    const ScalingCase& long_case = named("longrope_long_factor_from_max_offset");
    REQUIRE(short_case.seq_len == 64);
    REQUIRE(long_case.seq_len == 65);
    const RopeFrequencies f = prepared(short_case.scaling, short_case.base, short_case.rotary());
    for (int64_t length : {int64_t{1}, int64_t{64}})
      CHECK(max_relative(compute(f, length).first, short_case.inv_freq) <= kSameFrequencies);
    for (int64_t length : {int64_t{65}, int64_t{100000}})
      CHECK(max_relative(compute(f, length).first, long_case.inv_freq) <= kSameFrequencies);
    // The attention factor is the one from the factor alone (as at init in Hugging Face).
    CHECK(compute(f, 1).second == compute(f, 65).second);
  }
  SECTION("the other schemes") {
    for (const char* name : {"default_rank2", "linear_type_key", "yarn_qwen_factor4", "llama3_bands_d128", "given_inv_freq"}) {
      INFO(name);
      const ScalingCase& c = named(name);
      const RopeFrequencies f = prepared(c.scaling, c.base, c.rotary());
      const auto first = compute(f, 1);
      CHECK(first == compute(f, 1000000));
      CHECK(max_relative(first.first, c.inv_freq) <= kSameFrequencies);
    }
  }
}

TEST_CASE("RopeFrequencies::prepare keeps its own copy of the scheme's arrays", "[rope]") {
  for (const char* name : {"longrope_long_factor_from_max_offset", "given_inv_freq"}) {
    INFO(name);
    ScalingCase c = named(name);  // a copy: its arrays are still the original case's
    std::vector<double> short_factor = c.short_factor, long_factor = c.long_factor, given = c.given_inv_freq;
    c.scaling.short_factor = short_factor.empty() ? nullptr : short_factor.data();
    c.scaling.long_factor = long_factor.empty() ? nullptr : long_factor.data();
    c.scaling.inv_freq = given.empty() ? nullptr : given.data();
    const RopeFrequencies f = prepared(c.scaling, c.base, c.rotary());
    const auto before = compute(f, c.seq_len);
    for (auto* v : {&short_factor, &long_factor, &given})
      for (double& x : *v) x = kNaN;
    CHECK(compute(f, c.seq_len) == before);
    CHECK(max_relative(before.first, c.inv_freq) <= kSameFrequencies);
  }
}

TEST_CASE("RopeFrequencies::check refuses bad schemes, naming the field", "[rope][errors]") {
  const double factors[4] = {1.0, 1.5, 2.0, 3.0};
  const double negative[4] = {1.0, 1.5, -1.0, 3.0};

  SECTION("any scheme") {
    RopeScaling s = of_type(RopeType::standard);
    CHECK(check_message(s, 0.0) == "base: expected a positive finite number, got 0");
    CHECK(check_message(s, kInfinity) == "base: expected a positive finite number, got Infinity");
    s = of_type(RopeType::linear);
    s.factor = -2.0;
    CHECK(check_message(s) == "ropeScaling.factor: expected a positive finite number, got -2");
    s.factor = kNaN;
    CHECK(check_message(s) == "ropeScaling.factor: expected a positive finite number, got NaN");
    s = of_type(RopeType::yarn);
    s.factor = 4.0;
    s.original_max_position_embeddings = 64;
    s.attention_factor = 0.0;
    CHECK(check_message(s) == "ropeScaling.attention_factor: expected a positive finite number, got 0");
    s.attention_factor.reset();
    s.original_max_position_embeddings = 0;
    CHECK(check_message(s) == "ropeScaling.original_max_position_embeddings: expected a positive integer, got 0");
    s.original_max_position_embeddings.reset();
    s.max_position_embeddings = -5;
    CHECK(check_message(s) == "maxPositionEmbeddings: expected a positive integer, got -5");
  }
  SECTION("linear and dynamic") {
    CHECK(check_message(of_type(RopeType::linear)) ==
          "ropeScaling.factor: expected a positive finite number (rope_type 'linear' needs it), got none");
    RopeScaling s = of_type(RopeType::dynamic);
    s.factor = 2.0;
    CHECK(check_message(s) == "maxPositionEmbeddings: expected a positive integer (rope_type 'dynamic' needs it), got none");
    s.max_position_embeddings = 64;
    CHECK(check_message(s, 10000.0, 2) == "rotaryDim: expected more than 2 for rope_type 'dynamic', got 2");
    s.factor.reset();
    CHECK(check_message(s) == "ropeScaling.factor: expected a positive finite number (rope_type 'dynamic' needs it), got none");
  }
  SECTION("yarn") {
    RopeScaling s = of_type(RopeType::yarn);
    s.original_max_position_embeddings = 4096;
    CHECK(check_message(s) ==
          "ropeScaling.factor: expected a positive finite number, or maxPositionEmbeddings to derive it (÷ "
          "original_max_position_embeddings), got none");
    s.factor = 4.0;
    s.beta_fast = kInfinity;
    CHECK(check_message(s) == "ropeScaling.beta_fast: expected a finite number, got Infinity");
    s.beta_fast.reset();
    s.mscale_all_dim = kNaN;
    CHECK(check_message(s) == "ropeScaling.mscale_all_dim: expected a finite number, got NaN");
    s.mscale_all_dim.reset();
    s.original_max_position_embeddings.reset();
    CHECK(check_message(s) ==
          "ropeScaling.original_max_position_embeddings: expected a positive integer, or maxPositionEmbeddings "
          "(rope_type 'yarn' needs one), got none");
    s.max_position_embeddings = 4096;  // the original length defaults to it
    CHECK(check_message(s).empty());
  }
  SECTION("longrope") {
    RopeScaling s = of_type(RopeType::longrope);
    s.factor = 4.0;
    s.original_max_position_embeddings = 64;
    s.short_factor = factors;
    s.long_factor = factors;
    s.factor_count = 3;
    CHECK(check_message(s) ==
          "ropeScaling.short_factor: expected two lists (short_factor, long_factor) of 4 numbers (rotaryDim / 2), got 3 numbers");
    s.factor_count = 4;
    CHECK(check_message(s).empty());
    s.long_factor = negative;
    CHECK(check_message(s) == "ropeScaling.long_factor: expected positive finite numbers, got -1 at 2");
    s.long_factor = factors;
    s.short_factor = negative;
    CHECK(check_message(s) == "ropeScaling.short_factor: expected positive finite numbers, got -1 at 2");
    s.short_factor = s.long_factor = nullptr;  // a check of shapes before the arrays are copied in
    CHECK(check_message(s).empty());
    s.short_factor = s.long_factor = factors;
    s.factor.reset();
    CHECK(check_message(s) ==
          "maxPositionEmbeddings: expected a positive integer (÷ original_max_position_embeddings, it gives "
          "longrope's factor), or ropeScaling.factor, got none");
    s.max_position_embeddings = 2048;
    CHECK(check_message(s).empty());
    s.original_max_position_embeddings.reset();  // the original length defaults to the maximum
    CHECK(check_message(s).empty());
    s.factor = 4.0;
    s.max_position_embeddings.reset();
    s.original_max_position_embeddings.reset();
    CHECK(check_message(s) ==
          "ropeScaling.original_max_position_embeddings: expected a positive integer, or maxPositionEmbeddings "
          "(rope_type 'longrope' needs one), got none");
  }
  SECTION("llama3") {
    RopeScaling s = of_type(RopeType::llama3);
    s.factor = 8.0;
    s.high_freq_factor = 4.0;
    CHECK(check_message(s) ==
          "ropeScaling.low_freq_factor: expected a positive finite number (rope_type 'llama3' needs it), got none");
    s.low_freq_factor = 4.0;
    s.high_freq_factor = 1.0;
    CHECK(check_message(s) == "ropeScaling.high_freq_factor: expected more than low_freq_factor (4), got 1");
    s.high_freq_factor = 4.0;
    CHECK(check_message(s) == "ropeScaling.high_freq_factor: expected more than low_freq_factor (4), got 4");
    s.low_freq_factor = 1.0;
    CHECK(check_message(s) ==
          "ropeScaling.original_max_position_embeddings: expected a positive integer, or maxPositionEmbeddings "
          "(rope_type 'llama3' needs one), got none");
    s.max_position_embeddings = 8192;
    CHECK(check_message(s).empty());
    s.factor.reset();
    CHECK(check_message(s) == "ropeScaling.factor: expected a positive finite number (rope_type 'llama3' needs it), got none");
  }
  SECTION("given frequencies") {
    const double inv[4] = {1.0, kNaN, 0.01, 0.001};
    RopeScaling s = of_type(RopeType::given);
    s.inv_freq = inv;
    s.inv_freq_count = 3;
    CHECK(check_message(s) == "invFreq: expected 4 inverse frequencies (rotaryDim / 2), got 3");
    s.inv_freq_count = 4;
    CHECK(check_message(s) == "invFreq: expected finite numbers, got NaN at 1");
    s.inv_freq = factors;
    s.attention_scaling = kInfinity;
    CHECK(check_message(s) == "attentionScaling: expected a finite number, got Infinity");
    s.attention_scaling = 0.5;
    CHECK(check_message(s, 0.0).empty());  // no base needed
  }
  SECTION("prepare and check_rope refuse as check does") {
    RopeScaling s = of_type(RopeType::linear);
    RopeFrequencies f;
    CHECK(f.prepare(s, 10000.0, 8).message() == check_message(s));
    attn::RopeOptions options;
    options.scaling = s;
    CHECK(attn::check_rope({2, 3, 8}, options).message() == check_message(s));
    options.rotary_dim = 4;
    s = of_type(RopeType::given);
    s.inv_freq = factors;
    s.inv_freq_count = 4;
    options.scaling = s;
    CHECK(attn::check_rope({2, 3, 8}, options).message() == "invFreq: expected 2 inverse frequencies (rotaryDim / 2), got 4");
    std::vector<float> x(48, 1.0f), out(48);
    CHECK(attn::rope({x.data(), {2, 3, 8}}, options, out.data()).argument == "invFreq");
  }
}

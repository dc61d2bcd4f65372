#include "rope.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "buffer.h"
#include "kernels/kernels.h"
#include "module.h"

namespace attn {
namespace {

constexpr double kPi = 3.14159265358979323846;

Status check_positive(const std::optional<double>& value, const char* argument) {
  if (value && !(*value > 0.0 && std::isfinite(*value)))
    return Status::invalid(argument, "a positive finite number", number_string(*value));
  return Status::success();
}

Status require(const std::optional<double>& value, const char* argument, const char* type) {
  if (!value) return Status::invalid(argument, std::string("a positive finite number (rope_type '") + type + "' needs it)", "none");
  return check_positive(value, argument);
}

Status check_length(const std::optional<int64_t>& value, const char* argument) {
  if (value && *value <= 0) return Status::invalid(argument, "a positive integer", std::to_string(*value));
  return Status::success();
}

// Logarithms and powers through log1p (a polynomial) and exp (whose table exp2 already brings):
// std::log's and std::pow's tables would add 7 KB to every page for a few numbers a call.
double ln(double x) { return std::log1p(x - 1.0); }
double power(double base, double exponent) { return std::exp(exponent * ln(base)); }

// Hugging Face's get_mscale (YaRN's attention factor for a scale s).
double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * ln(scale) + 1.0; }

// base^(-2k/r): the default frequencies (_compute_default_rope_parameters).
double default_frequency(double base, int64_t k, int64_t half) {
  return power(base, -static_cast<double>(k) / static_cast<double>(half));
}

}  // namespace

Status RopeFrequencies::check(const RopeScaling& s, double base, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  if (s.type != RopeType::given && !(base > 0.0 && std::isfinite(base)))
    return Status::invalid("base", "a positive finite number", number_string(base));
  Status st = first_failure({check_positive(s.factor, "ropeScaling.factor"),
                             check_positive(s.attention_factor, "ropeScaling.attention_factor"),
                             check_length(s.original_max_position_embeddings, "ropeScaling.original_max_position_embeddings"),
                             check_length(s.max_position_embeddings, "maxPositionEmbeddings")});
  if (!st.ok()) return st;
  const bool has_original = s.original_max_position_embeddings || s.max_position_embeddings;
  const auto need_original = [&](const char* type) {
    return has_original ? Status::success()
                        : Status::invalid("ropeScaling.original_max_position_embeddings",
                                          std::string("a positive integer, or maxPositionEmbeddings (rope_type '") +
                                              type + "' needs one)",
                                          "none");
  };
  switch (s.type) {
    case RopeType::standard:
      return Status::success();
    case RopeType::linear:
      return require(s.factor, "ropeScaling.factor", "linear");
    case RopeType::dynamic:
      if (!s.max_position_embeddings)
        return Status::invalid("maxPositionEmbeddings", "a positive integer (rope_type 'dynamic' needs it)", "none");
      if (rotary_dim <= 2)
        return Status::invalid("rotaryDim", "more than 2 for rope_type 'dynamic'", std::to_string(rotary_dim));
      return require(s.factor, "ropeScaling.factor", "dynamic");
    case RopeType::yarn:
      for (auto [value, name] : {std::pair{s.beta_fast, "ropeScaling.beta_fast"}, {s.beta_slow, "ropeScaling.beta_slow"},
                                 {s.mscale, "ropeScaling.mscale"}, {s.mscale_all_dim, "ropeScaling.mscale_all_dim"}})
        if (value && !std::isfinite(*value)) return Status::invalid(name, "a finite number", number_string(*value));
      if (!s.factor && !s.max_position_embeddings)
        return Status::invalid("ropeScaling.factor",
                               "a positive finite number, or maxPositionEmbeddings to derive it (÷ "
                               "original_max_position_embeddings)",
                               "none");
      return need_original("yarn");
    case RopeType::longrope:
      if (s.factor_count != half)
        return Status::invalid("ropeScaling.short_factor",
                               "two lists (short_factor, long_factor) of " + std::to_string(half) + " numbers (rotaryDim / 2)",
                               std::to_string(s.factor_count) + " numbers");
      // Without the arrays (a check of shapes before they are copied in) only their length counts.
      for (const double* factors : {s.short_factor, s.long_factor})
        for (int64_t k = 0; factors && k < half; ++k)
          if (!(factors[k] > 0.0 && std::isfinite(factors[k])))
            return Status::invalid(factors == s.short_factor ? "ropeScaling.short_factor" : "ropeScaling.long_factor",
                                   "positive finite numbers", number_string(factors[k]) + " at " + std::to_string(k));
      if (!s.factor && !s.max_position_embeddings)
        return Status::invalid("maxPositionEmbeddings",
                               "a positive integer (÷ original_max_position_embeddings, it gives longrope's "
                               "factor), or ropeScaling.factor",
                               "none");
      return need_original("longrope");
    case RopeType::llama3:
      st = first_failure({require(s.factor, "ropeScaling.factor", "llama3"),
                          require(s.low_freq_factor, "ropeScaling.low_freq_factor", "llama3"),
                          require(s.high_freq_factor, "ropeScaling.high_freq_factor", "llama3")});
      if (!st.ok()) return st;
      if (*s.high_freq_factor <= *s.low_freq_factor)
        return Status::invalid("ropeScaling.high_freq_factor",
                               "more than low_freq_factor (" + number_string(*s.low_freq_factor) + ")",
                               number_string(*s.high_freq_factor));
      return need_original("llama3");
    case RopeType::given:
      if (s.inv_freq_count != half)
        return Status::invalid("invFreq", std::to_string(half) + " inverse frequencies (rotaryDim / 2)",
                               std::to_string(s.inv_freq_count));
      for (int64_t k = 0; s.inv_freq && k < half; ++k)
        if (!std::isfinite(s.inv_freq[k]))
          return Status::invalid("invFreq", "finite numbers", number_string(s.inv_freq[k]) + " at " + std::to_string(k));
      if (!std::isfinite(s.attention_scaling))
        return Status::invalid("attentionScaling", "a finite number", number_string(s.attention_scaling));
      return Status::success();
  }
  return Status::success();
}

Status RopeFrequencies::prepare(const RopeScaling& scaling, double base, int64_t rotary_dim) {
  Status s = check(scaling, base, rotary_dim);
  if (!s.ok()) return s;
  half_ = rotary_dim / 2;
  base_ = base;
  scaling_ = scaling;
  const bool longrope = scaling.type == RopeType::longrope, given = scaling.type == RopeType::given;
  s = tables_.allocate(longrope ? 2 * half_ : given ? half_ : 0, "RoPE frequencies");
  if (!s.ok()) return s;
  if (longrope) {
    std::copy_n(scaling.short_factor, half_, tables_.data());
    std::copy_n(scaling.long_factor, half_, tables_.data() + half_);
    scaling_.short_factor = tables_.data();
    scaling_.long_factor = tables_.data() + half_;
  } else if (given) {
    std::copy_n(scaling.inv_freq, half_, tables_.data());
    scaling_.inv_freq = tables_.data();
  }
  original_ = scaling.original_max_position_embeddings.value_or(scaling.max_position_embeddings.value_or(0));
  if (scaling.type == RopeType::dynamic) return Status::success();
  s = frequencies_.allocate(longrope ? 2 * half_ : half_, "RoPE frequencies");
  if (!s.ok()) return s;
  attention_ = derive(original_, frequencies_.data());
  if (longrope) derive(original_ + 1, frequencies_.data() + half_);
  return Status::success();
}

double RopeFrequencies::compute(int64_t sequence_length, double* inv_freq) const {
  if (scaling_.type == RopeType::dynamic) return derive(sequence_length, inv_freq);
  const bool past_original = scaling_.type == RopeType::longrope && sequence_length > original_;
  std::copy_n(frequencies_.data() + (past_original ? half_ : 0), half_, inv_freq);
  return attention_;
}

double RopeFrequencies::derive(int64_t sequence_length, double* inv_freq) const {
  const RopeScaling& s = scaling_;
  const int64_t half = half_;
  const double dim = 2.0 * static_cast<double>(half);
  const int64_t original = original_;
  switch (s.type) {
    case RopeType::standard:
    case RopeType::linear: {
      const double factor = s.type == RopeType::linear ? *s.factor : 1.0;
      for (int64_t k = 0; k < half; ++k) inv_freq[k] = default_frequency(base_, k, half) / factor;
      return 1.0;
    }
    case RopeType::dynamic: {
      // _compute_dynamic_ntk_parameters: the base grows with the length past max_position_embeddings.
      const double max_positions = static_cast<double>(*s.max_position_embeddings);
      const double length = std::max(static_cast<double>(sequence_length), max_positions);
      const double factor = *s.factor;
      const double base = base_ * power(factor * length / max_positions - (factor - 1.0), dim / (dim - 2.0));
      for (int64_t k = 0; k < half; ++k) inv_freq[k] = default_frequency(base, k, half);
      return 1.0;
    }
    case RopeType::yarn: {
      // _compute_yarn_parameters: frequencies below the correction range interpolated (divided by
      // the factor), those above kept, a linear ramp between.
      const double factor = s.factor ? *s.factor : static_cast<double>(*s.max_position_embeddings) / static_cast<double>(original);
      double attention = 0.0;
      if (s.attention_factor)
        attention = *s.attention_factor;
      else if (s.mscale && *s.mscale != 0.0 && s.mscale_all_dim && *s.mscale_all_dim != 0.0)
        attention = yarn_mscale(factor, *s.mscale) / yarn_mscale(factor, *s.mscale_all_dim);
      else
        attention = yarn_mscale(factor, 1.0);
      // `get(...) or 32`: an absent or zero beta takes the default.
      const double beta_fast = s.beta_fast && *s.beta_fast != 0.0 ? *s.beta_fast : 32.0;
      const double beta_slow = s.beta_slow && *s.beta_slow != 0.0 ? *s.beta_slow : 1.0;
      const auto correction_dim = [&](double rotations) {
        return dim * ln(static_cast<double>(original) / (rotations * 2.0 * kPi)) / (2.0 * ln(base_));
      };
      double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1.0);
      if (low == high) high += 0.001;  // as Hugging Face: no division by zero
      for (int64_t k = 0; k < half; ++k) {
        const double extrapolation = default_frequency(base_, k, half);
        const double ramp = std::clamp((static_cast<double>(k) - low) / (high - low), 0.0, 1.0);
        const double kept = 1.0 - ramp;
        inv_freq[k] = extrapolation / factor * (1.0 - kept) + extrapolation * kept;
      }
      return attention;
    }
    case RopeType::longrope: {
      // _compute_longrope_parameters and dynamic_rope_update: the long factors once the sequence
      // outgrows the original length.
      const double factor =
          s.factor ? *s.factor
                   : static_cast<double>(*s.max_position_embeddings) / static_cast<double>(original);
      const double attention =
          s.attention_factor ? *s.attention_factor
                             : factor <= 1.0 ? 1.0 : std::sqrt(1.0 + ln(factor) / ln(static_cast<double>(original)));
      const double* factors = sequence_length > original ? s.long_factor : s.short_factor;
      for (int64_t k = 0; k < half; ++k) inv_freq[k] = default_frequency(base_, k, half) / factors[k];
      return attention;
    }
    case RopeType::llama3: {
      // _compute_llama3_parameters: long wavelengths divided by the factor, short ones kept, a smooth
      // blend between.
      const double factor = *s.factor, low = *s.low_freq_factor, high = *s.high_freq_factor;
      const double low_wavelength = static_cast<double>(original) / low;
      const double high_wavelength = static_cast<double>(original) / high;
      for (int64_t k = 0; k < half; ++k) {
        const double frequency = default_frequency(base_, k, half), wavelength = 2.0 * kPi / frequency;
        if (wavelength > low_wavelength) {
          inv_freq[k] = frequency / factor;
        } else if (wavelength < high_wavelength) {
          inv_freq[k] = frequency;
        } else {
          const double smooth = (static_cast<double>(original) / wavelength - low) / (high - low);
          inv_freq[k] = (1.0 - smooth) * frequency / factor + smooth * frequency;
        }
      }
      return 1.0;
    }
    case RopeType::given:
      std::copy_n(s.inv_freq, half, inv_freq);
      return s.attention_scaling;
  }
  return 1.0;
}

Status check_rope(const Shape& x, const RopeOptions& options) {
  if (x.rank < 2 || x.rank > kMaxRank || !x.non_negative())
    return Status::invalid("x", "rank 2 to " + std::to_string(kMaxRank) + " ([..., L, d])", x.str());
  const int64_t length = x.at_end(2), dim = x.at_end(1);
  if (options.rotary_dim) {
    const int64_t r = *options.rotary_dim;
    if (r < 0 || r > dim || r % 2 != 0)
      return Status::invalid("rotaryDim", "an even integer in [0, " + std::to_string(dim) + "] (the head dim d)",
                             std::to_string(r));
  } else if (dim % 2 != 0) {
    return Status::invalid("x", "an even last dimension d, or rotaryDim (even, at most d)", x.str());
  }
  const Shape& p = options.positions.shape;
  if (options.positions.present() && !((p.rank == 1 && p[0] == length) || (p.rank == 2 && p[1] == length && x.rank >= 3 && p[0] == x[0])))
    return Status::invalid("positions",
                           "[" + std::to_string(length) + "] (L, one per row of x)" +
                               (x.rank >= 3 ? " or [" + std::to_string(x[0]) + ", " + std::to_string(length) + "] (N, L)" : ""),
                           p.str());
  return RopeFrequencies::check(options.scaling, options.base, options.rotary_dim.value_or(dim));
}

Status apply_rope(std::initializer_list<RopeTarget> targets, const RopeFrequencies& frequencies,
                  const IdsView& positions, int64_t first, bool interleaved) {
  const Shape& lead = targets.begin()->shape;
  const int64_t length = lead.at_end(2), half = frequencies.half();
  const bool per_row = positions.present() && positions.shape.rank == 2;
  const int64_t groups = per_row ? lead[0] : 1;
  // Hugging Face's seq_len: the largest position of the call plus one.
  int64_t sequence_length = first + length;
  if (positions.present()) {
    sequence_length = 0;
    for (int64_t i = 0; i < positions.shape.numel(); ++i)
      sequence_length = std::max<int64_t>(sequence_length, int64_t{positions.data[i]} + 1);
  }
  // cos and sin of a chunk of positions at a time: the table stays small whatever L is.
  constexpr int64_t kChunk = 64;
  Buffer<double> inv_freq;
  FloatBuffer table;
  Status s = first_failure({inv_freq.allocate(half, "RoPE frequencies"), table.allocate(2 * kChunk * half, "RoPE cos/sin")});
  if (!s.ok()) return s;
  const double attention = frequencies.compute(sequence_length, inv_freq.data());
  const kernels::KernelSet& k = kernels::active_kernels();
  for (int64_t group = 0; group < groups; ++group)
    for (int64_t l0 = 0; l0 < length; l0 += kChunk) {
      const int64_t count = std::min(kChunk, length - l0);
      for (int64_t l = 0; l < count; ++l) {
        // Angles in double precision (float32 angles drift at long positions), rounded to float once.
        const int64_t at = l0 + l;
        const double position = positions.present() ? positions.data[(per_row ? group * length : 0) + at]
                                                    : static_cast<double>(first + at);
        float* cos_a = table.data() + 2 * l * half;
        float* sin_a = cos_a + half;
        for (int64_t f = 0; f < half; ++f) {
          const double angle = position * inv_freq.data()[f];
          cos_a[f] = static_cast<float>(std::cos(angle) * attention);
          sin_a[f] = static_cast<float>(std::sin(angle) * attention);
        }
      }
      for (const RopeTarget& target : targets) {
        const int64_t dim = target.shape.at_end(1);
        const int64_t rows = target.shape.leading_numel(2) / std::max<int64_t>(groups, 1);
        for (int64_t l = 0; l < count; ++l) {
          const float* cos_a = table.data() + 2 * l * half;
          k.rope(target.data + (group * rows * length + l0 + l) * dim, static_cast<size_t>(rows),
                 static_cast<size_t>(length * dim), cos_a, cos_a + half, static_cast<size_t>(half), interleaved);
        }
      }
    }
  return Status::success();
}

Status rope(const TensorView& x, const RopeOptions& options, float* output) {
  Status s = first_failure({check_rope(x.shape, options), check_data(x, "x"), check_data(options.positions, "positions")});
  if (!s.ok()) return s;
  RopeFrequencies frequencies;
  s = frequencies.prepare(options.scaling, options.base, options.rotary_dim.value_or(x.shape.at_end(1)));
  if (!s.ok()) return s;
  if (output != x.data) std::copy_n(x.data, x.shape.numel(), output);
  return apply_rope({{output, x.shape}}, frequencies, options.positions, options.offset, options.interleaved);
}

}  // namespace attn

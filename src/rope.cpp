#include <algorithm>
#include <cmath>
#include <string>

#include "attention.h"
#include "buffer.h"
#include "module.h"

namespace attn {

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
  if (options.position_count >= 0 && options.position_count != length)
    return Status::invalid("positions", std::to_string(length) + " positions (L, one per row of x)",
                           std::to_string(options.position_count));
  if (!(options.base > 0.0 && std::isfinite(options.base)))
    return Status::invalid("base", "a positive finite number", number_string(options.base));
  return Status::success();
}

Status rope(const TensorView& x, const RopeOptions& options, float* output) {
  const bool given_positions = options.position_count >= 0;
  Status s = first_failure({check_rope(x.shape, options), check_data(x, "x"),
                            given_positions ? check_data(options.positions, {options.position_count}, "positions")
                                            : Status::success()});
  if (!s.ok()) return s;
  const int64_t length = x.shape.at_end(2), dim = x.shape.at_end(1), rows = x.shape.leading_numel(2);
  const int64_t half = options.rotary_dim.value_or(dim) / 2;
  // Each position's cos and sin, from angles in double precision (Hugging Face's float32 angles
  // drift at long positions), then rounded to float once.
  FloatBuffer table;
  Buffer<double> frequencies;
  s = first_failure({table.allocate(2 * half, "RoPE cos/sin"), frequencies.allocate(half, "RoPE frequencies")});
  if (!s.ok()) return s;
  for (int64_t k = 0; k < half; ++k)
    frequencies.data()[k] = std::pow(options.base, -static_cast<double>(k) / static_cast<double>(half));
  float* cos_a = table.data();
  float* sin_a = table.data() + half;
  // The pair of dims k rotates: (k, k + r/2) rotate-half, (2k, 2k + 1) interleaved.
  const int64_t pair_step = options.interleaved ? 1 : half;
  const int64_t first_step = options.interleaved ? 2 : 1;
  for (int64_t l = 0; l < length; ++l) {
    const double position = given_positions ? options.positions[l] : static_cast<double>(options.offset + l);
    for (int64_t k = 0; k < half; ++k) {
      const double angle = position * frequencies.data()[k];
      cos_a[k] = static_cast<float>(std::cos(angle));
      sin_a[k] = static_cast<float>(std::sin(angle));
    }
    for (int64_t row = 0; row < rows; ++row) {
      const float* in = x.data + (row * length + l) * dim;
      float* out = output + (row * length + l) * dim;
      for (int64_t k = 0; k < half; ++k) {
        const int64_t a = k * first_step, b = a + pair_step;
        const float xa = in[a], xb = in[b];
        out[a] = xa * cos_a[k] - xb * sin_a[k];
        out[b] = xb * cos_a[k] + xa * sin_a[k];
      }
      if (out != in) std::copy(in + 2 * half, in + dim, out + 2 * half);
    }
  }
  return Status::success();
}

}  // namespace attn

// Seeded dropout whose draws depend only on (seed, element index): every build, both SDPA paths
// and any split across threads drop exactly the same weights.
#pragma once

#include <cstdint>

namespace attn {

class Dropout {
 public:
  Dropout(float p, uint64_t seed)
      : seed_(seed),
        threshold_(static_cast<uint64_t>(static_cast<double>(p) * 4294967296.0)),
        keep_scale_(p > 0.0f ? 1.0f / (1.0f - p) : 1.0f) {}

  bool active() const { return threshold_ > 0; }
  // Survivors are scaled by 1 / (1 - p), as torch.nn.functional.dropout does.
  float keep_scale() const { return keep_scale_; }
  bool keeps(uint64_t index) const { return (mix(seed_ + index * 0x9E3779B97F4A7C15ull) >> 32) >= threshold_; }

  // Applies dropout to weights[0, n), whose first element has flat index `first_index`.
  void apply(float* weights, int64_t n, uint64_t first_index) const {
    for (int64_t j = 0; j < n; ++j)
      weights[j] = keeps(first_index + static_cast<uint64_t>(j)) ? weights[j] * keep_scale_ : 0.0f;
  }

 private:
  // splitmix64's finaliser: a strong 64-bit mix, cheap on every target.
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  uint64_t seed_;
  uint64_t threshold_;
  float keep_scale_;
};

}  // namespace attn

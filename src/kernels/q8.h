// q8_0, llama.cpp's 8-bit block format: a row of values cut into blocks of 32 (the last one
// shorter when 32 does not divide the row), each block stored as signed bytes q and one scale
// d = max|x| / 127, with q = round(x / d) (halves away from zero), so that x ≈ q · d. A KV cache
// of dtype q8 holds its keys and values so, with binary16 scales as llama.cpp's block_q8_0, and
// attends with its queries quantised so too (scales kept as floats): the decode step scores them
// in integers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../half.h"

namespace attn::kernels {

constexpr size_t kQ8Block = 32;

// Scales a row of n values has.
inline size_t q8_blocks(size_t n) { return (n + kQ8Block - 1) / kQ8Block; }

// The n ≤ 32 values of one block: writes q[0, n) and returns d (llama.cpp's quantize_row_q8_0_ref,
// dividing by d where it multiplies by 1 / d, which overflows for subnormal d). A block holding
// Inf or NaN (a query: a cache refuses them) gets d = NaN and q = 0, so that its scores are NaN.
inline float quantize_q8_block(const float* x, size_t n, int8_t* q) {
  float amax = 0.0f;
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    finite &= std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  const float d = finite ? amax / 127.0f : std::nanf("");
  // Clamped: a subnormal d is rounded coarsely enough that x / d may pass 127.
  for (size_t i = 0; i < n; ++i) q[i] = d > 0.0f ? static_cast<int8_t>(std::clamp(std::round(x[i] / d), -127.0f, 127.0f)) : 0;
  return d;
}

// A row of n values: q [n], scales [q8_blocks(n)] as floats, or as binary16 (a cache's rows).
template <class Scale>
void quantize_q8(const float* x, size_t n, int8_t* q, Scale* scales) {
  for (size_t b = 0, i = 0; i < n; ++b, i += kQ8Block) {
    const float d = quantize_q8_block(x + i, std::min(kQ8Block, n - i), q + i);
    if constexpr (std::is_same_v<Scale, float>)
      scales[b] = d;
    else
      scales[b] = to_half(d);
  }
}

// x [n] rounded through q8 with float scales, as floats (q · d): the queries a q8 cache attends
// with, whichever path reads them. Quantising the result again gives the same bytes.
inline void round_q8(const float* x, size_t n, float* out) {
  int8_t q[kQ8Block];
  for (size_t i = 0; i < n; i += kQ8Block) {
    const size_t count = std::min(kQ8Block, n - i);
    const float d = quantize_q8_block(x + i, count, q);
    for (size_t e = 0; e < count; ++e) out[i + e] = static_cast<float>(q[e]) * d;
  }
}

// The floats of a row of n values with binary16 scales: q · d, exact (8 bits times 11).
inline void dequantize_q8(const int8_t* q, const uint16_t* scales, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * from_half(scales[i / kQ8Block]);
}

}  // namespace attn::kernels

// IEEE binary16 ("f16"), the storage of half-precision KV caches and weights, and bfloat16
// ("bf16", the upper half of a float32), a weight storage: conversions from and to float.
// Arithmetic stays in float; only storage is halved.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace attn {

using Half = uint16_t;  // the bits of a binary16 or a bfloat16

// How a tensor's elements are stored: floats, binary16 bits or bfloat16 bits.
enum class WeightDtype { f32, f16, bf16 };

// Rounds to the nearest binary16, ties to even; out of range gives ±Inf, NaN stays NaN.
inline Half to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const Half sign = static_cast<Half>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u | static_cast<Half>((magnitude >> 13) & 0x3ffu);
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // from 65520 (halfway past 65504) on: Inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a subnormal multiple of 2^-24; scaling by 2^24 is exact and nearbyint rounds
    // ties to even. 1024 multiples carry into the smallest normal's bits, as they should.
    float scaled;
    std::memcpy(&scaled, &magnitude, sizeof scaled);
    return sign | static_cast<Half>(std::nearbyint(scaled * 16777216.0f));
  }
  // Normal: rebias the exponent (127 → 15) and round the 13 dropped mantissa bits, ties to even; a
  // carry moves into the exponent, as it should.
  uint32_t half = (magnitude - 0x38000000u) >> 13;
  const uint32_t dropped = magnitude & 0x1fffu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<Half>(half);
}

// Exact: every binary16 is a float.
inline float from_half(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  const uint32_t bits = sign | (exponent == 0x1fu ? 0x7f800000u : (exponent + 112u) << 23) | (mantissa << 13);
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Rounds to the nearest bfloat16, ties to even (past the largest finite: ±Inf); NaN stays NaN.
inline Half to_bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  // NaN made quiet: its payload may lie in the dropped bits alone.
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<Half>((bits >> 16) | 0x40u);
  return static_cast<Half>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Exact: a bfloat16 is the upper half of a float32.
inline float from_bfloat16(Half b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// A binary16 or bfloat16 word (`dtype`) as the float it is, and a float rounded to one.
inline float widen(Half h, WeightDtype dtype) { return dtype == WeightDtype::bf16 ? from_bfloat16(h) : from_half(h); }
inline Half narrow(float value, WeightDtype dtype) {
  return dtype == WeightDtype::bf16 ? to_bfloat16(value) : to_half(value);
}

}  // namespace attn

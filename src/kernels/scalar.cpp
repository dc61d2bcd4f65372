// Scalar twins: the reference every other kernel set is tested against, and the kernels of the
// no-SIMD wasm build and of the native build.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../half.h"
#include "kernels.h"
#include "packing.h"
#include "q8.h"

namespace attn::kernels {
namespace {

float scale_bias_max_scalar(float* s, const float* bias, size_t n, float scale) {
  float max = -std::numeric_limits<float>::infinity();
  bool saw_nan = false;
  for (size_t j = 0; j < n; ++j) {
    const float x = s[j] * scale + (bias ? bias[j] : 0.0f);
    s[j] = x;
    saw_nan |= std::isnan(x);
    max = x > max ? x : max;
  }
  return saw_nan ? std::numeric_limits<float>::quiet_NaN() : max;
}

float score_terms_max_scalar(float* s, const float* bias, size_t n, const ScoreTerms& terms) {
  float max = -std::numeric_limits<float>::infinity();
  bool saw_nan = false;
  const float capped_scale = terms.softcap > 0.0f ? terms.scale / terms.softcap : 0.0f;
  for (size_t j = 0; j < n; ++j) {
    float x = terms.softcap > 0.0f ? terms.softcap * std::tanh(s[j] * capped_scale) : s[j] * terms.scale;
    if (terms.alibi_slope != 0.0f) x += terms.alibi_slope * (terms.alibi_distance + static_cast<float>(j));
    if (bias) x += bias[j];
    s[j] = x;
    saw_nan |= std::isnan(x);
    max = x > max ? x : max;
  }
  return saw_nan ? std::numeric_limits<float>::quiet_NaN() : max;
}

float exp_sum_scalar(float* s, size_t n, float max) {
  float sum = 0.0f;
  for (size_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - max);
    sum += s[j];
  }
  return sum;
}

void scale_scalar(float* x, size_t n, float alpha) {
  for (size_t j = 0; j < n; ++j) x[j] *= alpha;
}

// Each row accumulates a whole panel row at a time: the same order of additions per output as a
// dot product, laid out so that compilers vectorise the 8-wide inner loop.
void gemm_packed_scalar(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* packed_b,
                        const float* bias, float* C, size_t ldc) {
  for (size_t j0 = 0; j0 < N; j0 += kPanel) {
    const size_t columns = std::min(kPanel, N - j0);
    const float* panel = packed_b + j0 * K;
    for (size_t i = 0; i < M; ++i) {
      float acc[kPanel];
      for (size_t c = 0; c < kPanel; ++c) acc[c] = bias && c < columns ? bias[j0 + c] : 0.0f;
      for (size_t k = 0; k < K; ++k) {
        const float a = A[i * lda + k];
        for (size_t c = 0; c < kPanel; ++c) acc[c] += a * panel[k * kPanel + c];
      }
      std::copy(acc, acc + columns, C + i * ldc + j0);
    }
  }
}

void tanh_scores_scalar(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* B, size_t ldb,
                        const float* w, float* C, size_t ldc) {
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (size_t k = 0; k < K; ++k) sum += w[k] * std::tanh(A[i * lda + k] + B[j * ldb + k]);
      C[i * ldc + j] = sum;
    }
}

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return from_half(x); }

template <class T>
void gemm_nt_scalar(size_t M, size_t N, size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C,
                    size_t ldc) {
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (size_t k = 0; k < K; ++k) sum += A[i * lda + k] * widen(B[j * ldb + k]);
      C[i * ldc + j] = sum;
    }
}

template <class T>
void gemm_nn_add_scalar(size_t M, size_t N, size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C,
                        size_t ldc) {
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (size_t k = 0; k < K; ++k) sum += A[i * lda + k] * widen(B[k * ldb + j]);
      C[i * ldc + j] += sum;
    }
}

// Each block's dot product is exact in int32 (at most 32 · 127 · 127); blocks add up in float.
void gemm_nt_q8_scalar(size_t M, size_t N, size_t K, const int8_t* A, const float* a_scales, size_t lda,
                       const int8_t* B, const uint16_t* b_scales, size_t ldb, float* C, size_t ldc) {
  const size_t blocks = q8_blocks(K);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (size_t b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        for (size_t k = b * kQ8Block; k < std::min(K, (b + 1) * kQ8Block); ++k)
          dot += int32_t{A[i * lda + k]} * int32_t{B[j * ldb + k]};
        sum += static_cast<float>(dot) * (a_scales[i * blocks + b] * from_half(b_scales[j * blocks + b]));
      }
      C[i * ldc + j] = sum;
    }
}

void gemm_nn_add_q8_scalar(size_t M, size_t N, size_t K, const float* A, size_t lda, const int8_t* B,
                           const uint16_t* b_scales, size_t ldb, float* C, size_t ldc) {
  const size_t blocks = q8_blocks(N);
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (size_t k = 0; k < K; ++k)
        sum += A[i * lda + k] * (static_cast<float>(B[k * ldb + j]) * from_half(b_scales[k * blocks + j / kQ8Block]));
      C[i * ldc + j] += sum;
    }
}

void widen_f16_scalar(const uint16_t* h, float* out, size_t n) { std::transform(h, h + n, out, from_half); }
void widen_bf16_scalar(const uint16_t* b, float* out, size_t n) { std::transform(b, b + n, out, from_bfloat16); }

void rope_scalar(float* x, size_t rows, size_t stride, const float* cos, const float* sin, size_t half,
                 bool interleaved) {
  // The pair of dims k turns: (k, k + half) rotate-half, (2k, 2k + 1) interleaved.
  const size_t pair_step = interleaved ? 1 : half, first_step = interleaved ? 2 : 1;
  for (size_t r = 0; r < rows; ++r) {
    float* v = x + r * stride;
    for (size_t k = 0; k < half; ++k) {
      const size_t a = k * first_step, b = a + pair_step;
      const float va = v[a], vb = v[b];
      v[a] = va * cos[k] - vb * sin[k];
      v[b] = vb * cos[k] + va * sin[k];
    }
  }
}

// act(v) in double, as the activations' definitions give it.
double activation(double v, Activation act) {
  switch (act) {
    case Activation::gelu:
      return 0.5 * v * std::erfc(-v * M_SQRT1_2);
    case Activation::gelu_tanh:
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case Activation::silu:
      break;
  }
  return v / (1.0 + std::exp(-v));
}

void activate_scalar(float* x, const float* multiplier, size_t n, Activation act) {
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(activation(x[i], act));
    if (multiplier) x[i] *= multiplier[i];
  }
}

}  // namespace

const KernelSet kScalarKernels = {
    "scalar",
    gemm_nt_scalar<float>,
    scale_bias_max_scalar,
    score_terms_max_scalar,
    exp_sum_scalar,
    scale_scalar,
    gemm_packed_scalar,
    tanh_scores_scalar,
    gemm_nt_scalar<uint16_t>,
    gemm_nn_add_scalar<float>,
    gemm_nn_add_scalar<uint16_t>,
    gemm_nt_q8_scalar,
    gemm_nn_add_q8_scalar,
    widen_f16_scalar,
    widen_bf16_scalar,
    rope_scalar,
    activate_scalar,
};

}  // namespace attn::kernels

// wasm SIMD128 kernels. A multiply-add is f32x4.mul + f32x4.add, as in ggml's simd-mappings for
// __wasm_simd128__, except in the relaxed builds (ATTENTION_RELAXED_SIMD), where it is one
// f32x4.relaxed_madd: a fused multiply-add wherever the CPU has one (see relaxed_madd.h).
// Natively the same source compiles against SIMDe's implementation of the wasm intrinsics, so the
// native build, its tests and its benchmarks run these very kernels.
#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "../half.h"
#include "kernels.h"
#include "packing.h"
#include "q8.h"
#if defined(ATTENTION_RELAXED_SIMD)
#include "relaxed_madd.h"
#endif

namespace attn::kernels {
namespace {

#if defined(ATTENTION_RELAXED_SIMD)
inline v128_t madd(v128_t acc, v128_t a, v128_t b) { return attention_relaxed_madd_f32x4(a, b, acc); }
#else
inline v128_t madd(v128_t acc, v128_t a, v128_t b) { return wasm_f32x4_add(acc, wasm_f32x4_mul(a, b)); }
#endif

// (Σ a, Σ b, Σ c, Σ d): four horizontal sums in two shuffle rounds, of floats or (kInt) of int32.
template <bool kInt = false>
inline v128_t horizontal_sum4(v128_t a, v128_t b, v128_t c, v128_t d) {
  const auto add = [](v128_t x, v128_t y) { return kInt ? wasm_i32x4_add(x, y) : wasm_f32x4_add(x, y); };
  const v128_t ab = add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
  const v128_t cd = add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
  return add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

// f32x4.max propagates NaN, which is what PyTorch's max does.
inline float horizontal_max(v128_t v) {
  v = wasm_f32x4_max(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_max(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}

inline float horizontal_add(v128_t v) {
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
  v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane(v, 0);
}

// exp(x) for x <= 0 (softmax's x - max), as XNNPACK's f32 raddstoreexpminusmax wasmsimd rr2-p5:
// the magic bias rounds x·log2(e) to an integer n inside the float's mantissa, a shift makes 2^n
// from it, and a degree-5 polynomial covers the rest. No floor and no float-to-int conversion,
// which V8 lowers to long sequences on x86-64: twice as fast as Cephes' floor-based form. x is first raised to
// at least -88, where n = -127 makes 2^n exactly 0, so exp(-inf) = 0 exactly; f32x4.pmax is one
// instruction (a mask and a select would be four) and keeps a NaN x, which stays NaN.
// The range reduction x = n·ln2 + t: returns t and sets two_to_n.
inline v128_t exp_reduce(v128_t x, v128_t& two_to_n) {
  x = wasm_f32x4_pmax(x, wasm_f32x4_splat(-88.0f));
  const v128_t magic_bias = wasm_f32x4_splat(0x1.8000FEp23f);
  v128_t n = madd(magic_bias, x, wasm_f32x4_splat(0x1.715476p+0f));
  two_to_n = wasm_i32x4_shl(n, 23);
  n = wasm_f32x4_sub(n, magic_bias);
  const v128_t t = madd(x, n, wasm_f32x4_splat(-0x1.62E400p-1f));
  return madd(t, n, wasm_f32x4_splat(-0x1.7F7D1Cp-20f));
}

// exp(x) = 2^n · (1 + t·p(t)) from exp_reduce's t and 2^n.
inline v128_t exp_polynomial(v128_t t, v128_t two_to_n) {
  v128_t p = madd(wasm_f32x4_splat(0x1.573A1Ap-5f), wasm_f32x4_splat(0x1.0F9F9Cp-7f), t);
  p = madd(wasm_f32x4_splat(0x1.555A80p-3f), p, t);
  p = madd(wasm_f32x4_splat(0x1.FFFDC6p-2f), p, t);
  p = madd(wasm_f32x4_splat(0x1.FFFFF6p-1f), p, t);
  t = wasm_f32x4_mul(t, two_to_n);
  return madd(two_to_n, t, p);
}

inline v128_t exp_nonpositive_f32x4(v128_t x) {
  v128_t two_to_n;
  const v128_t t = exp_reduce(x, two_to_n);
  return exp_polynomial(t, two_to_n);
}

// Rows of B as floats, four lanes at a time (load4) or one (load1). Binary16 is widened in the
// "scaled domain": its sign, exponent and mantissa moved into a float's places unchanged (a sign
// extending load, a shift, an and), which reads h as h · 2^-112, subnormals included (as float
// subnormals). Sums over such lanes are multiplied by kScaledHalf once, at the end: three
// instructions a vector where an exact widening takes seven. Inf and NaN (exponent 31) read as
// finite numbers, which is why the f16 kernels require finite values.
constexpr float kScaledHalf = 0x1p112f;
inline v128_t load4(const float* p) { return wasm_v128_load(p); }
inline v128_t load4(const uint16_t* p) {
  return wasm_v128_and(wasm_i32x4_shl(wasm_i32x4_load16x4(p), 13), wasm_i32x4_splat(static_cast<int32_t>(0x8fffffff)));
}
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) {
  const uint32_t bits = (static_cast<uint32_t>(*p & 0x8000u) << 16) | (static_cast<uint32_t>(*p & 0x7fffu) << 13);
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
// What sums over B's lanes are multiplied by: nothing for floats.
inline v128_t unscale(v128_t sum, const float*) { return sum; }
inline v128_t unscale(v128_t sum, const uint16_t*) { return wasm_f32x4_mul(sum, wasm_f32x4_splat(kScaledHalf)); }

// One MR x NR block of C = A · Bᵀ: MR·NR dot products accumulated four lanes of K at a time.
// 4x2 keeps 8 accumulators and 6 operands live, inside the 16 vector registers of x86-64.
template <int MR, int NR, class T>
void gemm_nt_tile(size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C, size_t ldc) {
  v128_t acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int c = 0; c < 4; ++c) acc[r][c] = wasm_f32x4_splat(0.0f);
  size_t k = 0;
  for (; k + 4 <= K; k += 4) {
    v128_t b[NR];
    for (int c = 0; c < NR; ++c) b[c] = load4(B + c * ldb + k);
    for (int r = 0; r < MR; ++r) {
      const v128_t a = wasm_v128_load(A + r * lda + k);
      for (int c = 0; c < NR; ++c) acc[r][c] = madd(acc[r][c], a, b[c]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    alignas(16) float sums[4];
    wasm_v128_store(sums, horizontal_sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
    for (int c = 0; c < NR; ++c) {
      float sum = sums[c];
      for (size_t t = k; t < K; ++t) sum += A[r * lda + t] * load1(B + c * ldb + t);
      sums[c] = sum;
    }
    wasm_v128_store(sums, unscale(wasm_v128_load(sums), B));
    std::copy(sums, sums + NR, C + r * ldc);
  }
}

template <int MR, int NR, class T>
void gemm_nt_rows(size_t N, size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C, size_t ldc) {
  size_t j = 0;
  for (; j + NR <= N; j += NR) gemm_nt_tile<MR, NR>(K, A, lda, B + j * ldb, ldb, C + j, ldc);
  if constexpr (NR > 3) {
    if (N - j == 3) {
      gemm_nt_tile<MR, 3>(K, A, lda, B + j * ldb, ldb, C + j, ldc);
      return;
    }
  }
  if constexpr (NR > 2) {
    if (N - j >= 2) {
      gemm_nt_tile<MR, 2>(K, A, lda, B + j * ldb, ldb, C + j, ldc);
      j += 2;
    }
  }
  if (j < N) gemm_nt_tile<MR, 1>(K, A, lda, B + j * ldb, ldb, C + j, ldc);
}

// 4 x 2 tiles, float or binary16 keys: a decode step's group of 4 query heads reads each key once
// (binary16 is widened once), where 2 x 4 read it twice: the f32 decode step took 0.85x the time
// of 2 x 4 at contexts 4096 and 16384 (same results: each dot product sums in the same order).
template <int MR, int NR, class T>
void gemm_nt__wasmsimd(size_t M, size_t N, size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C,
                       size_t ldc) {
  size_t i = 0;
  for (; i + MR <= M; i += MR) gemm_nt_rows<MR, NR>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
  if constexpr (MR > 2) {
    if (i + 2 <= M) {
      gemm_nt_rows<2, NR>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
      i += 2;
    }
  }
  if (i < M) gemm_nt_rows<1, NR>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
}

// C[MR, 4·NV columns] += A[MR, K] · B[K, those columns]: each A element is splat and multiplied
// into the row of B, 8 accumulators for 4 x 8.
template <int MR, int NV, class T>
void gemm_nn_add_tile(size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C, size_t ldc) {
  v128_t acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = wasm_f32x4_splat(0.0f);
  for (size_t k = 0; k < K; ++k) {
    v128_t b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load4(B + k * ldb + 4 * v);
    for (int r = 0; r < MR; ++r) {
      const v128_t a = wasm_v128_load32_splat(A + r * lda + k);
      for (int v = 0; v < NV; ++v) acc[r][v] = madd(acc[r][v], a, b[v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      float* c = C + r * ldc + 4 * v;
      wasm_v128_store(c, wasm_f32x4_add(wasm_v128_load(c), unscale(acc[r][v], B)));
    }
}

template <int MR, class T>
void gemm_nn_add_rows(size_t N, size_t K, const float* A, size_t lda, const T* B, size_t ldb, float* C, size_t ldc) {
  size_t j = 0;
  for (; j + 8 <= N; j += 8) gemm_nn_add_tile<MR, 2>(K, A, lda, B + j, ldb, C + j, ldc);
  if (j + 4 <= N) {
    gemm_nn_add_tile<MR, 1>(K, A, lda, B + j, ldb, C + j, ldc);
    j += 4;
  }
  for (; j < N; ++j)  // the last 1..3 columns
    for (int r = 0; r < MR; ++r) {
      float sum = 0.0f;
      for (size_t k = 0; k < K; ++k) sum += A[r * lda + k] * load1(B + k * ldb + j);
      C[r * ldc + j] += wasm_f32x4_extract_lane(unscale(wasm_f32x4_splat(sum), B), 0);
    }
}

template <class T>
void gemm_nn_add_4x8__wasmsimd(size_t M, size_t N, size_t K, const float* A, size_t lda, const T* B, size_t ldb,
                               float* C, size_t ldc) {
  size_t i = 0;
  for (; i + 4 <= M; i += 4) gemm_nn_add_rows<4>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
  switch (M - i) {
    case 3: gemm_nn_add_rows<3>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc); break;
    case 2: gemm_nn_add_rows<2>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc); break;
    case 1: gemm_nn_add_rows<1>(N, K, A + i * lda, lda, B, ldb, C + i * ldc, ldc); break;
    default: break;
  }
}

// The float of a finite binary16 scale: widened in the scaled domain (load1) and scaled back,
// exact and without the branches of from_half.
inline float q8_scale(const uint16_t* h) { return load1(h) * kScaledHalf; }

// MR ≤ 4 rows' q8 scores against one key, the rows in the lanes of one vector: for each block of
// 32, the key's bytes loaded once, eight at a time sign-extended to 16 bits (v128.load8x8_s), each
// row's four products summed in pairs into 32 bits (i32x4.dot_i16x8_s: exact, |sum| ≤ 32 · 127²)
// and added, then the rows' sums reduced into one vector in integers (exact), converted once and
// multiplied by the rows' scales times the key's: one conversion and one multiply-add a block
// where a float accumulator a row took four, and no reduction a row at the end (the q8 decode
// step in V8: 0.955 times the time of that 4 x 1 tile, and each block's sum exact). Relaxed SIMD's
// i32x4.dot_i8x16_i7x16_add would take 16 bytes at once, but only with one operand in [0, 127]
// and only with the standard opcodes, which the clang of Emscripten 3.1.6 lacks (CONTRIBUTING.md,
// toolchain pitfalls).
template <int MR>
void gemm_nt_q8_tile(size_t K, const int8_t* A, const float* a_scales, size_t lda, const int8_t* B,
                     const uint16_t* b_scales, float* C, size_t ldc) {
  const size_t blocks = q8_blocks(K), whole = K / kQ8Block;
  const auto row_scales = [&](size_t b) {
    const auto scale = [&](int r) { return r < MR ? a_scales[r * blocks + b] : 0.0f; };
    return wasm_f32x4_mul(wasm_f32x4_make(scale(0), scale(1), scale(2), scale(3)), wasm_f32x4_splat(q8_scale(b_scales + b)));
  };
  v128_t acc = wasm_f32x4_splat(0.0f);
  for (size_t b = 0; b < whole; ++b) {
    const int8_t* key = B + b * kQ8Block;
    const v128_t k0 = wasm_i16x8_load8x8(key), k1 = wasm_i16x8_load8x8(key + 8);
    const v128_t k2 = wasm_i16x8_load8x8(key + 16), k3 = wasm_i16x8_load8x8(key + 24);
    v128_t dots[4] = {wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0), wasm_i32x4_splat(0)};
    for (int r = 0; r < MR; ++r) {
      const int8_t* q = A + r * lda + b * kQ8Block;
      dots[r] = wasm_i32x4_add(
          wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q), k0), wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q + 8), k1)),
          wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q + 16), k2),
                         wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q + 24), k3)));
    }
    acc = madd(acc, wasm_f32x4_convert_i32x4(horizontal_sum4<true>(dots[0], dots[1], dots[2], dots[3])), row_scales(b));
  }
  if (whole < blocks) {  // the row's last, shorter block
    alignas(16) int32_t dots[4] = {};
    for (int r = 0; r < MR; ++r)
      for (size_t k = whole * kQ8Block; k < K; ++k) dots[r] += int32_t{A[r * lda + k]} * int32_t{B[k]};
    acc = madd(acc, wasm_f32x4_convert_i32x4(wasm_v128_load(dots)), row_scales(whole));
  }
  alignas(16) float scores[4];
  wasm_v128_store(scores, acc);
  for (int r = 0; r < MR; ++r) C[r * ldc] = scores[r];
}

// 4 x 1 tiles: each key block is loaded once for a group's four query heads (a 4 x 2 tile would
// keep 8 widened key vectors and 8 row sums live beside a query's, past x86-64's 16 registers).
void gemm_nt_q8_4x1__wasmsimd_dot(size_t M, size_t N, size_t K, const int8_t* A, const float* a_scales, size_t lda,
                                  const int8_t* B, const uint16_t* b_scales, size_t ldb, float* C, size_t ldc) {
  const size_t blocks = q8_blocks(K);
  for (size_t j = 0; j < N; ++j) {
    const int8_t* key = B + j * ldb;
    const uint16_t* scales = b_scales + j * blocks;
    size_t i = 0;
    for (; i + 4 <= M; i += 4)
      gemm_nt_q8_tile<4>(K, A + i * lda, a_scales + i * blocks, lda, key, scales, C + i * ldc + j, ldc);
    for (; i < M; ++i) gemm_nt_q8_tile<1>(K, A + i * lda, a_scales + i * blocks, lda, key, scales, C + i * ldc + j, ldc);
  }
}

// C[MR, 8 columns] += A[MR, K] · B[K, those columns], B's rows q8 and the columns inside one
// block: each row's eight bytes sign-extended to floats and times its block's scale (exact), then
// as gemm_nn_add_tile.
template <int MR>
void gemm_nn_add_q8_tile(size_t K, const float* A, size_t lda, const int8_t* B, const uint16_t* scales, size_t ldb,
                         size_t lds, float* C, size_t ldc) {
  v128_t acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = wasm_f32x4_splat(0.0f);
  for (size_t k = 0; k < K; ++k) {
    const v128_t d = wasm_f32x4_splat(q8_scale(scales + k * lds));
    const v128_t bytes = wasm_i16x8_load8x8(B + k * ldb);
    const v128_t lo = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(bytes)), d);
    const v128_t hi = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(bytes)), d);
    for (int r = 0; r < MR; ++r) {
      const v128_t a = wasm_v128_load32_splat(A + r * lda + k);
      acc[r][0] = madd(acc[r][0], a, lo);
      acc[r][1] = madd(acc[r][1], a, hi);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 2; ++v) {
      float* c = C + r * ldc + 4 * v;
      wasm_v128_store(c, wasm_f32x4_add(wasm_v128_load(c), acc[r][v]));
    }
}

template <int MR>
void gemm_nn_add_q8_rows(size_t N, size_t K, const float* A, size_t lda, const int8_t* B, const uint16_t* b_scales,
                         size_t ldb, float* C, size_t ldc) {
  const size_t lds = q8_blocks(N);
  size_t j = 0;
  // 8-column tiles from column 0 never cross a block of 32.
  for (; j + 8 <= N; j += 8) gemm_nn_add_q8_tile<MR>(K, A, lda, B + j, b_scales + j / kQ8Block, ldb, lds, C + j, ldc);
  for (; j < N; ++j)  // the last 1..7 columns (value dims are multiples of 8 in practice)
    for (int r = 0; r < MR; ++r) {
      float sum = 0.0f;
      for (size_t k = 0; k < K; ++k)
        sum += A[r * lda + k] * (static_cast<float>(B[k * ldb + j]) * q8_scale(b_scales + k * lds + j / kQ8Block));
      C[r * ldc + j] += sum;
    }
}

// 4 x 8 tiles, the rows past a multiple of 4 one at a time: two tile shapes instead of the f32
// kernel's eight keep the page's code small (a group of 4 or 8 query heads takes 4-row tiles only).
void gemm_nn_add_q8_4x8__wasmsimd(size_t M, size_t N, size_t K, const float* A, size_t lda, const int8_t* B,
                                  const uint16_t* b_scales, size_t ldb, float* C, size_t ldc) {
  size_t i = 0;
  for (; i + 4 <= M; i += 4) gemm_nn_add_q8_rows<4>(N, K, A + i * lda, lda, B, b_scales, ldb, C + i * ldc, ldc);
  for (; i < M; ++i) gemm_nn_add_q8_rows<1>(N, K, A + i * lda, lda, B, b_scales, ldb, C + i * ldc, ldc);
}

// One MR x 8 block of C = A · B + bias from one packed panel: each A element is splat and
// multiplied into the panel's two vectors (XNNPACK's f32-gemm "splat" micro-kernel). Measured in
// V8 on this machine (bench/kernels_wasm.cpp, 1024^3, before the row blocks below): 4x8 runs at 31 GFLOP/s, 3x8 at 22, 5x8 and
// 6x8 at 18-19 (V8 spills their accumulators).
template <int MR>
void gemm_packed_tile(size_t K, const float* A, size_t lda, const float* panel, const float* bias, float* C,
                      size_t ldc, size_t columns) {
  v128_t acc[MR][2];
  const v128_t b0 = bias ? wasm_v128_load(bias) : wasm_f32x4_splat(0.0f);
  const v128_t b1 = bias ? wasm_v128_load(bias + 4) : wasm_f32x4_splat(0.0f);
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = b0;
    acc[r][1] = b1;
  }
  // One pointer per row, each moved on by one float a step: V8 then spends one add per row and
  // step instead of recomputing every address from k (a shift and an add or two), which measured
  // 5 % faster at every shape. Unrolling k by hand does not help: V8 hoists all the loads of the
  // unrolled steps to the top and spills the accumulators.
  const float* a[MR];
  for (int r = 0; r < MR; ++r) a[r] = A + r * lda;
  for (const float* end = panel + K * kPanel; panel != end; panel += kPanel) {
    const v128_t lo = wasm_v128_load(panel), hi = wasm_v128_load(panel + 4);
    for (int r = 0; r < MR; ++r) {
      const v128_t splat = wasm_v128_load32_splat(a[r]++);
      acc[r][0] = madd(acc[r][0], splat, lo);
      acc[r][1] = madd(acc[r][1], splat, hi);
    }
  }
  for (int r = 0; r < MR; ++r) {
    if (columns == kPanel) {
      wasm_v128_store(C + r * ldc, acc[r][0]);
      wasm_v128_store(C + r * ldc + 4, acc[r][1]);
    } else {  // the last, partial panel
      alignas(16) float row[kPanel];
      wasm_v128_store(row, acc[r][0]);
      wasm_v128_store(row + 4, acc[r][1]);
      std::copy(row, row + columns, C + r * ldc);
    }
  }
}

// Blocks of 32 rows of A (128 KiB at K = 1024, in L2), and within each, panels outer and rows
// inner: one panel (K x 8 floats) stays in L1 while the block's rows stream past it, rather than
// all of A coming from memory once per panel. In V8 at 1024^3 this took the kernel from 22-25 to
// 32-35 GFLOP/s; blocks of 64 did as well, 16 and 128 worse, and splitting K too gained nothing.
constexpr size_t kRowBlock = 32;

void gemm_packed_4x8__wasmsimd_splat(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* packed_b,
                                     const float* bias, float* C, size_t ldc) {
  for (size_t i0 = 0; i0 < M; i0 += kRowBlock) {
    const size_t rows = std::min(kRowBlock, M - i0);
    for (size_t j0 = 0; j0 < N; j0 += kPanel) {
      const size_t columns = std::min(kPanel, N - j0);
      const float* panel = packed_b + j0 * K;
      alignas(16) float panel_bias[kPanel] = {};
      if (bias) std::copy(bias + j0, bias + j0 + columns, panel_bias);
      const float* b = bias ? panel_bias : nullptr;
      const float* a = A + i0 * lda;
      float* c = C + i0 * ldc + j0;
      size_t i = 0;
      for (; i + 4 <= rows; i += 4) gemm_packed_tile<4>(K, a + i * lda, lda, panel, b, c + i * ldc, ldc, columns);
      switch (rows - i) {
        case 3: gemm_packed_tile<3>(K, a + i * lda, lda, panel, b, c + i * ldc, ldc, columns); break;
        case 2: gemm_packed_tile<2>(K, a + i * lda, lda, panel, b, c + i * ldc, ldc, columns); break;
        case 1: gemm_packed_tile<1>(K, a + i * lda, lda, panel, b, c + i * ldc, ldc, columns); break;
        default: break;
      }
    }
  }
}

// Writes transform(x, bias, j) over each vector x = s[j..j+4) (bias: its 4 floats, or null) and
// returns the max of what it wrote: -inf when n = 0, NaN if any is NaN. The last 1..3 floats go
// through a zero-padded vector, so the transform is the same everywhere.
template <class Transform>
float transform_max(float* s, const float* bias, size_t n, const Transform& transform) {
  // Four running maxima through f32x4.pmax, one instruction where the NaN-propagating f32x4.max is
  // about eight. pmax skips NaN, so NaN is tracked on its own (x != x marks it); even so the loop
  // measured 1.5x faster over 128-float rows.
  v128_t vmax[4];
  for (v128_t& m : vmax) m = wasm_f32x4_splat(-std::numeric_limits<float>::infinity());
  v128_t nan = wasm_i32x4_splat(0);
  const auto apply = [&](size_t j) {
    const v128_t x = transform(wasm_v128_load(s + j), bias ? bias + j : nullptr, j);
    wasm_v128_store(s + j, x);
    nan = wasm_v128_or(nan, wasm_f32x4_ne(x, x));
    return x;
  };
  size_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int c = 0; c < 4; ++c) vmax[c] = wasm_f32x4_pmax(vmax[c], apply(j + 4 * c));
  for (; j + 4 <= n; j += 4) vmax[0] = wasm_f32x4_pmax(vmax[0], apply(j));
  bool saw_nan = wasm_v128_any_true(nan);
  if (j < n) {
    alignas(16) float tail[4] = {}, tail_bias[4] = {};
    std::copy(s + j, s + n, tail);
    if (bias) std::copy(bias + j, bias + n, tail_bias);
    wasm_v128_store(tail, transform(wasm_v128_load(tail), bias ? tail_bias : nullptr, j));
    std::copy(tail, tail + (n - j), s + j);
    for (size_t t = 0; t < n - j; ++t) {
      saw_nan |= std::isnan(tail[t]);
      vmax[1] = wasm_f32x4_pmax(vmax[1], wasm_f32x4_splat(tail[t]));
    }
  }
  if (saw_nan) return std::numeric_limits<float>::quiet_NaN();
  return horizontal_max(wasm_f32x4_max(wasm_f32x4_max(vmax[0], vmax[1]), wasm_f32x4_max(vmax[2], vmax[3])));
}

float scale_bias_max__wasmsimd(float* s, const float* bias, size_t n, float scale) {
  const v128_t vscale = wasm_f32x4_splat(scale);
  return transform_max(s, bias, n, [&](v128_t x, const float* b, size_t) {
    x = wasm_f32x4_mul(x, vscale);
    return b ? wasm_f32x4_add(x, wasm_v128_load(b)) : x;
  });
}

// The kernels' one tanh (the soft cap, additive scores) times a factor c, c folded into the
// coefficients (the soft cap's c·tanh costs no multiply of its own; below c = 1e-20 the smallest
// products lose bits to underflow, on results that small themselves).
class ScaledTanh {
 public:
  explicit ScaledTanh(float c)
      : r0_(wasm_f32x4_splat(c * 0.99999994f)), r1_(wasm_f32x4_splat(c * -0.3333288f)),
        r2_(wasm_f32x4_splat(c * 0.13325709f)), r3_(wasm_f32x4_splat(c * -0.053478442f)),
        r4_(wasm_f32x4_splat(c * 0.020331098f)), r5_(wasm_f32x4_splat(c * -0.006239807f)),
        r6_(wasm_f32x4_splat(c * 0.0010531325f)), p1_(wasm_f32x4_splat(c * 4.89352455891786e-03f)),
        p3_(wasm_f32x4_splat(c * 6.37261928875436e-04f)), p5_(wasm_f32x4_splat(c * 1.48572235717979e-05f)),
        p7_(wasm_f32x4_splat(c * 5.12229709037114e-08f)), p9_(wasm_f32x4_splat(c * -8.60467152213735e-11f)),
        p11_(wasm_f32x4_splat(c * 2.00018790482477e-13f)), p13_(wasm_f32x4_splat(c * -2.76076847742355e-16f)) {}

  // c·tanh(x) for |x| ≤ 1 (scores within the cap: the common case): x·R(x²), R of degree 6 fitted
  // (near minimax) to tanh(x)/x on [0, 1], in Estrin's scheme: 10 instructions, no division and a
  // dependent chain of 5 where the rational takes 16 and Horner's scheme a chain of 8 (14 % faster
  // than Horner over 128-score rows in V8). Error 2.2e-7 (3.1e-7 relative, near 0 too), within the
  // rational's. NaN stays NaN.
  v128_t polynomial(v128_t x) const {
    const v128_t y = wasm_f32x4_mul(x, x), y2 = wasm_f32x4_mul(y, y), y4 = wasm_f32x4_mul(y2, y2);
    const v128_t low = madd(madd(r0_, y, r1_), y2, madd(r2_, y, r3_));
    const v128_t high = madd(madd(r4_, y, r5_), y2, r6_);
    return wasm_f32x4_mul(x, madd(low, y4, high));
  }

  // c·tanh(x) for every x, as Eigen's generic_fast_tanh_float: x clamped to ±7.9053 (where
  // float's tanh is ±1), then a rational x·P(x²)/Q(x²) of degrees 13 and 6, in Estrin's scheme
  // (P's chain three multiply-adds after x⁴ where Horner's is six after x²). Error 3.4e-7 on every
  // float, relative near 0 too, so a cap far above the scores leaves them as they are (the
  // differential fuzzer found an exp-based form's 1 − e cancelling to 0 there). pmin/pmax keep a
  // NaN x (it is their first operand), and NaN stays NaN; ±Inf give ±c.
  v128_t rational(v128_t x) const {
    const v128_t limit = wasm_f32x4_splat(7.90531110763549805f);
    x = wasm_f32x4_pmax(wasm_f32x4_pmin(x, limit), wasm_f32x4_neg(limit));
    const v128_t y = wasm_f32x4_mul(x, x), y2 = wasm_f32x4_mul(y, y);
    const v128_t high = madd(madd(p9_, y, p11_), y2, p13_);
    const v128_t p = madd(madd(p1_, y, p3_), y2, madd(madd(p5_, y, p7_), y2, high));
    const v128_t q = madd(madd(wasm_f32x4_splat(4.89352518554385e-03f), y, wasm_f32x4_splat(2.26843463243900e-03f)), y2,
                          madd(wasm_f32x4_splat(1.18534705686654e-04f), y, wasm_f32x4_splat(1.19825839466702e-06f)));
    return wasm_f32x4_div(wasm_f32x4_mul(x, p), q);
  }

 private:
  v128_t r0_, r1_, r2_, r3_, r4_, r5_, r6_;
  v128_t p1_, p3_, p5_, p7_, p9_, p11_, p13_;
};

// Whether every |s[j] · scale| is at most 1 (false if one is NaN). Rounding is monotonic, so the
// largest |s[j]| times scale decides: one pass of a load, an and and a max a vector. The float's
// bits without its sign order as |s| does as integers, NaN above all.
bool within_unit(const float* s, size_t n, float scale) {
  const v128_t magnitude = wasm_i32x4_splat(0x7fffffff);
  v128_t largest = wasm_i32x4_splat(0);
  size_t j = 0;
  for (; j + 4 <= n; j += 4) largest = wasm_i32x4_max(largest, wasm_v128_and(wasm_v128_load(s + j), magnitude));
  alignas(16) int32_t lanes[4];
  wasm_v128_store(lanes, largest);
  int32_t bits = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  for (; j < n; ++j) {
    int32_t b;
    std::memcpy(&b, s + j, sizeof b);
    bits = std::max(bits, b & 0x7fffffff);
  }
  float most;
  std::memcpy(&most, &bits, sizeof most);
  return most * scale <= 1.0f;
}

// One loop for each form of the cap (none, the polynomial, the rational), so that no flag picks
// the cap per vector: V8 builds a constant used in one branch of a loop inside that branch, each
// time round. Rows whose scaled scores all lie within the cap take the polynomial.
float score_terms_max__wasmsimd(float* s, const float* bias, size_t n, const ScoreTerms& terms) {
  const bool capped = terms.softcap > 0.0f, alibi = terms.alibi_slope != 0.0f;
  const float scale = capped ? terms.scale / terms.softcap : terms.scale;
  const v128_t vscale = wasm_f32x4_splat(scale);
  const ScaledTanh capped_tanh(terms.softcap);
  const v128_t slope = wasm_f32x4_splat(terms.alibi_slope);
  // Key distances stay exact integers in float up to 2^24.
  const float d = terms.alibi_distance;
  const v128_t first_distances = wasm_f32x4_make(d, d + 1.0f, d + 2.0f, d + 3.0f);
  const auto terms_of = [&](auto&& cap) {
    return [&](v128_t x, const float* b, size_t j) {
      x = cap(wasm_f32x4_mul(x, vscale));
      if (alibi) x = madd(x, slope, wasm_f32x4_add(first_distances, wasm_f32x4_splat(static_cast<float>(j))));
      return b ? wasm_f32x4_add(x, wasm_v128_load(b)) : x;
    };
  };
  if (!capped) return transform_max(s, bias, n, terms_of([](v128_t x) { return x; }));
  // The common case, a cap and neither ALiBi nor a bias, with every scaled score within the cap:
  // the polynomial in a loop without the terms' branches (108 instructions per 16 scores in V8,
  // where the branches made it 180).
  if (!alibi && !bias && within_unit(s, n, scale))
    return transform_max(s, nullptr, n, [&](v128_t x, const float*, size_t) {
      return capped_tanh.polynomial(wasm_f32x4_mul(x, vscale));
    });
  return transform_max(s, bias, n, terms_of([&](v128_t x) { return capped_tanh.rational(x); }));
}

// exp_nonpositive_f32x4 over the row in two passes per chunk: the range reduction of every vector,
// then every polynomial. One vector's exp is a chain of ~20 dependent operations; evaluated whole,
// vector after vector (the order V8 emits), the chains fill the out-of-order window and the loop
// runs at about 1.5 instructions a cycle. Split in two, each pass has shorter chains and more of
// them in flight: 25 % faster over 128-float rows, with bit-identical values.
float exp_sum__wasmsimd_rr2_p5(float* s, size_t n, float max) {
  constexpr size_t kChunk = 64;
  const v128_t vmax = wasm_f32x4_splat(max);
  alignas(16) float two_to_n[kChunk];
  // Two accumulators hide the latency of the adds.
  v128_t sum0 = wasm_f32x4_splat(0.0f), sum1 = wasm_f32x4_splat(0.0f);
  const size_t whole_vectors = n / 4 * 4;
  for (size_t j0 = 0; j0 < whole_vectors; j0 += kChunk) {
    float* chunk = s + j0;
    const size_t length = std::min(kChunk, whole_vectors - j0);
    // Pass 1: t in place, 2^n to the side.
    for (size_t j = 0; j < length; j += 4) {
      v128_t power;
      wasm_v128_store(chunk + j, exp_reduce(wasm_f32x4_sub(wasm_v128_load(chunk + j), vmax), power));
      wasm_v128_store(two_to_n + j, power);
    }
    // Pass 2: the polynomial.
    const auto finish = [&](size_t j) {
      const v128_t e = exp_polynomial(wasm_v128_load(chunk + j), wasm_v128_load(two_to_n + j));
      wasm_v128_store(chunk + j, e);
      return e;
    };
    size_t j = 0;
    for (; j + 8 <= length; j += 8) {
      sum0 = wasm_f32x4_add(sum0, finish(j));
      sum1 = wasm_f32x4_add(sum1, finish(j + 4));
    }
    if (j < length) sum0 = wasm_f32x4_add(sum0, finish(j));
  }
  if (whole_vectors < n) {  // the last 1..3 elements, padded with -inf, whose exp adds 0 to the sum
    alignas(16) float tail[4];
    std::fill(tail, tail + 4, -std::numeric_limits<float>::infinity());
    std::copy(s + whole_vectors, s + n, tail);
    const v128_t e = exp_nonpositive_f32x4(wasm_f32x4_sub(wasm_v128_load(tail), vmax));
    wasm_v128_store(tail, e);
    std::copy(tail, tail + (n - whole_vectors), s + whole_vectors);
    sum1 = wasm_f32x4_add(sum1, e);
  }
  return horizontal_add(wasm_f32x4_add(sum0, sum1));
}

void scale__wasmsimd(float* x, size_t n, float alpha) {
  const v128_t valpha = wasm_f32x4_splat(alpha);
  size_t j = 0;
  for (; j + 4 <= n; j += 4) wasm_v128_store(x + j, wasm_f32x4_mul(wasm_v128_load(x + j), valpha));
  for (; j < n; ++j) x[j] *= alpha;
}

void tanh_scores__wasmsimd(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* B, size_t ldb,
                           const float* w, float* C, size_t ldc) {
  const ScaledTanh unit_tanh(1.0f);  // the sums reach past ±1: the rational alone
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0; j < N; ++j) {
      const float* a = A + i * lda;
      const float* b = B + j * ldb;
      v128_t acc = wasm_f32x4_splat(0.0f);
      size_t k = 0;
      for (; k + 4 <= K; k += 4)
        acc = madd(acc, wasm_v128_load(w + k), unit_tanh.rational(wasm_f32x4_add(wasm_v128_load(a + k), wasm_v128_load(b + k))));
      if (k < K) {  // the last 1..3 lanes, padded with zero weights
        alignas(16) float ta[4] = {}, tb[4] = {}, tw[4] = {};
        std::copy(a + k, a + K, ta);
        std::copy(b + k, b + K, tb);
        std::copy(w + k, w + K, tw);
        acc = madd(acc, wasm_v128_load(tw), unit_tanh.rational(wasm_f32x4_add(wasm_v128_load(ta), wasm_v128_load(tb))));
      }
      C[i * ldc + j] = horizontal_add(acc);
    }
}

// Binary16 widened as load4 does, then scaled back by 2^112 (exact: the scaled value's bits are
// the half's, and the product is a normal float for every finite half, subnormals included).
void widen_f16__wasmsimd(const uint16_t* h, float* out, size_t n) {
  const v128_t scale = wasm_f32x4_splat(kScaledHalf);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(out + i, wasm_f32x4_mul(load4(h + i), scale));
  for (; i < n; ++i) out[i] = load1(h + i) * kScaledHalf;
}

// Each word zero-extended to 32 bits as it loads (v128.load16x4_u) and shifted into the upper half:
// the float, bit for bit. Twice as fast in V8 as extending both halves of a 16-byte load, which
// clang 14 emits as i8x16.shuffle (6.7 against 13.9 G elements/s, 36864 words in L1).
void widen_bf16__wasmsimd(const uint16_t* b, float* out, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) wasm_v128_store(out + i, wasm_i32x4_shl(wasm_u32x4_load16x4(b + i), 16));
  for (; i < n; ++i) out[i] = from_bfloat16(b[i]);
}

// Four pairs a step. Multiplies and subtracts as the scalar twin does them, unfused even in the
// relaxed builds, so that every set rotates to the same bits. Interleaved pairs are split into
// their first and second dims by two shuffles and woven back by two more.
void rope__wasmsimd(float* x, size_t rows, size_t stride, const float* cos, const float* sin, size_t half,
                    bool interleaved) {
  const auto turn = [](v128_t a, v128_t b, v128_t c, v128_t s, v128_t& ta, v128_t& tb) {
    ta = wasm_f32x4_sub(wasm_f32x4_mul(a, c), wasm_f32x4_mul(b, s));
    tb = wasm_f32x4_add(wasm_f32x4_mul(b, c), wasm_f32x4_mul(a, s));
  };
  for (size_t r = 0; r < rows; ++r) {
    float* v = x + r * stride;
    size_t k = 0;
    for (; k + 4 <= half; k += 4) {
      const v128_t c = wasm_v128_load(cos + k), s = wasm_v128_load(sin + k);
      v128_t a, b;
      if (interleaved) {
        const v128_t lo = wasm_v128_load(v + 2 * k), hi = wasm_v128_load(v + 2 * k + 4);
        turn(wasm_i32x4_shuffle(lo, hi, 0, 2, 4, 6), wasm_i32x4_shuffle(lo, hi, 1, 3, 5, 7), c, s, a, b);
        wasm_v128_store(v + 2 * k, wasm_i32x4_shuffle(a, b, 0, 4, 1, 5));
        wasm_v128_store(v + 2 * k + 4, wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
      } else {
        turn(wasm_v128_load(v + k), wasm_v128_load(v + half + k), c, s, a, b);
        wasm_v128_store(v + k, a);
        wasm_v128_store(v + half + k, b);
      }
    }
    for (; k < half; ++k) {  // the last 1..3 pairs
      float* a = interleaved ? v + 2 * k : v + k;
      float* b = interleaved ? a + 1 : a + half;
      const float va = *a, vb = *b;
      *a = va * cos[k] - vb * sin[k];
      *b = vb * cos[k] + va * sin[k];
    }
  }
}

// sigmoid(y) = 1 / (1 + e^-y) through exp_nonpositive of -|y|, which never overflows: e^-|y| / (1 +
// e^-|y|) below 0, 1 / (1 + e^-|y|) from 0 on. ±Inf give 0 and 1; NaN stays NaN.
inline v128_t sigmoid_f32x4(v128_t y) {
  const v128_t e = exp_nonpositive_f32x4(wasm_f32x4_neg(wasm_f32x4_abs(y)));
  const v128_t one = wasm_f32x4_splat(1.0f);
  const v128_t numerator = wasm_v128_bitselect(e, one, wasm_f32x4_lt(y, wasm_f32x4_splat(0.0f)));
  return wasm_f32x4_div(numerator, wasm_f32x4_add(one, e));
}

// erfc(x) as Numerical Recipes' erfcc (a Chebyshev fit, relative error below 1.2e-7 everywhere):
// t = 1 / (1 + |x|/2), t · exp(−x² + P(t)) for x ≥ 0 and 2 minus it below. P(0) − x² may exceed 0
// by 3e-8 at x = 0, where exp_nonpositive is still exact to its ulps.
inline v128_t erfc_f32x4(v128_t x) {
  const v128_t z = wasm_f32x4_abs(x);
  const v128_t t = wasm_f32x4_div(wasm_f32x4_splat(1.0f), madd(wasm_f32x4_splat(1.0f), z, wasm_f32x4_splat(0.5f)));
  v128_t p = wasm_f32x4_splat(0.17087277f);
  for (const float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f, 0.37409196f,
                        1.00002368f, -1.26551223f})
    p = madd(wasm_f32x4_splat(c), p, t);
  const v128_t r = wasm_f32x4_mul(t, exp_nonpositive_f32x4(wasm_f32x4_sub(p, wasm_f32x4_mul(z, z))));
  return wasm_v128_bitselect(r, wasm_f32x4_sub(wasm_f32x4_splat(2.0f), r), wasm_f32x4_ge(x, wasm_f32x4_splat(0.0f)));
}

// Every activation as x times a factor in [0, 1]: silu's sigmoid(x); gelu's erfc(−x/√2) / 2;
// gelu_tanh's (1 + tanh(u)) / 2 = sigmoid(2u), u = √(2/π)·(x + 0.044715·x³).
template <Activation act>
v128_t activate_f32x4(v128_t x) {
  if constexpr (act == Activation::silu) {
    return wasm_f32x4_mul(x, sigmoid_f32x4(x));
  } else if constexpr (act == Activation::gelu) {
    return wasm_f32x4_mul(wasm_f32x4_mul(x, wasm_f32x4_splat(0.5f)), erfc_f32x4(wasm_f32x4_mul(x, wasm_f32x4_splat(-0.70710678f))));
  } else {
    const float two_c = 2.0f * 0.7978845608f;
    const v128_t two_u =
        wasm_f32x4_mul(x, madd(wasm_f32x4_splat(two_c), wasm_f32x4_mul(x, x), wasm_f32x4_splat(two_c * 0.044715f)));
    return wasm_f32x4_mul(x, sigmoid_f32x4(two_u));
  }
}

// Four at a time; the last 1..3 through the same vector code, padded. One loop per activation, its
// vector step written once (a page downloads this code: the tail reuses the step, not a copy).
template <Activation act>
void activate_rows(float* x, const float* multiplier, size_t n) {
  alignas(16) float tail[4] = {}, factors[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  const size_t whole = n & ~size_t{3};
  for (size_t i = 0; i <= whole; i += 4) {
    float* at = x + i;
    const float* by = multiplier ? multiplier + i : factors;
    if (i == whole) {  // the padded tail, or nothing
      if (i == n) break;
      std::copy(x + i, x + n, tail);
      if (multiplier) std::copy(multiplier + i, multiplier + n, factors);
      at = tail;
      by = factors;
    }
    v128_t y = activate_f32x4<act>(wasm_v128_load(at));
    if (multiplier || at == tail) y = wasm_f32x4_mul(y, wasm_v128_load(by));
    wasm_v128_store(at, y);
    if (at == tail) std::copy(tail, tail + (n - i), x + i);
  }
}

void activate__wasmsimd(float* x, const float* multiplier, size_t n, Activation act) {
  switch (act) {
    case Activation::silu:
      return activate_rows<Activation::silu>(x, multiplier, n);
    case Activation::gelu:
      return activate_rows<Activation::gelu>(x, multiplier, n);
    case Activation::gelu_tanh:
      return activate_rows<Activation::gelu_tanh>(x, multiplier, n);
  }
}

}  // namespace

const KernelSet kWasmSimdKernels = {
#if defined(ATTENTION_RELAXED_SIMD)
    "wasmsimd-relaxed",
#else
    "wasmsimd",
#endif
    gemm_nt__wasmsimd<4, 2, float>,
    scale_bias_max__wasmsimd,
    score_terms_max__wasmsimd,
    exp_sum__wasmsimd_rr2_p5,
    scale__wasmsimd,
    gemm_packed_4x8__wasmsimd_splat,
    tanh_scores__wasmsimd,
    gemm_nt__wasmsimd<4, 2, uint16_t>,
    gemm_nn_add_4x8__wasmsimd<float>,
    gemm_nn_add_4x8__wasmsimd<uint16_t>,
    gemm_nt_q8_4x1__wasmsimd_dot,
    gemm_nn_add_q8_4x8__wasmsimd,
    widen_f16__wasmsimd,
    widen_bf16__wasmsimd,
    rope__wasmsimd,
    activate__wasmsimd,
};

}  // namespace attn::kernels

// The packed right-hand operand of gemm_packed: B [K, N] cut into panels of kPanel columns, each
// stored as K rows of kPanel floats, zero-padded past N. Every kernel set reads this one layout,
// so a buffer packed once (weights, at load time) serves whichever set runs.
#pragma once

#include <algorithm>
#include <cstddef>

namespace attn::kernels {

constexpr size_t kPanel = 8;

inline size_t packed_size(size_t K, size_t N) { return K * ((N + kPanel - 1) / kPanel) * kPanel; }

// B [K, N] whose element (k, j) sits at b[k * k_stride + j * j_stride].
inline void pack_strided(size_t K, size_t N, const float* b, size_t k_stride, size_t j_stride, float* packed) {
  for (size_t j0 = 0; j0 < N; j0 += kPanel) {
    float* panel = packed + j0 * K;
    for (size_t k = 0; k < K; ++k)
      for (size_t c = 0; c < kPanel; ++c)
        panel[k * kPanel + c] = j0 + c < N ? b[k * k_stride + (j0 + c) * j_stride] : 0.0f;
  }
}

// Whole panels go through loops clang vectorises, 1.5 to 2 times faster in V8 than pack_strided's
// element by element, which packs the last, partial panel.

// B is given as rows of K values, one per output column: PyTorch's weight [N, K] (or keys
// [m, d] for scores), i.e. Bᵀ, with row stride ldb.
inline void pack_transposed(size_t K, size_t N, const float* bt, size_t ldb, float* packed) {
  const size_t whole = N / kPanel * kPanel;
  for (size_t j0 = 0; j0 < whole; j0 += kPanel) {
    const float* rows = bt + j0 * ldb;
    float* panel = packed + j0 * K;
    size_t k = 0;
    // Four values of each row at a time, each landing a panel row apart.
    for (; k + 4 <= K; k += 4)
      for (size_t c = 0; c < kPanel; ++c)
        for (size_t t = 0; t < 4; ++t) panel[(k + t) * kPanel + c] = rows[c * ldb + k + t];
    for (; k < K; ++k)
      for (size_t c = 0; c < kPanel; ++c) panel[k * kPanel + c] = rows[c * ldb + k];
  }
  pack_strided(K, N - whole, bt + whole * ldb, 1, ldb, packed + whole * K);
}

// B given as it is stored, [K, N] row-major with row stride ldb (values [m, dv]).
inline void pack_rows(size_t K, size_t N, const float* b, size_t ldb, float* packed) {
  const size_t whole = N / kPanel * kPanel;
  for (size_t j0 = 0; j0 < whole; j0 += kPanel)
    for (size_t k = 0; k < K; ++k) std::copy(b + k * ldb + j0, b + k * ldb + j0 + kPanel, packed + j0 * K + k * kPanel);
  pack_strided(K, N - whole, b + whole, ldb, 1, packed + whole * K);
}

}  // namespace attn::kernels

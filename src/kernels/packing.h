// The packed right-hand operand of gemm_packed: B [K, N] cut into panels of kPanel columns, each
// stored as K rows of kPanel floats, zero-padded past N. Every kernel set reads this one layout,
// so a buffer packed once (weights, at load time) serves whichever set runs.
#pragma once

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

// B is given as rows of K values, one per output column: PyTorch's weight [N, K] (or keys
// [m, d] for scores), i.e. Bᵀ, with row stride ldb.
inline void pack_transposed(size_t K, size_t N, const float* bt, size_t ldb, float* packed) {
  pack_strided(K, N, bt, 1, ldb, packed);
}

// B given as it is stored, [K, N] row-major with row stride ldb (values [m, dv]).
inline void pack_rows(size_t K, size_t N, const float* b, size_t ldb, float* packed) {
  pack_strided(K, N, b, ldb, 1, packed);
}

}  // namespace attn::kernels

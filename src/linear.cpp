#include "linear.h"

#include <algorithm>

#include "kernels/kernels.h"
#include "parallel.h"

namespace attn {

void linear(int64_t rows, int64_t in, int64_t out, const float* x, int64_t ldx, const float* weight,
            const float* bias, float* y, int64_t ldy) {
  constexpr int64_t kRowsPerItem = 32;
  const kernels::KernelSet& k = kernels::active_kernels();
  parallel_for((rows + kRowsPerItem - 1) / kRowsPerItem, [&](int64_t item, int) {
    const int64_t r0 = item * kRowsPerItem, count = std::min(kRowsPerItem, rows - r0);
    float* y_rows = y + r0 * ldy;
    k.gemm_nt(count, out, in, x + r0 * ldx, ldx, weight, in, y_rows, ldy);
    if (bias)
      for (int64_t r = 0; r < count; ++r)
        for (int64_t c = 0; c < out; ++c) y_rows[r * ldy + c] += bias[c];
  });
}

}  // namespace attn

#include "linear.h"

#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "parallel.h"

namespace attn {

Status PackedWeight::pack(const float* weight, int64_t out, int64_t in) {
  Status s = packed_.allocate(static_cast<int64_t>(kernels::packed_size(in, out)), "packed weights");
  if (!s.ok()) return s;
  kernels::pack_transposed(in, out, weight, in, packed_.data());
  in_ = in;
  out_ = out;
  return Status::success();
}

void linear_rows(int64_t rows, const float* x, int64_t ldx, const WeightSlice& weight, const float* bias, float* y,
                 int64_t ldy) {
  kernels::active_kernels().gemm_packed(rows, weight.out, weight.in, x, ldx, weight.packed, bias, y, ldy);
}

void linear(int64_t rows, const float* x, int64_t ldx, const WeightSlice& weight, const float* bias, float* y,
            int64_t ldy) {
  parallel_for((rows + kLinearRowsPerItem - 1) / kLinearRowsPerItem, [&](int64_t item, int) {
    const int64_t r0 = item * kLinearRowsPerItem;
    linear_rows(std::min(kLinearRowsPerItem, rows - r0), x + r0 * ldx, ldx, weight, bias, y + r0 * ldy, ldy);
  }, 2.0 * kLinearRowsPerItem * weight.in * weight.out);
}

}  // namespace attn

// y = x · Wᵀ + b over rows of tokens, as torch.nn.functional.linear, on weights packed once.
#pragma once

#include <cstdint>

#include "buffer.h"
#include "status.h"

namespace attn {

// A weight [out, in] (PyTorch's layout) packed for gemm_packed: modules pack theirs when they
// load a state dict, so forward() never repacks.
class PackedWeight {
 public:
  Status pack(const float* weight, int64_t out, int64_t in);
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  const float* data() const { return packed_.data(); }

 private:
  FloatBuffer packed_;
  int64_t in_ = 0, out_ = 0;
};

// Rows per work item when linear() splits rows across the thread pool: short inputs still keep
// every thread busy.
constexpr int64_t kLinearRowsPerItem = 32;

// x [rows, in] (row stride ldx), bias [out] or null, y [rows, out] (row stride ldy). Rows are split
// across the thread pool, kLinearRowsPerItem at a time.
void linear(int64_t rows, const float* x, int64_t ldx, const PackedWeight& weight, const float* bias, float* y,
            int64_t ldy);
// linear() on the calling thread alone, for callers that split the work across threads themselves.
void linear_rows(int64_t rows, const float* x, int64_t ldx, const PackedWeight& weight, const float* bias, float* y,
                 int64_t ldy);

}  // namespace attn

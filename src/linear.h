// y = x · Wᵀ + b over rows of tokens, as torch.nn.functional.linear, on weights packed once.
#pragma once

#include <cstdint>

#include "buffer.h"
#include "status.h"

namespace attn {

// Outputs of a packed weight: `out` of them, `in` inputs each, packed for gemm_packed.
struct WeightSlice {
  const float* packed;
  int64_t in, out;
};

// A weight [out, in] (PyTorch's layout) packed for gemm_packed: modules pack theirs when they
// load a state dict, so forward() never repacks.
class PackedWeight {
 public:
  Status pack(const float* weight, int64_t out, int64_t in);
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  // Outputs [first, first + count), first a multiple of the packing's panel width (8): each panel
  // is stored whole, so a slice starts at its first panel. Multihead attention projects one head
  // at a time through these.
  WeightSlice slice(int64_t first, int64_t count) const { return {packed_.data() + first * in_, in_, count}; }
  operator WeightSlice() const { return slice(0, out_); }

 private:
  FloatBuffer packed_;
  int64_t in_ = 0, out_ = 0;
};

// Rows per work item when linear() splits rows across the thread pool: short inputs still keep
// every thread busy.
constexpr int64_t kLinearRowsPerItem = 32;

// x [rows, in] (row stride ldx), bias [out] or null, y [rows, out] (row stride ldy). Rows are split
// across the thread pool, kLinearRowsPerItem at a time.
void linear(int64_t rows, const float* x, int64_t ldx, const WeightSlice& weight, const float* bias, float* y,
            int64_t ldy);
// linear() on the calling thread alone, for callers that split the work across threads themselves.
void linear_rows(int64_t rows, const float* x, int64_t ldx, const WeightSlice& weight, const float* bias, float* y,
                 int64_t ldy);

}  // namespace attn

// y = x · Wᵀ + b over rows of tokens, as torch.nn.functional.linear.
#pragma once

#include <cstdint>

namespace attn {

// x [rows, in] (row stride ldx), weight [out, in] (PyTorch's layout), bias [out] or null,
// y [rows, out] (row stride ldy). Rows are split across the thread pool.
void linear(int64_t rows, int64_t in, int64_t out, const float* x, int64_t ldx, const float* weight,
            const float* bias, float* y, int64_t ldy);

}  // namespace attn

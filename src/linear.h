// y = x · Wᵀ + b over rows of tokens, as torch.nn.functional.linear, on weights packed once.
#pragma once

#include <cstdint>
#include <memory>

#include "buffer.h"
#include "half.h"
#include "module.h"
#include "status.h"
#include "tensor.h"

namespace attn {

// Outputs of a packed weight: `out` of them, `in` inputs each, packed for gemm_packed.
struct WeightSlice {
  const float* packed;
  int64_t in, out;
};

// A weight [out, in] (PyTorch's layout) packed for gemm_packed: modules pack theirs when they
// load a state dict, so forward() never repacks. Held as floats, or as binary16 or bfloat16 words
// (half the memory; the arithmetic stays f32): apply() then widens each chunk of outputs once a
// call and multiplies every row by it.
class PackedWeight {
 public:
  // `weight` holds elements of dtype `given`, held as `held` (rounded to nearest even if narrower).
  Status pack(const void* weight, WeightDtype given, int64_t out, int64_t in, WeightDtype held);
  Status pack(const float* weight, int64_t out, int64_t in) {
    return pack(weight, WeightDtype::f32, out, in, WeightDtype::f32);
  }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  // Of an f32 weight, outputs [first, first + count), first a multiple of the packing's panel
  // width (8): each panel is stored whole, so a slice starts at its first panel. Multihead
  // attention projects one head at a time through these.
  WeightSlice slice(int64_t first, int64_t count) const { return {packed_.data() + first * in_, in_, count}; }
  operator WeightSlice() const { return slice(0, out_); }

  // y [rows, out] = x [rows, in] · Wᵀ + bias (bias [out] or null), any dtype, in work items of
  // up to 256 rows times 64 outputs across the thread pool: short inputs still split across
  // threads, and an item's rows stay in cache while its panels stream. Fails only out of memory
  // (a 16-bit weight's widened chunks).
  Status apply(int64_t rows, const float* x, const float* bias, float* y) const;

 private:
  FloatBuffer packed_;
  Buffer<Half> halves_;  // the packed layout, in 16-bit words of dtype_
  WeightDtype dtype_ = WeightDtype::f32;
  int64_t in_ = 0, out_ = 0;
  bool finite_ = true;  // of binary16 words: whether every one is finite (widen_f16 needs it)
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

// torch.nn.Linear: y = x · Wᵀ + b over x [..., in_features], its weight a PackedWeight of any
// dtype.
struct LinearConfig {
  int64_t in_features = 0, out_features = 0;
  bool bias = true;
  WeightDtype dtype = WeightDtype::f32;
};

// What Linear::load takes: weight [out, in] as floats, or as binary16 or bfloat16 words
// (`weight_dtype`; PyTorch's layout either way), and bias [out] when the module has one.
struct LinearWeights {
  const void* weight = nullptr;
  WeightDtype weight_dtype = WeightDtype::f32;
  Shape weight_shape;
  const float* bias = nullptr;
  Shape bias_shape;
};

class Linear : public Module {
 public:
  static Status create(const LinearConfig& config, std::unique_ptr<Linear>* out);
  const LinearConfig& config() const { return config_; }

  // Refused weights (shapes, a missing bias) leave what was loaded.
  Status check_load(const LinearWeights& weights) const;
  Status load(const LinearWeights& weights);

  bool loaded() const { return loaded_; }

  // x [..., in_features] → y [..., out_features].
  Status check_forward(const Shape& x, Shape* output) const;
  Status forward(const TensorView& x, float* y) const;
  // forward() on `rows` rows, unchecked: for callers that checked the shapes themselves.
  Status apply(int64_t rows, const float* x, float* y) const {
    return weight_.apply(rows, x, config_.bias ? bias_.data() : nullptr, y);
  }

 private:
  explicit Linear(const LinearConfig& config) : config_(config) {}
  Status prepare() override { return Status::success(); }

  LinearConfig config_;
  PackedWeight weight_;
  FloatBuffer bias_;
  bool loaded_ = false;
};

}  // namespace attn

#include "linear.h"

#include <algorithm>
#include <string>

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

namespace attn {
namespace {

// A Linear forward's work items: up to kLinearRows rows times kLinearChunk outputs (8 panels,
// widened once an item when f16), so that short layers still split across threads and an item's
// rows stay in cache while its panels stream.
constexpr int64_t kLinearChunk = 64, kLinearRows = 256;

}  // namespace

Status Linear::create(const LinearConfig& config, std::unique_ptr<Linear>* out) {
  Status s = first_failure({check_size("inFeatures", config.in_features), check_size("outFeatures", config.out_features)});
  if (!s.ok()) return s;
  out->reset(new Linear(config));
  return Status::success();
}

Status Linear::check_load(const LinearWeights& w) const {
  const LinearConfig& c = config_;
  const Shape weight{c.out_features, c.in_features};
  if (!(w.weight_shape == weight)) return Status::invalid("weight", weight.str(), w.weight_shape.str());
  if (c.bias && !(w.bias_shape == Shape{c.out_features}))
    return Status::invalid("bias", Shape{c.out_features}.str(), w.bias ? w.bias_shape.str() : "a missing entry");
  if (!c.bias && w.bias) return Status::invalid("bias", "no entry (created with bias: false)", w.bias_shape.str());
  return first_failure({check_data(w.weight, w.weight_shape, "weight"),
                        c.bias ? check_data(w.bias, w.bias_shape, "bias") : Status::success()});
}

Status Linear::load(const LinearWeights& w) {
  Status s = check_load(w);
  if (!s.ok()) return s;
  const int64_t in = config_.in_features, out = config_.out_features;
  if (config_.bias) {
    s = bias_.allocate(out, "Linear bias");
    if (!s.ok()) return s;
    std::copy_n(w.bias, out, bias_.data());
  }
  const float* floats = w.weight_f16 ? nullptr : static_cast<const float*>(w.weight);
  const Half* halves = w.weight_f16 ? static_cast<const Half*>(w.weight) : nullptr;
  if (config_.dtype == WeightDtype::f32) {
    // f16 weights widen once, into the packed floats.
    FloatBuffer widened;
    if (halves) {
      s = widened.allocate(out * in, "Linear weight");
      if (!s.ok()) return s;
      std::transform(halves, halves + out * in, widened.data(), from_half);
      floats = widened.data();
    }
    s = f32_.pack(floats, out, in);
  } else {
    // The packed layout (packing.h) with binary16 elements: panels of 8 outputs, K rows each.
    s = f16_.allocate(static_cast<int64_t>(kernels::packed_size(in, out)), "Linear weight");
    if (!s.ok()) return s;
    finite_ = true;
    const int64_t panel = static_cast<int64_t>(kernels::kPanel);
    for (int64_t j0 = 0; j0 < out; j0 += panel)
      for (int64_t k = 0; k < in; ++k)
        for (int64_t c = 0; c < panel; ++c) {
          const int64_t j = j0 + c;
          const Half h = j >= out ? Half{0} : halves ? halves[j * in + k] : to_half(floats[j * in + k]);
          f16_.data()[j0 * in + k * panel + c] = h;
          finite_ &= (h & 0x7c00u) != 0x7c00u;
        }
  }
  loaded_ = s.ok();
  return s;
}

Status Linear::check_forward(const Shape& x, Shape* output) const {
  if (x.rank < 1 || x.rank > kMaxRank || x.at_end(1) != config_.in_features || !x.non_negative())
    return Status::invalid("x", "[..., " + std::to_string(config_.in_features) + "] (inFeatures last)", x.str());
  *output = x;
  (*output)[x.rank - 1] = config_.out_features;
  return Status::success();
}

Status Linear::forward(const TensorView& x, float* y) const {
  Shape output;
  Status s = first_failure({loaded_ ? Status::success()
                                    : Status::invalid("Linear", "loadStateDict() before forward()", "no weights loaded"),
                            check_forward(x.shape, &output), check_data(x, "x")});
  if (!s.ok()) return s;
  const int64_t in = config_.in_features, out = config_.out_features, rows = x.shape.leading_numel(1);
  const float* bias = config_.bias ? bias_.data() : nullptr;
  const int64_t chunks = (out + kLinearChunk - 1) / kLinearChunk, blocks = (rows + kLinearRows - 1) / kLinearRows;
  const double flops = 2.0 * static_cast<double>(std::min(rows, kLinearRows)) * kLinearChunk * in;
  // Item i: chunk i / blocks, row block i % blocks.
  const auto run = [&](int64_t item, const WeightSlice& weight) {
    const int64_t j0 = item / blocks * kLinearChunk, r0 = item % blocks * kLinearRows;
    linear_rows(std::min(kLinearRows, rows - r0), x.data + r0 * in, in, weight, bias ? bias + j0 : nullptr,
                y + r0 * out + j0, out);
  };
  if (config_.dtype == WeightDtype::f32) {
    parallel_for(chunks * blocks, [&](int64_t item, int) {
      const int64_t j0 = item / blocks * kLinearChunk;
      run(item, f32_.slice(j0, std::min(kLinearChunk, out - j0)));
    }, flops);
    return Status::success();
  }
  // Each thread widens its chunk of panels into its own scratch, then multiplies every row by it.
  FloatBuffer scratch;
  s = scratch.allocate(thread_count() * kLinearChunk * in, "Linear widened weights");
  if (!s.ok()) return s;
  const kernels::KernelSet& k = kernels::active_kernels();
  parallel_for(chunks * blocks, [&](int64_t item, int worker) {
    const int64_t j0 = item / blocks * kLinearChunk, count = std::min(kLinearChunk, out - j0);
    const Half* panels = f16_.data() + j0 * in;
    const int64_t size = static_cast<int64_t>(kernels::packed_size(in, count));
    float* widened = scratch.data() + worker * kLinearChunk * in;
    if (finite_)
      k.widen_f16(panels, widened, size);
    else
      std::transform(panels, panels + size, widened, from_half);
    run(item, {widened, in, count});
  }, flops);
  return Status::success();
}

}  // namespace attn

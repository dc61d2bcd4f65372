#include "linear.h"

#include <algorithm>
#include <string>

#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "parallel.h"

namespace attn {

namespace {

// apply()'s work items (and pack()'s): up to kApplyRows rows times kApplyChunk outputs (8 panels).
constexpr int64_t kApplyChunk = 64, kApplyRows = 256;

}  // namespace

Status PackedWeight::pack(const void* weight, WeightDtype given, int64_t out, int64_t in, WeightDtype held) {
  const float* floats = static_cast<const float*>(weight);
  const Half* words = static_cast<const Half*>(weight);
  // Element i as the float it is, whatever it is given as.
  const auto value = [&](int64_t i) { return given == WeightDtype::f32 ? floats[i] : widen(words[i], given); };
  const int64_t size = static_cast<int64_t>(kernels::packed_size(in, out));
  FloatBuffer packed;
  Buffer<Half> packed_words;
  Status s;
  bool finite = true;
  if (held == WeightDtype::f32) {
    // 16-bit weights widen once, into the packed floats.
    FloatBuffer widened;
    if (given != WeightDtype::f32) {
      s = widened.allocate(out * in, "widened weights");
      if (!s.ok()) return s;
      for (int64_t i = 0; i < out * in; ++i) widened.data()[i] = value(i);
      floats = widened.data();
    }
    s = packed.allocate(size, "packed weights");
    if (!s.ok()) return s;
    kernels::pack_transposed(in, out, floats, in, packed.data());
  } else {
    // The packed layout (packing.h) with 16-bit elements: panels of 8 outputs, K rows each. Each
    // output's row is read in order and written every kPanel words, with no test per element: a
    // streamed model packs every layer on every call, so this runs at memory speed.
    s = packed_words.allocate(size, "packed weights");
    if (!s.ok()) return s;
    const int64_t panel = static_cast<int64_t>(kernels::kPanel), padded = (out + panel - 1) / panel * panel;
    Half* packed_data = packed_words.data();
    // Items of kApplyChunk outputs, split across the threads as apply() splits them.
    parallel_for((padded + kApplyChunk - 1) / kApplyChunk, [&](int64_t item, int) {
      for (int64_t j = item * kApplyChunk; j < std::min((item + 1) * kApplyChunk, padded); ++j) {
        Half* column = packed_data + j / panel * panel * in + j % panel;
        const Half* row = words + j * in;
        if (j >= out)
          for (int64_t k = 0; k < in; ++k) column[k * panel] = 0;
        else if (given == held)
          for (int64_t k = 0; k < in; ++k) column[k * panel] = row[k];
        else
          for (int64_t k = 0; k < in; ++k) column[k * panel] = narrow(value(j * in + k), held);
      }
    }, static_cast<double>(kApplyChunk * in));
    if (held == WeightDtype::f16)
      finite = std::none_of(packed_data, packed_data + size, [](Half h) { return (h & 0x7c00u) == 0x7c00u; });
  }
  packed_ = std::move(packed);
  halves_ = std::move(packed_words);
  dtype_ = held;
  in_ = in;
  out_ = out;
  finite_ = finite;
  return Status::success();
}

Status PackedWeight::apply(int64_t rows, const float* x, const float* bias, float* y) const {
  const int64_t in = in_, out = out_;
  const int64_t chunks = (out + kApplyChunk - 1) / kApplyChunk, blocks = (rows + kApplyRows - 1) / kApplyRows;
  const double flops = 2.0 * static_cast<double>(std::min(rows, kApplyRows)) * kApplyChunk * in;
  // Item i: chunk i / blocks, row block i % blocks.
  const auto run = [&](int64_t item, const WeightSlice& weight) {
    const int64_t j0 = item / blocks * kApplyChunk, r0 = item % blocks * kApplyRows;
    linear_rows(std::min(kApplyRows, rows - r0), x + r0 * in, in, weight, bias ? bias + j0 : nullptr, y + r0 * out + j0,
                out);
  };
  if (!halves_.data()) {
    parallel_for(chunks * blocks, [&](int64_t item, int) {
      const int64_t j0 = item / blocks * kApplyChunk;
      run(item, slice(j0, std::min(kApplyChunk, out - j0)));
    }, flops);
    return Status::success();
  }
  // Each thread widens its chunk of panels into its own scratch, then multiplies every row by it.
  FloatBuffer scratch;
  Status s = scratch.allocate(thread_count() * kApplyChunk * in, "widened weights");
  if (!s.ok()) return s;
  const kernels::KernelSet& k = kernels::active_kernels();
  parallel_for(chunks * blocks, [&](int64_t item, int worker) {
    const int64_t j0 = item / blocks * kApplyChunk, count = std::min(kApplyChunk, out - j0);
    const Half* panels = halves_.data() + j0 * in;
    const int64_t size = static_cast<int64_t>(kernels::packed_size(in, count));
    float* widened = scratch.data() + worker * kApplyChunk * in;
    if (dtype_ == WeightDtype::bf16)
      k.widen_bf16(panels, widened, size);
    else if (finite_)
      k.widen_f16(panels, widened, size);
    else
      std::transform(panels, panels + size, widened, from_half);
    run(item, {widened, in, count});
  }, flops);
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
  s = weight_.pack(w.weight, w.weight_dtype, out, in, config_.dtype);
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
  return apply(x.shape.leading_numel(1), x.data, y);
}

}  // namespace attn

#include "feed_forward.h"

#include <algorithm>
#include <string>

#include "buffer.h"
#include "module.h"
#include "parallel.h"

namespace attn {

namespace {

// Rows per pass: the hidden activations of 512 rows at a time (two [512, inner] buffers: 32 MiB
// for inner 8192, where a whole 2048-token input would take 128), and enough rows that each
// projection's work items (256 rows by 64 outputs) still balance across the threads.
constexpr int64_t kPassRows = 512;

std::string described(const Linear& linear) {
  return "Linear(" + std::to_string(linear.config().in_features) + ", " + std::to_string(linear.config().out_features) + ")";
}

Status check_loaded(const Linear* linear, const std::string& argument) {
  if (!linear->loaded()) return Status::invalid(argument, "a Linear with its weights loaded (loadStateDict())", "no weights loaded");
  return Status::success();
}

}  // namespace

Status check_feed_forward(const FeedForwardParts& p, const Shape& x, Shape* output) {
  if (!p.down) return Status::invalid("parts.down", "a Linear", "none");
  if (!p.up == !p.gate_up)
    return Status::invalid(p.up ? "parts.gateUp" : "parts.up", "either up (with or without gate) or gateUp", p.up ? "both" : "neither");
  if (p.gate && p.gate_up) return Status::invalid("parts.gate", "no gate beside gateUp (it holds the gate)", "a gate");
  Status s = first_failure({check_loaded(p.down, "parts.down"), p.up ? check_loaded(p.up, "parts.up") : check_loaded(p.gate_up, "parts.gateUp"),
                            p.gate ? check_loaded(p.gate, "parts.gate") : Status::success()});
  if (!s.ok()) return s;
  const Linear& first = p.gate_up ? *p.gate_up : *p.up;
  const int64_t in = first.config().in_features;
  int64_t inner = first.config().out_features;
  if (p.gate && !(p.gate->config().in_features == in && p.gate->config().out_features == inner))
    return Status::invalid("parts.gate", "Linear(" + std::to_string(in) + ", " + std::to_string(inner) + "), as up", described(*p.gate));
  if (p.gate_up) {
    if (inner % 2 != 0)
      return Status::invalid("parts.gateUp", "an even outFeatures (the gate's half, then the up's)", described(*p.gate_up));
    inner /= 2;
  }
  if (p.down->config().in_features != inner)
    return Status::invalid("parts.down", "Linear(" + std::to_string(inner) + ", ...) (inFeatures = the hidden width)", described(*p.down));
  // x as the first projection takes it; the output as down gives it.
  s = first.check_forward(x, output);
  if (s.ok()) (*output)[x.rank - 1] = p.down->config().out_features;
  return s;
}

Status feed_forward(const FeedForwardParts& p, const TensorView& x, float* y) {
  Shape output;
  Status s = first_failure({check_feed_forward(p, x.shape, &output), check_data(x, "x")});
  if (!s.ok()) return s;
  const Linear& first = p.gate_up ? *p.gate_up : p.gate ? *p.gate : *p.up;  // the activated projection
  const int64_t rows = x.shape.leading_numel(1), in = x.shape.at_end(1);
  const int64_t width = first.config().out_features, inner = p.down->config().in_features;
  const int64_t out = p.down->config().out_features, pass = std::min(rows, kPassRows);
  // hidden: the activated projection's rows; other: up's rows (the multiplier), or for gateUp the
  // activated halves gathered into rows of `inner` for down.
  FloatBuffer hidden, other;
  s = hidden.allocate(pass * width, "the hidden activations");
  if (s.ok() && (p.gate || p.gate_up)) s = other.allocate(pass * inner, "the hidden activations");
  if (!s.ok()) return s;
  const kernels::KernelSet& k = kernels::active_kernels();
  for (int64_t r0 = 0; r0 < rows && s.ok(); r0 += pass) {
    const int64_t n = std::min(pass, rows - r0);
    const float* input = x.data + r0 * in;
    s = first.apply(n, input, hidden.data());
    if (s.ok() && p.gate) s = p.up->apply(n, input, other.data());
    if (!s.ok()) break;
    parallel_for(n, [&](int64_t row, int) {
      float* h = hidden.data() + row * width;
      if (p.gate_up) {
        k.activate(h, h + inner, inner, p.activation);
        std::copy(h, h + inner, other.data() + row * inner);
      } else {
        k.activate(h, p.gate ? other.data() + row * inner : nullptr, inner, p.activation);
      }
    }, 20.0 * inner);
    s = p.down->apply(n, p.gate_up ? other.data() : hidden.data(), y + r0 * out);
  }
  return s;
}

}  // namespace attn

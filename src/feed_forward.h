// The feed-forward block of a transformer layer in one call: its hidden activations stay in wasm
// memory (a gated MLP of a 1B model at 2048 tokens would otherwise copy 64 MiB out and back in
// three times a layer) and are activated by a SIMD kernel.
#pragma once

#include "kernels/kernels.h"
#include "linear.h"
#include "status.h"
#include "tensor.h"

namespace attn {

using kernels::Activation;

// The block's Linear modules (not owned): down(act(gate(x)) ⊙ up(x)) with gate and up (Llama's
// MLP); down(act(up(x))) with up alone (GPT-2's, BERT's); or gate_up, one projection whose rows
// hold the gate's half and then the up's (Phi-3's gate_up_proj), for down(act(gate) ⊙ up).
struct FeedForwardParts {
  const Linear* gate = nullptr;
  const Linear* up = nullptr;
  const Linear* gate_up = nullptr;
  const Linear* down = nullptr;
  Activation activation = Activation::silu;
};

// x [..., in] → [..., down's out_features].
Status check_feed_forward(const FeedForwardParts& parts, const Shape& x, Shape* output);
Status feed_forward(const FeedForwardParts& parts, const TensorView& x, float* y);

}  // namespace attn

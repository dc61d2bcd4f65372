// The attention engine every operator ends in: softmax(scale · Q·Kᵀ + mask) · V over B
// independent blocks, either materialising the weights or streaming over key tiles.
#pragma once

#include <cstdint>

#include "dropout.h"
#include "mask.h"
#include "status.h"

namespace attn {

// B blocks of contiguous, row-major Q [n, d], K [m, d], V [m, dv] and output [n, dv]; block b of
// each starts at b times its block size.
struct AttentionBlocks {
  int64_t batch = 0, n = 0, m = 0, d = 0, dv = 0;
  const float* query = nullptr;
  const float* key = nullptr;
  const float* value = nullptr;
  float scale = 1.0f;
  const ScoreMask* mask = nullptr;
  const Dropout* dropout = nullptr;  // indices run over the weights [B, n, m], row-major
};

// Writes output [B, n, dv] and, when `weights` is non-null, weights [B, n, m]. Without weights it
// takes the streaming (online-softmax) path, whose scratch does not depend on n or m. A query
// that can see no key gets zero weights and a zero output.
Status attend(const AttentionBlocks& blocks, float* output, float* weights);

}  // namespace attn

// Rotary position embedding (RoPE) and the frequency schemes of Hugging Face's
// modeling_rope_utils.py (ROPE_INIT_FUNCTIONS): each gives the inverse frequencies of the rotated
// dims and an attention factor that multiplies cos and sin.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "buffer.h"
#include "status.h"
#include "tensor.h"

namespace attn {

// Hugging Face's rope_type names: default, linear, dynamic, yarn, longrope, llama3; `given` takes
// the inverse frequencies and the attention factor as they are.
enum class RopeType { standard, linear, dynamic, yarn, longrope, llama3, given };

// The fields of a config.json's rope_scaling (or rope_parameters) that the scheme reads, with
// Hugging Face's defaults where it has them. Arrays are read during RopeFrequencies::prepare only.
struct RopeScaling {
  RopeType type = RopeType::standard;
  // linear, dynamic and llama3 need it; yarn and longrope default to max / original positions.
  std::optional<double> factor;
  std::optional<double> attention_factor;  // yarn, longrope; default from factor
  std::optional<double> beta_fast, beta_slow, mscale, mscale_all_dim;  // yarn
  bool truncate = true;                                                  // yarn
  std::optional<double> low_freq_factor, high_freq_factor;               // llama3
  // yarn, longrope and llama3; default max_position_embeddings.
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<int64_t> max_position_embeddings;  // dynamic; the defaults above
  const double* short_factor = nullptr;  // longrope, rotary_dim / 2 each
  const double* long_factor = nullptr;
  int64_t factor_count = 0;
  const double* inv_freq = nullptr;  // given: rotary_dim / 2 inverse frequencies
  int64_t inv_freq_count = 0;
  double attention_scaling = 1.0;  // given
};

// A scheme prepared for one rotary size: the inverse frequencies of a call follow from the length
// of the sequence it covers (Hugging Face's seq_len, the largest position plus one), which only
// dynamic and longrope read.
class RopeFrequencies {
 public:
  // Checks `scaling` (naming its fields as ropeScaling.<config.json name>) and keeps what it needs.
  static Status check(const RopeScaling& scaling, double base, int64_t rotary_dim);
  Status prepare(const RopeScaling& scaling, double base, int64_t rotary_dim);

  int64_t half() const { return half_; }
  // Writes the rotary_dim / 2 inverse frequencies for a call over positions below
  // `sequence_length`, in double precision; returns the factor that multiplies cos and sin. Only
  // dynamic computes them per call: the others were computed once, by prepare().
  double compute(int64_t sequence_length, double* inv_freq) const;

 private:
  double derive(int64_t sequence_length, double* inv_freq) const;

  RopeScaling scaling_;  // its arrays point into tables_
  double base_ = 10000.0;
  int64_t half_ = 0;
  Buffer<double> tables_;
  // The frequencies of every length (longrope: up to the original length, then past it).
  Buffer<double> frequencies_;
  double attention_ = 1.0;
  int64_t original_ = 0;
};

// Rotary position embedding of x [..., L, d] into output (same shape; may be x itself). With
// r = rotary_dim and k in [0, r/2), position pos turns the pair of dims k by pos · inv_freq[k],
// in double precision, and scales it by the scheme's attention factor; dims from r on pass through.
struct RopeOptions {
  // [L], or [N, L] for x [N, ..., L, d]; absent: offset, offset + 1, …
  IdsView positions;
  int64_t offset = 0;
  double base = 10000.0;
  std::optional<int64_t> rotary_dim;  // even, at most d; default d
  // Rotate-half (GPT-NeoX, Hugging Face Llama) pairs dims k and k + r/2; interleaved (GPT-J, ONNX
  // rotary_interleaved) pairs 2k and 2k + 1.
  bool interleaved = false;
  RopeScaling scaling;
};

Status check_rope(const Shape& x, const RopeOptions& options);
Status rope(const TensorView& x, const RopeOptions& options, float* output);

// A tensor apply_rope turns in place: x [N, ..., L, d].
struct RopeTarget {
  float* data;
  Shape shape;
};

// `targets` (of the same N and L: a block's queries and keys) turned in place by a prepared scheme
// at positions [L] or [N, L] (or first, first + 1, …, when absent), the first rotary_dim dims of
// each pair by pair as `interleaved` says. Each position's cos and sin are computed once, in
// double precision, and serve every head of every target.
Status apply_rope(std::initializer_list<RopeTarget> targets, const RopeFrequencies& frequencies,
                  const IdsView& positions, int64_t first, bool interleaved);

}  // namespace attn

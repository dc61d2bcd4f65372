// The hot loops of attention behind one narrow interface. Each ISA flavour (scalar, wasm SIMD128)
// fills one KernelSet; the operators call active_kernels() and never an intrinsic. Every entry of
// every set is checked against the scalar twin by tests/cpp/kernels_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace attn::kernels {

// The terms modern decoders add to a row of scaled scores, in the contract's order: a soft cap
// (Gemma 2), then ALiBi's linear bias.
struct ScoreTerms {
  float scale;
  float softcap;         // c > 0: the scaled score s becomes c·tanh(s / c); 0: no cap
  float alibi_slope;     // adds alibi_slope · (alibi_distance + j); 0: no ALiBi
  float alibi_distance;  // j0 − p_i: how far the row's first key lies from the query's position
};

// The activations of a feed-forward block, by Hugging Face's names: silu; gelu (the erf form);
// gelu_tanh (gelu_new and gelu_pytorch_tanh, the tanh approximation).
enum class Activation : int32_t { silu, gelu, gelu_tanh };

struct KernelSet {
  const char* name;

  // C[M, N] = A[M, K] · B[N, K]ᵀ: scores from queries and keys, both row-major with rows of
  // length K, so neither operand needs packing.
  void (*gemm_nt)(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* B, size_t ldb, float* C,
                  size_t ldc);

  // s[j] = s[j] · scale + bias[j] (bias may be null); returns max_j s[j], -inf when n = 0, NaN
  // if any s[j] is NaN (so NaN inputs propagate as in PyTorch).
  float (*scale_bias_max)(float* s, const float* bias, size_t n, float scale);

  // s[j] = softcap(s[j] · scale) + alibi + bias[j] (bias may be null) as `terms` gives them;
  // returns the max as scale_bias_max does.
  float (*score_terms_max)(float* s, const float* bias, size_t n, const ScoreTerms& terms);

  // s[j] = exp(s[j] - max); returns the sum. exp(-inf) is exactly 0, so masked keys get weight 0.
  float (*exp_sum)(float* s, size_t n, float max);

  // x[j] *= alpha: normalisation and the online-softmax rescale.
  void (*scale)(float* x, size_t n, float alpha);

  // C[M, N] = A[M, K] · B + bias, B packed by pack_transposed (packing.h); bias [N] or null.
  // The GEMM of projections (weights packed once) and of scores (each key tile packed once).
  void (*gemm_packed)(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* packed_b,
                      const float* bias, float* C, size_t ldc);

  // C[i, j] = Σ_k w[k] · tanh(A[i, k] + B[j, k]): additive (Bahdanau) scores from projected
  // queries A [M, K] and keys B [N, K].
  void (*tanh_scores)(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* B, size_t ldb,
                      const float* w, float* C, size_t ldc);

  // The decode step's two products over a KV cache's rows, read where they lie (the cache is
  // never packed: each step reads every key and value once). gemm_nt_f16 is gemm_nt with B
  // stored as binary16 bits; gemm_nn_add is C[M, N] += A[M, K] · B[K, N] with B row-major (the
  // weights times the values). The f16 forms widen B in registers and require finite values: a
  // binary16 Inf or NaN reads as a wrong finite number, so callers holding one widen B first.
  void (*gemm_nt_f16)(size_t M, size_t N, size_t K, const float* A, size_t lda, const uint16_t* B, size_t ldb,
                      float* C, size_t ldc);
  void (*gemm_nn_add)(size_t M, size_t N, size_t K, const float* A, size_t lda, const float* B, size_t ldb, float* C,
                      size_t ldc);
  void (*gemm_nn_add_f16)(size_t M, size_t N, size_t K, const float* A, size_t lda, const uint16_t* B, size_t ldb,
                          float* C, size_t ldc);

  // The same products over a q8 cache's rows (q8.h: blocks of 32 along each row, one binary16
  // scale a block). gemm_nt_q8 scores queries A quantised as q8 (float scales) against keys B,
  // each block's dot product in integers times the two scales; gemm_nn_add_q8 is gemm_nn_add with
  // B's rows q8. Scale rows lie q8_blocks(K) apart (A and B of gemm_nt_q8) or q8_blocks(N) (B of
  // gemm_nn_add_q8), whatever lda and ldb are.
  void (*gemm_nt_q8)(size_t M, size_t N, size_t K, const int8_t* A, const float* a_scales, size_t lda,
                     const int8_t* B, const uint16_t* b_scales, size_t ldb, float* C, size_t ldc);
  void (*gemm_nn_add_q8)(size_t M, size_t N, size_t K, const float* A, size_t lda, const int8_t* B,
                         const uint16_t* b_scales, size_t ldb, float* C, size_t ldc);

  // out[i] = the float of binary16 h[i], exact for finite values (Inf and NaN, as above, are not):
  // f16 Linear weights widened a panel chunk at a time for gemm_packed.
  void (*widen_f16)(const uint16_t* h, float* out, size_t n);
  // out[i] = the float of bfloat16 b[i] (its upper half), exact for every value: bf16 Linear
  // weights, as widen_f16.
  void (*widen_bf16)(const uint16_t* b, float* out, size_t n);

  // Rotary position embedding of `rows` rows of x, one `stride` apart, that share a position: in
  // each, pair k (dims k and k + half, or 2k and 2k + 1 when interleaved) becomes (a·cos[k] −
  // b·sin[k], b·cos[k] + a·sin[k]). cos and sin hold the position's angles (times the scheme's
  // attention factor), computed once for every head of the queries and the keys.
  void (*rope)(float* x, size_t rows, size_t stride, const float* cos, const float* sin, size_t half,
               bool interleaved);

  // x[i] = act(x[i]) · multiplier[i] (multiplier null: act(x[i])): a feed-forward block's
  // activation, times its up projection when the block is gated. The scalar twin computes act in
  // double and rounds once, as PyTorch's float32 ops round; the others are within 2e-6 of it
  // (relative; absolute below 1e-30), NaN and ±Inf as it gives them.
  void (*activate)(float* x, const float* multiplier, size_t n, Activation act);
};

// A row's scaled scores with their terms and bias, through the cheaper scale_bias_max when there
// are no soft cap and no ALiBi; returns the max as both do.
inline float scale_terms_max(const KernelSet& k, float* s, const float* bias, size_t n, const ScoreTerms& terms) {
  if (terms.softcap == 0.0f && terms.alibi_slope == 0.0f) return k.scale_bias_max(s, bias, n, terms.scale);
  return k.score_terms_max(s, bias, n, terms);
}

extern const KernelSet kScalarKernels;
// The wasm SIMD128 set: in SIMD wasm builds, and natively wherever SIMDe provides the intrinsics
// (ATTENTION_SIMDE, set by CMakeLists.txt), so native tests and benchmarks run the same kernels.
#if defined(__wasm_simd128__) || defined(ATTENTION_SIMDE)
#define ATTENTION_HAS_SIMD128_KERNELS 1
extern const KernelSet kWasmSimdKernels;
#endif

// The set the operators call: the fastest this build was compiled for, unless overridden.
const KernelSet& active_kernels();
// Makes the operators call `set` (null: the default again), so that the differential fuzzer runs
// one call on every set. Not thread-safe: call it between operator calls.
void override_active_kernels(const KernelSet* set);

// Every set this build has, the scalar twins first: what the tester checks and the benchmarks time.
std::vector<const KernelSet*> compiled_kernel_sets();

}  // namespace attn::kernels

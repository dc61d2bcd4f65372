// Kernel figures measured inside wasm, for bench/attention.mjs: the SIMD128 multiply-add peak of
// this machine and the GEMM kernel's throughput. Not part of the package.
#include <emscripten/bind.h>
#include <emscripten/emscripten.h>
#include <wasm_simd128.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "half.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "kernels/q8.h"

namespace {

// Independent chains of f32x4 multiplies and of f32x4 adds, as many of each as cover their
// latency: the loop then runs at the throughput of the vector units (CPUs with separate multiply
// and add pipes run both at once). 4 lanes x (kChains multiplies + kChains adds) per iteration.
double simd128_peak_gflops(int iterations) {
  constexpr int kChains = 7;
  v128_t product[kChains], sum[kChains];
  for (int c = 0; c < kChains; ++c) {
    product[c] = wasm_f32x4_splat(1.0f + c * 1e-3f);
    sum[c] = wasm_f32x4_splat(float(c));
  }
  const v128_t scale = wasm_f32x4_splat(0.9999999f), shift = wasm_f32x4_splat(1e-7f);
  const double start = emscripten_get_now();
  for (int it = 0; it < iterations; ++it)
    for (int c = 0; c < kChains; ++c) {
      product[c] = wasm_f32x4_mul(product[c], scale);
      sum[c] = wasm_f32x4_add(sum[c], shift);
    }
  const double ms = emscripten_get_now() - start;
  float sink = 0;  // keeps the chains alive
  for (int c = 0; c < kChains; ++c) sink += wasm_f32x4_extract_lane(product[c], 0) + wasm_f32x4_extract_lane(sum[c], 0);
  if (std::isnan(sink)) return 0;
  return 8.0 * kChains * iterations / (ms * 1e6);
}

// A [M, K] and B [K, N] packed for gemm_packed, filled with sin and cos.
struct GemmOperands {
  std::vector<float> A, packed;

  GemmOperands(size_t M, size_t N, size_t K) : A(M * K), packed(attn::kernels::packed_size(K, N)) {
    std::vector<float> Bt(N * K);
    for (size_t i = 0; i < A.size(); ++i) A[i] = std::sin(float(i));
    for (size_t i = 0; i < Bt.size(); ++i) Bt[i] = std::cos(float(i));
    attn::kernels::pack_transposed(K, N, Bt.data(), K, packed.data());
  }
};

// C[M, N] = A[M, K] · B with B packed once, as projections run; the best of `repeats` runs.
double gemm_gflops(int M, int N, int K, int repeats) {
  const GemmOperands operands(M, N, K);
  std::vector<float> C(size_t(M) * N);
  const auto& kernels = attn::kernels::active_kernels();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = emscripten_get_now();
    kernels.gemm_packed(M, N, K, operands.A.data(), K, operands.packed.data(), nullptr, C.data(), N);
    best = std::min(best, emscripten_get_now() - start);
  }
  return 2.0 * M * N * K / (best * 1e6);
}

// The decode step's kernels on one chunk of a KV cache's rows, in L1, best of `repeats` runs of
// `calls` calls: kind 0 gemm_nt, 1 gemm_nt_f16 (scores: M query heads of a group, N keys, K head
// dim), 2 gemm_nn_add, 3 gemm_nn_add_f16 (weights times values: M, N value dim, K keys), 4
// gemm_nt_q8, 5 gemm_nn_add_q8 (the same over q8 rows, queries quantised).
double decode_kernel_gflops(int kind, int M, int N, int K, int calls, int repeats) {
  const bool scores = kind % 4 < 2, f16 = kind % 2 == 1 && kind < 4, q8 = kind >= 4;
  std::vector<float> A(size_t(M) * K), B(size_t(N) * K), C(size_t(M) * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = std::sin(float(i));
  for (size_t i = 0; i < B.size(); ++i) B[i] = std::cos(float(i));
  std::vector<uint16_t> B16(B.size());
  std::transform(B.begin(), B.end(), B16.begin(), attn::to_half);
  // q8: A [M, K] by rows of K; B by rows of K (keys) or of N (values).
  const size_t width = scores ? K : N, rows = B.size() / width;
  std::vector<int8_t> qa(A.size()), qb(B.size());
  std::vector<float> sa(size_t(M) * attn::kernels::q8_blocks(K));
  std::vector<uint16_t> sb(rows * attn::kernels::q8_blocks(width));
  for (int i = 0; q8 && i < M; ++i)
    attn::kernels::quantize_q8(A.data() + i * K, K, qa.data() + i * K, sa.data() + i * attn::kernels::q8_blocks(K));
  for (size_t r = 0; q8 && r < rows; ++r)
    attn::kernels::quantize_q8(B.data() + r * width, width, qb.data() + r * width, sb.data() + r * attn::kernels::q8_blocks(width));
  const auto& k = attn::kernels::active_kernels();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = emscripten_get_now();
    for (int c = 0; c < calls; ++c) {
      if (scores && q8) k.gemm_nt_q8(M, N, K, qa.data(), sa.data(), K, qb.data(), sb.data(), K, C.data(), N);
      if (!scores && q8) k.gemm_nn_add_q8(M, N, K, A.data(), K, qb.data(), sb.data(), N, C.data(), N);
      if (q8) continue;
      if (scores && !f16) k.gemm_nt(M, N, K, A.data(), K, B.data(), K, C.data(), N);
      if (scores && f16) k.gemm_nt_f16(M, N, K, A.data(), K, B16.data(), K, C.data(), N);
      if (!scores && !f16) k.gemm_nn_add(M, N, K, A.data(), K, B.data(), N, C.data(), N);
      if (!scores && f16) k.gemm_nn_add_f16(M, N, K, A.data(), K, B16.data(), N, C.data(), N);
    }
    best = std::min(best, emscripten_get_now() - start);
  }
  if (std::isnan(C[0])) return 0;
  return 2.0 * M * N * K * calls / (best * 1e6);
}

// 16-bit Linear weights widened for the GEMM: widen_f16 (bf16 false) or widen_bf16 on `n`
// elements, best of `repeats` runs of `calls` calls, in G elements/s.
double widen_rate(bool bf16, int n, int calls, int repeats) {
  const attn::WeightDtype dtype = bf16 ? attn::WeightDtype::bf16 : attn::WeightDtype::f16;
  std::vector<uint16_t> words(n);
  for (int i = 0; i < n; ++i) words[i] = attn::narrow(std::sin(float(i)), dtype);
  std::vector<float> out(n);
  const auto& k = attn::kernels::active_kernels();
  const auto kernel = bf16 ? k.widen_bf16 : k.widen_f16;
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = emscripten_get_now();
    for (int c = 0; c < calls; ++c) kernel(words.data(), out.data(), n);
    best = std::min(best, emscripten_get_now() - start);
  }
  if (std::isnan(out[0])) return 0;
  return double(n) * calls / (best * 1e6);
}

// RoPE over `rows` rows of 2·half dims at one position (a decode step's query and key heads), in
// L1, best of `repeats` runs of `calls` calls, in G elements/s.
double rope_rate(bool interleaved, int rows, int half, int calls, int repeats) {
  std::vector<float> x(size_t(rows) * 2 * half), cos(half), sin(half);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  for (int k = 0; k < half; ++k) {
    cos[k] = std::cos(0.1f * k);
    sin[k] = std::sin(0.1f * k);
  }
  const auto& k = attn::kernels::active_kernels();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = emscripten_get_now();
    for (int c = 0; c < calls; ++c) k.rope(x.data(), rows, 2 * half, cos.data(), sin.data(), half, interleaved);
    best = std::min(best, emscripten_get_now() - start);
  }
  if (std::isnan(x[0])) return 0;
  return double(x.size()) * calls / (best * 1e6);
}

// What bounds the GEMM. One k step of its 4x8 tile issues two panel loads, four load-splats of A
// and 16 multiplies and adds. These copies of that loop keep either kind of load out of it (A's
// four values, or the panel's two vectors, fixed for the whole tile: timing only, the results are
// wrong), so the three figures show which one holds the kernel below the peak.
enum class TileLoads { kAll, kNoSplats, kNoPanelLoads };

template <TileLoads kLoads>
void tile_4x8(size_t K, const float* A, size_t lda, const float* panel, float* C, size_t ldc) {
  v128_t acc[4][2];
  for (auto& row : acc) row[0] = row[1] = wasm_f32x4_splat(0.0f);
  const float* a[4];
  v128_t fixed_a[4];
  for (int r = 0; r < 4; ++r) {
    a[r] = A + r * lda;
    fixed_a[r] = wasm_v128_load32_splat(a[r]);
  }
  const v128_t fixed_lo = wasm_v128_load(panel), fixed_hi = wasm_v128_load(panel + 4);
  for (size_t k = 0; k < K; ++k, panel += 8) {
    const bool load_panel = kLoads != TileLoads::kNoPanelLoads;
    const v128_t lo = load_panel ? wasm_v128_load(panel) : fixed_lo, hi = load_panel ? wasm_v128_load(panel + 4) : fixed_hi;
    for (int r = 0; r < 4; ++r) {
      const v128_t splat = kLoads == TileLoads::kNoSplats ? fixed_a[r] : wasm_v128_load32_splat(a[r]++);
      acc[r][0] = wasm_f32x4_add(acc[r][0], wasm_f32x4_mul(splat, lo));
      acc[r][1] = wasm_f32x4_add(acc[r][1], wasm_f32x4_mul(splat, hi));
    }
  }
  for (int r = 0; r < 4; ++r) {
    wasm_v128_store(C + r * ldc, acc[r][0]);
    wasm_v128_store(C + r * ldc + 4, acc[r][1]);
  }
}

// A score tile's shape: 32 queries x 128 keys x head dim 64, all in L1.
constexpr size_t kLoopM = 32, kLoopN = 128, kLoopK = 64;

// C = A · B in the kernel's order: panels, and 4-row tiles within them.
template <TileLoads kLoads>
void gemm_4x8(const float* A, const float* packed, float* C) {
  for (size_t j0 = 0; j0 < kLoopN; j0 += 8)
    for (size_t i = 0; i < kLoopM; i += 4) tile_4x8<kLoads>(kLoopK, A + i * kLoopK, kLoopK, packed + j0 * kLoopK, C + i * kLoopN + j0, kLoopN);
}

void kernel_gemm(const float* A, const float* packed, float* C) {
  attn::kernels::active_kernels().gemm_packed(kLoopM, kLoopN, kLoopK, A, kLoopK, packed, nullptr, C, kLoopN);
}

// GFLOP/s of the kernel itself, and of the loop above with all its loads, without the splats and
// without the panel loads; the variants take turns each round, so drift slows them alike. Best of
// `repeats` rounds of `calls` calls each.
emscripten::val gemm_loop_gflops(int repeats, int calls) {
  const GemmOperands operands(kLoopM, kLoopN, kLoopK);
  std::vector<float> C(kLoopM * kLoopN);
  using Gemm = void (*)(const float*, const float*, float*);
  const std::pair<const char*, Gemm> variants[] = {{"kernel", kernel_gemm},
                                                   {"allLoads", gemm_4x8<TileLoads::kAll>},
                                                   {"noSplats", gemm_4x8<TileLoads::kNoSplats>},
                                                   {"noPanelLoads", gemm_4x8<TileLoads::kNoPanelLoads>}};
  constexpr int kVariants = sizeof(variants) / sizeof(variants[0]);
  double best[kVariants];
  std::fill(best, best + kVariants, 1e300);
  for (int r = 0; r < repeats; ++r)
    for (int v = 0; v < kVariants; ++v) {
      const double start = emscripten_get_now();
      for (int c = 0; c < calls; ++c) variants[v].second(operands.A.data(), operands.packed.data(), C.data());
      best[v] = std::min(best[v], (emscripten_get_now() - start) / calls);
    }
  emscripten::val result = emscripten::val::object();
  for (int v = 0; v < kVariants; ++v) result.set(variants[v].first, 2.0 * kLoopM * kLoopN * kLoopK / (best[v] * 1e6));
  return result;
}

// A feed-forward block's activation (attn::kernels::Activation `act`, times a multiplier when
// `gated`) on `n` floats in L1, best of `repeats` runs of `calls` calls, in G elements/s. Each call
// activates what the last one left: every activation keeps finite inputs finite and in range.
double activate_rate(int act, bool gated, int n, int calls, int repeats) {
  std::vector<float> x(n), up(n, 1.0f);
  for (int i = 0; i < n; ++i) x[i] = 4.0f * std::sin(float(i));
  const auto& k = attn::kernels::active_kernels();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = emscripten_get_now();
    for (int c = 0; c < calls; ++c) k.activate(x.data(), gated ? up.data() : nullptr, n, static_cast<attn::kernels::Activation>(act));
    best = std::min(best, emscripten_get_now() - start);
  }
  if (std::isnan(x[0])) return 0;
  return double(n) * calls / (best * 1e6);
}

}  // namespace

EMSCRIPTEN_BINDINGS(bench_kernels) {
  emscripten::function("simd128PeakGflops", &simd128_peak_gflops);
  emscripten::function("gemmGflops", &gemm_gflops);
  emscripten::function("gemmLoopGflops", &gemm_loop_gflops);
  emscripten::function("decodeKernelGflops", &decode_kernel_gflops);
  emscripten::function("widenRate", &widen_rate);
  emscripten::function("ropeRate", &rope_rate);
  emscripten::function("activateRate", &activate_rate);
}

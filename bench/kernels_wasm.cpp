// Kernel figures measured inside wasm, for bench/attention.mjs: the SIMD128 multiply-add peak of
// this machine and the GEMM kernel's throughput. Not part of the package.
#include <emscripten/bind.h>
#include <emscripten/emscripten.h>
#include <wasm_simd128.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/packing.h"

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

// C[M, N] = A[M, K] · B with B packed once, as projections run; the best of `repeats` runs.
double gemm_gflops(int M, int N, int K, int repeats) {
  std::vector<float> A(size_t(M) * K), Bt(size_t(N) * K), C(size_t(M) * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = std::sin(float(i));
  for (size_t i = 0; i < Bt.size(); ++i) Bt[i] = std::cos(float(i));
  std::vector<float> packed(attn::kernels::packed_size(K, N));
  attn::kernels::pack_transposed(K, N, Bt.data(), K, packed.data());
  const auto& kernels = attn::kernels::active_kernels();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const double start = emscripten_get_now();
    kernels.gemm_packed(M, N, K, A.data(), K, packed.data(), nullptr, C.data(), N);
    best = std::min(best, emscripten_get_now() - start);
  }
  return 2.0 * M * N * K / (best * 1e6);
}

}  // namespace

EMSCRIPTEN_BINDINGS(bench_kernels) {
  emscripten::function("simd128PeakGflops", &simd128_peak_gflops);
  emscripten::function("gemmGflops", &gemm_gflops);
}

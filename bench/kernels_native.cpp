// Kernel micro-benchmarks (Google Benchmark), one per kernel family, as XNNPACK's bench/ has:
// every KernelSet this native build has (scalar, and the wasm SIMD128 set through SIMDe) at the
// shapes attention gives each kernel. `npm run bench:kernels [-- --benchmark_filter=gemm]`.
// Native figures compare kernel designs with each other; the wasm figures that the README quotes
// come from bench/attention.mjs, which runs the same kernels inside V8.
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/packing.h"

namespace {

using attn::kernels::KernelSet;

std::vector<float> wave(size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i));
  return v;
}

// Floating-point operations per second, from the work one iteration does.
void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["FLOPS"] = benchmark::Counter(flops_per_iteration, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

void set_elements(benchmark::State& state, size_t elements) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * elements));
}

// Unpacked A·Bᵀ, as relative attention's positional term runs it (args: M, N, K = head dim).
void gemm_nt(benchmark::State& state, const KernelSet* set) {
  const size_t M = state.range(0), N = state.range(1), K = state.range(2);
  const std::vector<float> A = wave(M * K), B = wave(N * K);
  std::vector<float> C(M * N);
  for (auto _ : state) {
    set->gemm_nt(M, N, K, A.data(), K, B.data(), K, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, 2.0 * M * N * K);
}

// Projections (weights packed once), packed-key scores and weights times packed values
// (args: M, N, K).
void gemm_packed(benchmark::State& state, const KernelSet* set) {
  const size_t M = state.range(0), N = state.range(1), K = state.range(2);
  const std::vector<float> A = wave(M * K), Bt = wave(N * K), bias = wave(N);
  std::vector<float> packed(attn::kernels::packed_size(K, N)), C(M * N);
  attn::kernels::pack_transposed(K, N, Bt.data(), K, packed.data());
  for (auto _ : state) {
    set->gemm_packed(M, N, K, A.data(), K, packed.data(), bias.data(), C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, 2.0 * M * N * K);
}

// Packing a key tile or a weight for gemm_packed (args: K, N). The same code serves every set.
void pack_transposed(benchmark::State& state) {
  const size_t K = state.range(0), N = state.range(1);
  const std::vector<float> Bt = wave(N * K);
  std::vector<float> packed(attn::kernels::packed_size(K, N));
  for (auto _ : state) {
    attn::kernels::pack_transposed(K, N, Bt.data(), K, packed.data());
    benchmark::DoNotOptimize(packed.data());
  }
  set_elements(state, K * N);
}

// The softmax of one score row (arg: keys): scale + mask + max, exp + sum, normalise.
void scale_bias_max(benchmark::State& state, const KernelSet* set) {
  const size_t n = state.range(0);
  const std::vector<float> scores = wave(n), bias = wave(n);
  std::vector<float> row(n);
  for (auto _ : state) {
    row = scores;
    benchmark::DoNotOptimize(set->scale_bias_max(row.data(), bias.data(), n, 0.125f));
  }
  set_elements(state, n);
}

void exp_sum(benchmark::State& state, const KernelSet* set) {
  const size_t n = state.range(0);
  const std::vector<float> scores = wave(n, 8.0f);
  std::vector<float> row(n);
  for (auto _ : state) {
    row = scores;
    benchmark::DoNotOptimize(set->exp_sum(row.data(), n, 8.0f));
  }
  set_elements(state, n);
}

void scale(benchmark::State& state, const KernelSet* set) {
  const size_t n = state.range(0);
  std::vector<float> row = wave(n);
  for (auto _ : state) {
    set->scale(row.data(), n, 0.999f);
    benchmark::DoNotOptimize(row.data());
  }
  set_elements(state, n);
}

// Additive scores of a 32-query tile against 128 keys (args: M, N, K = hidden size).
void tanh_scores(benchmark::State& state, const KernelSet* set) {
  const size_t M = state.range(0), N = state.range(1), K = state.range(2);
  const std::vector<float> A = wave(M * K), B = wave(N * K), w = wave(K);
  std::vector<float> C(M * N);
  for (auto _ : state) {
    set->tanh_scores(M, N, K, A.data(), K, B.data(), K, w.data(), C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_elements(state, M * N * K);
}

void register_all() {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets()) {
    const std::string suffix = std::string("/") + set->name;
    benchmark::RegisterBenchmark(("gemm_nt" + suffix).c_str(), gemm_nt, set)->Args({32, 128, 64})->Args({32, 128, 8});
    benchmark::RegisterBenchmark(("gemm_packed" + suffix).c_str(), gemm_packed, set)
        ->Args({32, 128, 64})
        ->Args({32, 64, 128})
        ->Args({32, 8, 96})
        ->Args({256, 512, 512})
        ->Args({1024, 1024, 1024});
    benchmark::RegisterBenchmark(("scale_bias_max" + suffix).c_str(), scale_bias_max, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("exp_sum" + suffix).c_str(), exp_sum, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("scale" + suffix).c_str(), scale, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("tanh_scores" + suffix).c_str(), tanh_scores, set)->Args({32, 128, 16})->Args({32, 128, 64});
  }
  benchmark::RegisterBenchmark("pack_transposed", pack_transposed)->Args({64, 128})->Args({512, 512});
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

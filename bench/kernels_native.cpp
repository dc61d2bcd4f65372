// Kernel micro-benchmarks (Google Benchmark), one per kernel family, as XNNPACK's bench/ has:
// every KernelSet this native build has (scalar, and the wasm SIMD128 set through SIMDe) at the
// shapes attention gives each kernel. `npm run bench:kernels [-- --benchmark_filter=gemm]`.
// Native figures compare kernel designs with each other; the wasm figures that the README quotes
// come from bench/attention.mjs, which runs the same kernels inside V8. On x86, x86_tile_step times
// the GEMM's inner step as machine code, to tell the CPU's limit from V8's.
#include <benchmark/benchmark.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "half.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "kernels/q8.h"

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

// A decode step's two products over a KV cache's rows, as the engine's in-place path runs them on
// one chunk of keys: scores of a group of query heads against keys (gemm_nt, gemm_nt_f16; args: M
// = the group, N = keys, K = head dim) and the weights times the values (gemm_nn_add,
// gemm_nn_add_f16; args: M, N = value dim, K = keys). Binary16 rows hold the same values rounded.
std::vector<uint16_t> as_halves(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = attn::to_half(v[i]);
  return h;
}

template <class T, bool kScores>
void cache_product(benchmark::State& state, const KernelSet* set) {
  const size_t M = state.range(0), N = state.range(1), K = state.range(2);
  const std::vector<float> A = wave(M * K), B = wave(N * K);
  const std::vector<uint16_t> B16 = as_halves(B);
  std::vector<float> C(M * N);
  constexpr bool kFloat = std::is_same_v<T, float>;
  for (auto _ : state) {
    if constexpr (kScores && kFloat) set->gemm_nt(M, N, K, A.data(), K, B.data(), K, C.data(), N);
    if constexpr (kScores && !kFloat) set->gemm_nt_f16(M, N, K, A.data(), K, B16.data(), K, C.data(), N);
    if constexpr (!kScores && kFloat) set->gemm_nn_add(M, N, K, A.data(), K, B.data(), N, C.data(), N);
    if constexpr (!kScores && !kFloat) set->gemm_nn_add_f16(M, N, K, A.data(), K, B16.data(), N, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, 2.0 * M * N * K);
}

// The same two products over q8 rows (kernels/q8.h), the queries quantised as a step quantises
// them (args as above).
template <bool kScores>
void cache_product_q8(benchmark::State& state, const KernelSet* set) {
  const size_t M = state.range(0), N = state.range(1), K = state.range(2);
  const std::vector<float> A = wave(M * K), B = wave(N * K);
  // Scores: A [M, K] and B [N, K] quantised by rows of K; values: B [K, N] by rows of N.
  const size_t width = kScores ? K : N, rows = B.size() / width;
  std::vector<int8_t> qa(M * K), qb(B.size());
  std::vector<float> sa(M * attn::kernels::q8_blocks(K));
  std::vector<uint16_t> sb(rows * attn::kernels::q8_blocks(width));
  for (size_t i = 0; i < M; ++i)
    attn::kernels::quantize_q8(A.data() + i * K, K, qa.data() + i * K, sa.data() + i * attn::kernels::q8_blocks(K));
  for (size_t r = 0; r < rows; ++r)
    attn::kernels::quantize_q8(B.data() + r * width, width, qb.data() + r * width, sb.data() + r * attn::kernels::q8_blocks(width));
  std::vector<float> C(M * N);
  for (auto _ : state) {
    if constexpr (kScores)
      set->gemm_nt_q8(M, N, K, qa.data(), sa.data(), K, qb.data(), sb.data(), K, C.data(), N);
    else
      set->gemm_nn_add_q8(M, N, K, A.data(), K, qb.data(), sb.data(), N, C.data(), N);
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

// A score row with the modern decoders' terms (arg: keys): Gemma 2's soft cap and ALiBi.
void score_terms_max(benchmark::State& state, const KernelSet* set) {
  const size_t n = state.range(0);
  const std::vector<float> scores = wave(n, 8.0f), bias = wave(n);
  std::vector<float> row(n);
  const attn::kernels::ScoreTerms terms{0.125f, 30.0f, 0.0625f, -static_cast<float>(n)};
  for (auto _ : state) {
    row = scores;
    benchmark::DoNotOptimize(set->score_terms_max(row.data(), bias.data(), n, terms));
  }
  set_elements(state, n);
}

// 16-bit weights widened for gemm_packed, binary16 (widen_f16) or bfloat16 (widen_bf16) (arg:
// elements; a 16-bit Linear's chunk of 64 outputs of 576 inputs is 36864).
template <attn::WeightDtype kDtype>
void widen(benchmark::State& state, const KernelSet* set) {
  const size_t n = state.range(0);
  std::vector<uint16_t> words(n);
  const std::vector<float> values = wave(n);
  for (size_t i = 0; i < n; ++i) words[i] = attn::narrow(values[i], kDtype);
  const auto kernel = kDtype == attn::WeightDtype::bf16 ? set->widen_bf16 : set->widen_f16;
  std::vector<float> out(n);
  for (auto _ : state) {
    kernel(words.data(), out.data(), n);
    benchmark::DoNotOptimize(out.data());
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

// RoPE at one position over every head of a block's queries and keys (args: rows = query heads +
// key/value heads, half = rotary dim / 2, interleaved), the cos/sin table given: elements turned.
void rope(benchmark::State& state, const KernelSet* set) {
  const size_t rows = state.range(0), half = state.range(1), dim = 2 * half;
  const bool interleaved = state.range(2) != 0;
  std::vector<float> x = wave(rows * dim);
  const std::vector<float> cos = wave(half), sin = wave(half, 0.5f);
  for (auto _ : state) {
    set->rope(x.data(), rows, dim, cos.data(), sin.data(), half, interleaved);
    benchmark::DoNotOptimize(x.data());
  }
  set_elements(state, rows * dim);
}

// A feed-forward block's activation over one row of a Llama-3.2-1B-shaped MLP (args: n, the
// activation as attn::kernels::Activation, gated): elements activated.
void activate(benchmark::State& state, const KernelSet* set) {
  const size_t n = state.range(0);
  const auto act = static_cast<attn::kernels::Activation>(state.range(1));
  const std::vector<float> x = wave(n, 4.0f), up = wave(n);
  std::vector<float> y = x;
  for (auto _ : state) {
    std::copy(x.begin(), x.end(), y.begin());  // the same inputs every pass
    set->activate(y.data(), state.range(2) ? up.data() : nullptr, n, act);
    benchmark::DoNotOptimize(y.data());
  }
  set_elements(state, n);
}

#if defined(__x86_64__)
// What holds the wasm GEMM below the SIMD128 peak on x86, timed on machine code itself: one k step
// of gemm_packed's 4x8 tile as V8 compiles it (two vmovdqu of the panel, four vbroadcastss of A,
// eight vmulps each feeding a vaddps into an accumulator), the same step without its six loads, and
// with the multiply and add fused (vfmadd231ps: what relaxed SIMD's f32x4.relaxed_madd would give).
// Operands stay in L1, four steps per loop pass.
#define TILE_LOADS(a_offset, panel_offset)                                                        \
  "vmovdqu " #panel_offset "(%[panel]), %%xmm14\n vmovdqu " #panel_offset "+16(%[panel]), %%xmm15\n" \
  "vbroadcastss " #a_offset "(%[a]), %%xmm8\n vbroadcastss " #a_offset "+4(%[a]), %%xmm9\n"        \
  "vbroadcastss " #a_offset "+8(%[a]), %%xmm10\n vbroadcastss " #a_offset "+12(%[a]), %%xmm11\n"
#define TILE_MUL_ADD(splat, acc_lo, acc_hi)                                 \
  "vmulps %%xmm14, %%" #splat ", %%xmm12\n vaddps %%xmm12, %%" #acc_lo ", %%" #acc_lo "\n" \
  "vmulps %%xmm15, %%" #splat ", %%xmm13\n vaddps %%xmm13, %%" #acc_hi ", %%" #acc_hi "\n"
#define TILE_FMA(splat, acc_lo, acc_hi) \
  "vfmadd231ps %%xmm14, %%" #splat ", %%" #acc_lo "\n vfmadd231ps %%xmm15, %%" #splat ", %%" #acc_hi "\n"
#define TILE_STEP(OP) OP(xmm8, xmm0, xmm1) OP(xmm9, xmm2, xmm3) OP(xmm10, xmm4, xmm5) OP(xmm11, xmm6, xmm7)
#define TILE_LOOP(BODY)                                                                          \
  __asm__ volatile("1:\n" BODY "add $64, %[a]\n add $128, %[panel]\n dec %[passes]\n jnz 1b\n"    \
                   : [a] "+r"(a), [panel] "+r"(panel), [passes] "+r"(passes)                     \
                   :                                                                             \
                   : "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", \
                     "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15")

enum class TileStep { kMulAdd, kMulAddNoLoads, kFma };

template <TileStep kStep>
void x86_tile_step(benchmark::State& state) {
  constexpr size_t kSteps = 64;
  if (!__builtin_cpu_supports("avx") || (kStep == TileStep::kFma && !__builtin_cpu_supports("fma"))) {
    state.SkipWithError("this CPU lacks AVX or FMA");
    return;
  }
  alignas(64) float A[kSteps * 4] = {}, panel_data[kSteps * 8] = {};
  for (auto _ : state) {
    const float* a = A;
    const float* panel = panel_data;
    size_t passes = kSteps / 4;
    if constexpr (kStep == TileStep::kMulAdd)
      TILE_LOOP(TILE_LOADS(0, 0) TILE_STEP(TILE_MUL_ADD) TILE_LOADS(16, 32) TILE_STEP(TILE_MUL_ADD)
                    TILE_LOADS(32, 64) TILE_STEP(TILE_MUL_ADD) TILE_LOADS(48, 96) TILE_STEP(TILE_MUL_ADD));
    else if constexpr (kStep == TileStep::kMulAddNoLoads)
      TILE_LOOP(TILE_STEP(TILE_MUL_ADD) TILE_STEP(TILE_MUL_ADD) TILE_STEP(TILE_MUL_ADD) TILE_STEP(TILE_MUL_ADD));
    else
      TILE_LOOP(TILE_LOADS(0, 0) TILE_STEP(TILE_FMA) TILE_LOADS(16, 32) TILE_STEP(TILE_FMA) TILE_LOADS(32, 64)
                    TILE_STEP(TILE_FMA) TILE_LOADS(48, 96) TILE_STEP(TILE_FMA));
  }
  set_flops(state, 2.0 * 4 * 8 * kSteps);
}
#endif

void register_all() {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets()) {
    const std::string suffix = std::string("/") + set->name;
    benchmark::RegisterBenchmark(("gemm_nt" + suffix).c_str(), gemm_nt, set)->Args({32, 128, 64})->Args({32, 128, 8});
    // Llama 3's decode step: 4 query heads a key/value head, chunks of 128 keys, head dim 64.
    benchmark::RegisterBenchmark(("gemm_nt_cache" + suffix).c_str(), cache_product<float, true>, set)->Args({4, 128, 64});
    benchmark::RegisterBenchmark(("gemm_nt_f16" + suffix).c_str(), cache_product<uint16_t, true>, set)->Args({4, 128, 64});
    benchmark::RegisterBenchmark(("gemm_nn_add" + suffix).c_str(), cache_product<float, false>, set)->Args({4, 64, 128});
    benchmark::RegisterBenchmark(("gemm_nn_add_f16" + suffix).c_str(), cache_product<uint16_t, false>, set)->Args({4, 64, 128});
    benchmark::RegisterBenchmark(("gemm_nt_q8" + suffix).c_str(), cache_product_q8<true>, set)->Args({4, 128, 64});
    benchmark::RegisterBenchmark(("gemm_nn_add_q8" + suffix).c_str(), cache_product_q8<false>, set)->Args({4, 64, 128});
    benchmark::RegisterBenchmark(("gemm_packed" + suffix).c_str(), gemm_packed, set)
        ->Args({32, 128, 64})
        ->Args({32, 64, 128})
        ->Args({32, 8, 96})
        ->Args({256, 512, 512})
        ->Args({1024, 1024, 1024});
    benchmark::RegisterBenchmark(("scale_bias_max" + suffix).c_str(), scale_bias_max, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("score_terms_max" + suffix).c_str(), score_terms_max, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("exp_sum" + suffix).c_str(), exp_sum, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("scale" + suffix).c_str(), scale, set)->Arg(128)->Arg(2048);
    benchmark::RegisterBenchmark(("widen_f16" + suffix).c_str(), widen<attn::WeightDtype::f16>, set)->Arg(36864);
    benchmark::RegisterBenchmark(("widen_bf16" + suffix).c_str(), widen<attn::WeightDtype::bf16>, set)->Arg(36864);
    benchmark::RegisterBenchmark(("tanh_scores" + suffix).c_str(), tanh_scores, set)->Args({32, 128, 16})->Args({32, 128, 64});
    // Llama-3.2-1B's decode step: 32 query heads and 8 key/value heads of head dim 64.
    benchmark::RegisterBenchmark(("rope" + suffix).c_str(), rope, set)->Args({40, 32, 0})->Args({40, 32, 1});
    // silu and gelu_tanh gated (Llama, Gemma), gelu plain (BERT, GPT-NeoX).
    benchmark::RegisterBenchmark(("activate" + suffix).c_str(), activate, set)->Args({8192, 0, 1})->Args({8192, 2, 1})->Args({8192, 1, 0});
  }
  benchmark::RegisterBenchmark("pack_transposed", pack_transposed)->Args({64, 128})->Args({512, 512});
#if defined(__x86_64__)
  benchmark::RegisterBenchmark("x86_tile_step/mul_add", x86_tile_step<TileStep::kMulAdd>);
  benchmark::RegisterBenchmark("x86_tile_step/mul_add_no_loads", x86_tile_step<TileStep::kMulAddNoLoads>);
  benchmark::RegisterBenchmark("x86_tile_step/fma", x86_tile_step<TileStep::kFma>);
#endif
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

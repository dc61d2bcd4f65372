// The kernel tester: every kernel of every set this build has is checked against a float64
// reference, and every non-scalar set against its scalar twin, over sizes equal to, below, above
// and multiples of the SIMD tiles (as XNNPACK's microkernel testers do).
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "half.h"
#include "kernels/kernels.h"
#include "kernels/packing.h"
#include "kernels/q8.h"

namespace {

using attn::kernels::KernelSet;

const std::vector<size_t> kSizes = {1, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129};

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Sums of K products of values in [-1, 1]: compare with an absolute tolerance scaled by K.
void require_close(const std::vector<float>& got, const std::vector<double>& want, double tolerance) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::fabs(got[i] - want[i]) <= tolerance);
}

// (M, N, K) triples that sweep each dimension over kSizes while the others stay odd and small.
std::vector<std::array<size_t, 3>> gemm_shapes() {
  std::vector<std::array<size_t, 3>> shapes;
  for (size_t s : kSizes) {
    shapes.push_back({s, 5, 7});
    shapes.push_back({3, s, 9});
    shapes.push_back({4, 6, s});
    shapes.push_back({s, s, s});
  }
  return shapes;
}

// Halves of random floats in [lo, hi), and a subnormal or zero every 7th: the values an f16 cache holds.
std::vector<uint16_t> random_halves(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  const std::vector<float> floats = random_floats(n, seed, lo, hi);
  std::vector<uint16_t> halves(n);
  for (size_t i = 0; i < n; ++i) halves[i] = attn::to_half(i % 7 == 3 ? floats[i] * 1e-5f : floats[i]);
  return halves;
}

double widened(float x) { return x; }
double widened(uint16_t x) { return attn::from_half(x); }

// The decode step's products over cache rows B (float or binary16), against float64: gemm_nt's
// scores and gemm_nn_add's accumulation into C, each with padded strides left untouched.
template <class T, class MakeB>
void check_cache_products(const KernelSet& set, size_t M, size_t N, size_t K, MakeB make_b,
                          void (*KernelSet::*nt)(size_t, size_t, size_t, const float*, size_t, const T*, size_t, float*, size_t),
                          void (*KernelSet::*nn)(size_t, size_t, size_t, const float*, size_t, const T*, size_t, float*, size_t)) {
  const size_t lda = K + 3, ldb = K + 1, ldc = N + 2;
  const std::vector<float> A = random_floats(M * lda, 30);
  const std::vector<T> B = make_b(N * ldb, 31);
  std::vector<float> C(M * ldc, 7.0f);
  (set.*nt)(M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc);
  for (size_t i = 0; i < M; ++i) {
    for (size_t j = 0; j < N; ++j) {
      double sum = 0;
      for (size_t k = 0; k < K; ++k) sum += double(A[i * lda + k]) * widened(B[j * ldb + k]);
      REQUIRE(std::fabs(C[i * ldc + j] - sum) <= 1e-6 * K);
    }
    for (size_t j = N; j < ldc; ++j) REQUIRE(C[i * ldc + j] == 7.0f);
  }
  // B read as [K, N] with row stride N + 5; C starts at its own values.
  const size_t ldv = N + 5;
  const std::vector<T> V = make_b(K * ldv, 32);
  std::vector<float> D = random_floats(M * ldc, 33);
  const std::vector<float> before = D;
  (set.*nn)(M, N, K, A.data(), lda, V.data(), ldv, D.data(), ldc);
  for (size_t i = 0; i < M; ++i) {
    for (size_t j = 0; j < N; ++j) {
      double sum = before[i * ldc + j];
      for (size_t k = 0; k < K; ++k) sum += double(A[i * lda + k]) * widened(V[k * ldv + j]);
      REQUIRE(std::fabs(D[i * ldc + j] - sum) <= 1e-6 * (K + 1));
    }
    for (size_t j = N; j < ldc; ++j) REQUIRE(D[i * ldc + j] == before[i * ldc + j]);
  }
}

// Every 16-bit word of `dtype` widens to a float that rounds back to it (NaN to a NaN); halfway to
// the next word away from zero rounds to the even one of the two, a hair either side to the nearer.
void check_rounding(attn::WeightDtype dtype, uint32_t largest_finite) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t word = static_cast<uint16_t>(h);
    const float x = attn::widen(word, dtype);
    if (std::isnan(x)) {
      REQUIRE((h & 0x7fff) > largest_finite + 1);
      REQUIRE(std::isnan(attn::widen(attn::narrow(x, dtype), dtype)));
      continue;
    }
    INFO("h=" << h << " x=" << x);
    REQUIRE(attn::narrow(x, dtype) == word);
    if ((h & 0x7fff) >= largest_finite) continue;  // the largest finite and Inf have no next word
    const float next = attn::widen(static_cast<uint16_t>(h + 1), dtype);
    const float midpoint = static_cast<float>((double(x) + double(next)) / 2);
    REQUIRE(attn::narrow(midpoint, dtype) == ((h & 1) ? h + 1 : h));
    REQUIRE(attn::narrow(std::nextafter(midpoint, x), dtype) == word);
    REQUIRE(attn::narrow(std::nextafter(midpoint, next), dtype) == h + 1);
  }
}

}  // namespace

TEST_CASE("to_half rounds to the nearest binary16, ties to even; from_half is exact", "[kernels][f16]") {
  using attn::from_half;
  using attn::to_half;
  check_rounding(attn::WeightDtype::f16, 0x7bff);
  REQUIRE(to_half(65504.0f) == 0x7bff);
  REQUIRE(to_half(65519.99f) == 0x7bff);
  REQUIRE(to_half(65520.0f) == 0x7c00);  // halfway past the largest finite: Inf, ties to even
  REQUIRE(to_half(-1e30f) == 0xfc00);
  REQUIRE(to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
  REQUIRE(to_half(1e-9f) == 0x0000);
  REQUIRE(to_half(-0.0f) == 0x8000);
  REQUIRE(from_half(0x0001) == std::ldexp(1.0f, -24));
}

TEST_CASE("the decode products match a float64 reference over f32 and f16 rows", "[kernels][f16]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (auto [M, N, K] : gemm_shapes()) {
      INFO(set->name << " M=" << M << " N=" << N << " K=" << K);
      check_cache_products<float>(*set, M, N, K, [](size_t n, uint32_t seed) { return random_floats(n, seed); },
                                  &KernelSet::gemm_nt, &KernelSet::gemm_nn_add);
      check_cache_products<uint16_t>(*set, M, N, K, [](size_t n, uint32_t seed) { return random_halves(n, seed); },
                                     &KernelSet::gemm_nt_f16, &KernelSet::gemm_nn_add_f16);
    }
}

TEST_CASE("widen_f16 gives every finite binary16's float exactly", "[kernels][f16]") {
  std::vector<uint16_t> halves;
  for (uint32_t h = 0; h <= 0xffff; ++h)
    if ((h & 0x7c00) != 0x7c00) halves.push_back(static_cast<uint16_t>(h));
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t offset : {0, 1, 3}) {  // every alignment and a tail of each length
      INFO(set->name << " offset " << offset);
      std::vector<float> out(halves.size() - offset, 7.0f);
      set->widen_f16(halves.data() + offset, out.data(), out.size());
      for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == attn::from_half(halves[i + offset]));
    }
}

TEST_CASE("to_bfloat16 rounds to the nearest bfloat16, ties to even; from_bfloat16 is exact", "[kernels][bf16]") {
  using attn::from_bfloat16;
  using attn::to_bfloat16;
  check_rounding(attn::WeightDtype::bf16, 0x7f7f);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = from_bfloat16(static_cast<uint16_t>(h));
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    REQUIRE(bits == h << 16);
  }
  // Past the largest finite by half a step or more: Inf. A NaN whose payload lies in the dropped
  // bits alone stays NaN.
  REQUIRE(to_bfloat16(std::numeric_limits<float>::max()) == 0x7f80);
  REQUIRE(to_bfloat16(-std::numeric_limits<float>::max()) == 0xff80);
  float low_nan;
  const uint32_t low_nan_bits = 0x7f800001u;
  std::memcpy(&low_nan, &low_nan_bits, sizeof low_nan);
  REQUIRE(std::isnan(from_bfloat16(to_bfloat16(low_nan))));
  REQUIRE(to_bfloat16(-0.0f) == 0x8000);
}

TEST_CASE("widen_bf16 gives every bfloat16's float exactly, Inf and NaN included", "[kernels][bf16]") {
  std::vector<uint16_t> words(0x10000);
  for (size_t h = 0; h < words.size(); ++h) words[h] = static_cast<uint16_t>(h);
  std::vector<size_t> sizes = kSizes;
  sizes.push_back(words.size() - 7);
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : sizes)
      for (size_t offset : {0, 1, 3}) {  // every alignment
        INFO(set->name << " n=" << n << " offset " << offset);
        std::vector<float> out(n + 1, 7.0f);
        set->widen_bf16(words.data() + offset, out.data(), n);
        for (size_t i = 0; i < n; ++i) {
          uint32_t got;
          std::memcpy(&got, &out[i], sizeof got);
          REQUIRE(got == static_cast<uint32_t>(words[i + offset]) << 16);
        }
        REQUIRE(out[n] == 7.0f);
      }
}

TEST_CASE("gemm_nt matches a float64 reference, with padded strides", "[kernels]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (auto [M, N, K] : gemm_shapes()) {
      INFO(set->name << " M=" << M << " N=" << N << " K=" << K);
      const size_t lda = K + 3, ldb = K + 1, ldc = N + 2;
      const std::vector<float> A = random_floats(M * lda, 1), B = random_floats(N * ldb, 2);
      std::vector<float> C(M * ldc, 7.0f);
      set->gemm_nt(M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc);
      std::vector<float> got;
      std::vector<double> want;
      for (size_t i = 0; i < M; ++i)
        for (size_t j = 0; j < N; ++j) {
          double sum = 0;
          for (size_t k = 0; k < K; ++k) sum += double(A[i * lda + k]) * B[j * ldb + k];
          want.push_back(sum);
          got.push_back(C[i * ldc + j]);
        }
      require_close(got, want, 1e-6 * K);
      for (size_t i = 0; i < M; ++i)  // the padding between rows is untouched
        for (size_t j = N; j < ldc; ++j) REQUIRE(C[i * ldc + j] == 7.0f);
    }
}

TEST_CASE("pack_transposed and pack_rows lay B out in zero-padded panels", "[kernels]") {
  for (size_t K : kSizes)
    for (size_t N : kSizes) {
      INFO("K=" << K << " N=" << N);
      const size_t ldbt = K + 1, ldb = N + 3;
      const std::vector<float> Bt = random_floats(N * ldbt, 20);
      std::vector<float> B(K * ldb, 9.0f);  // the same matrix stored [K, N]
      for (size_t k = 0; k < K; ++k)
        for (size_t j = 0; j < N; ++j) B[k * ldb + j] = Bt[j * ldbt + k];
      std::vector<float> from_transposed(attn::kernels::packed_size(K, N), -1.0f), from_rows = from_transposed;
      attn::kernels::pack_transposed(K, N, Bt.data(), ldbt, from_transposed.data());
      attn::kernels::pack_rows(K, N, B.data(), ldb, from_rows.data());
      const size_t panel = attn::kernels::kPanel;
      for (size_t j0 = 0; j0 < N; j0 += panel)
        for (size_t k = 0; k < K; ++k)
          for (size_t c = 0; c < panel; ++c) {
            const float want = j0 + c < N ? Bt[(j0 + c) * ldbt + k] : 0.0f;
            REQUIRE(from_transposed[j0 * K + k * panel + c] == want);
            REQUIRE(from_rows[j0 * K + k * panel + c] == want);
          }
    }
}

TEST_CASE("gemm_packed matches a float64 reference, with and without bias, over ragged panels", "[kernels]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (auto [M, N, K] : gemm_shapes())
      for (bool with_bias : {false, true}) {
        INFO(set->name << " M=" << M << " N=" << N << " K=" << K << " bias=" << with_bias);
        const size_t lda = K + 3, ldbt = K + 1, ldc = N + 2;
        const std::vector<float> A = random_floats(M * lda, 17), Bt = random_floats(N * ldbt, 18);
        const std::vector<float> bias = random_floats(N, 19);
        std::vector<float> packed(attn::kernels::packed_size(K, N), -1.0f);
        attn::kernels::pack_transposed(K, N, Bt.data(), ldbt, packed.data());
        std::vector<float> C(M * ldc, 7.0f);
        set->gemm_packed(M, N, K, A.data(), lda, packed.data(), with_bias ? bias.data() : nullptr, C.data(), ldc);
        std::vector<float> got;
        std::vector<double> want;
        for (size_t i = 0; i < M; ++i)
          for (size_t j = 0; j < N; ++j) {
            double sum = with_bias ? bias[j] : 0.0;
            for (size_t k = 0; k < K; ++k) sum += double(A[i * lda + k]) * Bt[j * ldbt + k];
            want.push_back(sum);
            got.push_back(C[i * ldc + j]);
          }
        require_close(got, want, 1e-6 * (K + 1));
        for (size_t i = 0; i < M; ++i)
          for (size_t j = N; j < ldc; ++j) REQUIRE(C[i * ldc + j] == 7.0f);
      }
}

TEST_CASE("scale_bias_max scales, adds the bias and returns the max", "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : kSizes)
      for (bool with_bias : {false, true}) {
        INFO(set->name << " n=" << n << " bias=" << with_bias);
        std::vector<float> s = random_floats(n, 6, -5, 5), bias = random_floats(n, 7, -2, 2);
        bias[n / 2] = -inf;  // a masked key
        const std::vector<float> before = s;
        const float max = set->scale_bias_max(s.data(), with_bias ? bias.data() : nullptr, n, 0.5f);
        float want_max = -inf;
        for (size_t j = 0; j < n; ++j) {
          const float want = before[j] * 0.5f + (with_bias ? bias[j] : 0.0f);
          REQUIRE(s[j] == want);
          want_max = std::max(want_max, want);
        }
        REQUIRE(max == want_max);
        // NaN propagates wherever it sits: in each vector of a 16-float step, mid-row, last.
        for (size_t at : {size_t{0}, size_t{4}, size_t{8}, size_t{12}, n / 2, n - 1}) {
          if (at >= n) continue;
          s = before;
          s[at] = std::numeric_limits<float>::quiet_NaN();
          REQUIRE(std::isnan(set->scale_bias_max(s.data(), nullptr, n, 1.0f)));
        }
      }
}

TEST_CASE("score_terms_max soft-caps, adds ALiBi and the bias, and returns the max", "[kernels]") {
  const float inf = std::numeric_limits<float>::infinity();
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : kSizes)
      for (float softcap : {0.0f, 2.5f, 30.0f})
        for (float slope : {0.0f, 0.0625f, 0.7f})
          for (bool with_bias : {false, true}) {
            INFO(set->name << " n=" << n << " softcap=" << softcap << " slope=" << slope << " bias=" << with_bias);
            std::vector<float> s = random_floats(n, 21, -40, 40), bias = random_floats(n, 22, -2, 2);
            bias[n / 2] = -inf;  // a masked key
            const std::vector<float> before = s;
            // The row's first key lies 37 keys before the query's position (j0 - p_i = -37).
            const attn::kernels::ScoreTerms terms{0.25f, softcap, slope, -37.0f};
            const float max = set->score_terms_max(s.data(), with_bias ? bias.data() : nullptr, n, terms);
            double want_max = -inf;
            for (size_t j = 0; j < n; ++j) {
              double want = before[j] * 0.25;
              if (softcap > 0) want = softcap * std::tanh(want / softcap);
              want += double(slope) * (-37.0 + double(j)) + (with_bias ? bias[j] : 0.0);
              // tanh's float error (~1e-7 absolute) is scaled by the cap; ALiBi's terms reach ~130.
              if (std::isinf(want))
                REQUIRE(s[j] == want);
              else
                REQUIRE(std::fabs(s[j] - want) <= 1e-6 * (1.0 + softcap + std::fabs(want)));
              want_max = std::max(want_max, want);
            }
            if (std::isinf(want_max))
              REQUIRE(max == want_max);
            else
              REQUIRE(std::fabs(max - want_max) <= 1e-6 * (1.0 + softcap + std::fabs(want_max)));
            for (size_t at : {size_t{0}, size_t{4}, n / 2, n - 1}) {  // NaN propagates from anywhere
              if (at >= n) continue;
              s = before;
              s[at] = std::numeric_limits<float>::quiet_NaN();
              REQUIRE(std::isnan(set->score_terms_max(s.data(), nullptr, n, terms)));
            }
          }
}

// Fuzzer finding: the SIMD soft cap formed tanh from 1 − exp(−2|x|), which cancels to 0 for small
// |x|, so a cap far above the scores (c = 1e30) turned every score into 0 instead of leaving it.
TEST_CASE("score_terms_max keeps small capped arguments to relative precision", "[kernels]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (const float cap : {1e30f, 1e4f, 50.0f}) {
      INFO(set->name << " softcap " << cap);
      std::vector<float> s = random_floats(37, 40, -20, 20);
      const std::vector<float> raw = s;
      set->score_terms_max(s.data(), nullptr, s.size(), {0.5f, cap, 0.0f, 0.0f});
      for (size_t j = 0; j < s.size(); ++j) {
        const double want = cap * std::tanh(0.5 * raw[j] / cap);
        REQUIRE(std::fabs(s[j] - want) <= 1e-6 * std::fabs(want) + 1e-7);
      }
    }
}

// The SIMD soft cap takes a polynomial for rows whose scaled scores all lie within the cap and the
// rational otherwise: both within tanh's 3.4e-7 (times the cap), either side of |s / c| = 1.
TEST_CASE("score_terms_max's soft cap is as accurate within the cap as beyond it", "[kernels]") {
  const float cap = 50.0f, above_one = std::nextafter(1.0f, 2.0f);
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : kSizes)
      for (float reach : {1.0f, above_one, 8.0f}) {  // the largest |s / c| of the row
        INFO(set->name << " n=" << n << " reach=" << reach);
        std::vector<float> s = random_floats(n, 41, -cap, cap);
        s[n / 2] = reach * cap;
        if (n > 1) s[0] = -cap;  // s / c = -1 exactly
        const std::vector<float> raw = s;
        set->score_terms_max(s.data(), nullptr, n, {1.0f, cap, 0.0f, 0.0f});
        for (size_t j = 0; j < n; ++j)
          REQUIRE(std::fabs(s[j] - cap * std::tanh(double(raw[j]) / cap)) <= 3.5e-7 * cap);
      }
}

TEST_CASE("exp_sum exponentiates against the max, exp(-inf) = 0 exactly", "[kernels]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : kSizes) {
      INFO(set->name << " n=" << n);
      std::vector<float> s = random_floats(n, 8, -30, 0);
      s[n - 1] = -100.0f;  // below the normal float range of exp
      if (n > 3) s[n / 3] = -87.6f;  // about where the SIMD exp's 2^n reaches 2^-127 = 0
      s[0] = -std::numeric_limits<float>::infinity();
      const std::vector<float> before = s;
      const float sum = set->exp_sum(s.data(), n, 0.25f);
      double want_sum = 0;
      for (size_t j = 0; j < n; ++j) {
        const double want = std::exp(double(before[j]) - 0.25);
        REQUIRE(std::fabs(s[j] - want) <= 2e-7 * want + 1e-38);
        want_sum += want;
      }
      REQUIRE(s[0] == 0.0f);
      REQUIRE(std::fabs(sum - want_sum) <= 1e-6 * want_sum + 1e-38);
      // NaN propagates from either pass of a chunk and from the tail: first, mid-row, last.
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        std::vector<float> with_nan = before;
        with_nan[at] = std::numeric_limits<float>::quiet_NaN();
        REQUIRE(std::isnan(set->exp_sum(with_nan.data(), n, 0.0f)));
      }
    }
}

TEST_CASE("scale multiplies in place", "[kernels]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : kSizes) {
      std::vector<float> x = random_floats(n, 9);
      const std::vector<float> before = x;
      set->scale(x.data(), n, -1.5f);
      for (size_t j = 0; j < n; ++j) REQUIRE(x[j] == before[j] * -1.5f);
    }
}

TEST_CASE("tanh_scores matches a float64 reference, tanh saturating to exactly +-1", "[kernels]") {
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (auto [M, N, K] : gemm_shapes()) {
      INFO(set->name << " M=" << M << " N=" << N << " K=" << K);
      const size_t lda = K + 1, ldb = K + 2, ldc = N + 3;
      std::vector<float> A = random_floats(M * lda, 13, -3, 3), B = random_floats(N * ldb, 14, -3, 3);
      const std::vector<float> w = random_floats(K, 15);
      A[0] = 60.0f;  // tanh(±60 + small) is ±1 exactly in float
      B[0] = 0.5f;
      std::vector<float> C(M * ldc, 7.0f);
      set->tanh_scores(M, N, K, A.data(), lda, B.data(), ldb, w.data(), C.data(), ldc);
      std::vector<float> got;
      std::vector<double> want;
      for (size_t i = 0; i < M; ++i)
        for (size_t j = 0; j < N; ++j) {
          double sum = 0;
          for (size_t k = 0; k < K; ++k) sum += double(w[k]) * std::tanh(double(A[i * lda + k]) + B[j * ldb + k]);
          want.push_back(sum);
          got.push_back(C[i * ldc + j]);
        }
      require_close(got, want, 3e-7 * K);
      for (size_t i = 0; i < M; ++i) REQUIRE(C[i * ldc + N] == 7.0f);
    }
}

TEST_CASE("every kernel set agrees with its scalar twin", "[kernels]") {
  const KernelSet& scalar = attn::kernels::kScalarKernels;
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t n : kSizes) {
      INFO(set->name << " n=" << n);
      const std::vector<float> A = random_floats(n * n, 10), B = random_floats(n * n, 11);
      std::vector<float> C1(n * n), C2(n * n);
      scalar.gemm_nt(n, n, n, A.data(), n, B.data(), n, C1.data(), n);
      set->gemm_nt(n, n, n, A.data(), n, B.data(), n, C2.data(), n);
      for (size_t i = 0; i < n * n; ++i) REQUIRE(std::fabs(C1[i] - C2[i]) <= 1e-5f);
      std::vector<float> s1 = random_floats(n, 12, -10, 0), s2 = s1;
      REQUIRE(std::fabs(scalar.exp_sum(s1.data(), n, 0.0f) - set->exp_sum(s2.data(), n, 0.0f)) <= 1e-6f * n);
      for (size_t j = 0; j < n; ++j) REQUIRE(std::fabs(s1[j] - s2[j]) <= 2e-7f);
      const attn::kernels::ScoreTerms terms{0.5f, 5.0f, 0.125f, -3.0f};
      std::vector<float> t1 = random_floats(n, 23, -20, 20), t2 = t1;
      const float max1 = scalar.score_terms_max(t1.data(), nullptr, n, terms);
      const float max2 = set->score_terms_max(t2.data(), nullptr, n, terms);
      REQUIRE(std::fabs(max1 - max2) <= 2e-6f);
      for (size_t j = 0; j < n; ++j) REQUIRE(std::fabs(t1[j] - t2[j]) <= 2e-6f);
      const std::vector<float> w = random_floats(n, 16);
      scalar.tanh_scores(n, n, n, A.data(), n, B.data(), n, w.data(), C1.data(), n);
      set->tanh_scores(n, n, n, A.data(), n, B.data(), n, w.data(), C2.data(), n);
      for (size_t i = 0; i < n * n; ++i) REQUIRE(std::fabs(C1[i] - C2[i]) <= 3e-7f * n);
    }
}

TEST_CASE("rope turns every pair of every row, rotate-half and interleaved, as its scalar twin", "[kernels][rope]") {
  const KernelSet& scalar = attn::kernels::kScalarKernels;
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (size_t half : kSizes)
      for (bool interleaved : {false, true}) {
        INFO(set->name << " half=" << half << " interleaved=" << interleaved);
        // Three rows of 2·half rotated dims and 3 passed through (partial rotary), 2 floats apart.
        const size_t rows = 3, dim = 2 * half + 3, stride = dim + 2;
        const std::vector<float> before = random_floats(rows * stride, 50, -4, 4);
        const std::vector<float> angles = random_floats(half, 51, -40, 40);
        std::vector<float> cos(half), sin(half);
        for (size_t k = 0; k < half; ++k) {  // an attention factor of 0.75, as YaRN's
          cos[k] = static_cast<float>(std::cos(double(angles[k])) * 0.75);
          sin[k] = static_cast<float>(std::sin(double(angles[k])) * 0.75);
        }
        std::vector<float> x = before, twin = before;
        set->rope(x.data(), rows, stride, cos.data(), sin.data(), half, interleaved);
        scalar.rope(twin.data(), rows, stride, cos.data(), sin.data(), half, interleaved);
        REQUIRE(x == twin);  // the same float operations in the same order
        for (size_t r = 0; r < rows; ++r) {
          const float* v = before.data() + r * stride;
          const float* got = x.data() + r * stride;
          for (size_t k = 0; k < half; ++k) {
            const size_t a = interleaved ? 2 * k : k, b = interleaved ? a + 1 : a + half;
            const double want_a = double(v[a]) * cos[k] - double(v[b]) * sin[k];
            const double want_b = double(v[b]) * cos[k] + double(v[a]) * sin[k];
            REQUIRE(std::fabs(got[a] - want_a) <= 1e-6 * (1 + std::fabs(want_a)));
            REQUIRE(std::fabs(got[b] - want_b) <= 1e-6 * (1 + std::fabs(want_b)));
          }
          for (size_t e = 2 * half; e < stride; ++e) REQUIRE(got[e] == v[e]);  // rest of row and padding
        }
        // Rows past `rows` are not touched.
        std::vector<float> longer = random_floats(2 * stride, 52), kept = longer;
        set->rope(longer.data(), 1, stride, cos.data(), sin.data(), half, interleaved);
        REQUIRE(std::equal(longer.begin() + stride, longer.end(), kept.begin() + stride));
      }
}

namespace {

// `rows` rows of `width` random floats quantised as q8: bytes `ld` apart, scales q8_blocks(width)
// apart, binary16 (a cache's keys or values) or float (Scale = float: a step's queries).
template <class Scale>
struct Q8Rows {
  std::vector<int8_t> q;
  std::vector<Scale> scales;

  Q8Rows(size_t rows, size_t width, size_t ld, uint32_t seed) : q(rows * ld, 99), scales(rows * attn::kernels::q8_blocks(width)) {
    const std::vector<float> x = random_floats(rows * width, seed, -3, 3);
    for (size_t r = 0; r < rows; ++r)
      attn::kernels::quantize_q8(x.data() + r * width, width, q.data() + r * ld, scales.data() + r * attn::kernels::q8_blocks(width));
  }
  double scale(size_t row, size_t block, size_t width) const {
    const Scale s = scales[row * attn::kernels::q8_blocks(width) + block];
    if constexpr (std::is_same_v<Scale, float>)
      return s;
    else
      return attn::from_half(s);
  }
};

}  // namespace

TEST_CASE("quantize_q8 is llama.cpp's q8_0: d = max|x| / 127, q = round(x / d), per block of 32", "[kernels][q8]") {
  using attn::kernels::kQ8Block;
  for (size_t n : kSizes) {
    INFO("n=" << n);
    const std::vector<float> x = random_floats(n, 60, -5, 5);
    std::vector<int8_t> q(n + 1, 99);
    std::vector<float> scales(attn::kernels::q8_blocks(n));
    attn::kernels::quantize_q8(x.data(), n, q.data(), scales.data());
    REQUIRE(q[n] == 99);
    for (size_t b = 0; b < scales.size(); ++b) {
      const size_t begin = b * kQ8Block, end = std::min(n, begin + kQ8Block);  // the last block shorter
      float amax = 0;
      for (size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
      REQUIRE(scales[b] == amax / 127.0f);
      for (size_t i = begin; i < end; ++i) {
        REQUIRE(q[i] == static_cast<int8_t>(std::round(x[i] / scales[b])));
        REQUIRE(std::fabs(q[i] * double(scales[b]) - x[i]) <= 0.5 * scales[b] * (1 + 1e-6));
      }
    }
    // Binary16 scales (a cache's): the same bytes, the scale rounded.
    std::vector<int8_t> q16(n);
    std::vector<uint16_t> halves(scales.size());
    attn::kernels::quantize_q8(x.data(), n, q16.data(), halves.data());
    REQUIRE(std::equal(q16.begin(), q16.end(), q.begin()));
    std::vector<float> back(n);
    attn::kernels::dequantize_q8(q16.data(), halves.data(), n, back.data());
    for (size_t i = 0; i < n; ++i) REQUIRE(back[i] == float(q16[i]) * attn::from_half(halves[i / kQ8Block]));
  }
  int8_t q[3];
  const float zeros[3] = {0.0f, -0.0f, 0.0f};
  REQUIRE(attn::kernels::quantize_q8_block(zeros, 3, q) == 0.0f);
  REQUIRE((q[0] == 0 && q[1] == 0 && q[2] == 0));
  // Halves away from zero, as roundf: 0.5 · d → 1.
  const float halves[2] = {127.0f, 0.5f};
  attn::kernels::quantize_q8_block(halves, 2, q);
  REQUIRE((q[0] == 127 && q[1] == 1));
  // Inf or NaN (a query's: caches refuse them): d NaN, q 0, so that the block's scores are NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const float bad[3] = {1.0f, inf, std::nanf("")};
  for (size_t at : {1, 2}) {
    const float block[2] = {bad[0], bad[at]};
    REQUIRE(std::isnan(attn::kernels::quantize_q8_block(block, 2, q)));
    REQUIRE((q[0] == 0 && q[1] == 0));
  }
  // A subnormal d is rounded coarsely (190 · 2^-149 / 127 → 2^-149): q clamped to ±127, not wrapped.
  const float tiny[2] = {std::ldexp(190.0f, -149), -std::ldexp(190.0f, -149)};
  attn::kernels::quantize_q8_block(tiny, 2, q);
  REQUIRE((q[0] == 127 && q[1] == -127));
}

TEST_CASE("the q8 decode products match a float64 reference over the same blocks", "[kernels][q8]") {
  using attn::kernels::q8_blocks;
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (auto [M, N, K] : gemm_shapes()) {
      INFO(set->name << " M=" << M << " N=" << N << " K=" << K);
      // Scores: queries [M, K] (float scales) against keys [N, K] (binary16 scales), padded strides.
      const size_t lda = K + 3, ldb = K + 1, ldc = N + 2;
      const Q8Rows<float> A(M, K, lda, 61);
      const Q8Rows<uint16_t> B(N, K, ldb, 62);
      std::vector<float> C(M * ldc, 7.0f);
      set->gemm_nt_q8(M, N, K, A.q.data(), A.scales.data(), lda, B.q.data(), B.scales.data(), ldb, C.data(), ldc);
      for (size_t i = 0; i < M; ++i) {
        for (size_t j = 0; j < N; ++j) {
          double want = 0, magnitude = 0;
          for (size_t k = 0; k < K; ++k) {
            const double term = double(A.q[i * lda + k]) * B.q[j * ldb + k] * A.scale(i, k / 32, K) * B.scale(j, k / 32, K);
            want += term;
            magnitude += std::fabs(term);
          }
          REQUIRE(std::fabs(C[i * ldc + j] - want) <= 1e-6 * magnitude + 1e-30);
        }
        for (size_t j = N; j < ldc; ++j) REQUIRE(C[i * ldc + j] == 7.0f);
      }
      // Weights [M, K] times values [K, N] (row stride N + 5), added to C.
      const size_t ldv = N + 5;
      const std::vector<float> W = random_floats(M * lda, 63);
      const Q8Rows<uint16_t> V(K, N, ldv, 64);
      std::vector<float> D = random_floats(M * ldc, 65);
      const std::vector<float> before = D;
      set->gemm_nn_add_q8(M, N, K, W.data(), lda, V.q.data(), V.scales.data(), ldv, D.data(), ldc);
      for (size_t i = 0; i < M; ++i) {
        for (size_t j = 0; j < N; ++j) {
          double want = before[i * ldc + j];
          for (size_t k = 0; k < K; ++k) want += double(W[i * lda + k]) * V.q[k * ldv + j] * V.scale(k, j / 32, N);
          REQUIRE(std::fabs(D[i * ldc + j] - want) <= 3e-6 * (K + 1));
        }
        for (size_t j = N; j < ldc; ++j) REQUIRE(D[i * ldc + j] == before[i * ldc + j]);
      }
    }
}

TEST_CASE("round_q8 gives q · d, which quantises again to the same bytes", "[kernels][q8]") {
  for (size_t n : kSizes) {
    INFO("n=" << n);
    const std::vector<float> x = random_floats(n, 66, -7, 7);
    std::vector<int8_t> q(n), again(n);
    std::vector<float> scales(attn::kernels::q8_blocks(n)), scales_again(scales.size()), rounded(n);
    attn::kernels::quantize_q8(x.data(), n, q.data(), scales.data());
    attn::kernels::round_q8(x.data(), n, rounded.data());
    for (size_t i = 0; i < n; ++i) REQUIRE(rounded[i] == float(q[i]) * scales[i / 32]);
    attn::kernels::quantize_q8(rounded.data(), n, again.data(), scales_again.data());
    REQUIRE(again == q);
    for (size_t b = 0; b < scales.size(); ++b) REQUIRE(scales_again[b] == Approx(scales[b]).epsilon(1e-6));
  }
}

TEST_CASE("activate gives silu, gelu and gelu_tanh as its scalar twin, times a multiplier", "[kernels][activate]") {
  using attn::kernels::Activation;
  const KernelSet& scalar = attn::kernels::kScalarKernels;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // The twin itself at x = 1 and -1: 1 / (1 + e^-1), Φ(1), and the tanh form at 1 (PyTorch's values).
  const std::vector<std::pair<Activation, double>> at_one = {
      {Activation::silu, 0.7310585786300049}, {Activation::gelu, 0.8413447460685429}, {Activation::gelu_tanh, 0.8411919906082768}};
  for (const auto& [act, want] : at_one) {
    float x[2] = {1.0f, -1.0f};
    scalar.activate(x, nullptr, 2, act);
    REQUIRE(x[0] == static_cast<float>(want));
    REQUIRE(x[1] == static_cast<float>(want - 1.0));  // each is x·g(x) with g(−x) = 1 − g(x)
  }
  std::vector<float> specials = {0.0f, -0.0f, inf, -inf, nan, 88.0f, -88.0f, 100.0f, -100.0f, 1e20f, -1e20f, 1e-30f, -1e-30f,
                                 1e-40f, 0.5f, -0.5f, 3.0f, -3.0f, 7.5f, -7.5f, 20.0f, -20.0f};
  const std::vector<float> wide = random_floats(400, 53, -12, 12);
  specials.insert(specials.end(), wide.begin(), wide.end());
  const std::vector<float> factors = random_floats(specials.size(), 54, -2, 2);
  for (const KernelSet* set : attn::kernels::compiled_kernel_sets())
    for (Activation act : {Activation::silu, Activation::gelu, Activation::gelu_tanh})
      for (bool gated : {false, true})
        for (size_t n : {specials.size(), size_t{1}, size_t{3}, size_t{5}, size_t{6}, size_t{7}}) {
          INFO(set->name << " activation " << int(act) << " gated " << gated << " n=" << n);
          std::vector<float> x(specials.begin(), specials.begin() + n), twin = x;
          x.push_back(7.0f);
          set->activate(x.data(), gated ? factors.data() : nullptr, n, act);
          scalar.activate(twin.data(), gated ? factors.data() : nullptr, n, act);
          for (size_t i = 0; i < n; ++i) {
            INFO("x = " << specials[i]);
            if (std::isnan(twin[i])) {
              REQUIRE(std::isnan(x[i]));
              continue;
            }
            if (std::isinf(twin[i])) {
              REQUIRE(x[i] == twin[i]);
              continue;
            }
            // Each activation is x·g(x), 0 ≤ g ≤ 1: where g nears 0 only its error relative to x counts.
            const double bound = 2e-6 * (std::fabs(twin[i]) + 1e-7 * std::fabs(specials[i]) * (gated ? std::fabs(factors[i]) : 1.0));
            REQUIRE(std::fabs(double(x[i]) - double(twin[i])) <= bound + 1e-30);
          }
          REQUIRE(x[n] == 7.0f);
        }
}

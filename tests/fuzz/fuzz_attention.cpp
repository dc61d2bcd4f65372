// libFuzzer target over the core's whole surface: shapes, masks and options decoded from the
// input, valid or not, for every operator; data from the input too (NaN and Inf included). It is
// differential: every valid call of every operator (SDPA, the KV cache, RoPE, MultiheadAttention,
// SelfAttention, AdditiveAttention, RelativeMultiHeadAttention, GroupedQueryAttention) runs on each
// kernel set this build has (the scalar twins and the SIMD128 kernels through SIMDe) and is
// compared with a plain double-precision reference written here from the contract; kernel sets
// must also agree with each other where the data hold NaN or Inf, and GroupedQueryAttention fed in
// chunks through a cache must equal the block over its whole input (and its project() gives the
// reference's q, k and v). Crashes, sanitizer reports, disagreements and broken invariants are
// findings; each one becomes a regression test in tests/cpp. Run with `npm run fuzz`
// (scripts/fuzz.sh).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "additive_attention.h"
#include "attention.h"
#include "grouped_query_attention.h"
#include "kernels/kernels.h"
#include "kernels/q8.h"
#include "kv_cache.h"
#include "mask.h"
#include "multihead_attention.h"
#include "relative_attention.h"
#include "self_attention.h"

namespace {

// Reads the fuzzer's bytes as a stream of small decisions; past the end everything reads 0.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Mostly small sizes, sometimes 0, sometimes negative (invalid).
  int64_t dim() {
    const uint8_t b = byte();
    if (b == 255) return -1;
    return b % 7;
  }
  bool flag() { return byte() & 1; }
  // Half the calls draw data with NaN, ±Inf and 1e30 among it, half without: then the differential
  // checks, which need scores that cannot overflow, apply to the whole call.
  void allow_special_numbers(bool allow) { specials_ = allow; }
  float number() {
    if (!specials_) return (static_cast<int>(byte()) - 128) / 32.0f;
    switch (byte() % 16) {
      case 0: return NAN;
      case 1: return INFINITY;
      case 2: return -INFINITY;
      case 3: return 1e30f;
      default: return (static_cast<int>(byte()) - 128) / 32.0f;
    }
  }
  attn::Shape shape(int max_rank) {
    attn::Shape s;
    s.rank = byte() % (max_rank + 1);
    for (int a = 0; a < s.rank; ++a) s[a] = dim();
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  bool specials_ = true;
};

// Data for a shape: only when its size is small and valid (the core must refuse the others first).
struct Tensor {
  attn::Shape shape;
  std::vector<float> data;
  attn::TensorView view() const { return {data.empty() ? nullptr : data.data(), shape}; }
};

int64_t safe_numel(const attn::Shape& s) {
  if (!s.non_negative()) return 0;
  int64_t n = 1;
  for (int a = 0; a < s.rank; ++a) n *= s[a];
  return n;
}

Tensor tensor_of(Input& in, const attn::Shape& shape) {
  Tensor t{shape, {}};
  t.data.resize(safe_numel(t.shape));
  for (float& x : t.data) x = in.number();
  return t;
}

Tensor tensor(Input& in, int max_rank) { return tensor_of(in, in.shape(max_rank)); }

struct Mask {
  attn::MaskType type = attn::MaskType::none;
  attn::Shape shape;
  std::vector<uint8_t> bools;
  std::vector<float> floats;
  attn::MaskView view(bool true_means_masked) const {
    const void* data = type == attn::MaskType::boolean ? static_cast<const void*>(bools.data()) : floats.data();
    return {type, safe_numel(shape) ? data : nullptr, shape, true_means_masked};
  }
};

Mask mask_of(Input& in, const attn::Shape& shape) {
  Mask m;
  m.type = static_cast<attn::MaskType>(in.byte() % 3);
  m.shape = shape;
  const int64_t n = safe_numel(m.shape);
  for (int64_t i = 0; i < n; ++i) {
    if (m.type == attn::MaskType::boolean) m.bools.push_back(in.byte() % 3 == 0);
    m.floats.push_back(in.byte() % 4 == 0 ? -INFINITY : in.number());
  }
  return m;
}

Mask mask(Input& in, int max_rank) { return mask_of(in, in.shape(max_rank)); }

std::vector<float> buffer(const attn::Shape& s) { return std::vector<float>(safe_numel(s) + 1, -7.0f); }

// A softmax row sums to 1, or 0 when every key is hidden.
void check_rows(const std::vector<float>& weights, int64_t count, int64_t m, bool moderate_inputs) {
  if (!moderate_inputs || m == 0) return;
  for (int64_t r = 0; r < count / m; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < m; ++j) sum += weights[r * m + j];
    if (!(std::fabs(sum - 1.0) < 1e-3 || sum == 0.0)) std::abort();
  }
}

// Inputs whose scores cannot overflow: moderate finite data and scale. (Overflowing scores give
// NaN rows, exactly as in PyTorch, so the row invariant does not hold for them.)
bool moderate(const std::vector<const Tensor*>& tensors, const Mask& m, const attn::SdpaOptions& o) {
  constexpr float kLimit = 1e6f;
  for (const Tensor* t : tensors)
    for (float x : t->data)
      if (!(std::fabs(x) < kLimit)) return false;
  for (float x : m.floats)
    if (!(std::fabs(x) < kLimit || x == -INFINITY)) return false;
  for (int64_t h = 0; h < o.alibi_slope_count; ++h)
    if (!(std::fabs(o.alibi_slopes[h]) < kLimit)) return false;
  return !o.scale || std::fabs(*o.scale) < kLimit;
}

struct Ids {
  attn::Shape shape;
  std::vector<int32_t> data;
  attn::IdsView view() const { return {safe_numel(shape) ? data.data() : nullptr, shape}; }
};

Ids ids(Input& in, int max_rank) {
  Ids ids{in.shape(max_rank), {}};
  ids.data.resize(safe_numel(ids.shape));
  for (int32_t& id : ids.data) id = in.byte() % 3;
  return ids;
}


// ---- the double-precision reference ---------------------------------------------------------

// Row-major multi-index of `flat` over `shape`.
std::vector<int64_t> unravel(int64_t flat, const attn::Shape& shape) {
  std::vector<int64_t> index(shape.rank);
  for (int a = shape.rank - 1; a >= 0; --a) {
    index[a] = shape[a] > 0 ? flat % shape[a] : 0;
    flat = shape[a] > 0 ? flat / shape[a] : 0;
  }
  return index;
}

// The element of a tensor of shape `s` that broadcasts (right-aligned) to `index` over `target`.
int64_t broadcast_offset(const attn::Shape& s, const attn::Shape& target, const std::vector<int64_t>& index) {
  int64_t offset = 0;
  for (int a = 0; a < s.rank; ++a) offset = offset * s[a] + (s[a] == 1 ? 0 : index[target.rank - s.rank + a]);
  return offset;
}

struct Reference {
  std::vector<double> output, weights;
  double max_score = 0;  // the largest |score|: float rounding grows with it
};

// Scores that are not scale · q·k (additive attention's), for block b, query i, key j.
using ScoreOf = std::function<double(int64_t b, int64_t i, int64_t j)>;

// scaled_dot_product_attention as the contract writes it (v1 and v2 options, no dropout), in
// double; with `score_of`, its scores replace scale · q·k (the rest is the same).
Reference reference_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const attn::SdpaOptions& o,
                         const ScoreOf& score_of = nullptr) {
  const attn::Shape& qs = q.shape;
  const int64_t n = qs.at_end(2), d = qs.at_end(1), m = k.shape.at_end(2), dv = v.shape.at_end(1);
  const int64_t blocks = qs.leading_numel(2);
  const int64_t query_heads = qs.rank >= 3 ? qs.at_end(3) : 1, kv_heads = k.shape.rank >= 3 ? k.shape.at_end(3) : 1;
  attn::Shape scores = qs;
  scores[scores.rank - 1] = m;
  attn::Shape query_rows = qs, key_rows = qs;
  query_rows.rank -= 1;
  key_rows.rank -= 1;
  key_rows[key_rows.rank - 1] = m;
  std::vector<double> slopes(static_cast<size_t>(query_heads));
  if (o.alibi) {
    if (o.alibi_slopes) {
      std::copy_n(o.alibi_slopes, query_heads, slopes.begin());
    } else {
      int64_t power = 1;
      while (power * 2 <= query_heads) power *= 2;
      for (int64_t h = 0; h < query_heads; ++h)
        slopes[h] = h < power ? std::exp2(-8.0 * (h + 1) / power) : std::exp2(-8.0 * (2 * (h - power) + 1) / (2 * power));
    }
  }
  const double scale = o.scale ? *o.scale : (d > 0 ? 1.0 / std::sqrt(static_cast<double>(d)) : 1.0);
  Reference r;
  r.output.assign(blocks * n * dv, 0.0);
  r.weights.assign(blocks * n * m, 0.0);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t h = b % query_heads;
    const int64_t kv_block = o.enable_gqa && query_heads > 0 ? b / query_heads * kv_heads + h / (query_heads / kv_heads) : b;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = i + (o.causal == attn::Causal::lower_right || o.queries_last ? m - n : 0);
      std::vector<double> s(m, -INFINITY);
      for (int64_t j = 0; j < m; ++j) {
        std::vector<int64_t> index = unravel((b * n + i) * m + j, scores);
        bool visible = true;
        if (o.causal == attn::Causal::upper_left && j > i) visible = false;
        if (o.causal == attn::Causal::lower_right && j > p) visible = false;
        if (o.window && std::llabs(p - j) >= *o.window) visible = false;
        if (o.query_document_ids.present()) {
          std::vector<int64_t> row = index;
          row.pop_back();
          std::vector<int64_t> key_row = row;
          key_row.back() = j;
          const int32_t query_id = o.query_document_ids.data[broadcast_offset(o.query_document_ids.shape, query_rows, row)];
          const int32_t key_id = o.key_document_ids.data[broadcast_offset(o.key_document_ids.shape, key_rows, key_row)];
          if (query_id != key_id) visible = false;
        }
        double x = 0;
        if (score_of) {
          x = score_of(b, i, j);
        } else {
          for (int64_t c = 0; c < d; ++c) x += double(q.data[(b * n + i) * d + c]) * k.data[(kv_block * m + j) * d + c];
          x *= scale;
        }
        if (o.softcap) x = *o.softcap * std::tanh(x / *o.softcap);
        if (o.alibi) x += slopes[h] * static_cast<double>(j - p);
        if (o.attn_mask.present()) {
          const int64_t at = broadcast_offset(o.attn_mask.shape, scores, index);
          if (o.attn_mask.type == attn::MaskType::boolean) {
            if ((static_cast<const uint8_t*>(o.attn_mask.data)[at] != 0) == o.attn_mask.true_means_masked) visible = false;
          } else {
            x += static_cast<const float*>(o.attn_mask.data)[at];
          }
        }
        // Only what the softmax sees moves it: a hidden or -inf score must not widen the tolerance.
        if (visible && x != -INFINITY) {
          r.max_score = std::max(r.max_score, std::fabs(x));
          s[j] = x;
        }
      }
      const double max = m > 0 ? *std::max_element(s.begin(), s.end()) : -INFINITY;
      if (max == -INFINITY) continue;  // no visible key: zeros
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - max));
      for (int64_t j = 0; j < m; ++j) {
        const double w = s[j] / sum;
        r.weights[(b * n + i) * m + j] = w;
        for (int64_t c = 0; c < dv; ++c) r.output[(b * n + i) * dv + c] += w * v.data[(kv_block * m + j) * dv + c];
      }
    }
  }
  return r;
}

// The default RoPE frequencies base^(−k/half), k < half.
std::vector<double> default_frequencies(double base, int64_t half) {
  std::vector<double> inv_freq(half);
  for (int64_t k = 0; k < half; ++k) inv_freq[k] = std::pow(base, -static_cast<double>(k) / static_cast<double>(half));
  return inv_freq;
}

// RoPE as the contract writes it, in double, over x [..., length, dim]: the pairs (e, e + half)
// (or (2k, 2k + 1) interleaved) turned by position · inv_freq[k] and scaled by `attention`;
// dimensions past 2·half kept.
std::vector<double> reference_rope(const Tensor& x, const std::function<double(int64_t)>& position_of,
                                   const std::vector<double>& inv_freq, bool interleaved, double attention = 1.0) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  const int64_t length = x.shape.at_end(2), dim = x.shape.at_end(1);
  std::vector<double> out(x.data.begin(), x.data.end());
  for (int64_t row = 0; row < x.shape.leading_numel(2); ++row)
    for (int64_t l = 0; l < length; ++l) {
      const float* a = x.data.data() + (row * length + l) * dim;
      for (int64_t e = 0; e < 2 * half; ++e) {
        const bool first = interleaved ? e % 2 == 0 : e < half;
        const int64_t pair = interleaved ? (first ? e + 1 : e - 1) : (first ? e + half : e - half);
        const int64_t k = interleaved ? e / 2 : e % half;
        const double angle = position_of(l) * inv_freq[k];
        const double c = std::cos(angle) * attention, s = std::sin(angle) * attention;
        out[(row * length + l) * dim + e] = first ? a[e] * c - a[pair] * s : a[e] * c + a[pair] * s;
      }
    }
  return out;
}

// x [..., E] · weightᵀ ([out, E]) (+ bias) in double, rounded to float as the modules' input
// projections are.
Tensor project(const Tensor& x, const std::vector<float>& weight, int64_t out, const float* bias = nullptr) {
  const int64_t E = x.shape.at_end(1), rows = safe_numel(x.shape) / std::max<int64_t>(E, 1);
  Tensor y{x.shape, std::vector<float>(rows * out)};
  y.shape[y.shape.rank - 1] = out;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (int64_t e = 0; e < E; ++e) sum += double(x.data[r * E + e]) * weight[o * E + e];
      y.data[r * out + o] = static_cast<float>(sum);
    }
  return y;
}

// An output projection in double: x [rows, in] · weightᵀ ([out, in]) + bias.
std::vector<double> linear_double(const std::vector<double>& x, int64_t in, const std::vector<float>& weight, int64_t out,
                                  const float* bias) {
  const int64_t rows = in > 0 ? static_cast<int64_t>(x.size()) / in : 0;
  std::vector<double> y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (int64_t e = 0; e < in; ++e) sum += x[r * in + e] * weight[o * in + e];
      y[r * out + o] = sum;
    }
  return y;
}

// [N, L, heads·d] → [N, heads, L, d].
Tensor split_heads(const Tensor& x, int64_t heads) {
  const int64_t N = x.shape[0], L = x.shape[1], d = x.shape[2] / heads;
  Tensor y{{N, heads, L, d}, std::vector<float>(x.data.size())};
  for (int64_t b = 0; b < N; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t l = 0; l < L; ++l)
        std::copy_n(x.data.data() + (b * L + l) * heads * d + h * d, d, y.data.data() + ((b * heads + h) * L + l) * d);
  return y;
}

// [N·heads, L, d] → [N, L, heads·d].
std::vector<double> merge_heads(const std::vector<double>& x, int64_t N, int64_t heads, int64_t L, int64_t d) {
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t l = 0; l < L; ++l)
        std::copy_n(x.data() + ((b * heads + h) * L + l) * d, d, y.data() + (b * L + l) * heads * d + h * d);
  return y;
}

Tensor rounded(const attn::Shape& shape, const std::vector<double>& values) {
  return {shape, std::vector<float>(values.begin(), values.end())};
}

// RMSNorm in double of each run of `width` floats of x (QK-norm), scaled by w or 1 + w.
Tensor rms_normed(const Tensor& x, int64_t width, const std::vector<float>& w, const attn::QkNorm& norm) {
  Tensor y = x;
  for (size_t start = 0; start < y.data.size(); start += width) {
    double squares = 0.0;
    for (int64_t e = 0; e < width; ++e) squares += static_cast<double>(x.data[start + e]) * x.data[start + e];
    const double inverse = 1.0 / std::sqrt(squares / static_cast<double>(width) + norm.eps);
    for (int64_t e = 0; e < width; ++e)
      y.data[start + e] = static_cast<float>(x.data[start + e] * inverse * (norm.unit_offset ? 1.0 + w[e] : w[e]));
  }
  return y;
}

// What Hugging Face's Llama attention block feeds its attention, written out: projections,
// QK-norm, RoPE at 0 … t−1 on q and k (the scheme's frequencies and attention factor); q
// [N, H, t, d], k and v [N, G, t, d]. `weights`: q, k, v, o projection weights, then the q, k, v
// biases when the block has them, then q_norm and k_norm.
struct Projections {
  Tensor q, k, v;
};

Projections reference_llama_projections(const attn::GroupedQueryAttentionConfig& c, const std::vector<std::vector<float>>& weights,
                                        const Tensor& x, const std::vector<double>& inv_freq, double attention) {
  const int64_t H = c.num_heads, G = c.num_key_value_heads, d = c.head_dim;
  const auto bias = [&](size_t i) { return c.qkv_bias ? weights[4 + i].data() : nullptr; };
  const size_t norms = c.qkv_bias ? 7 : 4;
  const auto normed = [&](const Tensor& projected, size_t which) {
    if (c.qk_norm.scope == attn::QkNormScope::none) return projected;
    const int64_t width = c.qk_norm.scope == attn::QkNormScope::head ? d : projected.shape.at_end(1);
    return rms_normed(projected, width, weights[norms + which], c.qk_norm);
  };
  const auto rotated = [&](const Tensor& heads) {
    return rounded(heads.shape, reference_rope(heads, [](int64_t l) { return static_cast<double>(l); }, inv_freq,
                                               c.rope_interleaved, attention));
  };
  return {rotated(split_heads(normed(project(x, weights[0], H * d, bias(0)), 0), H)),
          rotated(split_heads(normed(project(x, weights[1], G * d, bias(1)), 1), G)),
          split_heads(project(x, weights[2], G * d, bias(2)), G)};
}

// The block's output: attention over reference_llama_projections (grouped heads, lower-right
// causal, window, soft cap, scale), heads merged, o_proj.
Reference reference_llama_attention(const attn::GroupedQueryAttentionConfig& c, const std::vector<std::vector<float>>& weights,
                                    const Tensor& x, const std::vector<double>& inv_freq, double attention) {
  const int64_t N = x.shape[0], t = x.shape[1], H = c.num_heads, d = c.head_dim;
  const auto [q, k, v] = reference_llama_projections(c, weights, x, inv_freq, attention);
  attn::SdpaOptions o;
  o.enable_gqa = true;
  o.causal = attn::Causal::lower_right;
  o.window = c.sliding_window;
  o.softcap = c.softcap;
  o.scale = c.scale;
  Reference r = reference_sdpa(q, k, v, o);
  r.output = linear_double(merge_heads(r.output, N, H, t, d), H * d, weights[3], c.hidden_size, nullptr);
  return r;
}

// A module input in the (L, N, F) layout, (N, L, F) with batch_first, or unbatched (L, F), as
// [N, L, F]; `from_batch_major` turns a result [N, L, F] back into the input's layout.
Tensor batch_major(const Tensor& x, bool batch_first) {
  if (x.shape.rank == 2) return {{1, x.shape[0], x.shape[1]}, x.data};
  if (batch_first) return x;
  const int64_t L = x.shape[0], N = x.shape[1], F = x.shape[2];
  Tensor y{{N, L, F}, std::vector<float>(x.data.size())};
  for (int64_t l = 0; l < L; ++l)
    for (int64_t b = 0; b < N; ++b) std::copy_n(x.data.data() + (l * N + b) * F, F, y.data.data() + (b * L + l) * F);
  return y;
}

std::vector<double> from_batch_major(const std::vector<double>& y, int64_t N, int64_t L, int64_t F, bool sequence_first) {
  if (!sequence_first) return y;
  std::vector<double> out(y.size());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t l = 0; l < L; ++l) std::copy_n(y.data() + (b * L + l) * F, F, out.data() + (l * N + b) * F);
  return out;
}

// A mask's value at `index` of `target` (which it broadcasts to) as an additive term: a boolean
// entry hides when it equals `hides`.
double additive_term(const Mask& m, const attn::Shape& target, const std::vector<int64_t>& index, bool hides) {
  if (m.type == attn::MaskType::none) return 0.0;
  const int64_t at = broadcast_offset(m.shape, target, index);
  if (m.type == attn::MaskType::boolean) return (m.bools[at] != 0) == hides ? -INFINITY : 0.0;
  return m.floats[at];
}

// nn.MultiheadAttention in eval mode as the contract writes it: the in-projection; bias_k / bias_v
// and the zero-attention row appended as key columns that no mask hides; attnMask ([n, m] or
// [N·heads, n, m]), keyPaddingMask and isCausal added per head; SDPA; heads merged; out_proj;
// weights averaged over heads when asked. `weights` in state-dict order.
Reference reference_mha(const attn::MultiheadAttentionConfig& c, const std::vector<std::vector<float>>& weights, const Tensor& query,
                        const Tensor& key, const Tensor& value, const Mask& attn_mask, const Mask& key_padding_mask,
                        const attn::MultiheadAttentionOptions& options) {
  const int64_t E = c.embed_dim, H = c.num_heads, hd = E / H;
  const bool packed = c.kdim == E && c.vdim == E;
  const auto slice = [](const std::vector<float>& w, int64_t first, int64_t count) {
    return std::vector<float>(w.begin() + first, w.begin() + first + count);
  };
  const std::vector<float> w_q = packed ? slice(weights[0], 0, E * E) : weights[0];
  const std::vector<float> w_k = packed ? slice(weights[0], E * E, E * E) : weights[1];
  const std::vector<float> w_v = packed ? slice(weights[0], 2 * E * E, E * E) : weights[2];
  size_t next = packed ? 1 : 3;
  const float* in_bias = c.bias ? weights[next++].data() : nullptr;
  const float* bias_k = c.add_bias_kv ? weights[next++].data() : nullptr;
  const float* bias_v = c.add_bias_kv ? weights[next++].data() : nullptr;
  const std::vector<float>& w_out = weights[next++];
  const float* out_bias = c.bias ? weights[next].data() : nullptr;
  const auto in_bias_of = [&](int slot) { return in_bias ? in_bias + slot * E : nullptr; };

  const Tensor q = project(batch_major(query, c.batch_first), w_q, E, in_bias_of(0));
  const int64_t N = q.shape[0], n = q.shape[1], m = key.shape.rank == 2 ? key.shape[0] : key.shape[c.batch_first ? 1 : 0];
  const int64_t all_keys = m + (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  // Keys (values) projected, then the bias row, then the zero row.
  const auto with_extra_rows = [&](const Tensor& projected, const float* bias_row) {
    Tensor out{{N, all_keys, E}, std::vector<float>(N * all_keys * E, 0.0f)};
    for (int64_t b = 0; b < N; ++b) {
      std::copy_n(projected.data.data() + b * m * E, m * E, out.data.data() + b * all_keys * E);
      if (bias_row) std::copy_n(bias_row, E, out.data.data() + (b * all_keys + m) * E);
    }
    return out;
  };
  const Tensor k = with_extra_rows(project(batch_major(key, c.batch_first), w_k, E, in_bias_of(1)), bias_k);
  const Tensor v = with_extra_rows(project(batch_major(value, c.batch_first), w_v, E, in_bias_of(2)), bias_v);

  Mask merged{attn::MaskType::additive, {N, H, n, all_keys}, {}, std::vector<float>(N * H * n * all_keys, 0.0f)};
  for (int64_t b = 0; b < N; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j) {
          double term = additive_term(attn_mask, {N * H, n, m}, {b * H + h, i, j}, true) +
                        additive_term(key_padding_mask, {N, m}, {b, j}, true);
          if (options.is_causal && j > i) term = -INFINITY;
          merged.floats[((b * H + h) * n + i) * all_keys + j] = static_cast<float>(term);
        }
  attn::SdpaOptions o;
  o.attn_mask = merged.view(true);
  Reference r = reference_sdpa(split_heads(q, H), split_heads(k, H), split_heads(v, H), o);
  r.output = from_batch_major(linear_double(merge_heads(r.output, N, H, n, hd), E, w_out, E, out_bias), N, n, E,
                              query.shape.rank == 3 && !c.batch_first);
  if (!options.need_weights) {
    r.weights.clear();
  } else if (options.average_attn_weights) {
    std::vector<double> average(N * n * all_keys, 0.0);
    for (int64_t b = 0; b < N; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t e = 0; e < n * all_keys; ++e) average[b * n * all_keys + e] += r.weights[(b * H + h) * n * all_keys + e] / H;
    r.weights = average;
  }
  return r;
}

// Transformer-XL relative attention as the contract writes it (labml.ai's formulation): with
// r = j − i − (m − n), score = ((q_i + u_h)·k_j + q_i·R[P + r, h] + bias[P + r, h]) / sqrt(d_k);
// mask [n or 1, m, B or 1], 0 = masked out. Weights [n, m, B, heads], or [B, heads, n, m] when
// `heads_first`. `weights` in state-dict order.
Reference reference_relative(int64_t heads, int64_t P, const std::vector<std::vector<float>>& weights, const Tensor& query,
                             const Tensor& key, const Tensor& value, const Mask& mask, bool heads_first) {
  const int64_t D = query.shape[2], dk = D / heads, n = query.shape[0], m = key.shape[0], B = query.shape[1];
  const Tensor q = split_heads(project(batch_major(query, false), weights[0], D), heads);
  const Tensor k = split_heads(project(batch_major(key, false), weights[1], D), heads);
  const Tensor v = split_heads(project(batch_major(value, false), weights[2], D, weights[3].data()), heads);
  const std::vector<float>&R = weights[6], &position_bias = weights[7], &u = weights[8];
  const ScoreOf score = [&](int64_t block, int64_t i, int64_t j) {
    const int64_t h = block % heads, relative = P + j - i - (m - n);
    const float* qi = q.data.data() + (block * n + i) * dk;
    const float* kj = k.data.data() + (block * m + j) * dk;
    double sum = position_bias[relative * heads + h];
    for (int64_t c = 0; c < dk; ++c)
      sum += (double(qi[c]) + u[h * dk + c]) * kj[c] + double(qi[c]) * R[(relative * heads + h) * dk + c];
    return sum / std::sqrt(static_cast<double>(dk));
  };
  Mask hidden{attn::MaskType::additive, {B, heads, n, m}, {}, std::vector<float>(B * heads * n * m, 0.0f)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j)
          hidden.floats[((b * heads + h) * n + i) * m + j] = static_cast<float>(additive_term(mask, {n, m, B}, {i, j, b}, false));
  attn::SdpaOptions o;
  o.attn_mask = hidden.view(true);
  Reference r = reference_sdpa(q, k, v, o, score);
  r.output = from_batch_major(linear_double(merge_heads(r.output, B, heads, n, dk), D, weights[4], D, weights[5].data()), B, n, D, true);
  if (!heads_first) {
    std::vector<double> by_query(r.weights.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < m; ++j) by_query[((i * m + j) * B + b) * heads + h] = r.weights[((b * heads + h) * n + i) * m + j];
    r.weights = by_query;
  }
  return r;
}

// Float results against the reference: the float rounding of scores of size S moves a softmax by
// about S · 2^-24 relative, so the tolerance grows with the largest score.
void require_close(const float* got, const std::vector<double>& want, double max_score) {
  const double tolerance = 1e-4 + 1e-6 * max_score;
  for (size_t e = 0; e < want.size(); ++e)
    if (!(std::fabs(got[e] - want[e]) <= tolerance * (1.0 + std::fabs(want[e])))) std::abort();
}

// Runs `call(output, weights)` (weights may be null) on every kernel set and compares with `want`.
template <class Call>
void on_every_kernel_set(const Reference& want, size_t outputs, Call call) {
  for (const attn::kernels::KernelSet* set : attn::kernels::compiled_kernel_sets()) {
    attn::kernels::override_active_kernels(set);
    std::vector<float> out(outputs + 1), w(want.weights.size() + 1), streamed(outputs + 1);
    const bool ok = call(out.data(), w.data()) && call(streamed.data(), nullptr);
    attn::kernels::override_active_kernels(nullptr);
    if (!ok) std::abort();
    require_close(out.data(), want.output, want.max_score);
    require_close(streamed.data(), want.output, want.max_score);
    if (!want.weights.empty()) require_close(w.data(), want.weights, want.max_score);
  }
}

// Modules (no reference here): each kernel set must succeed or fail as the scalar twins do and,
// when the call's data are moderate, agree with them within float rounding; NaN where they give NaN.
template <class Call>
void kernel_sets_agree(int64_t outputs, int64_t weights, bool moderate_data, Call call) {
  std::vector<std::vector<float>> results;
  std::vector<bool> succeeded;
  for (const attn::kernels::KernelSet* set : attn::kernels::compiled_kernel_sets()) {
    attn::kernels::override_active_kernels(set);
    results.emplace_back(outputs + weights + 1, -7.0f);
    succeeded.push_back(call(results.back().data(), weights ? results.back().data() + outputs : nullptr));
  }
  attn::kernels::override_active_kernels(nullptr);
  for (size_t set = 1; set < results.size(); ++set) {
    if (succeeded[set] != succeeded[0]) std::abort();
    if (!succeeded[0] || !moderate_data) continue;
    for (size_t e = 0; e < results[0].size(); ++e) {
      const float want = results[0][e], got = results[set][e];
      if (std::isnan(want) != std::isnan(got) || !(std::isnan(want) || std::fabs(got - want) <= 1e-3 * (1.0 + std::fabs(want))))
        std::abort();
    }
  }
}

// Whether every float of `values` is finite and below 1e4: scores of such data cannot overflow.
bool moderate_floats(std::initializer_list<const std::vector<float>*> values) {
  for (const std::vector<float>* v : values)
    for (float x : *v)
      if (!(std::fabs(x) < 1e4f)) return false;
  return true;
}

void fuzz_sdpa(Input& in) {
  const Tensor q = tensor(in, 4), k = tensor(in, 4), v = tensor(in, 4);
  const Mask m = mask(in, 4);
  attn::SdpaOptions o;
  o.attn_mask = m.view(false);
  o.causal = static_cast<attn::Causal>(in.byte() % 3);
  if (in.flag()) o.scale = in.number();
  o.dropout_p = in.flag() ? in.number() : 0.0f;
  o.seed = in.byte();
  // The v2 options: each sometimes present, sometimes invalid.
  o.enable_gqa = in.flag();
  if (in.flag()) o.window = static_cast<int64_t>(in.byte() % 9) - 1;
  if (in.flag()) o.softcap = in.number();
  std::vector<float> slopes(in.byte() % 5);
  for (float& slope : slopes) slope = in.number();
  o.alibi = in.flag();
  if (o.alibi && in.flag()) {
    o.alibi_slopes = slopes.data();
    o.alibi_slope_count = static_cast<int64_t>(slopes.size());
  }
  const Ids query_ids = ids(in, 3), key_ids = ids(in, 3);
  switch (in.byte() % 3) {
    case 1:
      o.query_document_ids = o.key_document_ids = query_ids.view();
      o.shared_document_ids = true;
      break;
    case 2:
      o.query_document_ids = query_ids.view();
      o.key_document_ids = key_ids.view();
      break;
    default: break;
  }
  if (!attn::check_scaled_dot_product_attention(q.shape, k.shape, v.shape, o).ok()) {
    std::vector<float> out(1);
    if (attn::scaled_dot_product_attention(q.view(), k.view(), v.view(), o, out.data(), nullptr).ok()) std::abort();
    return;
  }
  attn::Shape out_shape = q.shape, w_shape = q.shape;
  out_shape[out_shape.rank - 1] = v.shape.at_end(1);
  w_shape[w_shape.rank - 1] = k.shape.at_end(2);
  std::vector<float> out = buffer(out_shape), w = buffer(w_shape), streamed = buffer(out_shape);
  if (!attn::scaled_dot_product_attention(q.view(), k.view(), v.view(), o, out.data(), w.data()).ok()) std::abort();
  if (!attn::scaled_dot_product_attention(q.view(), k.view(), v.view(), o, streamed.data(), nullptr).ok()) std::abort();
  if (o.dropout_p != 0.0f) return;
  const bool moderate_inputs = moderate({&q, &k, &v}, m, o);
  check_rows(w, safe_numel(w_shape), k.shape.at_end(2), moderate_inputs);
  if (!moderate_inputs) return;
  on_every_kernel_set(reference_sdpa(q, k, v, o), static_cast<size_t>(safe_numel(out_shape)), [&](float* out, float* weights) {
    return attn::scaled_dot_product_attention(q.view(), k.view(), v.view(), o, out, weights).ok();
  });
}

// A cache configuration, then appends, truncates, resets and attends (valid or not) in any order:
// refused calls change nothing, the positions held follow the ring's rule, and every attend
// matches the reference over the keys the cache holds (lower-right, grouped heads).
void fuzz_kv_cache(Input& in) {
  attn::KVCacheConfig c;
  c.batch = 1 + in.byte() % 2;
  c.heads = 1 + in.byte() % 3;
  c.head_dim = in.dim();
  c.value_dim = in.flag() ? in.dim() : 0;
  c.max_length = in.dim() + in.dim();
  c.dtype = static_cast<attn::CacheDtype>(in.byte() % 3);  // f32, f16, q8
  if (in.flag()) c.window = in.dim();
  std::unique_ptr<attn::KVCache> cache;
  if (!attn::KVCache::create(c, &cache).ok()) return;
  const attn::KVCacheConfig& k = cache->config();
  bool moderate_data = true;
  for (int op = 0; op < 10; ++op) {
    const int64_t held = cache->length();
    switch (in.byte() % 4) {
      case 0: {
        const int64_t t = in.dim();
        Tensor key{{k.batch, k.heads, t, k.head_dim}, {}}, value{{k.batch, k.heads, t, k.value_dim}, {}};
        // An f16 cache refuses a finite value binary16 would hold as ±Inf (|x| ≥ 65520); a q8 cache
        // Inf, NaN and a value whose block scale, |x| / 127, binary16 would hold as Inf.
        bool moderate = true, refused = false;
        for (Tensor* x : {&key, &value}) {
          x->data.resize(safe_numel(x->shape));
          for (float& e : x->data) {
            moderate &= std::fabs(e = in.number()) < 1e4f;
            refused |= k.dtype == attn::CacheDtype::f16 && std::isfinite(e) && std::fabs(e) >= 65520.0f;
            refused |= k.dtype == attn::CacheDtype::q8 && !(std::fabs(e) / 127.0f < 65520.0f);
          }
        }
        const int64_t expected = cache->length_after_append(t);
        const bool appended = cache->append(key.view(), value.view()).ok();
        if ((appended ? cache->length() != expected : cache->length() != held) || (appended && refused)) std::abort();
        if (appended) moderate_data &= moderate;
        break;
      }
      case 1: {
        // A ring that has dropped positions keeps the window − 1 the next position sees.
        const int64_t length = in.byte() % (held + 2);
        const int64_t least = k.window && cache->position() > held ? std::min(*k.window - 1, held) : 0;
        const bool valid = least <= length && length <= held;
        if (cache->truncate(length).ok() != valid || cache->length() != (valid ? length : held)) std::abort();
        break;
      }
      case 2:
        if (in.byte() % 4 == 0) {
          cache->reset();
          moderate_data = true;
        }
        break;
      default: {
        const int64_t query_heads = k.heads * (1 + in.byte() % 3), n = in.byte() % (held + 2);
        Tensor q{{k.batch, query_heads, n, k.head_dim}, {}};
        q.data.resize(safe_numel(q.shape));
        for (float& e : q.data) e = (static_cast<int>(in.byte()) - 128) / 32.0f;
        attn::CacheAttendOptions o;
        o.causal = in.flag();
        if (in.flag()) o.softcap = 1.0f + in.byte() % 8;
        o.alibi = in.flag();
        if (in.flag()) o.window = in.dim();
        Mask mask;
        if (in.flag()) {
          mask.type = attn::MaskType::boolean;
          mask.shape = {in.flag() ? k.batch : 1, in.flag() ? query_heads : 1, in.flag() ? n : 1, held};
          for (int64_t e = 0; e < safe_numel(mask.shape); ++e) mask.bools.push_back(in.byte() % 3 != 0);
          o.attn_mask = mask.view(false);
        }
        attn::Shape output_shape, weights_shape;
        if (!cache->check_attend(q.shape, o, &output_shape, &weights_shape).ok()) {
          std::vector<float> out(1);
          if (cache->attend(q.view(), o, out.data(), nullptr).ok()) std::abort();
          break;
        }
        std::vector<float> keys(k.batch * k.heads * held * k.head_dim), values(k.batch * k.heads * held * k.value_dim);
        cache->copy_keys(keys.data());
        cache->copy_values(values.data());
        if (!moderate_data) {
          std::vector<float> out = buffer(output_shape);
          if (!cache->attend(q.view(), o, out.data(), nullptr).ok()) std::abort();
          break;
        }
        const Tensor held_keys{{k.batch, k.heads, held, k.head_dim}, keys}, held_values{{k.batch, k.heads, held, k.value_dim}, values};
        // A q8 cache attends with the query rounded through q8, as the API says.
        Tensor rounded = q;
        if (k.dtype == attn::CacheDtype::q8)
          for (size_t row = 0; row < q.data.size(); row += static_cast<size_t>(k.head_dim))
            attn::kernels::round_q8(q.data.data() + row, k.head_dim, rounded.data.data() + row);
        on_every_kernel_set(reference_sdpa(rounded, held_keys, held_values, cache->as_sdpa(o)), static_cast<size_t>(safe_numel(output_shape)),
                            [&](float* out, float* weights) { return cache->attend(q.view(), o, out, weights).ok(); });
      }
    }
  }
}

// RoPE against the contract's formula in double (angles included).
void fuzz_rope(Input& in) {
  const Tensor x = tensor(in, 3);
  attn::RopeOptions o;
  std::vector<int32_t> positions(in.byte() % 6);
  for (int32_t& p : positions) p = static_cast<int32_t>(in.byte()) - 16;
  if (in.flag()) {
    o.positions = {positions.data(), {static_cast<int64_t>(positions.size())}};
  } else {
    o.offset = static_cast<int64_t>(in.byte()) * 1000;
  }
  if (in.flag()) o.base = in.flag() ? in.number() : 500000.0;
  if (in.flag()) o.rotary_dim = in.dim();
  o.interleaved = in.flag();
  std::vector<float> out = buffer(x.shape);
  if (!attn::check_rope(x.shape, o).ok()) {
    if (attn::rope(x.view(), o, out.data()).ok()) std::abort();
    return;
  }
  if (!attn::rope(x.view(), o, out.data()).ok()) std::abort();
  const std::vector<double> want = reference_rope(x, [&](int64_t l) {
    return o.positions.present() ? o.positions.data[l] : static_cast<double>(o.offset + l);
  }, default_frequencies(o.base, o.rotary_dim.value_or(x.shape.at_end(1)) / 2), o.interleaved);
  for (size_t e = 0; e < want.size(); ++e)
    if (std::isfinite(want[e]) && !(std::fabs(out[e] - want[e]) <= 1e-5 * (1.0 + std::fabs(want[e])) + 1e-6 * (std::fabs(x.data[e]) + 1)))
      std::abort();
}

// GroupedQueryAttention: the block over its whole input against the reference on every kernel set,
// then fed in chunks through a cache, equal to the whole (RoPE positions, the ring's wrap, grouped
// heads, windows and soft caps included).
void fuzz_grouped_query_attention(Input& in) {
  attn::GroupedQueryAttentionConfig c;
  c.num_key_value_heads = 1 + in.byte() % 2;
  c.num_heads = c.num_key_value_heads * (1 + in.byte() % 3);
  c.head_dim = 2 * (1 + in.byte() % 3);
  c.hidden_size = 1 + in.byte() % 8;
  c.qkv_bias = in.flag();
  c.rope_interleaved = in.flag();
  if (in.flag()) c.sliding_window = 1 + in.byte() % 5;
  if (in.flag()) c.softcap = 1.0f + in.byte() % 8;
  if (in.flag()) {
    c.qk_norm.scope = in.flag() ? attn::QkNormScope::head : attn::QkNormScope::all;
    c.qk_norm.eps = in.flag() ? 1e-6 : 1e-2;
    c.qk_norm.unit_offset = in.flag();
  }
  // The schemes whose frequencies do not depend on the length (so that a chunked run equals the
  // whole); their values are the rope tests' to check against Hugging Face.
  std::vector<double> given(c.head_dim / 2);
  for (double& f : given) f = in.byte() / 64.0;
  switch (in.byte() % 5) {
    case 1: c.rope_scaling.type = attn::RopeType::linear, c.rope_scaling.factor = 1 + in.byte() % 8; break;
    case 2:
      c.rope_scaling.type = attn::RopeType::llama3, c.rope_scaling.factor = 8, c.rope_scaling.low_freq_factor = 1;
      c.rope_scaling.high_freq_factor = 4, c.rope_scaling.original_max_position_embeddings = 1 + in.byte() * 8;
      break;
    case 3: c.rope_scaling.type = attn::RopeType::yarn, c.rope_scaling.factor = 1 + in.byte() % 8;
      c.rope_scaling.original_max_position_embeddings = 1 + in.byte() * 64;
      break;
    case 4: c.rope_scaling.type = attn::RopeType::given, c.rope_scaling.inv_freq = given.data();
      c.rope_scaling.inv_freq_count = c.head_dim / 2, c.rope_scaling.attention_scaling = in.byte() / 128.0;
      break;
    default: break;
  }
  std::unique_ptr<attn::GroupedQueryAttention> block;
  if (!attn::GroupedQueryAttention::create(c, &block).ok()) std::abort();
  attn::RopeFrequencies frequencies;
  if (!frequencies.prepare(c.rope_scaling, c.rope_base, c.head_dim).ok()) std::abort();
  std::vector<double> inv_freq(c.head_dim / 2);
  const double attention = frequencies.compute(0, inv_freq.data());
  const int64_t q_size = c.num_heads * c.head_dim, kv_size = c.num_key_value_heads * c.head_dim, hidden = c.hidden_size;
  std::vector<std::pair<std::string, attn::Shape>> entries = {
      {"q_proj.weight", {q_size, hidden}}, {"k_proj.weight", {kv_size, hidden}}, {"v_proj.weight", {kv_size, hidden}},
      {"o_proj.weight", {hidden, q_size}}};
  if (c.qkv_bias) entries.insert(entries.end(), {{"q_proj.bias", {q_size}}, {"k_proj.bias", {kv_size}}, {"v_proj.bias", {kv_size}}});
  if (c.qk_norm.scope != attn::QkNormScope::none) {
    const bool per_head = c.qk_norm.scope == attn::QkNormScope::head;
    entries.insert(entries.end(), {{"q_norm.weight", {per_head ? c.head_dim : q_size}}, {"k_norm.weight", {per_head ? c.head_dim : kv_size}}});
  }
  std::vector<std::vector<float>> storage;
  std::vector<attn::NamedTensor> state_dict;
  storage.reserve(entries.size());
  for (const auto& [name, shape] : entries) {
    storage.emplace_back(safe_numel(shape));
    for (float& x : storage.back()) x = (static_cast<int>(in.byte()) - 128) / 128.0f;
    state_dict.push_back({name, {storage.back().data(), shape}});
  }
  if (!block->load_state_dict(state_dict).ok()) std::abort();
  const int64_t N = 1 + in.byte() % 2, t = 1 + in.byte() % 7;
  Tensor x{{N, t, hidden}, {}};
  for (int64_t e = 0; e < N * t * hidden; ++e) x.data.push_back((static_cast<int>(in.byte()) - 128) / 64.0f);
  on_every_kernel_set(reference_llama_attention(block->config(), storage, x, inv_freq, attention), static_cast<size_t>(N * t * hidden),
                      [&](float* out, float* weights) { return block->forward(x.view(), {}, out, weights).ok(); });
  // project(): the q, k and v its attention reads, on every kernel set.
  const Projections want = reference_llama_projections(block->config(), storage, x, inv_freq, attention);
  for (const attn::kernels::KernelSet* set : attn::kernels::compiled_kernel_sets()) {
    attn::kernels::override_active_kernels(set);
    std::vector<float> q(want.q.data.size()), k(want.k.data.size()), v(want.v.data.size());
    const bool ok = block->project(x.view(), {}, q.data(), k.data(), v.data()).ok();
    attn::kernels::override_active_kernels(nullptr);
    if (!ok) std::abort();
    for (const auto& [got, reference] : {std::pair{&q, &want.q}, std::pair{&k, &want.k}, std::pair{&v, &want.v}})
      for (size_t e = 0; e < got->size(); ++e)
        if (!(std::fabs((*got)[e] - reference->data[e]) <= 1e-4 * (1.0 + std::fabs(reference->data[e])))) std::abort();
  }
  std::vector<float> whole(N * t * hidden), chunked(N * t * hidden);
  if (!block->forward(x.view(), {}, whole.data(), nullptr).ok()) std::abort();
  std::unique_ptr<attn::KVCache> cache;
  if (!attn::KVCache::create(block->cache_config(t, N, static_cast<attn::CacheDtype>(in.byte() % 3)), &cache).ok())
    std::abort();
  attn::GroupedQueryAttentionOptions o;
  o.cache = cache.get();
  for (int64_t first = 0; first < t;) {
    const int64_t count = std::min<int64_t>(t - first, 1 + in.byte() % 3);
    Tensor chunk{{N, count, hidden}, {}};
    std::vector<float> out(N * count * hidden);
    for (int64_t b = 0; b < N; ++b)
      chunk.data.insert(chunk.data.end(), x.data.begin() + (b * t + first) * hidden, x.data.begin() + (b * t + first + count) * hidden);
    if (!block->forward(chunk.view(), o, out.data(), nullptr).ok()) std::abort();
    for (int64_t b = 0; b < N; ++b) std::copy_n(out.data() + b * count * hidden, count * hidden, chunked.data() + (b * t + first) * hidden);
    first += count;
  }
  // An f16 cache rounds keys to 2^-11 relative (q8 to 2^-8 of a block's largest), which moves
  // scores of a few hundred (these weights give them) by whole units: its run is checked for
  // finite results only (fuzz_kv_cache compares f16 and q8 attends with the reference over the
  // rounded keys).
  const bool rounded = cache->config().dtype != attn::CacheDtype::f32;
  for (size_t e = 0; e < whole.size(); ++e)
    if (rounded ? !std::isfinite(chunked[e]) : !(std::fabs(chunked[e] - whole[e]) <= 1e-4 * (1.0 + std::fabs(whole[e]))))
      std::abort();

  // The first row left-padded with junk, its attention_mask saying so, through a cache: its tokens
  // equal the row run alone (positions counted as generate() does, padded keys hidden).
  const int64_t pad = 1 + in.byte() % 3;
  Tensor padded{{1, pad + t, hidden}, std::vector<float>(pad * hidden, 1e3f)};
  padded.data.insert(padded.data.end(), x.data.begin(), x.data.begin() + t * hidden);
  std::vector<uint8_t> tokens(pad + t, 1);
  std::fill_n(tokens.begin(), pad, 0);
  std::unique_ptr<attn::KVCache> rows;
  if (!attn::KVCache::create(block->cache_config(pad + t, 1, attn::CacheDtype::f32), &rows).ok()) std::abort();
  attn::GroupedQueryAttentionOptions masked;
  masked.cache = rows.get();
  masked.attention_mask = {attn::MaskType::boolean, tokens.data(), {1, pad + t}};
  std::vector<float> out((pad + t) * hidden);
  if (!block->forward(padded.view(), masked, out.data(), nullptr).ok()) std::abort();
  for (int64_t e = 0; e < t * hidden; ++e)
    if (!(std::fabs(out[pad * hidden + e] - whole[e]) <= 1e-4 * (1.0 + std::fabs(whole[e])))) std::abort();
}

// Loads a state dict of the declared shapes with data from the input, sometimes with one entry
// renamed or reshaped, then runs forward with whatever shapes and masks the input gives.
template <class Module, class Forward>
void fuzz_module(Input& in, std::unique_ptr<Module>& module, std::vector<std::pair<std::string, attn::Shape>> entries,
                 Forward forward) {
  if (in.flag() && !entries.empty()) {
    auto& victim = entries[in.byte() % entries.size()];
    if (in.flag()) victim.first += "_extra";
    else victim.second[0] += 1;
  }
  std::vector<std::vector<float>> storage;
  std::vector<attn::NamedTensor> state_dict;
  for (const auto& [name, shape] : entries) {
    storage.emplace_back(safe_numel(shape));
    for (float& x : storage.back()) x = in.number();
    state_dict.push_back({name, {storage.back().data(), shape}});
  }
  module->load_state_dict(state_dict);
  bool moderate_parameters = true;
  for (const std::vector<float>& values : storage) moderate_parameters &= moderate_floats({&values});
  forward(*module, moderate_parameters, storage);
}

bool moderate_mask(const Mask& m) {
  for (float x : m.floats)
    if (!(std::fabs(x) < 1e4f || x == -INFINITY)) return false;
  return true;
}

void fuzz_mha(Input& in) {
  attn::MultiheadAttentionConfig c;
  c.embed_dim = in.dim() + 1;
  c.num_heads = in.dim() + 1;
  c.bias = in.flag();
  c.add_bias_kv = in.flag();
  c.add_zero_attn = in.flag();
  c.kdim = in.flag() ? in.dim() : 0;
  c.vdim = in.flag() ? in.dim() : 0;
  c.batch_first = in.flag();
  c.dropout = in.flag() ? 0.5f : 0.0f;
  std::unique_ptr<attn::MultiheadAttention> mha;
  if (!attn::MultiheadAttention::create(c, &mha).ok()) return;
  const attn::MultiheadAttentionConfig& k = mha->config();
  const int64_t E = k.embed_dim;
  std::vector<std::pair<std::string, attn::Shape>> entries;
  if (k.kdim == E && k.vdim == E) {
    entries.push_back({"in_proj_weight", {3 * E, E}});
  } else {
    entries.push_back({"q_proj_weight", {E, E}});
    entries.push_back({"k_proj_weight", {E, k.kdim}});
    entries.push_back({"v_proj_weight", {E, k.vdim}});
  }
  if (k.bias) entries.push_back({"in_proj_bias", {3 * E}});
  if (k.add_bias_kv) {
    entries.push_back({"bias_k", {1, 1, E}});
    entries.push_back({"bias_v", {1, 1, E}});
  }
  entries.push_back({"out_proj.weight", {E, E}});
  if (k.bias) entries.push_back({"out_proj.bias", {E}});
  const bool dropout_active = in.flag() && k.dropout > 0.0f;
  mha->set_training(dropout_active);
  fuzz_module(in, mha, entries, [&](attn::MultiheadAttention& module, bool moderate_parameters, const auto& weights) {
    const Tensor q = tensor(in, 3), key = tensor(in, 3), v = tensor(in, 3);
    const Mask am = mask(in, 3), kpm = mask(in, 2);
    attn::MultiheadAttentionOptions o;
    o.attn_mask = am.view(true);
    o.key_padding_mask = kpm.view(true);
    o.need_weights = in.flag();
    o.average_attn_weights = in.flag();
    o.is_causal = in.flag();
    attn::Shape os, ws;
    if (!module.check_forward(q.shape, key.shape, v.shape, o, &os, &ws).ok()) return;
    const bool moderate_data =
        moderate_parameters && moderate_floats({&q.data, &key.data, &v.data}) && moderate_mask(am) && moderate_mask(kpm);
    kernel_sets_agree(safe_numel(os), o.need_weights ? safe_numel(ws) : 0, moderate_data,
                      [&](float* out, float* w) { return module.forward(q.view(), key.view(), v.view(), o, out, w).ok(); });
    std::vector<float> out = buffer(os), w = buffer(ws);
    if (!module.forward(q.view(), key.view(), v.view(), o, out.data(), o.need_weights ? w.data() : nullptr).ok())
      return;
    if (moderate_data && !dropout_active) {
      on_every_kernel_set(reference_mha(k, weights, q, key, v, am, kpm, o), static_cast<size_t>(safe_numel(os)),
                          [&](float* output, float* weights_out) {
                            attn::MultiheadAttentionOptions streamed = o;
                            streamed.need_weights = o.need_weights && weights_out;
                            return module.forward(q.view(), key.view(), v.view(), streamed, output, weights_out).ok();
                          });
    }
    // The output written over the query (as the bindings do) must be the same, bit for bit.
    Tensor over = q;
    const int64_t count = safe_numel(os);
    if (in.flag() && count > 0) {
      if (!module.forward(over.view(), key.view(), v.view(), o, over.data.data(), o.need_weights ? w.data() : nullptr).ok() ||
          std::memcmp(over.data.data(), out.data(), count * sizeof(float)) != 0)
        std::abort();
    }
  });
}

void fuzz_small_modules(Input& in) {
  const int64_t a = in.dim() + 1, b = in.dim() + 1, c = in.dim() + 1;
  switch (in.byte() % 3) {
    case 0: {
      std::unique_ptr<attn::SelfAttention> m;
      if (!attn::SelfAttention::create({a, b, c, 0.0f}, &m).ok()) return;
      fuzz_module(in, m, {{"W_q.weight", {b, a}}, {"W_k.weight", {b, a}}, {"W_v.weight", {c, a}}},
                  [&](attn::SelfAttention& module, bool moderate_parameters, const auto& weights) {
                    const Tensor x = tensor(in, 3);
                    const Mask mk = mask(in, 3);
                    attn::Shape os, ws;
                    if (!module.check_forward(x.shape, {mk.view(true)}, &os, &ws).ok()) return;
                    std::vector<float> probe = buffer(os);
                    if (!module.forward(x.view(), {mk.view(true)}, probe.data(), nullptr).ok()) return;  // not loaded
                    if (!(moderate_parameters && moderate_floats({&x.data}) && moderate_mask(mk))) return;
                    attn::SdpaOptions o;
                    o.attn_mask = mk.view(true);
                    on_every_kernel_set(reference_sdpa(project(x, weights[0], b), project(x, weights[1], b), project(x, weights[2], c), o),
                                        static_cast<size_t>(safe_numel(os)), [&](float* out, float* w) {
                                          return module.forward(x.view(), {mk.view(true)}, out, w).ok();
                                        });
                  });
      return;
    }
    case 1: {
      std::unique_ptr<attn::AdditiveAttention> m;
      if (!attn::AdditiveAttention::create({a, b, c, 0.0f}, &m).ok()) return;
      fuzz_module(in, m, {{"W_q.weight", {c, a}}, {"W_k.weight", {c, b}}, {"W_v.weight", {1, c}}},
                  [&](attn::AdditiveAttention& module, bool moderate_parameters, const auto& weights) {
                    // Shapes that fit the module half the time: random ones rarely do.
                    const bool fitting = in.flag();
                    const int64_t batch = in.dim(), query_count = in.dim(), key_count = in.dim(), value_size = in.dim();
                    const Tensor q = fitting ? tensor_of(in, {batch, query_count, a}) : tensor(in, 3);
                    const Tensor k = fitting ? tensor_of(in, {batch, key_count, b}) : tensor(in, 3);
                    const Tensor v = fitting ? tensor_of(in, {batch, key_count, value_size}) : tensor(in, 3);
                    const Mask mk = fitting ? mask_of(in, {batch, query_count, key_count}) : mask(in, 3);
                    attn::Shape os, ws;
                    if (!module.check_forward(q.shape, k.shape, v.shape, {mk.view(true)}, &os, &ws).ok()) return;
                    std::vector<float> probe = buffer(os);
                    if (!module.forward(q.view(), k.view(), v.view(), {mk.view(true)}, probe.data(), nullptr).ok()) return;
                    if (!(moderate_parameters && moderate_floats({&q.data, &k.data, &v.data}) && moderate_mask(mk))) return;
                    // scores[b, i, j] = w_v · tanh(W_q q_i + W_k k_j), in double.
                    const Tensor queries = project(q, weights[0], c), keys = project(k, weights[1], c);
                    const int64_t n = q.shape.at_end(2), m = k.shape.at_end(2);
                    const ScoreOf score = [&](int64_t block, int64_t i, int64_t j) {
                      double sum = 0;
                      for (int64_t h = 0; h < c; ++h)
                        sum += double(weights[2][h]) * std::tanh(double(queries.data[(block * n + i) * c + h]) + keys.data[(block * m + j) * c + h]);
                      return sum;
                    };
                    attn::SdpaOptions o;
                    o.attn_mask = mk.view(true);
                    on_every_kernel_set(reference_sdpa(q, k, v, o, score), static_cast<size_t>(safe_numel(os)), [&](float* out, float* w) {
                      return module.forward(q.view(), k.view(), v.view(), {mk.view(true)}, out, w).ok();
                    });
                  });
      return;
    }
    default: {
      const int64_t P = in.dim() + 1;
      std::unique_ptr<attn::RelativeMultiHeadAttention> m;
      if (!attn::RelativeMultiHeadAttention::create({a, b * a, P, 0.0f}, &m).ok()) return;
      const int64_t D = b * a, dk = b;
      fuzz_module(in, m,
                  {{"query.linear.weight", {a * dk, D}}, {"key.linear.weight", {a * dk, D}},
                   {"value.linear.weight", {a * dk, D}}, {"value.linear.bias", {a * dk}}, {"output.weight", {D, a * dk}},
                   {"output.bias", {D}}, {"key_pos_embeddings", {2 * P, a, dk}}, {"key_pos_bias", {2 * P, a}},
                   {"query_pos_bias", {a, dk}}},
                  [&](attn::RelativeMultiHeadAttention& module, bool moderate_parameters, const auto& weights) {
                    const bool fitting = in.flag();
                    const int64_t n = std::min(in.dim(), P), m = std::max(std::min(in.dim(), P), n), B = in.dim();
                    const Tensor q = fitting ? tensor_of(in, {n, B, D}) : tensor(in, 3);
                    const Tensor k = fitting ? tensor_of(in, {m, B, D}) : tensor(in, 3);
                    const Tensor v = fitting ? tensor_of(in, {m, B, D}) : tensor(in, 3);
                    Mask mk = fitting ? mask_of(in, {in.flag() ? n : 1, m, in.flag() ? B : 1}) : mask(in, 3);
                    if (mk.type == attn::MaskType::additive) mk.type = attn::MaskType::boolean, mk.bools.resize(mk.floats.size());
                    const bool heads_first = in.flag();
                    attn::Shape os, ws;
                    if (!module.check_forward(q.shape, k.shape, v.shape, {mk.view(false), 0, heads_first}, &os, &ws).ok())
                      return;
                    const bool moderate_data = moderate_parameters && moderate_floats({&q.data, &k.data, &v.data});
                    const auto forward = [&](float* out, float* w) {
                      return module.forward(q.view(), k.view(), v.view(), {mk.view(false), 0, heads_first}, out, w).ok();
                    };
                    kernel_sets_agree(safe_numel(os), safe_numel(ws), moderate_data, forward);
                    std::vector<float> probe = buffer(os), probe_weights = buffer(ws);
                    if (!moderate_data || !forward(probe.data(), probe_weights.data())) return;  // not loaded
                    on_every_kernel_set(reference_relative(a, P, weights, q, k, v, mk, heads_first), static_cast<size_t>(safe_numel(os)),
                                        forward);
                  });
    }
  }
}

void fuzz_merge(Input& in) {
  const Mask am = mask(in, 3), kpm = mask(in, 3);
  const int64_t heads = in.dim();
  attn::Shape merged;
  if (!attn::check_merge_masks({am.view(true), kpm.view(true), heads}, &merged).ok()) return;
  std::vector<float> out = buffer(merged);
  if (!attn::merge_masks({am.view(true), kpm.view(true), heads}, out.data()).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  in.allow_special_numbers(in.flag());
  switch (in.byte() % 7) {
    case 0: fuzz_sdpa(in); break;
    case 1: fuzz_mha(in); break;
    case 2: fuzz_small_modules(in); break;
    case 3: fuzz_kv_cache(in); break;
    case 4: fuzz_rope(in); break;
    case 5: fuzz_grouped_query_attention(in); break;
    default: fuzz_merge(in); break;
  }
  return 0;
}

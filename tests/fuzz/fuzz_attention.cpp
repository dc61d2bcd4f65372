// libFuzzer target over the core's whole surface: shapes, masks and options decoded from the
// input, valid or not, for every operator; data from the input too (NaN and Inf included).
// Crashes, sanitizer reports and broken invariants are findings; each one becomes a regression
// test in tests/cpp. Run with `npm run fuzz` (scripts/fuzz.sh).
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "additive_attention.h"
#include "attention.h"
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
  float number() {
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

Tensor tensor(Input& in, int max_rank) {
  Tensor t{in.shape(max_rank), {}};
  t.data.resize(safe_numel(t.shape));
  for (float& x : t.data) x = in.number();
  return t;
}

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

Mask mask(Input& in, int max_rank) {
  Mask m;
  m.type = static_cast<attn::MaskType>(in.byte() % 3);
  m.shape = in.shape(max_rank);
  const int64_t n = safe_numel(m.shape);
  for (int64_t i = 0; i < n; ++i) {
    if (m.type == attn::MaskType::boolean) m.bools.push_back(in.byte() % 3 == 0);
    m.floats.push_back(in.byte() % 4 == 0 ? -INFINITY : in.number());
  }
  return m;
}

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
  if (o.dropout_p == 0.0f) check_rows(w, safe_numel(w_shape), k.shape.at_end(2), moderate({&q, &k, &v}, m, o));
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
  forward(*module);
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
  mha->set_training(in.flag());
  fuzz_module(in, mha, entries, [&](attn::MultiheadAttention& module) {
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
    std::vector<float> out = buffer(os), w = buffer(ws);
    if (!module.forward(q.view(), key.view(), v.view(), o, out.data(), o.need_weights ? w.data() : nullptr).ok())
      return;
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
                  [&](attn::SelfAttention& module) {
                    const Tensor x = tensor(in, 3);
                    const Mask mk = mask(in, 3);
                    attn::Shape os, ws;
                    if (!module.check_forward(x.shape, mk.view(true), &os, &ws).ok()) return;
                    std::vector<float> out = buffer(os), w = buffer(ws);
                    module.forward(x.view(), mk.view(true), 0, out.data(), w.data());
                  });
      return;
    }
    case 1: {
      std::unique_ptr<attn::AdditiveAttention> m;
      if (!attn::AdditiveAttention::create({a, b, c, 0.0f}, &m).ok()) return;
      fuzz_module(in, m, {{"W_q.weight", {c, a}}, {"W_k.weight", {c, b}}, {"W_v.weight", {1, c}}},
                  [&](attn::AdditiveAttention& module) {
                    const Tensor q = tensor(in, 3), k = tensor(in, 3), v = tensor(in, 3);
                    const Mask mk = mask(in, 3);
                    attn::Shape os, ws;
                    if (!module.check_forward(q.shape, k.shape, v.shape, mk.view(true), &os, &ws).ok()) return;
                    std::vector<float> out = buffer(os), w = buffer(ws);
                    module.forward(q.view(), k.view(), v.view(), mk.view(true), 0, out.data(), w.data());
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
                  [&](attn::RelativeMultiHeadAttention& module) {
                    const Tensor q = tensor(in, 3), k = tensor(in, 3), v = tensor(in, 3);
                    Mask mk = mask(in, 3);
                    if (mk.type == attn::MaskType::additive) mk.type = attn::MaskType::boolean, mk.bools.resize(mk.floats.size());
                    const bool heads_first = in.flag();
                    attn::Shape os, ws;
                    if (!module.check_forward(q.shape, k.shape, v.shape, mk.view(false), heads_first, &os, &ws).ok())
                      return;
                    std::vector<float> out = buffer(os), w = buffer(ws);
                    module.forward(q.view(), k.view(), v.view(), mk.view(false), 0, heads_first, out.data(), w.data());
                  });
    }
  }
}

void fuzz_merge(Input& in) {
  const Mask am = mask(in, 3), kpm = mask(in, 3);
  const int64_t heads = in.dim();
  attn::Shape merged;
  if (!attn::check_merge_masks(am.view(true), kpm.view(true), heads, &merged).ok()) return;
  std::vector<float> out = buffer(merged);
  if (!attn::merge_masks(am.view(true), kpm.view(true), heads, out.data()).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  switch (in.byte() % 4) {
    case 0: fuzz_sdpa(in); break;
    case 1: fuzz_mha(in); break;
    case 2: fuzz_small_modules(in); break;
    default: fuzz_merge(in); break;
  }
  return 0;
}

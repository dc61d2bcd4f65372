// The `ours-native` rows of bench/attention.mjs: the same core, built natively, timing the
// MultiheadAttention forward that the wasm builds run.
// Usage: attention_bench_native L E H threads weights(0|1) runs  -> one JSON line on stdout.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "multihead_attention.h"
#include "parallel.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s L E H threads weights(0|1) runs\n", argv[0]);
    return 2;
  }
  const int64_t L = std::atoll(argv[1]), E = std::atoll(argv[2]), H = std::atoll(argv[3]);
  const int threads = std::atoi(argv[4]), runs = std::atoi(argv[6]);
  const bool need_weights = std::atoi(argv[5]) != 0;
  attn::set_thread_count(threads);

  // The bench script's weights: sin/cos patterns every implementation can rebuild exactly.
  std::vector<float> in_proj(3 * E * E), in_bias(3 * E), out_w(E * E), out_b(E), x(L * E), output(L * E);
  for (size_t i = 0; i < in_proj.size(); ++i) in_proj[i] = 0.05f * std::sin(float(i));
  for (size_t i = 0; i < in_bias.size(); ++i) in_bias[i] = 0.01f * std::cos(float(i));
  for (size_t i = 0; i < out_w.size(); ++i) out_w[i] = 0.05f * std::cos(float(i));
  for (size_t i = 0; i < out_b.size(); ++i) out_b[i] = 0.01f * std::sin(float(i));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i));

  attn::MultiheadAttentionConfig config;
  config.embed_dim = E;
  config.num_heads = H;
  std::unique_ptr<attn::MultiheadAttention> mha;
  attn::Status s = attn::MultiheadAttention::create(config, &mha);
  if (s.ok())
    s = mha->load_state_dict({{"in_proj_weight", {in_proj.data(), {3 * E, E}}},
                              {"in_proj_bias", {in_bias.data(), {3 * E}}},
                              {"out_proj.weight", {out_w.data(), {E, E}}},
                              {"out_proj.bias", {out_b.data(), {E}}}});
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  attn::MultiheadAttentionOptions options;
  options.is_causal = true;
  options.need_weights = need_weights;
  std::vector<float> weights(need_weights ? L * L : 0);
  std::vector<double> times;
  for (int r = 0; r < runs + 1; ++r) {  // the first run warms up
    const auto start = std::chrono::steady_clock::now();
    s = mha->forward({x.data(), {L, 1, E}}, {x.data(), {L, 1, E}}, {x.data(), {L, 1, E}}, options, output.data(),
                     need_weights ? weights.data() : nullptr);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    if (r > 0) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  std::printf("{\"min_ms\":%.3f,\"median_ms\":%.3f,\"output_head\":[", times.front(), times[times.size() / 2]);
  for (int i = 0; i < 8; ++i) std::printf("%s%.7g", i ? "," : "", output[i]);
  std::printf("]}\n");
  return 0;
}

// bench/decode.mjs's decode step built natively (g++ -O3 -march=native, the wasm SIMD128 kernels
// through SIMDe, multiply-adds contracted to FMA as the relaxed builds' are): the same KVCache
// layout and attend path, so that the step's native time says how much of its distance from the
// roofline is WebAssembly's and how much the layout's. A server, so that decode.mjs can time it in
// alternation with the wasm rows: one command a line on stdin, one answer a line on stdout.
//   threads N                  the core's thread count                      → ok
//   read                       GB/s of the best of 20 sequential reads of 64 MiB (as
//                              bench/bandwidth.mjs reads inside wasm)       → GB/s
//   load NAME DTYPE CTX FILE   a cache (f32, f16 or q8) of CTX positions: FILE holds float32 past
//                              keys and values [heads, CTX - 1, d], the step's key and value
//                              [heads, 1, d] and its query [query heads, 1, d]  → ok
//   step NAME                  one step (append, attend, truncate back)    → its ms
//   output NAME                the last step's output [query heads, d]      → the floats
//   free NAME                                                               → ok
#if defined(__wasm_simd128__)
#error "a native program"
#endif
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/wasm/simd128.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kv_cache.h"
#include "parallel.h"

namespace {

constexpr int64_t kQueryHeads = 32, kHeads = 8, kDim = 64;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Four v128 accumulators over 64 bytes a step, the loop of bench/bandwidth.mjs's module.
double read_gbps() {
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<float> buffer(kBytes / sizeof(float), 1.0f);
  double best = 1e300;
  float sink = 0.0f;
  for (int pass = 0; pass < 20; ++pass) {
    const double start = now_ms();
    v128_t acc[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    for (const float* p = buffer.data(), *end = p + buffer.size(); p != end; p += 16)
      for (int a = 0; a < 4; ++a) acc[a] = wasm_f32x4_add(acc[a], wasm_v128_load(p + 4 * a));
    best = std::min(best, now_ms() - start);
    sink += wasm_f32x4_extract_lane(wasm_f32x4_add(wasm_f32x4_add(acc[0], acc[1]), wasm_f32x4_add(acc[2], acc[3])), 0);
  }
  if (sink < 0.0f) std::fprintf(stderr, "%g\n", sink);  // keeps the sums
  return kBytes / (best * 1e6);
}

struct Problem {
  std::unique_ptr<attn::KVCache> cache;
  int64_t context = 0;
  std::vector<float> step_key, step_value, query, output;
};

std::string load(Problem& p, const std::string& dtype, int64_t context, const std::string& file) {
  attn::KVCacheConfig config;
  config.heads = kHeads;
  config.head_dim = kDim;
  config.max_length = context;
  config.dtype = dtype == "f16" ? attn::CacheDtype::f16 : dtype == "q8" ? attn::CacheDtype::q8 : attn::CacheDtype::f32;
  attn::Status s = attn::KVCache::create(config, &p.cache);
  if (!s.ok()) return s.message();
  const int64_t past = kHeads * (context - 1) * kDim;
  std::vector<float> keys(past), values(past);
  p.step_key.resize(kHeads * kDim);
  p.step_value.resize(kHeads * kDim);
  p.query.resize(kQueryHeads * kDim);
  p.output.resize(kQueryHeads * kDim);
  std::ifstream in(file, std::ios::binary);
  for (std::vector<float>* v : {&keys, &values, &p.step_key, &p.step_value, &p.query})
    in.read(reinterpret_cast<char*>(v->data()), static_cast<std::streamsize>(v->size() * sizeof(float)));
  if (!in) return "cannot read " + file;
  p.context = context;
  const attn::Shape shape{1, kHeads, context - 1, kDim};
  s = p.cache->append({keys.data(), shape}, {values.data(), shape});
  return s.ok() ? "ok" : s.message();
}

// append, attend, truncate: what decode.mjs's step does through the JS API.
std::string step(Problem& p) {
  const attn::Shape one{1, kHeads, 1, kDim};
  const double start = now_ms();
  attn::Status s = p.cache->append({p.step_key.data(), one}, {p.step_value.data(), one});
  if (s.ok()) s = p.cache->attend({p.query.data(), {1, kQueryHeads, 1, kDim}}, {}, p.output.data(), nullptr);
  if (s.ok()) s = p.cache->truncate(p.context - 1);
  const double ms = now_ms() - start;
  if (!s.ok()) return s.message();
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", ms);
  return text;
}

}  // namespace

int main() {
  std::map<std::string, Problem> problems;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command, name;
    words >> command >> name;
    std::string answer = "unknown command: " + command;
    if (command == "threads") {
      answer = std::to_string(attn::set_thread_count(std::stoi(name)));
    } else if (command == "read") {
      answer = std::to_string(read_gbps());
    } else if (command == "load") {
      std::string dtype, file;
      int64_t context = 0;
      words >> dtype >> context >> file;
      answer = load(problems[name], dtype, context, file);
    } else if (command == "step") {
      answer = step(problems.at(name));
    } else if (command == "output") {
      std::ostringstream floats;
      floats.precision(9);
      for (float x : problems.at(name).output) floats << x << ' ';
      answer = floats.str();
    } else if (command == "free") {
      problems.erase(name);
      answer = "ok";
    }
    std::cout << answer << std::endl;
  }
  return 0;
}

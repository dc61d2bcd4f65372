// Splits independent work items across a persistent pool of threads. Builds without
// ATTENTION_THREADS run everything inline on the caller's thread.
#pragma once

#include <cstdint>
#include <functional>

namespace attn {

// Sets how many threads (the caller's included) later calls use; clamped to [1, kMaxThreads],
// and to 1 in builds without threads. Returns the count in force. Not thread-safe: call it
// between operator calls.
int set_thread_count(int threads);
int thread_count();
constexpr int kMaxThreads = 64;

// Calls work(item, worker) once for every item in [0, count). `worker` in [0, thread_count())
// names the thread, so callers can give each its own scratch. Returns when all items are done.
// `flops_per_item` estimates the work: jobs too small to pay for waking the pool run inline.
void parallel_for(int64_t count, const std::function<void(int64_t item, int worker)>& work,
                  double flops_per_item = 1e9);

}  // namespace attn

#include "parallel.h"

#include <algorithm>

#if ATTENTION_THREADS
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace attn {

#if ATTENTION_THREADS
namespace {

// Polls of a flag before a thread sleeps on it (0.1 to 0.2 ms natively here): waking a sleeping
// thread costs tens of microseconds, more on a VM, whose idle vCPU must be scheduled again, and a
// decode step makes several pool calls a few microseconds apart. A one-token attention block on 2
// threads (bench/decode.mjs's block) took 0.86 to 0.91 times the time with it, builds with and
// without it timed in alternation.
constexpr int kSpins = 200000;

template <typename Ready>
void spin_until(Ready ready) {
  for (int spin = 0; spin < kSpins && !ready(); ++spin) {
  }
}

// Workers are started once and then wait for jobs: starting a thread per call would, under
// Emscripten, need the browser's event loop to hand a used worker back to the pool.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int worker = 1; worker < threads; ++worker) threads_.emplace_back([this, worker] { serve(worker); });
  }

  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  void run(int64_t count, const std::function<void(int64_t, int)>& work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      work_ = &work;
      count_ = count;
      next_.store(0);
      busy_.store(static_cast<int>(threads_.size()));
      generation_.fetch_add(1);
    }
    wake_.notify_all();
    drain(0);
    const auto finished = [this] { return busy_.load() == 0; };
    spin_until(finished);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
    work_ = nullptr;
  }

 private:
  void drain(int worker) {
    for (int64_t item = next_.fetch_add(1); item < count_; item = next_.fetch_add(1)) (*work_)(item, worker);
  }

  void serve(int worker) {
    uint64_t seen = 0;
    const auto new_job = [&] { return generation_.load() != seen; };
    for (;;) {
      spin_until(new_job);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || new_job(); });
        if (stopping_) return;
        seen = generation_.load();
      }
      drain(worker);
      std::lock_guard<std::mutex> lock(mutex_);
      if (busy_.fetch_sub(1) == 1) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int)>* work_ = nullptr;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  // Atomic so that a spinning thread may read them without the lock; changed under it.
  std::atomic<int> busy_{0};
  std::atomic<uint64_t> generation_{0};
  bool stopping_ = false;
};

std::unique_ptr<ThreadPool> pool;

}  // namespace

int set_thread_count(int threads) {
  threads = std::clamp(threads, 1, kMaxThreads);
  if (threads != thread_count()) pool = threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr;
  return thread_count();
}

int thread_count() { return pool ? pool->size() : 1; }

// Waking the pool costs tens of microseconds: below ~1 MFLOP of work, one thread is faster.
constexpr double kMinParallelFlops = 1e6;

void parallel_for(int64_t count, const std::function<void(int64_t, int)>& work, double flops_per_item) {
  if (!pool || count <= 1 || count * flops_per_item < kMinParallelFlops) {
    for (int64_t item = 0; item < count; ++item) work(item, 0);
    return;
  }
  pool->run(count, work);
}

#else

int set_thread_count(int) { return 1; }
int thread_count() { return 1; }
void parallel_for(int64_t count, const std::function<void(int64_t, int)>& work, double) {
  for (int64_t item = 0; item < count; ++item) work(item, 0);
}

#endif

}  // namespace attn

// A buffer whose allocation can fail without aborting: the core is built without exceptions,
// where std::vector would abort on bad_alloc. Callers turn failure into a Status.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "status.h"

namespace attn {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer(std::move(other)).swap(*this);
    return *this;
  }
  ~Buffer() { std::free(data_); }

  // Replaces the contents with `count` uninitialised elements; `what` names the buffer in the error.
  Status allocate(int64_t count, const char* what) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    const bool representable = count >= 0 && static_cast<uint64_t>(count) <= SIZE_MAX / sizeof(T);
    if (representable) data_ = static_cast<T*>(std::malloc(static_cast<size_t>(count > 0 ? count : 1) * sizeof(T)));
    if (!data_) return Status::no_memory(what, std::to_string(count * static_cast<int64_t>(sizeof(T))) + " bytes");
    size_ = count;
    return Status::success();
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void swap(Buffer& other) {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  T* data_ = nullptr;
  int64_t size_ = 0;
};

using FloatBuffer = Buffer<float>;

}  // namespace attn

// A float buffer whose allocation can fail without aborting: the core is built without
// exceptions, where std::vector would abort on bad_alloc. Callers turn failure into a Status.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "status.h"

namespace attn {

class FloatBuffer {
 public:
  FloatBuffer() = default;
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  FloatBuffer(FloatBuffer&& other) noexcept { swap(other); }
  FloatBuffer& operator=(FloatBuffer&& other) noexcept {
    FloatBuffer(std::move(other)).swap(*this);
    return *this;
  }
  ~FloatBuffer() { std::free(data_); }

  // Replaces the contents with `count` uninitialised floats; `what` names the buffer in the error.
  Status allocate(int64_t count, const char* what) {
    std::free(data_);
    data_ = nullptr;
    size_ = 0;
    const bool representable = count >= 0 && static_cast<uint64_t>(count) <= SIZE_MAX / sizeof(float);
    if (representable) data_ = static_cast<float*>(std::malloc(static_cast<size_t>(count > 0 ? count : 1) * sizeof(float)));
    if (!data_) return Status::no_memory(what, std::to_string(count * 4) + " bytes");
    size_ = count;
    return Status::success();
  }

  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  void swap(FloatBuffer& other) {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

  float* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace attn

// Tensors as (pointer, shape) views over row-major, contiguous float data. The core never owns
// caller data: bindings and tests keep it alive for the duration of a call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "status.h"

namespace attn {

// Eight dimensions cover every layout PyTorch attention uses ([B, H, n, d] plus spare leading
// dims) and let shapes live on the stack, so validation never allocates.
constexpr int kMaxRank = 8;

struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  Shape() = default;
  Shape(std::initializer_list<int64_t> list);

  int64_t operator[](int axis) const { return dims[axis]; }
  int64_t& operator[](int axis) { return dims[axis]; }
  // Negative axes count from the end, as in PyTorch.
  int64_t at_end(int from_end) const { return dims[rank - from_end]; }
  int64_t numel() const;
  bool non_negative() const;
  // The product of all but the last `trailing` dimensions.
  int64_t leading_numel(int trailing) const;
  std::string str() const;  // "[2, 3, 4]"
};

bool operator==(const Shape& a, const Shape& b);
inline bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

struct TensorView {
  const float* data = nullptr;
  Shape shape;
};

enum class MaskType { none, boolean, additive };

// A boolean mask is bytes (0/1); an additive mask is floats added to the scores. What a boolean
// 1 means (attend or masked) differs between the PyTorch functions mirrored, so it travels with
// the view rather than being assumed.
struct MaskView {
  MaskType type = MaskType::none;
  const void* data = nullptr;
  Shape shape;
  bool true_means_masked = false;

  bool present() const { return type != MaskType::none; }
};

// Integer ids (the document ids of packed sequences); absent when it has neither data nor shape.
struct IdsView {
  const int32_t* data = nullptr;
  Shape shape;

  bool present() const { return data != nullptr || shape.rank > 0; }
};

// Fails when a non-empty tensor or a present mask has no data. Operators check this before reading,
// after the shape-only checks that bindings run on their own to size outputs.
Status check_data(const void* data, const Shape& shape, const std::string& argument);
inline Status check_data(const TensorView& tensor, const std::string& argument) {
  return check_data(tensor.data, tensor.shape, argument);
}
inline Status check_data(const MaskView& mask, const std::string& argument) {
  return mask.present() ? check_data(mask.data, mask.shape, argument) : Status::success();
}
inline Status check_data(const IdsView& ids, const std::string& argument) {
  return ids.present() ? check_data(ids.data, ids.shape, argument) : Status::success();
}

}  // namespace attn

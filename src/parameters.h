// A module's named parameters, loaded from a PyTorch state_dict(): all entries or none, and every
// missing, extra or mis-shaped entry is an error that names it.
#pragma once

#include <string>
#include <vector>

#include "buffer.h"
#include "status.h"
#include "tensor.h"

namespace attn {

struct NamedTensor {
  std::string name;
  TensorView tensor;
};

class Parameters {
 public:
  // Declares an entry; returns its index for get(). Declared before any load.
  int declare(std::string name, Shape shape);

  // Copies every declared entry from `state_dict`. On error nothing changes.
  Status load(const std::vector<NamedTensor>& state_dict);

  // Frees an entry's copy once its module has derived what it needs (its packed weights): get()
  // gives null until the next load.
  void release(int index) { entries_[index].values = FloatBuffer(); }

  const float* get(int index) const { return entries_[index].values.data(); }
  float* get(int index) { return entries_[index].values.data(); }
  const Shape& shape(int index) const { return entries_[index].shape; }

 private:
  struct Entry {
    std::string name;
    Shape shape;
    FloatBuffer values;
  };
  std::string names() const;

  std::vector<Entry> entries_;
};

}  // namespace attn

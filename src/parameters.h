// A module's named parameters, loaded from a PyTorch state_dict(): all entries or none, and every
// missing, extra or mis-shaped entry is an error that names it.
#pragma once

#include <string>
#include <vector>

#include "buffer.h"
#include "half.h"
#include "status.h"
#include "tensor.h"

namespace attn {

struct NamedTensor {
  std::string name;
  TensorView tensor;
  WeightDtype dtype = WeightDtype::f32;  // what tensor.data holds: floats, or binary16 or bfloat16 words
};

// A packed entry as loaded: floats, or 16-bit words of `dtype`.
struct LoadedWeight {
  const void* data;
  WeightDtype dtype;
};

class Parameters {
 public:
  // Declares an entry; returns its index for get(). Declared before any load. 16-bit tensors
  // widen into floats, except those given for a `packed` entry (a weight its module packs, in
  // whichever dtype it holds it): these stay as given until then, in weight() (get() is null).
  int declare(std::string name, Shape shape, bool packed = false);

  // Copies every declared entry from `state_dict`. On error nothing changes.
  Status load(const std::vector<NamedTensor>& state_dict);

  // Frees an entry's copy once its module has derived what it needs (its packed weights): get()
  // gives null until the next load.
  void release(int index) { entries_[index].values = Values(); }

  const float* get(int index) const { return entries_[index].values.floats.data(); }
  LoadedWeight weight(int index) const {
    const Values& v = entries_[index].values;
    return v.halves.data() ? LoadedWeight{v.halves.data(), v.dtype} : LoadedWeight{v.floats.data(), WeightDtype::f32};
  }
  float* get(int index) { return entries_[index].values.floats.data(); }
  const Shape& shape(int index) const { return entries_[index].shape; }

 private:
  struct Values {
    FloatBuffer floats;
    Buffer<Half> halves;
    WeightDtype dtype = WeightDtype::f32;  // of halves
  };
  struct Entry {
    std::string name;
    Shape shape;
    bool packed;
    Values values;
  };
  std::string names() const;

  std::vector<Entry> entries_;
};

}  // namespace attn

// What every attention module shares: parameters loaded from a state_dict(), and train/eval mode
// (eval by default: this is an inference library).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "parameters.h"
#include "status.h"

namespace attn {

// Constructor checks every module shares: sizes are positive integers, dropout is in [0, 1).
inline Status check_size(const char* argument, int64_t value) {
  if (value > 0) return Status::success();
  return Status::invalid(argument, "a positive integer", std::to_string(value));
}

inline Status check_dropout(float p) {
  if (p >= 0.0f && p < 1.0f) return Status::success();
  return Status::invalid("dropout", "a number in [0, 1)", number_string(p));
}

// The first failure among `checks`, or success.
inline Status first_failure(std::initializer_list<Status> checks) {
  for (const Status& s : checks)
    if (!s.ok()) return s;
  return Status::success();
}

class Module {
 public:
  virtual ~Module() = default;

  // Loads the parameters, then lets the module prepare them (pack its weights). A refused state
  // dict changes nothing; if preparing fails (out of memory), forward() refuses until a load works.
  Status load_state_dict(const std::vector<NamedTensor>& state_dict) {
    Status s = parameters_.load(state_dict);
    if (!s.ok()) return s;
    s = prepare();
    ready_ = s.ok();
    return s;
  }
  void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }

 protected:
  // Derives what forward() needs from freshly loaded parameters.
  virtual Status prepare() = 0;

  // The error every forward() gives before load_state_dict().
  Status require_loaded(const char* module) const {
    if (ready_) return Status::success();
    return Status::invalid(module, "loadStateDict() before forward()", "no weights loaded");
  }

  Parameters parameters_;
  bool training_ = false;

 private:
  bool ready_ = false;
};

}  // namespace attn

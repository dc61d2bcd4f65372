// Errors travel as values: the core is compiled without exceptions, and no error may cross into
// JS as a C++ exception (each one that escapes leaks C stack).
#pragma once

#include <string>
#include <utility>

namespace attn {

struct Status {
  // Empty `argument` means success. Messages follow PyTorch's habit of naming the argument and
  // both shapes.
  std::string argument;
  std::string expected;
  std::string got;
  bool out_of_memory = false;

  bool ok() const { return argument.empty(); }
  std::string message() const;

  static Status success() { return {}; }
  static Status invalid(std::string argument, std::string expected, std::string got) {
    Status s;
    s.argument = std::move(argument);
    s.expected = std::move(expected);
    s.got = std::move(got);
    return s;
  }
  static Status no_memory(std::string what, std::string bytes) {
    Status s = invalid(std::move(what), "memory for the result and scratch", std::move(bytes));
    s.out_of_memory = true;
    return s;
  }
};

// A number as an error quotes it: JS's names for NaN and the infinities, up to 6 decimals, an
// exponent from 1e12 on. Not std::to_string: its printf float formatting costs 8 KB of wasm.
std::string number_string(double x);

}  // namespace attn

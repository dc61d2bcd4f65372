#include "tensor.h"

#include <cmath>

#include "status.h"

namespace attn {

Shape::Shape(std::initializer_list<int64_t> list) {
  for (int64_t d : list) dims[rank++] = d;
}

int64_t Shape::numel() const { return leading_numel(0); }

int64_t Shape::leading_numel(int trailing) const {
  int64_t n = 1;
  for (int i = 0; i < rank - trailing; ++i) n *= dims[i];
  return n;
}

bool Shape::non_negative() const {
  for (int i = 0; i < rank; ++i)
    if (dims[i] < 0) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i)
    if (a.dims[i] != b.dims[i]) return false;
  return true;
}

Status check_data(const void* data, const Shape& shape, const std::string& argument) {
  if (shape.numel() > 0 && data == nullptr) return Status::invalid(argument, "data", "a null pointer");
  return Status::success();
}

std::string Status::message() const {
  if (ok()) return "";
  if (out_of_memory) return "out of memory: " + argument + " needs " + got;
  return argument + ": expected " + expected + ", got " + got;
}

std::string number_string(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  const double magnitude = std::fabs(x);
  if (magnitude >= 1e12) {
    // Divided down rather than through log10 and pow, whose tables would weigh 5 KB in the page.
    int exponent = 0;
    double mantissa = magnitude;
    for (; mantissa >= 10.0; ++exponent) mantissa /= 10.0;
    return number_string(std::copysign(mantissa, x)) + "e+" + std::to_string(exponent);
  }
  const int64_t millionths = std::llround(magnitude * 1e6);
  std::string s = (x < 0 && millionths > 0 ? "-" : "") + std::to_string(millionths / 1000000);
  if (const int64_t fraction = millionths % 1000000) {
    std::string digits = std::to_string(fraction + 1000000).substr(1);
    digits.erase(digits.find_last_not_of('0') + 1);
    s += "." + digits;
  }
  return s;
}

}  // namespace attn

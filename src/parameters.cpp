#include "parameters.h"

#include <algorithm>
#include <cstring>

namespace attn {

namespace {
std::string entry(const std::string& name) { return "stateDict['" + name + "']"; }
}  // namespace

int Parameters::declare(std::string name, Shape shape, bool packed) {
  entries_.push_back({std::move(name), shape, packed, {}});
  return static_cast<int>(entries_.size()) - 1;
}

std::string Parameters::names() const {
  std::string s;
  for (const Entry& e : entries_) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

Status Parameters::load(const std::vector<NamedTensor>& state_dict) {
  for (const NamedTensor& given : state_dict) {
    const auto match = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == given.name; });
    if (match == entries_.end()) {
      // A whole model's name ends in one of ours after a dot: say which prefix selects the layer.
      const auto suffix = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
        const size_t n = given.name.size(), m = e.name.size();
        return n > m && given.name.compare(n - m, m, e.name) == 0 && given.name[n - m - 1] == '.';
      });
      const std::string hint =
          suffix == entries_.end()
              ? ""
              : "; for one layer of a whole model's names, load with prefix '" +
                    given.name.substr(0, given.name.size() - suffix->name.size()) + "'";
      return Status::invalid(entry(given.name), "no such entry (this module has " + names() + hint + ")",
                             given.tensor.shape.str());
    }
    if (given.tensor.shape != match->shape) return Status::invalid(entry(given.name), match->shape.str(), given.tensor.shape.str());
    Status data = check_data(given.tensor, entry(given.name));
    if (!data.ok()) return data;
  }
  for (const Entry& e : entries_) {
    const auto count = std::count_if(state_dict.begin(), state_dict.end(), [&](const NamedTensor& t) { return t.name == e.name; });
    if (count == 0) return Status::invalid(entry(e.name), e.shape.str(), "a missing entry");
    if (count > 1) return Status::invalid(entry(e.name), "one entry", std::to_string(count) + " entries");
  }
  // Allocate everything before replacing anything, so a failure leaves the old values in place.
  // Every entry is given once (checked above).
  std::vector<Values> fresh(entries_.size());
  for (const NamedTensor& given : state_dict) {
    const size_t i = static_cast<size_t>(
        std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == given.name; }) - entries_.begin());
    const int64_t n = given.tensor.shape.numel();
    const bool words = given.dtype != WeightDtype::f32;
    const bool halves = words && entries_[i].packed;
    Status s = halves ? fresh[i].halves.allocate(n, "parameters") : fresh[i].floats.allocate(n, "parameters");
    if (!s.ok()) return s;
    fresh[i].dtype = given.dtype;
    const Half* from = reinterpret_cast<const Half*>(given.tensor.data);
    if (n == 0) continue;
    if (halves)
      std::memcpy(fresh[i].halves.data(), from, static_cast<size_t>(n) * sizeof(Half));
    else if (words)
      std::transform(from, from + n, fresh[i].floats.data(), [&](Half h) { return widen(h, given.dtype); });
    else
      std::memcpy(fresh[i].floats.data(), given.tensor.data, static_cast<size_t>(n) * sizeof(float));
  }
  for (size_t i = 0; i < entries_.size(); ++i) entries_[i].values = std::move(fresh[i]);
  return Status::success();
}

}  // namespace attn

#include "parameters.h"

#include <algorithm>
#include <cstring>

namespace attn {

namespace {
std::string entry(const std::string& name) { return "stateDict['" + name + "']"; }
}  // namespace

int Parameters::declare(std::string name, Shape shape) {
  entries_.push_back({std::move(name), shape, {}});
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
  std::vector<FloatBuffer> fresh(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    Status s = fresh[i].allocate(entries_[i].shape.numel(), "parameters");
    if (!s.ok()) return s;
  }
  for (const NamedTensor& given : state_dict) {
    const auto index = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == given.name; }) -
                       entries_.begin();
    if (given.tensor.shape.numel() > 0)
      std::memcpy(fresh[index].data(), given.tensor.data, static_cast<size_t>(given.tensor.shape.numel()) * sizeof(float));
  }
  for (size_t i = 0; i < entries_.size(); ++i) entries_[i].values = std::move(fresh[i]);
  return Status::success();
}

}  // namespace attn

#include "graph/name_index.h"

#include "absl/hash/hash.h"
#include "graph/graph.h"

namespace memonger::graph {

size_t NameIndex::NameHash::operator()(int32_t id) const {
  return absl::Hash<absl::string_view>{}(values[id].name);
}

size_t NameIndex::NameHash::operator()(absl::string_view name) const {
  return absl::Hash<absl::string_view>{}(name);
}

bool NameIndex::NameEq::operator()(int32_t a, int32_t b) const {
  return a == b || values[a].name == values[b].name;
}

bool NameIndex::NameEq::operator()(int32_t a, absl::string_view b) const {
  return values[a].name == b;
}

NameIndex::NameIndex(const Value* values, size_t capacity)
    : first_(0, NameHash{values}, NameEq{values}) {
  first_.reserve(capacity);  // room for `capacity` names (the constructor's count is of slots)
}

int32_t NameIndex::Add(int32_t id) {
  auto [at, inserted] = first_.insert(id);
  if (inserted) return 0;
  const int32_t first = *at;
  std::vector<int32_t>& versions = several_[first];
  if (versions.empty()) versions.push_back(first);
  versions.push_back(id);
  return static_cast<int32_t>(versions.size()) - 1;
}

absl::Span<const int32_t> NameIndex::Versions(absl::string_view name) const {
  auto at = first_.find(name);
  if (at == first_.end()) return {};
  if (!several_.empty()) {
    if (auto it = several_.find(*at); it != several_.end()) return absl::MakeConstSpan(it->second);
  }
  return absl::Span<const int32_t>(&*at, 1);
}

}  // namespace memonger::graph

#include "graph/attribute.h"

namespace memonger::graph {

const Attribute* AttributeView::Find(absl::string_view name) const {
  for (const Attribute& a : attrs_) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::optional<int64_t> AttributeView::GetInt(absl::string_view name) const {
  const Attribute* a = Find(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* i = std::get_if<int64_t>(&a->data)) return *i;
  return std::nullopt;
}

std::optional<double> AttributeView::GetFloat(absl::string_view name) const {
  const Attribute* a = Find(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* f = std::get_if<double>(&a->data)) return *f;
  if (const auto* i = std::get_if<int64_t>(&a->data)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<std::string> AttributeView::GetString(absl::string_view name) const {
  const Attribute* a = Find(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&a->data)) return *s;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> AttributeView::GetInts(absl::string_view name) const {
  const Attribute* a = Find(name);
  if (a == nullptr) return std::nullopt;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&a->data)) return *v;
  if (const auto* i = std::get_if<int64_t>(&a->data)) return std::vector<int64_t>{*i};
  // A Caffe2 Argument with an empty `ints` list carries no field at all.
  if (std::holds_alternative<std::monostate>(a->data)) return std::vector<int64_t>{};
  return std::nullopt;
}

}  // namespace memonger::graph

#include "graph/op_schema.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace memonger::graph {

absl::Status ShapeContext::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(op_type, " op '", op_name, "': ", message));
}

const OpSchemaTable& OpSchemaTable::Builtin() {
  static const OpSchemaTable* const kTable = [] {
    auto* table = new OpSchemaTable();
    AddElementwiseSchemas(*table);
    AddTensorSchemas(*table);
    AddNnSchemas(*table);
    AddLossSchemas(*table);
    AddGradientSchemas(*table);
    AddAttentionSchemas(*table);
    return table;
  }();
  return *kTable;
}

const OpSchema* OpSchemaTable::Find(absl::string_view type) const {
  auto it = schemas_.find(type);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpSchemaTable::Types() const {
  std::vector<std::string> types;
  types.reserve(schemas_.size());
  for (const auto& [type, schema] : schemas_) types.push_back(type);
  std::sort(types.begin(), types.end());
  return types;
}

void OpSchemaTable::Add(OpSchema schema) {
  std::string type = schema.type;
  schemas_.insert_or_assign(std::move(type), std::move(schema));
}

}  // namespace memonger::graph

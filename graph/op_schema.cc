#include "graph/op_schema.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "util/check.h"

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

void OpSchemaTable::SetTypedInput(const std::vector<absl::string_view>& types, int slot,
                                  std::vector<DataType> allowed,
                                  absl::string_view unless_attr) {
  MG_CHECK(!allowed.empty() && slot >= 0);
  for (absl::string_view type : types) {
    auto it = schemas_.find(type);
    MG_CHECK(it != schemas_.end());
    it->second.typed_inputs.push_back({slot, allowed, std::string(unless_attr)});
  }
}

const std::vector<DataType>* OpSchema::AllowedInputTypes(int slot,
                                                         const AttributeView& attrs) const {
  for (const TypedInput& typed : typed_inputs) {
    if (typed.slot != slot) continue;
    if (!typed.unless_attr.empty()) {
      if (attrs.GetInt(typed.unless_attr).value_or(0) != 0) continue;
    }
    return &typed.allowed;
  }
  return nullptr;
}

}  // namespace memonger::graph

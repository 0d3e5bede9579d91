#include "graph/onnx/input_types.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "onnx/defs/schema.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

// Which type an untyped input takes when its readers allow several, most likely first: what
// exporters feed (float activations, int64 indices and shapes), then the rest.
constexpr DataType kPreference[] = {
    DataType::kFloat32, DataType::kInt64,   DataType::kInt32,   DataType::kBool,
    DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64, DataType::kInt8,
    DataType::kUInt8,   DataType::kInt16};

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// "tensor(float)" -> kFloat32; nullopt for what we cannot hold (strings, sequences, uint64...).
std::optional<DataType> FromOnnxTypeString(const std::string& text) {
  absl::string_view inner = text;
  if (!absl::ConsumePrefix(&inner, "tensor(") || !absl::ConsumeSuffix(&inner, ")")) {
    return std::nullopt;
  }
  absl::StatusOr<DataType> dtype = ParseDataType(inner);  // ONNX's names are among ours
  if (!dtype.ok()) return std::nullopt;
  return *dtype;
}

std::string NodeLabel(const onnx::NodeProto& node, int index) {
  if (node.name().empty()) return absl::StrCat(node.op_type(), " node #", index);
  return absl::StrCat(node.op_type(), " node '", util::Quote(node.name()), "'");
}

std::string TypeList(const std::set<DataType>& types) {
  std::vector<std::string> names;
  for (DataType t : types) names.emplace_back(DataTypeName(t));
  return names.empty() ? "no type we can plan" : absl::StrJoin(names, ", ");
}

// The types the schema of `node` allows at input `slot`; nullopt when the node has no schema
// here (a custom domain) or the slot is past its formal inputs.
std::optional<std::set<DataType>> AllowedAt(const onnx::NodeProto& node, int slot,
                                           const absl::flat_hash_map<std::string, int>& opsets) {
  const std::string domain = IsDefaultDomain(node.domain()) ? "" : node.domain();
  auto opset = opsets.find(domain);
  if (opset == opsets.end()) return std::nullopt;
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second,
                                                                domain);
  if (schema == nullptr || schema->inputs().empty()) return std::nullopt;
  const auto& formals = schema->inputs();
  const onnx::OpSchema::FormalParameter* formal = nullptr;
  if (slot < static_cast<int>(formals.size())) {
    formal = &formals[slot];
  } else if (formals.back().GetOption() == onnx::OpSchema::Variadic) {
    formal = &formals.back();
  } else {
    return std::nullopt;
  }
  std::set<DataType> allowed;
  for (const std::string* type : formal->GetTypes()) {
    if (std::optional<DataType> t = FromOnnxTypeString(*type); t.has_value()) allowed.insert(*t);
  }
  return allowed;
}

// Per value name, the (node, input slot) pairs that read it, in node order.
using Readers = absl::flat_hash_map<std::string, std::vector<std::pair<int, int>>>;

absl::StatusOr<DataType> FromReaders(const onnx::GraphProto& graph, const std::string& name,
                                     const Readers& readers,
                                     const absl::flat_hash_map<std::string, int>& opsets) {
  std::optional<std::set<DataType>> common;
  std::string first_reader;
  std::set<DataType> first_allowed;
  auto found = readers.find(name);
  if (found == readers.end()) return DataType::kFloat32;  // nothing constrains it
  for (const auto& [n, slot] : found->second) {
    const onnx::NodeProto& node = graph.node(n);
    std::optional<std::set<DataType>> allowed = AllowedAt(node, slot, opsets);
    if (!allowed.has_value()) continue;
    const std::string label = absl::StrCat(NodeLabel(node, n), " (input ", slot, ")");
    if (!common.has_value()) {
      common = *allowed;
      first_reader = label;
      first_allowed = *allowed;
    } else {
      std::set<DataType> both;
      std::set_intersection(common->begin(), common->end(), allowed->begin(), allowed->end(),
                            std::inserter(both, both.begin()));
      common = std::move(both);
    }
    if (common->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph input '", util::Quote(name),
          "' declares no type, and its readers allow no common one: ", first_reader, " allows ",
          TypeList(first_allowed), "; ", label, " allows ", TypeList(*allowed),
          ". Pass --input-type ", name, "=DTYPE"));
    }
  }
  if (!common.has_value()) return DataType::kFloat32;  // nothing constrains it
  for (DataType t : kPreference) {
    if (common->count(t) > 0) return t;
  }
  return *common->begin();
}

}  // namespace

absl::Status TypeGraphInputs(onnx::GraphProto& graph,
                             const absl::flat_hash_map<std::string, int>& opsets,
                             const absl::flat_hash_set<std::string>& params,
                             const std::map<std::string, DataType>& input_types) {
  absl::flat_hash_set<std::string> graph_inputs;
  for (const onnx::ValueInfoProto& vi : graph.input()) graph_inputs.insert(vi.name());
  for (const auto& entry : input_types) {
    const std::string& name = entry.first;
    if (params.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input-type names '", util::Quote(name),
          "', which is an initializer (its data fixes its type), not a graph input"));
    }
    if (!graph_inputs.contains(name)) {
      std::vector<std::string> names;
      for (const onnx::ValueInfoProto& vi : graph.input()) names.push_back(vi.name());
      return absl::InvalidArgumentError(absl::StrCat(
          "--input-type names '", util::Quote(name), "', which is not a graph input (inputs: ",
          names.empty() ? "none" : util::Quote(absl::StrJoin(names, ", ")), ")"));
    }
  }
  Readers readers;  // built once: O(node inputs)
  for (int n = 0; n < graph.node_size(); ++n) {
    for (int slot = 0; slot < graph.node(n).input_size(); ++slot) {
      readers[graph.node(n).input(slot)].emplace_back(n, slot);
    }
  }
  for (onnx::ValueInfoProto& vi : *graph.mutable_input()) {
    if (params.contains(vi.name())) continue;
    const onnx::TypeProto::ValueCase kind = vi.type().value_case();
    if (kind != onnx::TypeProto::kTensorType && kind != onnx::TypeProto::VALUE_NOT_SET) {
      continue;  // a sequence or map: refused later with its own message
    }
    DataType dtype = DataType::kUndefined;
    if (auto it = input_types.find(vi.name()); it != input_types.end()) {
      dtype = it->second;
    } else if (kind == onnx::TypeProto::kTensorType && vi.type().tensor_type().elem_type() != 0) {
      continue;  // declared
    } else {
      MG_ASSIGN_OR_RETURN(dtype, FromReaders(graph, vi.name(), readers, opsets));
    }
    vi.mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(dtype));
  }
  return absl::OkStatus();
}

}  // namespace memonger::graph

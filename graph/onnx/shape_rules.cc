#include "graph/onnx/shape_rules.h"

#include "absl/strings/str_cat.h"
#include "graph/einsum.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph::onnx_fold {
namespace {

// The element type of `name` as any list of the graph declares it; 0 when none does.
int32_t ElementType(const onnx::GraphProto& graph, const std::string& name) {
  for (const onnx::TensorProto& t : graph.initializer()) {
    if (t.name() == name) return t.data_type();
  }
  for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      if (vi.name() == name && vi.type().tensor_type().elem_type() != 0) {
        return vi.type().tensor_type().elem_type();
      }
    }
  }
  return 0;
}

void SetDims(onnx::GraphProto& graph, const std::string& name, int32_t fallback_type,
             const std::vector<int64_t>& dims) {
  onnx::ValueInfoProto* entry = nullptr;
  for (onnx::ValueInfoProto& vi : *graph.mutable_value_info()) {
    if (vi.name() == name) entry = &vi;
  }
  if (entry == nullptr) {
    entry = graph.add_value_info();
    entry->set_name(name);
  }
  onnx::TypeProto_Tensor* tensor = entry->mutable_type()->mutable_tensor_type();
  if (tensor->elem_type() == 0) tensor->set_elem_type(fallback_type);
  onnx::TensorShapeProto* shape = tensor->mutable_shape();
  shape->clear_dim();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

std::string NodeName(const onnx::NodeProto& node, int index) {
  return absl::StrCat(node.op_type(), " node '",
                      util::Quote(node.name().empty() ? absl::StrCat("#", index) : node.name()),
                      "'");
}

}  // namespace

absl::StatusOr<bool> ApplyShapeRules(onnx::GraphProto& graph, const std::vector<int>& frontier,
                                     const StaticDimsOf& static_dims) {
  bool typed = false;
  for (int i : frontier) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.op_type() != "Einsum" || node.output_size() != 1 || node.output(0).empty()) continue;
    std::vector<std::vector<int64_t>> dims;
    bool known = true;
    for (const std::string& in : node.input()) {
      const std::vector<int64_t>* d = static_dims(in);
      if (d == nullptr) known = false;
      else dims.push_back(*d);
    }
    if (!known || static_dims(node.output(0)) != nullptr) continue;
    std::string equation;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == "equation") equation = a.s();
    }
    absl::StatusOr<EinsumSpec> spec = ResolveEinsum(equation, dims);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(NodeName(node, i), ": ", spec.status().message()));
    }
    SetDims(graph, node.output(0), ElementType(graph, node.input(0)), spec->output_dims);
    typed = true;
  }
  return typed;
}

}  // namespace memonger::graph::onnx_fold

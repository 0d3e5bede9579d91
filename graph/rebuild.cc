#include "graph/rebuild.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace memonger::graph {

Declaration DeclarationOf(const TensorType& type) {
  Declaration d;
  d.dtype = type.dtype;
  DeclaredDims dims;
  dims.reserve(type.dims.size());
  for (int64_t size : type.dims) dims.push_back(DeclaredDim{size, ""});
  d.dims = std::move(dims);
  return d;
}

void CopyInterface(const Graph& graph, GraphBuilder& builder) {
  for (ValueId id : graph.inputs()) builder.AddExternalInput(graph.value(id).name);
  for (ValueId id : graph.outputs()) builder.AddExternalOutput(graph.value(id).name);
  for (ValueId id : graph.losses()) builder.AddLoss(graph.value(id).name);
  for (const auto& [param, grad] : graph.param_grads()) {
    builder.AddParamGrad(graph.value(param).name, graph.value(grad).name);
  }
  CopyDeclarations(graph, builder);
}

void CopyDeclarations(const Graph& graph, GraphBuilder& builder) {
  builder.SetStaticData(graph.shared_static_data());
  builder.SetDataDependentSizes(graph);
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const Value& v = graph.value(id);
    if (v.role == Role::kParam || v.role == Role::kConstant || v.role == Role::kWorkspace) {
      builder.DeclareRole(v.name, v.role);
    }
    // A blob written several times (a gradient summed in place) is declared once, at its first
    // version, where every version has the same type.
    const absl::Span<const ValueId> versions = graph.Versions(v.name);
    if (!v.type.has_value() || versions.front() != id) continue;
    bool same = true;
    for (ValueId other : versions) {
      const Value& o = graph.value(other);
      same = same && o.type.has_value() && *o.type == *v.type && o.alignment == v.alignment;
    }
    if (same) builder.Declare(v.name, DeclarationOf(*v.type), v.alignment);
  }
}

void RestoreSymbolicInputs(const Graph& source, Graph& rebuilt) {
  for (ValueId id = 0; id < rebuilt.num_values(); ++id) {
    if (rebuilt.value(id).producer != kNone) continue;
    const std::optional<ValueId> before = source.FindValue(rebuilt.value(id).name);
    if (!before.has_value()) continue;
    const Declaration& declared = source.value(*before).declared;
    if (!declared.dims) continue;
    const bool symbolic = std::any_of(declared.dims->begin(), declared.dims->end(),
                                      [](const DeclaredDim& d) { return !d.symbol.empty(); });
    if (symbolic) rebuilt.mutable_value(id).declared.dims = *declared.dims;
  }
}

OpSpec SpecOf(const Graph& graph, const Op& op) {
  OpSpec spec;
  spec.name = op.name;
  spec.type = op.type;
  spec.domain = op.domain;
  for (ValueId v : op.inputs) spec.inputs.push_back(graph.value(v).name);
  for (ValueId v : op.outputs) spec.outputs.push_back(graph.value(v).name);
  for (ValueId v : op.control_inputs) spec.control_inputs.push_back(graph.value(v).name);
  spec.attrs = op.attrs;
  spec.device = op.device;
  spec.engine = op.engine;
  spec.is_gradient_op = op.is_gradient_op;
  spec.view = op.view;
  return spec;
}

}  // namespace memonger::graph

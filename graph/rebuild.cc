#include "graph/rebuild.h"

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
  builder.SetStaticData(graph.shared_static_data());
  for (ValueId id : graph.inputs()) builder.AddExternalInput(graph.value(id).name);
  for (ValueId id : graph.outputs()) builder.AddExternalOutput(graph.value(id).name);
  for (ValueId id : graph.losses()) builder.AddLoss(graph.value(id).name);
  for (const auto& [param, grad] : graph.param_grads()) {
    builder.AddParamGrad(graph.value(param).name, graph.value(grad).name);
  }
  for (const Value& v : graph.values()) {
    if (v.role == Role::kParam || v.role == Role::kConstant || v.role == Role::kWorkspace) {
      builder.DeclareRole(v.name, v.role);
    }
    if (v.type.has_value() && graph.Versions(v.name).size() == 1) {
      builder.Declare(v.name, DeclarationOf(*v.type), v.alignment);
    }
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

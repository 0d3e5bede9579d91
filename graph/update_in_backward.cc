#include "graph/update_in_backward.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/attribute.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

struct Update {
  ValueId param;
  ValueId grad;
};

// A name no value of `graph` has, from `base`.
std::string FreshName(const Graph& graph, const std::string& base) {
  std::string name = base;
  for (int k = 1; graph.FindValue(name).has_value(); ++k) name = absl::StrCat(base, "_", k);
  return name;
}

// One op of an update, part of the backward pass.
OpSpec UpdateOp(std::string type, std::string name, std::vector<std::string> inputs,
                std::string output, Device device) {
  OpSpec op;
  op.type = std::move(type);
  op.name = std::move(name);
  op.inputs = std::move(inputs);
  op.outputs = {std::move(output)};
  op.device = device;
  op.is_gradient_op = true;
  return op;
}

}  // namespace

absl::StatusOr<Graph> UpdateInBackward(const Graph& training, double learning_rate) {
  if (!std::isfinite(learning_rate) || learning_rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the learning rate must be finite and > 0, not ", learning_rate));
  }
  if (training.param_grads().empty()) {
    return absl::InvalidArgumentError(
        "updating params in the backward pass needs a training net that pairs params with "
        "gradients (--mode training)");
  }
  // After which op each update goes: the latest of its gradient's producer, its gradient's
  // readers and its param's readers.
  std::map<OpId, std::vector<Update>> after;
  std::vector<bool> updated_grad(training.num_values(), false);
  for (const auto& [param, grad] : training.param_grads()) {
    const Value& p = training.value(param);
    const Value& g = training.value(grad);
    if (training.Versions(p.name).size() != 1 || p.producer != kNone) {
      return absl::InvalidArgumentError(absl::StrCat(
          "param ", p.DisplayName(), " is written by an op of the net: it cannot also be "
          "updated in the backward pass"));
    }
    if (g.producer == kNone || training.FindValue(g.name) != grad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient ", g.DisplayName(), " of param ", p.DisplayName(),
          " is not the latest value an op of the net makes under its name"));
    }
    if (!g.type.has_value() || !p.type.has_value() || g.type->dtype != p.type->dtype ||
        g.type->dims != p.type->dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gradient ", g.DisplayName(), " has not the type of its param ", p.DisplayName()));
    }
    const absl::Span<const OpId> readers = training.consumers(param);
    const Device grad_device = training.op(g.producer).device;
    if (!readers.empty() && training.op(readers.front()).device != grad_device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "param ", p.DisplayName(), " lives on ",
          DeviceToString(training.op(readers.front()).device), " but its gradient ",
          g.DisplayName(), " on ", DeviceToString(grad_device),
          ": an update in the backward pass needs both on one device"));
    }
    OpId last = g.producer;
    for (OpId reader : readers) last = std::max(last, reader);
    // The gradient is scaled in place: its other readers (Div's rule reads dA for dB) first.
    for (OpId reader : training.consumers(grad)) last = std::max(last, reader);
    after[last].push_back({param, grad});
    updated_grad[grad] = true;
  }

  GraphBuilder out(training.name());
  CopyDeclarations(training, out);
  for (ValueId id : training.inputs()) out.AddExternalInput(training.value(id).name);
  for (ValueId id : training.outputs()) {
    if (!updated_grad[id]) out.AddExternalOutput(training.value(id).name);
  }
  for (const auto& [param, grad] : training.param_grads()) {
    out.AddExternalOutput(training.value(param).name);
  }
  for (ValueId id : training.losses()) out.AddLoss(training.value(id).name);

  // One learning-rate scalar per dtype and device, made before the first update that reads it.
  std::map<std::pair<DataType, std::string>, std::string> rates;
  for (OpId id = 0; id < static_cast<OpId>(training.ops().size()); ++id) {
    out.AddOp(SpecOf(training, training.op(id)));
    const auto it = after.find(id);
    if (it == after.end()) continue;
    for (const Update& u : it->second) {
      const Value& p = training.value(u.param);
      const Value& g = training.value(u.grad);
      const DataType dtype = p.type->dtype;
      // On the device of the gradient and the param (checked above to be one).
      const Device device = training.op(g.producer).device;
      const std::string where = device.type == 0 ? "" : "_" + DeviceToString(device);
      auto [rate, inserted] = rates.try_emplace(std::make_pair(dtype, where));
      if (inserted) {
        rate->second =
            FreshName(training, absl::StrCat("learning_rate_", DataTypeName(dtype), where));
        OpSpec fill = UpdateOp("ConstantFill", rate->second, {}, rate->second, device);
        fill.attrs = {Attribute{"value", learning_rate},
                      Attribute{"dtype", std::string(DataTypeName(dtype))}};
        out.AddOp(std::move(fill));
      }
      // In place by name: every planner then counts the step in the gradient's bytes, as the
      // recomputation model (which plans without in-place reuse) does too.
      out.AddOp(UpdateOp("Mul", absl::StrCat(g.name, "_step"), {g.name, rate->second}, g.name,
                         device));
      out.AddOp(UpdateOp("Sub", absl::StrCat(p.name, "_update"), {p.name, g.name}, p.name,
                         device));
    }
  }
  MG_ASSIGN_OR_RETURN(Graph graph, std::move(out).Build());
  MG_RETURN_IF_ERROR(InferShapes(graph, ShapeBindings{}));
  RestoreSymbolicInputs(training, graph);
  return graph;
}

}  // namespace memonger::graph

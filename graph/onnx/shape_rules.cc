#include "graph/onnx/shape_rules.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/control_regions.h"
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

int64_t IntAttribute(const onnx::NodeProto& node, const char* name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return a.i();
  }
  return 0;
}

std::string DimsText(const std::vector<int64_t>* dims) {
  if (dims == nullptr) return "unknown";
  return absl::StrCat("[", absl::StrJoin(*dims, ","), "]");
}

// A control-flow marker's outputs (graph/control_regions.h): the types of what it copies.
// True when it typed any; Unimplemented where an If's branches, or a Loop's iterations, give a
// value two shapes (a flat plan of one iteration holds one).
absl::StatusOr<bool> TypeMarker(onnx::GraphProto& graph, const onnx::NodeProto& node, int index,
                                const StaticDimsOf& static_dims) {
  // (output, the input it copies, the input that must agree) triples.
  struct Copy {
    std::string output, from, agrees;
  };
  std::vector<Copy> copies;
  std::vector<std::pair<std::string, int32_t>> scalars;  // (output, element type)
  const int outputs = node.output_size();
  if (node.op_type() == kIfEnd && node.input_size() == 1 + 2 * outputs) {
    for (int k = 0; k < outputs; ++k) {
      copies.push_back({node.output(k), node.input(1 + k), node.input(1 + outputs + k)});
    }
  } else if (node.op_type() == kLoopBegin && outputs >= 2) {
    const int given = static_cast<int>(IntAttribute(node, "has_trip_count") != 0) +
                      static_cast<int>(IntAttribute(node, "has_condition") != 0);
    if (node.input_size() != given + outputs - 2) return false;
    scalars.emplace_back(node.output(0), onnx::TensorProto::INT64);
    scalars.emplace_back(node.output(1), onnx::TensorProto::BOOL);
    for (int k = 2; k < outputs; ++k) {
      copies.push_back({node.output(k), node.input(given + k - 2), node.input(given + k - 2)});
    }
  } else if (node.op_type() == kLoopEnd) {
    const int m = IntAttribute(node, "has_trip_count") != 0 ? 1 : 0;
    if (node.input_size() < m + 3 + 2 * outputs) return false;
    for (int k = 0; k < outputs; ++k) {
      // out_k (what the last iteration computed) and in_k (what the first one read).
      copies.push_back({node.output(k), node.input(m + 3 + outputs + k), node.input(m + 2 + k)});
    }
  } else {
    return false;
  }
  bool typed = false;
  for (const auto& [output, elem] : scalars) {
    if (static_dims(output) != nullptr) continue;
    SetDims(graph, output, elem, {});
    typed = true;
  }
  for (const Copy& c : copies) {
    const std::vector<int64_t>* from = static_dims(c.from);
    const std::vector<int64_t>* agrees = static_dims(c.agrees);
    if (from == nullptr || agrees == nullptr || static_dims(c.output) != nullptr) continue;
    const int32_t type = ElementType(graph, c.from);
    if (*from != *agrees || type != ElementType(graph, c.agrees)) {
      const bool loop = node.op_type() == kLoopEnd;
      return absl::UnimplementedError(absl::StrCat(
          NodeName(node, index), ": '", c.output, "' is ", DimsText(from), " from ",
          loop ? "an iteration" : "the then-branch", " ('", c.from, "') but ", DimsText(agrees),
          loop ? " when the iteration begins ('" : " from the else-branch ('", c.agrees,
          "'), or of another element type; a value of ",
          loop ? "a Loop counted at run time must keep its type from one iteration to the next"
               : "an If decided at run time must have one type whichever branch runs"));
    }
    SetDims(graph, c.output, type, *from);
    typed = true;
  }
  return typed;
}

}  // namespace

absl::StatusOr<bool> ApplyShapeRules(onnx::GraphProto& graph, const std::vector<int>& frontier,
                                     const StaticDimsOf& static_dims) {
  bool typed = false;
  for (int i : frontier) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.domain() == kControlDomain) {
      MG_ASSIGN_OR_RETURN(const bool marker_typed, TypeMarker(graph, node, i, static_dims));
      typed = typed || marker_typed;
      continue;
    }
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

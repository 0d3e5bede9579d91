#include "graph/onnx/onnx_import.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/einsum.h"
#include "graph/onnx/control_flow.h"
#include "graph/onnx/input_types.h"
#include "graph/onnx/onnx_fold.h"
#include "graph/onnx/tensor_data_check.h"
#include "graph/onnx/tensor_decode.h"
#include "graph/shape_inference.h"
#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"
#include "util/file_io.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using Dims = std::vector<int64_t>;

// libonnx messages can be long (every failing node); messages keep their start.
constexpr size_t kMaxQuotedMessage = 600;

std::string Quote(const std::string& text) {
  if (text.size() <= kMaxQuotedMessage) return text;
  return absl::StrCat(text.substr(0, kMaxQuotedMessage), "...");
}

// "Reshape node 'r1'" or "Reshape node #3" for unnamed nodes.
std::string NodeLabel(const onnx::NodeProto& node, int index) {
  if (!node.name().empty()) return absl::StrCat(node.op_type(), " node '", node.name(), "'");
  return absl::StrCat(node.op_type(), " node #", index);
}

bool IsDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

std::string ElementTypeName(int32_t elem_type) {
  const std::string name =
      onnx::TensorProto::DataType_IsValid(elem_type)
          ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type))
          : std::string("?");
  return absl::StrCat(name, " (", elem_type, ")");
}

std::string TypeCaseName(const onnx::TypeProto& type) {
  switch (type.value_case()) {
    case onnx::TypeProto::kTensorType: return "a tensor";
    case onnx::TypeProto::kSequenceType: return "a sequence";
    case onnx::TypeProto::kMapType: return "a map";
    case onnx::TypeProto::kOptionalType: return "an optional";
    case onnx::TypeProto::kSparseTensorType: return "a sparse tensor";
    case onnx::TypeProto::kOpaqueType: return "an opaque value";
    default: return "of no type";
  }
}

// ---------------------------------------------------------------------------------------------
// Refusals that do not depend on shapes.

absl::Status CheckSupported(const onnx::ModelProto& model) {
  const onnx::GraphProto& graph = model.graph();
  int opset = 0;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (IsDefaultDomain(o.domain())) opset = static_cast<int>(o.version());
  }
  MG_RETURN_IF_ERROR(onnx_fold::CheckControlFlowOps(graph, opset));
  if (graph.sparse_initializer_size() > 0) {
    return absl::UnimplementedError(absl::StrCat("sparse initializer '",
                                                 graph.sparse_initializer(0).values().name(),
                                                 "' is not supported (dense tensors only)"));
  }
  absl::flat_hash_set<std::string> imported;
  for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
    imported.insert(IsDefaultDomain(opset.domain()) ? "" : opset.domain());
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const std::string domain = IsDefaultDomain(node.domain()) ? "" : node.domain();
    if (imported.contains(domain)) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        NodeLabel(node, i), " is of domain '", node.domain(),
        "', which the model's opset_import does not import",
        domain.empty() ? " (the default ONNX domain needs an opset version)" : ""));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Preparing the working copy.

// An Einsum equation's syntax (graph/einsum.h), checked before libonnx sees it: libonnx leaves a
// malformed equation's output shape unknown, which would read as a data-dependent shape.
absl::Status CheckEinsumEquation(const onnx::NodeProto& node, int index) {
  std::string equation;
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "equation") equation = a.s();
  }
  const absl::Status s = CheckEinsumSyntax(equation, node.input_size());
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(NodeLabel(node, index), ": ", s.message()));
}

// Constant inputs that make an op meaningless, which libonnx's shape functions let through with
// a made-up shape (Range with a constant delta of 0 was typed int64[0]).
absl::Status CheckConstantOperands(const onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, const onnx::TensorProto*> constants;
  for (const onnx::TensorProto& t : graph.initializer()) constants[t.name()] = &t;
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1) continue;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.name() == "value" && a.has_t()) constants[node.output(0)] = &a.t();
    }
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.op_type() == "Einsum") MG_RETURN_IF_ERROR(CheckEinsumEquation(node, i));
    if (node.op_type() != "Range" || node.input_size() != 3) continue;
    auto it = constants.find(node.input(2));
    if (it == constants.end()) continue;
    const std::optional<onnx_fold::ConstTensor> delta = onnx_fold::TensorFromProto(*it->second);
    if (!delta.has_value() || delta->size() != 1) continue;
    const bool zero = delta->is_real() ? delta->reals[0] == 0.0 : delta->ints[0] == 0;
    if (zero) {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeLabel(node, i), ": delta '", node.input(2), "' is 0: the range has no end"));
    }
  }
  return absl::OkStatus();
}

// Names and single assignment, checked before libonnx sees the graph (libonnx's inference
// assumes a well-formed graph: an undefined input can crash it).
absl::Status CheckStructure(const onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, std::string> defined;  // name -> what defines it
  for (const onnx::TensorProto& t : graph.initializer()) {
    if (t.name().empty()) return absl::InvalidArgumentError("an initializer has an empty name");
    MG_RETURN_IF_ERROR(CheckTensorData(t, absl::StrCat("initializer '", t.name(), "'")));
    defined.emplace(t.name(), absl::StrCat("initializer '", t.name(), "'"));
  }
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    if (vi.name().empty()) return absl::InvalidArgumentError("a graph input has an empty name");
    defined.emplace(vi.name(), absl::StrCat("graph input '", vi.name(), "'"));
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.op_type().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("node #", i, " ('", node.name(),
                                                     "') has no op type"));
    }
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_t()) {
        MG_RETURN_IF_ERROR(CheckTensorData(
            a.t(), absl::StrCat(NodeLabel(node, i), ": attribute '", a.name(), "'")));
      }
    }
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;
      auto [it, inserted] = defined.emplace(out, NodeLabel(node, i));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            NodeLabel(node, i), " writes '", out, "', which ", it->second,
            " already defines (ONNX values are assigned once)"));
      }
    }
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    std::vector<std::string> reads(node.input().begin(), node.input().end());
    for (std::string& in : onnx_fold::OuterReads(node)) reads.push_back(std::move(in));
    for (const std::string& in : reads) {
      if (!in.empty() && !defined.contains(in)) {
        return absl::InvalidArgumentError(absl::StrCat(
            NodeLabel(node, i), " reads '", in,
            "', which no node produces and which is neither a graph input nor an initializer"));
      }
    }
  }
  absl::flat_hash_set<std::string> names;
  for (const auto& [name, what] : defined) names.insert(name);
  MG_RETURN_IF_ERROR(onnx_fold::CheckSubgraphScopes(graph, names));
  for (const auto* list : {&graph.output(), &graph.value_info()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      if (vi.name().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a graph ", list == &graph.output() ? "output" : "value_info entry",
            " has an empty name"));
      }
    }
  }
  for (const onnx::ValueInfoProto& vi : graph.output()) {
    if (!defined.contains(vi.name())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", vi.name(),
          "' is produced by no node and is neither a graph input nor an initializer"));
    }
  }
  return absl::OkStatus();
}

// Stable topological order of the nodes (ties by file position); nodes of valid ONNX are already
// in such an order. InvalidArgument naming a node on a cycle.
absl::Status SortNodes(onnx::GraphProto& graph) {
  const int n = graph.node_size();
  absl::flat_hash_map<std::string, int> producer;
  for (int i = 0; i < n; ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty()) producer.emplace(out, i);
    }
  }
  bool sorted = true;
  std::vector<std::vector<int>> successors(n);
  std::vector<int> indegree(n, 0);
  for (int i = 0; i < n; ++i) {
    // An If reads what its branches read from this scope as well as its condition.
    std::vector<std::string> reads(graph.node(i).input().begin(), graph.node(i).input().end());
    for (std::string& in : onnx_fold::OuterReads(graph.node(i))) reads.push_back(std::move(in));
    for (const std::string& in : reads) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end() || it->second == i) continue;
      successors[it->second].push_back(i);
      ++indegree[i];
      if (it->second > i) sorted = false;
    }
  }
  if (sorted) return absl::OkStatus();
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int s : successors[i]) {
      if (--indegree[s] == 0) ready.push(s);
    }
  }
  if (static_cast<int>(order.size()) != n) {
    // Walk back from a node left over through left-over producers: after n steps the walk is
    // on a cycle.
    int v = 0;
    while (indegree[v] == 0) ++v;
    for (int step = 0; step < n; ++step) {
      for (const std::string& in : graph.node(v).input()) {
        auto it = producer.find(in);
        if (!in.empty() && it != producer.end() && indegree[it->second] > 0) {
          v = it->second;
          break;
        }
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the graph has a cycle through ", NodeLabel(graph.node(v), v)));
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i : order) *nodes.Add() = graph.node(i);
  graph.mutable_node()->Swap(&nodes);
  return absl::OkStatus();
}

// Declared shape -> our declaration (symbols kept). nullopt dims when a dim is neither a number
// nor a symbol, or no shape is declared.
Declaration DeclarationOf(const onnx::TypeProto& type) {
  Declaration d;
  if (!type.has_tensor_type()) return d;
  auto dtype = DataTypeFromProtoNumber(type.tensor_type().elem_type());
  if (dtype.ok()) d.dtype = *dtype;
  if (!type.tensor_type().has_shape()) return d;
  DeclaredDims dims;
  for (const auto& dim : type.tensor_type().shape().dim()) {
    if (dim.has_dim_value()) {
      dims.push_back({dim.dim_value(), ""});
    } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
      dims.push_back({0, dim.dim_param()});
    } else {
      return d;
    }
  }
  d.dims = std::move(dims);
  return d;
}

// Applies --input-shape and --dim. Symbols a bound input declares are bound by its shape too,
// so that `--input-shape x=2,16` also fixes N in other values declared [N, ...].
absl::Status ApplyBindings(onnx::GraphProto& graph, const absl::flat_hash_set<std::string>& params,
                           const ShapeBindings& bindings) {
  // A --dim for a symbol the model does not have is a mistake, refused before anything binds.
  std::set<std::string> model_symbols;
  for (const auto* list : {&graph.input(), &graph.output(), &graph.value_info()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
      for (const auto& dim : vi.type().tensor_type().shape().dim()) {
        if (dim.has_dim_param() && !dim.dim_param().empty()) model_symbols.insert(dim.dim_param());
      }
    }
  }
  MG_RETURN_IF_ERROR(CheckDimsUsed(model_symbols, bindings));
  SymbolSizes symbols(bindings);
  absl::flat_hash_set<std::string> bound_inputs;
  for (const auto& [name, dims] : bindings.inputs) {
    onnx::ValueInfoProto* input = nullptr;
    for (onnx::ValueInfoProto& vi : *graph.mutable_input()) {
      if (vi.name() == name) input = &vi;
    }
    if (input == nullptr) {
      if (params.contains(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--input-shape names '", name,
            "', which is an initializer (a param with a fixed shape), not a graph input"));
      }
      std::vector<std::string> names;
      for (const onnx::ValueInfoProto& vi : graph.input()) names.push_back(vi.name());
      return absl::InvalidArgumentError(
          absl::StrCat("--input-shape names '", name, "', which is not a graph input (inputs: ",
                       names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
    }
    for (int64_t d : dims) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input-shape ", name, ": negative dimension ", d));
      }
    }
    if (input->type().value_case() != onnx::TypeProto::kTensorType &&
        input->type().value_case() != onnx::TypeProto::VALUE_NOT_SET) {
      return absl::UnimplementedError(absl::StrCat("graph input '", name, "' is ",
                                                   TypeCaseName(input->type()),
                                                   ", not a tensor: only tensors are planned"));
    }
    onnx::TypeProto_Tensor* tensor = input->mutable_type()->mutable_tensor_type();
    if (tensor->has_shape()) {
      const auto& declared = tensor->shape();
      if (declared.dim_size() != static_cast<int>(dims.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--input-shape ", name, "=", absl::StrJoin(dims, ","), " has rank ", dims.size(),
            " but graph input '", name, "' is declared with rank ", declared.dim_size()));
      }
      for (int k = 0; k < declared.dim_size(); ++k) {
        if (!declared.dim(k).has_dim_param() || declared.dim(k).dim_param().empty()) continue;
        MG_RETURN_IF_ERROR(symbols.Bind(name, static_cast<size_t>(k), declared.dim(k).dim_param(),
                                        dims[k]));
      }
    }
    tensor->clear_shape();
    onnx::TensorShapeProto* shape = tensor->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
    bound_inputs.insert(name);
  }

  // The run's data sizes what the flags left free (an exporter's dim name is only a name).
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    auto data = bindings.data_shapes.find(vi.name());
    if (data == bindings.data_shapes.end() || bound_inputs.contains(vi.name()) ||
        !vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) {
      continue;
    }
    const auto& declared = vi.type().tensor_type().shape();
    if (declared.dim_size() != static_cast<int>(data->second.size())) continue;
    for (int k = 0; k < declared.dim_size(); ++k) {
      const std::string& symbol = declared.dim(k).dim_param();
      if (!declared.dim(k).has_dim_param() || symbol.empty() ||
          symbols.sizes().count(symbol) > 0) {
        continue;
      }
      MG_RETURN_IF_ERROR(symbols.Bind(vi.name(), static_cast<size_t>(k), symbol, data->second[k]));
    }
  }

  auto bind = [&](onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    for (auto& dim : *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim()) {
      if (!dim.has_dim_param()) continue;
      auto it = symbols.sizes().find(dim.dim_param());
      if (it != symbols.sizes().end()) dim.set_dim_value(it->second);
    }
  };
  for (auto* list : {graph.mutable_input(), graph.mutable_output(), graph.mutable_value_info()}) {
    for (onnx::ValueInfoProto& vi : *list) bind(vi);
  }
  return absl::OkStatus();
}

// Every graph input needs a concrete shape before inference.
absl::Status CheckInputsStatic(const onnx::GraphProto& graph) {
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    const std::string& name = vi.name();
    if (!vi.type().has_tensor_type()) {
      if (vi.type().value_case() == onnx::TypeProto::VALUE_NOT_SET) {
        return absl::InvalidArgumentError(absl::StrCat(
            "graph input '", name, "' declares no type; its element type cannot be known"));
      }
      return absl::UnimplementedError(absl::StrCat("graph input '", name, "' is ",
                                                   TypeCaseName(vi.type()),
                                                   ", not a tensor: only tensors are planned"));
    }
    const onnx::TypeProto_Tensor& tensor = vi.type().tensor_type();
    if (tensor.elem_type() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", name, "' declares no element type"));
    }
    if (auto dtype = DataTypeFromProtoNumber(tensor.elem_type()); !dtype.ok()) {
      return absl::UnimplementedError(absl::StrCat("graph input '", name, "': element type ",
                                                   ElementTypeName(tensor.elem_type()),
                                                   " is not supported"));
    }
    if (!tensor.has_shape()) {
      return absl::InvalidArgumentError(absl::StrCat("graph input '", name,
                                                     "' declares no shape; pass --input-shape ",
                                                     name, "=D0,D1,..."));
    }
    for (int k = 0; k < tensor.shape().dim_size(); ++k) {
      const auto& dim = tensor.shape().dim(k);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "graph input '", name, "': dim ", k, " has negative size ", dim.dim_value()));
        }
        continue;
      }
      if (dim.has_dim_param() && !dim.dim_param().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "graph input '", name, "': dim ", k, " is the symbolic dimension '", dim.dim_param(),
            "', which is unbound; pass --dim ", dim.dim_param(), "=VALUE or --input-shape ", name,
            "=D0,D1,..."));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "graph input '", name, "': dim ", k,
          " has no size (neither a number nor a symbol); pass --input-shape ", name,
          "=D0,D1,..."));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Types after inference.

// 3: a tensor with element type and concrete dims; 2: with a shape; 1: some type; 0: none.
int Completeness(const onnx::TypeProto& type) {
  if (!type.has_tensor_type()) return type.value_case() == onnx::TypeProto::VALUE_NOT_SET ? 0 : 1;
  if (type.tensor_type().elem_type() != 0 && onnx_fold::StaticDims(type).has_value()) return 3;
  return type.tensor_type().has_shape() ? 2 : 1;
}

class TypeResolver {
 public:
  TypeResolver(const onnx::ModelProto& model, absl::flat_hash_set<std::string> user_symbols)
      : model_(model), user_symbols_(std::move(user_symbols)) {
    const onnx::GraphProto& graph = model.graph();
    // A name may be listed more than once (a graph output keeps the value_info entry of an
    // earlier inference run): the most complete entry wins.
    for (const auto* list : {&graph.input(), &graph.output(), &graph.value_info()}) {
      for (const onnx::ValueInfoProto& vi : *list) {
        if (!vi.has_type()) continue;
        auto [it, inserted] = types_.emplace(vi.name(), &vi.type());
        if (!inserted && Completeness(vi.type()) > Completeness(*it->second)) {
          it->second = &vi.type();
        }
      }
    }
    for (const onnx::OperatorSetIdProto& opset : model.opset_import()) {
      opsets_[IsDefaultDomain(opset.domain()) ? "" : opset.domain()] =
          static_cast<int>(opset.version());
    }
  }

  // The type of an initializer: from its dims.
  absl::StatusOr<TensorType> InitializerType(const onnx::TensorProto& t) const {
    const std::string what = absl::StrCat("initializer '", t.name(), "'");
    auto dtype = DataTypeFromProtoNumber(t.data_type());
    if (!dtype.ok() || *dtype == DataType::kUndefined) {
      return absl::UnimplementedError(absl::StrCat(
          what, ": element type ", ElementTypeName(t.data_type()), " is not supported"));
    }
    TensorType type{*dtype, Dims(t.dims().begin(), t.dims().end())};
    MG_RETURN_IF_ERROR(ByteSize(type, what).status());
    return type;
  }

  // The type of a value named `name`; `producer` is its node (index into the graph) or -1.
  absl::StatusOr<TensorType> ValueType(const std::string& name, int producer) {
    const std::string what =
        producer < 0 ? absl::StrCat("value '", name, "'")
                     : absl::StrCat("value '", name, "' (output of ",
                                    NodeLabel(model_.graph().node(producer), producer), ")");
    auto it = types_.find(name);
    if (it == types_.end() || it->second->value_case() == onnx::TypeProto::VALUE_NOT_SET) {
      return Unknown(what, producer, "has no type after ONNX shape inference");
    }
    const onnx::TypeProto& type = *it->second;
    if (!type.has_tensor_type()) {
      return absl::UnimplementedError(absl::StrCat(what, " is ", TypeCaseName(type),
                                                   ", not a tensor: only tensors are planned"));
    }
    const onnx::TypeProto_Tensor& tensor = type.tensor_type();
    if (tensor.elem_type() == 0) {
      return Unknown(what, producer, "has no element type after ONNX shape inference");
    }
    auto dtype = DataTypeFromProtoNumber(tensor.elem_type());
    if (!dtype.ok()) {
      return absl::UnimplementedError(absl::StrCat(
          what, ": element type ", ElementTypeName(tensor.elem_type()), " is not supported"));
    }
    if (!tensor.has_shape()) {
      return Unknown(what, producer, "has no shape (not even a rank) after ONNX shape inference");
    }
    Dims dims;
    for (int k = 0; k < tensor.shape().dim_size(); ++k) {
      const auto& dim = tensor.shape().dim(k);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ": dim ", k, " has negative size ", dim.dim_value()));
        }
        dims.push_back(dim.dim_value());
        continue;
      }
      if (dim.has_dim_param() && user_symbols_.contains(dim.dim_param())) {
        // A name the file gives a dim that nothing computes (inference merges every dim it
        // can compute into the declarations): only a binding can size it.
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": dim ", k, " is the symbolic dimension '", dim.dim_param(),
            "', which ONNX shape inference cannot compute and which is unbound; pass --dim ",
            dim.dim_param(), "=VALUE"));
      }
      return Unknown(what, producer,
                     absl::StrCat("has a dim that stays unknown (dim ", k, " of ",
                                  tensor.shape().dim_size(),
                                  ") after ONNX shape inference and constant folding"));
    }
    TensorType result{*dtype, std::move(dims)};
    MG_RETURN_IF_ERROR(ByteSize(result, what).status());
    return result;
  }

 private:
  absl::Status Unknown(const std::string& what, int producer, const std::string& problem) {
    if (producer < 0) return absl::InvalidArgumentError(absl::StrCat(what, " ", problem));
    const onnx::NodeProto& node = model_.graph().node(producer);
    const std::string domain = IsDefaultDomain(node.domain()) ? "" : node.domain();
    auto opset = opsets_.find(domain);
    if (opset == opsets_.end()) {
      return absl::UnimplementedError(absl::StrCat(
          what, " ", problem, ": the model imports no opset for the node's domain '",
          node.domain(), "'"));
    }
    if (onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, domain) == nullptr &&
        !IsModelFunction(node)) {
      return absl::UnimplementedError(absl::StrCat(
          what, " ", problem, ": libonnx has no schema for op type '", node.op_type(), "'",
          domain.empty() ? "" : absl::StrCat(" of domain '", domain, "'"), " at opset ",
          opset->second, " (declare the output's type and shape in the model's value_info)"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", problem, StrictDiagnostics(), RuntimeInputs(node)));
  }

  bool IsModelFunction(const onnx::NodeProto& node) const {
    for (const onnx::FunctionProto& f : model_.functions()) {
      if (f.name() == node.op_type() && f.domain() == node.domain()) return true;
    }
    return false;
  }

  // libonnx's own complaint, from a strict rerun on a copy (only on this error path).
  std::string StrictDiagnostics() {
    if (!strict_message_.has_value()) {
      onnx::ModelProto copy = model_;
      absl::Status s = onnx_fold::RunOnnxShapeInference(copy, /*strict=*/true);
      strict_message_ = s.ok() ? "" : std::string(s.message());
    }
    if (strict_message_->empty()) return "";
    return absl::StrCat("; ", Quote(*strict_message_));
  }

  // The node's inputs whose values are not constants: what its output shape may depend on.
  std::string RuntimeInputs(const onnx::NodeProto& node) const {
    absl::flat_hash_set<std::string> constants;
    for (const onnx::TensorProto& t : model_.graph().initializer()) constants.insert(t.name());
    for (const onnx::NodeProto& n : model_.graph().node()) {
      if (n.op_type() == "Constant" && IsDefaultDomain(n.domain())) {
        for (const std::string& out : n.output()) constants.insert(out);
      }
    }
    std::vector<std::string> runtime;
    for (const std::string& in : node.input()) {
      if (!in.empty() && !constants.contains(in)) runtime.push_back(absl::StrCat("'", in, "'"));
    }
    if (runtime.empty()) return "";
    return absl::StrCat("; the shape depends on the values of ", absl::StrJoin(runtime, ", "),
                        ", which are not constants even after folding (computed from graph "
                        "inputs' values or by ops we do not fold)");
  }

  const onnx::ModelProto& model_;
  absl::flat_hash_set<std::string> user_symbols_;
  absl::flat_hash_map<std::string, const onnx::TypeProto*> types_;
  absl::flat_hash_map<std::string, int> opsets_;
  std::optional<std::string> strict_message_;
};

// ---------------------------------------------------------------------------------------------
// Building the Graph.

std::optional<Attribute> ConvertAttribute(const onnx::AttributeProto& a) {
  Attribute out;
  out.name = a.name();
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED) {  // old files: the set field tells
    if (a.has_i()) type = onnx::AttributeProto::INT;
    else if (a.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (a.has_s()) type = onnx::AttributeProto::STRING;
    else if (a.ints_size() > 0) type = onnx::AttributeProto::INTS;
    else if (a.floats_size() > 0) type = onnx::AttributeProto::FLOATS;
    else if (a.strings_size() > 0) type = onnx::AttributeProto::STRINGS;
  }
  switch (type) {
    case onnx::AttributeProto::INT: out.data = static_cast<int64_t>(a.i()); break;
    case onnx::AttributeProto::FLOAT: out.data = static_cast<double>(a.f()); break;
    case onnx::AttributeProto::STRING: out.data = a.s(); break;
    case onnx::AttributeProto::INTS:
      out.data = std::vector<int64_t>(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.data = std::vector<double>(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.data = std::vector<std::string>(a.strings().begin(), a.strings().end());
      break;
    default: return std::nullopt;  // tensors, sparse tensors, type protos: not carried
  }
  return out;
}

// Names of a node's inputs or outputs without the omitted optional ones (""). When an omitted
// one precedes a present one, `slots` receives each kept name's position in the node.
std::vector<std::string> PresentNames(const google::protobuf::RepeatedPtrField<std::string>& names,
                                      std::vector<int64_t>* slots) {
  std::vector<std::string> kept;
  std::vector<int64_t> positions;
  bool gap = false;
  bool interior_gap = false;
  for (int k = 0; k < names.size(); ++k) {
    if (names[k].empty()) {
      gap = true;
      continue;
    }
    interior_gap = interior_gap || gap;
    kept.push_back(names[k]);
    positions.push_back(k);
  }
  if (interior_gap) *slots = std::move(positions);
  return kept;
}

// The model as libonnx will see it, and what we must remember of the file as written.
struct WorkingModel {
  onnx::ModelProto model;
  absl::flat_hash_set<std::string> params;  // initializer names
  // First output of each node written with domain "ai.onnx" (renamed "" for libonnx).
  absl::flat_hash_set<std::string> ai_onnx_outputs;
  // First output of each convolution given an explicit kernel_shape for libonnx (HardenConvs).
  absl::flat_hash_set<std::string> synthetic_kernel_shape;
  absl::flat_hash_set<std::string> user_symbols;  // dim_params the file declares
  absl::flat_hash_map<std::string, Declaration> declarations;  // graph inputs and outputs
};

// A graph input listed for an initializer (IR < 4 does so for every weight) against the
// initializer's data: the element type and every dimension given as a number must agree (a
// symbolic or missing dimension, or a missing shape, declares nothing).
absl::Status CheckInputMatchesInitializer(const onnx::ValueInfoProto& input,
                                          const onnx::TensorProto& data) {
  if (!input.has_type() || !input.type().has_tensor_type()) return absl::OkStatus();
  const onnx::TypeProto_Tensor& declared = input.type().tensor_type();
  bool agrees = declared.elem_type() == 0 || declared.elem_type() == data.data_type();
  std::string dims_text = "[?]";
  if (declared.has_shape()) {
    std::vector<std::string> dims;
    const onnx::TensorShapeProto& shape = declared.shape();
    agrees = agrees && shape.dim_size() == data.dims_size();
    for (int k = 0; k < shape.dim_size(); ++k) {
      const onnx::TensorShapeProto_Dimension& dim = shape.dim(k);
      if (dim.has_dim_value()) {
        dims.push_back(absl::StrCat(dim.dim_value()));
        agrees = agrees && (k >= data.dims_size() || dim.dim_value() == data.dims(k));
      } else {
        dims.push_back(dim.has_dim_param() ? dim.dim_param() : "?");
      }
    }
    dims_text = absl::StrCat("[", absl::StrJoin(dims, ","), "]");
  }
  if (agrees) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "graph input '", input.name(), "' is declared ", ElementTypeName(declared.elem_type()), " ",
      dims_text, " but its initializer holds ", ElementTypeName(data.data_type()), " [",
      absl::StrJoin(data.dims(), ","), "]"));
}

// Steps before inference: refusals, graph inputs without initializers, domains libonnx finds,
// structure checks, dependency order, declarations as written.
absl::StatusOr<WorkingModel> Prepare(onnx::ModelProto model) {
  if (!model.has_graph()) {
    return absl::InvalidArgumentError("not an ONNX model: it has no graph");
  }
  if (model.graph().node_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ONNX graph '", model.graph().name(), "' has no nodes"));
  }
  MG_RETURN_IF_ERROR(CheckSupported(model));

  WorkingModel w;
  w.model = std::move(model);
  onnx::GraphProto& graph = *w.model.mutable_graph();
  // Initializers are params, even where IR < 4 also lists them as graph inputs. Such an input
  // declares the initializer's type: the data fixes it, and a declaration that says otherwise
  // is an error naming both, not silently overruled.
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) {
    w.params.insert(t.name());
    initializers.emplace(t.name(), &t);
  }
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    auto it = initializers.find(vi.name());
    if (it == initializers.end()) continue;
    MG_RETURN_IF_ERROR(CheckInputMatchesInitializer(vi, *it->second));
  }
  {
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> inputs;
    absl::flat_hash_set<std::string> seen;
    for (onnx::ValueInfoProto& vi : *graph.mutable_input()) {
      if (w.params.contains(vi.name()) || !seen.insert(vi.name()).second) continue;
      inputs.Add()->Swap(&vi);
    }
    graph.mutable_input()->Swap(&inputs);
  }
  // libonnx reads initializer shapes only from IR 4 on; ours are no longer listed as inputs.
  if (w.model.ir_version() < 4) w.model.set_ir_version(4);

  // libonnx looks domains up literally and registers its schemas under "": "ai.onnx" is
  // renamed "" here and restored on our ops (found by their first output; a node without
  // outputs keeps "").
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (node.domain() != "ai.onnx") continue;
    node.clear_domain();
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;
      w.ai_onnx_outputs.insert(out);
      break;
    }
  }
  bool has_empty = false;
  for (const onnx::OperatorSetIdProto& opset : w.model.opset_import()) {
    has_empty = has_empty || opset.domain().empty();
  }
  for (onnx::OperatorSetIdProto& opset : *w.model.mutable_opset_import()) {
    if (opset.domain() == "ai.onnx" && !has_empty) {
      opset.clear_domain();
      has_empty = true;
    }
  }

  MG_RETURN_IF_ERROR(CheckStructure(graph));
  MG_RETURN_IF_ERROR(CheckConstantOperands(graph));
  MG_RETURN_IF_ERROR(SortNodes(graph));

  for (const auto* list : {&graph.input(), &graph.output(), &graph.value_info()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
      for (const auto& dim : vi.type().tensor_type().shape().dim()) {
        if (dim.has_dim_param() && !dim.dim_param().empty()) w.user_symbols.insert(dim.dim_param());
      }
    }
  }
  for (const auto* list : {&graph.input(), &graph.output()}) {
    for (const onnx::ValueInfoProto& vi : *list) {
      w.declarations[vi.name()] = DeclarationOf(vi.type());
    }
  }
  return w;
}

// libonnx 1.12's convolution shape functions index the input's dims by the weight's rank
// without checking it (a malformed model crashes them). For each Conv, ConvInteger, QLinearConv
// and ConvTranspose whose weight shape is known before inference (an initializer or a graph
// input), we check the weight's rank and make kernel_shape explicit (weight dims 2...), which
// libonnx does check against the input's rank. The attribute is not carried to our op unless the
// file had it.
absl::Status HardenConvs(WorkingModel& w) {
  onnx::GraphProto& graph = *w.model.mutable_graph();
  absl::flat_hash_map<std::string, Dims> known;
  for (const onnx::TensorProto& t : graph.initializer()) {
    known[t.name()] = Dims(t.dims().begin(), t.dims().end());
  }
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    if (auto dims = onnx_fold::StaticDims(vi.type())) known[vi.name()] = std::move(*dims);
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    if (!node.domain().empty()) continue;
    const std::string& op = node.op_type();
    int weight = -1;
    if (op == "Conv" || op == "ConvInteger" || op == "ConvTranspose") weight = 1;
    if (op == "QLinearConv") weight = 3;
    if (weight < 0 || node.input_size() <= weight) continue;
    auto it = known.find(node.input(weight));
    if (it == known.end()) continue;
    const Dims& dims = it->second;
    if (dims.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeLabel(node, i), ": weight '", node.input(weight), "' has rank ", dims.size(),
          "; a convolution weight has rank 3 or more (M x C/group x k1 x ... x kn)"));
    }
    auto x = known.find(node.input(0));
    if (x != known.end() && x->second.size() != dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          NodeLabel(node, i), ": input '", node.input(0), "' has rank ", x->second.size(),
          " but weight '", node.input(weight), "' has rank ", dims.size()));
    }
    bool has_kernel_shape = false;
    for (const onnx::AttributeProto& a : node.attribute()) {
      has_kernel_shape = has_kernel_shape || a.name() == "kernel_shape";
    }
    if (has_kernel_shape || node.output_size() == 0 || node.output(0).empty()) continue;
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name("kernel_shape");
    a->set_type(onnx::AttributeProto::INTS);
    for (size_t k = 2; k < dims.size(); ++k) a->add_ints(dims[k]);
    w.synthetic_kernel_shape.insert(node.output(0));
  }
  return absl::OkStatus();
}

// The type of every value after inference and folding; the first value (in node order) without
// a supported dtype and concrete dims is the error.
absl::StatusOr<absl::flat_hash_map<std::string, TensorType>> ResolveTypes(
    const WorkingModel& w) {
  const onnx::GraphProto& graph = w.model.graph();
  TypeResolver resolver(w.model, w.user_symbols);
  absl::flat_hash_map<std::string, TensorType> types;
  for (const onnx::TensorProto& t : graph.initializer()) {
    MG_ASSIGN_OR_RETURN(types[t.name()], resolver.InitializerType(t));
  }
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    MG_ASSIGN_OR_RETURN(types[vi.name()], resolver.ValueType(vi.name(), -1));
  }
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (out.empty() || types.contains(out)) continue;
      MG_ASSIGN_OR_RETURN(types[out], resolver.ValueType(out, i));
    }
  }
  return types;
}

// ConstantOfShape's fill value is a one-element tensor attribute, and tensor attributes are not
// carried: it becomes the number attribute 'value' (int64 for integer and bool tensors, double
// for floating-point ones) when the number is exactly that, as the kernel reads it. A value that
// cannot be carried exactly (an int64 beyond 2^53 is still exact as int64; a malformed tensor
// is not) is marked 'value_not_carried', which the kernel refuses rather than fill with 0.
void MaybeCarryFillValue(const onnx::NodeProto& node, OpSpec& op) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() != "value" || !a.has_t()) continue;
    absl::StatusOr<TensorData> data = DecodeTensorProto(a.t());
    const int64_t size = data.ok() ? DataTypeSize(data->type.dtype) : 0;
    if (!data.ok() || size <= 0 || static_cast<int64_t>(data->bytes.size()) != size) {
      op.attrs.push_back({"value_not_carried", int64_t{1}});
      return;
    }
    const char* p = data->bytes.data();
    auto read = [p](auto zero) {
      decltype(zero) v;
      std::memcpy(&v, p, sizeof(v));
      return v;
    };
    switch (data->type.dtype) {
      case DataType::kFloat32: op.attrs.push_back({"value", static_cast<double>(read(float{}))}); return;
      case DataType::kFloat64: op.attrs.push_back({"value", read(double{})}); return;
      case DataType::kInt64: op.attrs.push_back({"value", read(int64_t{})}); return;
      case DataType::kInt32: op.attrs.push_back({"value", int64_t{read(int32_t{})}}); return;
      case DataType::kInt16: op.attrs.push_back({"value", int64_t{read(int16_t{})}}); return;
      case DataType::kInt8: op.attrs.push_back({"value", int64_t{read(int8_t{})}}); return;
      case DataType::kUInt8: op.attrs.push_back({"value", int64_t{read(uint8_t{})}}); return;
      case DataType::kBool: op.attrs.push_back({"value", int64_t{read(uint8_t{}) != 0}}); return;
      default: op.attrs.push_back({"value_not_carried", int64_t{1}}); return;
    }
  }
}

// The one number a static input of the model holds (an initializer or a Constant node's
// value); nullopt for a computed input or one of another size.
std::optional<double> StaticScalar(const WorkingModel& w, const std::string& name) {
  std::optional<onnx_fold::ConstTensor> t;
  for (const onnx::TensorProto& init : w.model.graph().initializer()) {
    if (init.name() == name) t = onnx_fold::TensorFromProto(init, 1);
  }
  for (const onnx::NodeProto& node : w.model.graph().node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1 || node.output(0) != name) continue;
    if (std::optional<onnx::TensorProto> value = ConstantValue(node)) {
      t = onnx_fold::TensorFromProto(*value, 1);
    }
  }
  if (!t.has_value() || t->size() != 1) return std::nullopt;
  return t->is_real() ? t->reals[0] : static_cast<double>(t->ints[0]);
}

// A Dropout that is the identity: not in training mode (no training_mode input, or a static
// false), or a static ratio of 0. Its output is then a view of its data (as PyTorch returns
// the input itself for p = 0): no copy lives until the backward pass reads it.
bool IsIdentityDropout(const onnx::NodeProto& node, const WorkingModel& w) {
  if (node.op_type() != "Dropout" || !IsDefaultDomain(node.domain())) return false;
  if (node.input_size() < 3 || node.input(2).empty()) return true;
  if (std::optional<double> mode = StaticScalar(w, node.input(2)); mode && *mode == 0) return true;
  if (node.input_size() < 2 || node.input(1).empty()) return false;  // ratio 0.5
  const std::optional<double> ratio = StaticScalar(w, node.input(1));
  return ratio.has_value() && *ratio == 0;
}

OpSpec OpFromNode(const onnx::NodeProto& node, const WorkingModel& w) {
  OpSpec op;
  op.name = node.name();
  op.type = node.op_type();
  op.domain = node.domain();
  for (const std::string& out : node.output()) {
    if (out.empty()) continue;
    if (w.ai_onnx_outputs.contains(out)) op.domain = "ai.onnx";
    break;
  }
  const bool drop_kernel_shape =
      node.output_size() > 0 && w.synthetic_kernel_shape.contains(node.output(0));
  std::vector<int64_t> input_slots, output_slots;
  op.inputs = PresentNames(node.input(), &input_slots);
  op.outputs = PresentNames(node.output(), &output_slots);
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (drop_kernel_shape && a.name() == "kernel_shape") continue;
    if (auto attr = ConvertAttribute(a)) op.attrs.push_back(std::move(*attr));
  }
  if (node.op_type() == "ConstantOfShape" && IsDefaultDomain(node.domain())) {
    MaybeCarryFillValue(node, op);
  }
  // What ONNX Runtime keeps as an alias of its input (its Reshape, Squeeze, ... kernels share
  // the input's buffer): view ops, which --views lets alias it (LivenessOptions::views).
  static constexpr absl::string_view kViewOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                                   "Identity"};
  if (IsDefaultDomain(node.domain()) &&
      std::find(std::begin(kViewOps), std::end(kViewOps), node.op_type()) != std::end(kViewOps)) {
    op.view = true;
  }
  if (IsIdentityDropout(node, w)) op.view = true;
  if (!input_slots.empty()) op.attrs.push_back({"onnx_input_slots", input_slots});
  if (!output_slots.empty()) op.attrs.push_back({"onnx_output_slots", output_slots});
  // ONNX defaults that differ from Caffe2's, made explicit: our schemas and kernels read an
  // absent attribute as Caffe2 does. ONNX Split splits axis 0, Caffe2's the channel axis 1.
  if (node.op_type() == "Split" && IsDefaultDomain(node.domain())) {
    bool has_axis = false;
    for (const onnx::AttributeProto& a : node.attribute()) has_axis = has_axis || a.name() == "axis";
    if (!has_axis) op.attrs.push_back({"axis", int64_t{0}});
  }
  return op;
}

absl::StatusOr<Graph> BuildGraph(const WorkingModel& w,
                                 const absl::flat_hash_set<std::string>& folded,
                                 const absl::flat_hash_map<std::string, TensorType>& types,
                                 const std::string& source_name) {
  const onnx::GraphProto& graph = w.model.graph();
  GraphBuilder builder(graph.name().empty() ? std::filesystem::path(source_name).stem().string()
                                            : graph.name());
  builder.ReserveOps(static_cast<size_t>(graph.node_size()));
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    builder.AddExternalInput(vi.name());
    if (auto it = w.declarations.find(vi.name()); it != w.declarations.end()) {
      builder.Declare(vi.name(), it->second);
    }
  }
  // GraphBuilder wants static values to be external inputs: initializers, folded values and
  // Constant outputs are, and Constant nodes are not ops.
  for (const onnx::TensorProto& t : graph.initializer()) {
    builder.AddExternalInput(t.name());
    builder.DeclareRole(t.name(), folded.contains(t.name()) ? Role::kConstant : Role::kParam);
  }
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Constant" && IsDefaultDomain(node.domain())) {
      for (const std::string& out : node.output()) {
        if (out.empty()) continue;
        builder.AddExternalInput(out);
        builder.DeclareRole(out, Role::kConstant);
      }
      continue;
    }
    builder.AddOp(OpFromNode(node, w));
  }
  for (const onnx::ValueInfoProto& vi : graph.output()) {
    builder.AddExternalOutput(vi.name());
    auto it = w.declarations.find(vi.name());
    if (it != w.declarations.end() && !w.params.contains(vi.name())) {
      builder.Declare(vi.name(), it->second);
    }
  }
  MG_ASSIGN_OR_RETURN(Graph g, std::move(builder).Build());

  // ONNX is SSA: one version per name, typed by name.
  for (ValueId id = 0; id < g.num_values(); ++id) {
    Value& v = g.mutable_value(id);
    auto it = types.find(v.name);
    if (it == types.end()) {
      return absl::InternalError(absl::StrCat("value '", v.name, "' has no type after import"));
    }
    v.type = it->second;
  }
  return g;
}

// Pure functions of constants become constants before anything else sees them, so that the
// planner never places them in the arena as activations:
//  - Identity of a static value (an initializer, a Constant node's output, or another such
//    Identity) is an alias: its readers read the static value itself and the node goes. This
//    is how torch.onnx.export writes tied and deduplicated weights (`onnx::MatMul_123 =
//    Identity(wte.weight)`), each of which was an activation copy live from step 0 to its reader.
//  - any other node the shape folder evaluates (fold_eval.h: Cast, Reshape, Transpose,
//    ConstantOfShape, arithmetic, ...) whose inputs are all static is evaluated once, its outputs
//    becoming constants (initializers listed in `folded`), within the folder's element limit
//    (kMaxFoldElements): larger results stay ops.
// A node writing a graph output is kept (the output is the model's interface).
// O(nodes + edges), plus the evaluation of what folds.
// REQUIRES: `folded` empty; it receives the names of the constants made here.
// With `fold_params` false (training), a node reading a parameter's values is kept (only Shape
// and Size, which read its type, fold): a folded copy of a weight (a Linear's transposed
// weight) would be a constant, and the weight's gradient would silently not reach it.
void FoldStaticNodes(WorkingModel& w, absl::flat_hash_set<std::string>& folded, bool fold_params) {
  onnx::GraphProto& graph = *w.model.mutable_graph();
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers.emplace(t.name(), &t);
  absl::flat_hash_set<std::string> outputs;
  for (const onnx::ValueInfoProto& vi : graph.output()) outputs.insert(vi.name());
  absl::flat_hash_map<std::string, onnx::TensorProto> constants;  // Constant nodes' values
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() != "Constant" || !IsDefaultDomain(node.domain()) || node.output_size() != 1)
      continue;
    if (std::optional<onnx::TensorProto> t = ConstantValue(node)) constants[node.output(0)] = *t;
  }
  auto is_static = [&](const std::string& name) {
    return initializers.contains(name) || constants.contains(name) || folded.contains(name);
  };
  // Decoded lazily: only the inputs of a node that may fold are read as ConstTensors. A node
  // map: the evaluator holds pointers to several entries while more are decoded.
  absl::node_hash_map<std::string, std::optional<onnx_fold::ConstTensor>> decoded;
  auto value_of = [&](const std::string& name) -> const onnx_fold::ConstTensor* {
    auto [it, inserted] = decoded.try_emplace(name);
    if (inserted) {  // a file's tensor: folded results are decoded as they are made
      auto i = initializers.find(name);
      const onnx::TensorProto* t = i != initializers.end() ? i->second : &constants.at(name);
      if (!HasExternalData(*t)) it->second = onnx_fold::TensorFromProto(*t);
    }
    return it->second.has_value() ? &*it->second : nullptr;
  };
  absl::flat_hash_map<std::string, std::string> alias;  // Identity output -> static value
  std::vector<onnx::TensorProto> new_initializers;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    for (std::string& in : *node.mutable_input()) {
      if (auto it = alias.find(in); it != alias.end()) in = it->second;
    }
    onnx_fold::RenameOuterReads(node, alias);
    bool all_static = node.input_size() > 0 && node.op_type() != "Constant" &&
                      IsDefaultDomain(node.domain());
    const bool reads_type_only = node.op_type() == "Shape" || node.op_type() == "Size";
    for (const std::string& in : node.input()) {
      const bool param = !fold_params && !reads_type_only && w.params.contains(in) &&
                         !folded.contains(in);
      all_static = all_static && (in.empty() || (is_static(in) && !param));
    }
    for (const std::string& out : node.output()) all_static = all_static && !outputs.contains(out);
    if (all_static && node.op_type() == "Identity" && node.input_size() == 1 &&
        node.output_size() == 1) {
      // Readers are renamed to the static value itself, so a chain of Identities ends there.
      alias[node.output(0)] = node.input(0);
      continue;
    }
    if (all_static && onnx_fold::IsFoldableOp(node)) {
      std::vector<onnx_fold::FoldInput> inputs;
      bool known = true;
      for (const std::string& in : node.input()) {
        onnx_fold::FoldInput input;
        input.present = !in.empty();
        if (input.present) {
          input.value = value_of(in);
          known = known && input.value != nullptr;
        }
        inputs.push_back(input);
      }
      std::optional<std::vector<onnx_fold::ConstTensor>> result;
      if (known) result = onnx_fold::EvaluateNode(node, inputs);
      if (result.has_value() && static_cast<int>(result->size()) == node.output_size()) {
        for (int k = 0; k < node.output_size(); ++k) {
          if (node.output(k).empty()) continue;
          new_initializers.push_back(onnx_fold::TensorToProto((*result)[k], node.output(k)));
          decoded[node.output(k)] = std::move((*result)[k]);
          folded.insert(node.output(k));
        }
        continue;
      }
    }
    kept.Add()->Swap(&node);
  }
  graph.mutable_node()->Swap(&kept);
  for (onnx::TensorProto& t : new_initializers) graph.add_initializer()->Swap(&t);
  // Declarations of the aliased names are gone with their values.
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> rest;
  for (onnx::ValueInfoProto& vi : *graph.mutable_value_info()) {
    if (!alias.contains(vi.name())) rest.Add()->Swap(&vi);
  }
  graph.mutable_value_info()->Swap(&rest);
}

// External data is read (or, without keep_data, checked) before inference, so that a missing
// file fails before any work and libonnx sees the weights as the file means them.
absl::Status ResolveExternalData(WorkingModel& w, const OnnxImportOptions& options) {
  for (onnx::TensorProto& t : *w.model.mutable_graph()->mutable_initializer()) {
    MG_RETURN_IF_ERROR(ReadExternalData(t, options.model_dir, options.keep_data));
  }
  return absl::OkStatus();
}

// The data of every static value of `g` that the model holds: initializers (the file's and the
// folded ones, their bytes moved out of the working model), Constant nodes. A tensor without
// data (weights stripped from a file) or of a type we do not decode is simply absent: the
// executor refuses to run without it unless asked to seed it. Without `all`, only tensors of at
// most kSmallStaticElements elements: the numbers later stages read as facts of the net (the
// gradient builder's exponents, dropout ratios, axes and slice bounds), never the weights.
constexpr int64_t kSmallStaticElements = 16;

bool IsSmallTensor(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kSmallStaticElements) return false;
    n *= d;
  }
  return n <= kSmallStaticElements;
}

// The same for a Constant node's value, read from its attributes (the tensor is not copied).
bool IsSmallConstant(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "value" && a.has_t()) return IsSmallTensor(a.t());
    if (a.name() == "value_floats") return a.floats_size() <= kSmallStaticElements;
    if (a.name() == "value_ints") return a.ints_size() <= kSmallStaticElements;
    if (a.name() == "value_float" || a.name() == "value_int") return true;
  }
  return false;
}

std::shared_ptr<const StaticData> TakeStaticData(WorkingModel& w, const Graph& g, bool all,
                                                 const absl::flat_hash_set<std::string>* folded) {
  auto data = std::make_shared<StaticData>();
  auto wanted = [&](const std::string& name) {
    const std::optional<ValueId> id = g.FindValue(name);
    return id.has_value() && g.value(*id).producer == kNone && IsStatic(g.value(*id).role);
  };
  for (onnx::TensorProto& t : *w.model.mutable_graph()->mutable_initializer()) {
    const bool any_size = all || (folded != nullptr && folded->contains(t.name()));
    if (!wanted(t.name()) || (!any_size && (!IsSmallTensor(t) || HasExternalData(t)))) continue;
    absl::StatusOr<TensorData> decoded = DecodeTensorProto(t);
    t.clear_raw_data();
    if (decoded.ok()) data->emplace(t.name(), *std::move(decoded));
  }
  for (const onnx::NodeProto& node : w.model.graph().node()) {
    if (node.op_type() != "Constant" || !IsDefaultDomain(node.domain()) ||
        node.output_size() == 0 || !wanted(node.output(0)) ||
        (!all && folded == nullptr && !IsSmallConstant(node))) {
      continue;
    }
    if (std::optional<onnx::TensorProto> t = ConstantValue(node)) {
      absl::StatusOr<TensorData> decoded = DecodeTensorProto(*t);
      if (decoded.ok()) data->emplace(node.output(0), *std::move(decoded));
    }
  }
  return data;
}

// Folding replaced every If whose condition the shapes decide and unrolled every Loop whose trip
// count they decide (onnx_fold.h); one left depends on tensor values, and would need plans of
// its own for what runs at run time.
absl::Status CheckControlFlowDecided(const onnx::GraphProto& graph) {
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.op_type() == "If") {
      return absl::UnimplementedError(absl::StrCat(
          NodeLabel(node, i), ": its condition '", node.input(0),
          "' depends on tensor values, not only on shapes; an If is planned only where the "
          "shapes decide its branch (nested plans for a branch chosen at run time are not "
          "built)"));
    }
    if (node.op_type() == "Scan") {
      return absl::UnimplementedError(absl::StrCat(
          NodeLabel(node, i), ": the shapes of its scan inputs stay unknown, so its length does"));
    }
    if (node.op_type() != "Loop") continue;
    const bool counted = !node.input(0).empty();
    return absl::UnimplementedError(absl::StrCat(
        NodeLabel(node, i), ": ",
        counted ? absl::StrCat("its trip count '", node.input(0), "'")
                : std::string("it has no trip count, and its condition"),
        counted && !node.input(1).empty() ? absl::StrCat(" or its condition '", node.input(1), "'")
                                          : std::string(),
        " depends on tensor values, not only on shapes; a Loop is planned only where the shapes "
        "decide how often it runs (as copies of its body; nested plans for iterations counted "
        "at run time are not built)"));
  }
  return absl::OkStatus();
}

// Nodes stably sorted by wave: the highest level (onnx_fold::FoldReport::derived_values) of
// what a node reads or writes (but its bounded outputs), 0 for final values. A run that measures
// data-dependent sizes in schedule order (allocator/executor.h, RunMeasuring) then retypes the
// net once per wave instead of once per data-dependent op: every NonZero of SSD's 90 classes
// runs before any op that reads one, and a node of an If's branch that a bound chose (derived
// without reading a bound) after that bound. Still a dependency order: a node's wave is at
// least that of each input's producer.
void OrderByWave(onnx::GraphProto& graph, const onnx_fold::FoldReport& report) {
  if (report.derived_values.empty()) return;
  const absl::flat_hash_map<std::string, int> level(report.derived_values.begin(),
                                                    report.derived_values.end());
  absl::flat_hash_set<std::string> bounded;
  for (const auto& [value, why] : report.bounded_values) bounded.insert(value);
  std::vector<std::pair<int, int>> order;  // (wave, position)
  for (int i = 0; i < graph.node_size(); ++i) {
    int wave = 0;
    for (const std::string& in : graph.node(i).input()) {
      if (auto it = level.find(in); it != level.end()) wave = std::max(wave, it->second);
    }
    for (const std::string& out : graph.node(i).output()) {
      if (auto it = level.find(out); it != level.end() && !bounded.contains(out)) {
        wave = std::max(wave, it->second);
      }
    }
    order.emplace_back(wave, i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (const auto& [wave, i] : order) nodes.Add()->Swap(graph.mutable_node(i));
  graph.mutable_node()->Swap(&nodes);
}

// What the import decided that a user should know: Ifs replaced by a branch, sizes planned at
// an upper bound (grouped by op type, the first of each named).
void AddControlFlowNotes(const onnx_fold::FoldReport& report, std::vector<std::string>& notes) {
  // A net of many Ifs gets the first few and a count, not a line each.
  constexpr size_t kIfLines = 8;
  for (size_t i = 0; i < report.decided_control_flow.size() && i < kIfLines; ++i) {
    notes.push_back(report.decided_control_flow[i]);
  }
  if (report.decided_control_flow.size() > kIfLines) {
    notes.push_back(absl::StrCat("and ", report.decided_control_flow.size() - kIfLines,
                                 " more Ifs and Loops the shapes decide, each planned as what runs"));
  }
  if (report.bounded_values.empty()) return;
  std::map<std::string, std::pair<int, std::string>> by_op;  // op type -> count, first
  for (const auto& [value, why] : report.bounded_values) {
    const std::string op = why.substr(0, why.find(':'));
    auto [it, inserted] = by_op.try_emplace(op, 0, absl::StrCat("'", value, "' (", why, ")"));
    ++it->second.first;
  }
  std::vector<std::string> parts;
  for (const auto& [op, entry] : by_op) {
    parts.push_back(absl::StrCat(entry.first, " x ", op, ", e.g. ", entry.second));
  }
  notes.push_back(absl::StrCat(
      report.bounded_values.size(),
      " outputs have sizes that depend on tensor values and are planned at upper bounds, as is "
      "everything computed from them: ",
      absl::StrJoin(parts, "; ")));
}

absl::StatusOr<Graph> ImportModel(onnx::ModelProto model, const ShapeBindings& bindings,
                                  const std::string& source_name,
                                  const OnnxImportOptions& options, int bound_percent = 100) {
  MG_ASSIGN_OR_RETURN(WorkingModel w, Prepare(std::move(model)));
  MG_RETURN_IF_ERROR(ResolveExternalData(w, options));
  absl::flat_hash_set<std::string> folded;
  FoldStaticNodes(w, folded, options.fold_params);
  absl::flat_hash_map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto& opset : w.model.opset_import()) {
    opsets[IsDefaultDomain(opset.domain()) ? "" : opset.domain()] =
        static_cast<int>(opset.version());
  }
  MG_RETURN_IF_ERROR(
      TypeGraphInputs(*w.model.mutable_graph(), opsets, w.params, bindings.input_types));
  MG_RETURN_IF_ERROR(ApplyBindings(*w.model.mutable_graph(), w.params, bindings));
  MG_RETURN_IF_ERROR(CheckInputsStatic(w.model.graph()));
  MG_RETURN_IF_ERROR(HardenConvs(w));
  MG_ASSIGN_OR_RETURN(onnx_fold::FoldReport report,
                      onnx_fold::InferAndFold(w.model, [&] {
                        onnx_fold::FoldOptions fold;
                        fold.bound_percent = bound_percent;
                        fold.measured = &options.measured_sizes;
                        return fold;
                      }()));
  MG_RETURN_IF_ERROR(CheckControlFlowDecided(w.model.graph()));
  OrderByWave(*w.model.mutable_graph(), report);
  MG_ASSIGN_OR_RETURN(auto types, ResolveTypes(w));
  folded.insert(report.folded_values.begin(), report.folded_values.end());
  MG_ASSIGN_OR_RETURN(Graph g, BuildGraph(w, folded, types, source_name));
  g.set_static_data(
      TakeStaticData(w, g, options.keep_data, options.keep_folded_data ? &folded : nullptr));
  DataDependentSizes sizes;
  for (auto& [value, why] : report.bounded_values) sizes.bounded.push_back({value, why});
  for (const auto& [value, level] : report.derived_values) sizes.derived.insert(value);
  g.set_data_dependent_sizes(std::move(sizes));
  if (options.notes != nullptr) {
    AddControlFlowNotes(report, *options.notes);
  }
  return g;
}

absl::Status Annotate(const absl::Status& status, const std::string& source_name) {
  return absl::Status(status.code(), absl::StrCat(source_name, ": ", status.message()));
}

}  // namespace

absl::StatusOr<Graph> ImportOnnxFile(const std::string& path, const ShapeBindings& bindings,
                                     const OnnxImportOptions& options) {
  MG_ASSIGN_OR_RETURN(const std::string bytes, util::ReadInputFile(path, options.limits));
  OnnxImportOptions with_dir = options;
  if (with_dir.model_dir.empty()) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    with_dir.model_dir = parent.empty() ? std::string(".") : parent.string();
  }
  return ImportOnnxBytes(bytes, bindings, path, with_dir);
}

namespace {

absl::StatusOr<onnx::ModelProto> ParseModelBytes(const std::string& bytes,
                                                 const std::string& source_name,
                                                 const util::InputLimits& limits) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": the file is empty, not an ONNX model"));
  }
  MG_RETURN_IF_ERROR(util::CheckInputSize(static_cast<int64_t>(bytes.size()), limits, source_name));
  MG_RETURN_IF_ERROR(util::CheckProtobufSize(static_cast<int64_t>(bytes.size()), source_name));
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetRecursionLimit(limits.max_nesting_depth);
  if (!model.ParseFromCodedStream(&in)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": not an ONNX model (the bytes do not parse as an ONNX ModelProto)"));
  }
  return model;
}

}  // namespace

absl::StatusOr<std::string> WithoutLargeTensorData(const std::string& bytes,
                                                   const std::string& source_name,
                                                   const util::InputLimits& limits) {
  MG_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModelBytes(bytes, source_name, limits));
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (IsSmallTensor(t) || HasExternalData(t)) continue;
    if (absl::Status s = CheckTensorData(t, absl::StrCat("initializer '", t.name(), "'"));
        !s.ok()) {
      return Annotate(s, source_name);
    }
    // Every field that holds elements: the dims, type and name stay.
    t.clear_raw_data();
    t.clear_float_data();
    t.clear_int32_data();
    t.clear_int64_data();
    t.clear_double_data();
    t.clear_uint64_data();
    t.clear_string_data();
  }
  return model.SerializeAsString();
}

namespace {

// A size computed from a data-dependent bound is an upper bound only if it grows with the
// bound (size_bounds.h). The net is typed again with every such size at half its bound and
// at 0: a value larger there than at the bounds is an error naming it. Values one typing has
// and the other has not (an If the sizes decide another way) are not compared, nor is a
// typing that fails (a Reshape of 0 elements with a -1 is ambiguous).
absl::Status CheckBoundsGrow(const Graph& at_bounds, const std::string& bytes,
                             const ShapeBindings& bindings, const std::string& source_name,
                             const OnnxImportOptions& options) {
  OnnxImportOptions quiet;
  quiet.limits = options.limits;
  quiet.model_dir = options.model_dir;
  quiet.fold_params = options.fold_params;
  for (int percent : {50, 0}) {
    absl::StatusOr<onnx::ModelProto> model = ParseModelBytes(bytes, source_name, options.limits);
    if (!model.ok()) return model.status();
    absl::StatusOr<Graph> smaller =
        ImportModel(*std::move(model), bindings, source_name, quiet, percent);
    if (!smaller.ok()) continue;
    for (const Value& v : smaller->values()) {
      const std::optional<ValueId> id = at_bounds.FindValue(v.name);
      if (!id || !v.type || !at_bounds.value(*id).type) continue;
      const Value& bounded = at_bounds.value(*id);
      absl::StatusOr<int64_t> small_bytes = ValueByteSize(v);
      absl::StatusOr<int64_t> bound_bytes = ValueByteSize(bounded);
      if (!small_bytes.ok() || !bound_bytes.ok() || *small_bytes <= *bound_bytes) continue;
      return absl::UnimplementedError(absl::StrCat(
          "value '", v.name, "' takes ", *small_bytes, " bytes (", TensorTypeToString(*v.type),
          ") with the data-dependent sizes at ", percent, "% of their bounds, more than the ",
          *bound_bytes, " (", TensorTypeToString(*bounded.type),
          ") at the bounds: its size does not grow with them, so no upper bound is known for it"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Graph> ImportOnnxBytes(const std::string& bytes, const ShapeBindings& bindings,
                                      const std::string& source_name,
                                      const OnnxImportOptions& options) {
  MG_ASSIGN_OR_RETURN(onnx::ModelProto model, ParseModelBytes(bytes, source_name, options.limits));
  absl::StatusOr<Graph> graph = ImportModel(std::move(model), bindings, source_name, options);
  if (!graph.ok()) return Annotate(graph.status(), source_name);
  if (!graph->data_dependent_sizes().empty() && options.measured_sizes.empty()) {
    if (absl::Status s = CheckBoundsGrow(*graph, bytes, bindings, source_name, options); !s.ok()) {
      return Annotate(s, source_name);
    }
  }
  return graph;
}

}  // namespace memonger::graph

#include "graph/onnx/onnx_fold.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "graph/control_regions.h"
#include "graph/onnx/control_flow.h"
#include "graph/onnx/fold_internal.h"
#include "graph/onnx/sequences.h"
#include "graph/onnx/shape_rules.h"
#include "graph/onnx/size_bounds.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger::graph::onnx_fold {

namespace {

// ---------------------------------------------------------------------------------------------
// The driver.

bool FullyTyped(const onnx::TypeProto& type) {
  return type.has_tensor_type() && type.tensor_type().elem_type() != 0 &&
         StaticDims(type).has_value();
}

// Types libonnx knows after a run: graph inputs, value_info, outputs, initializers.
class TypeTable {
 public:
  explicit TypeTable(const onnx::GraphProto& graph) {
    for (const onnx::TensorProto& t : graph.initializer()) {
      onnx::TypeProto& type = initializer_types_[t.name()];
      type.mutable_tensor_type()->set_elem_type(t.data_type());
      onnx::TensorShapeProto* shape = type.mutable_tensor_type()->mutable_shape();
      for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    }
    // Only complete types are remembered. A name may be listed more than once (a graph output
    // keeps a value_info entry from an earlier run): any complete entry counts.
    for (const auto& [name, type] : initializer_types_) {
      if (auto dims = StaticDims(type)) static_dims_[name] = std::move(*dims);
    }
    for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()}) {
      for (const onnx::ValueInfoProto& vi : *list) {
        if (static_dims_.contains(vi.name()) || !FullyTyped(vi.type())) continue;
        static_dims_[vi.name()] = *StaticDims(vi.type());
      }
    }
  }

  // nullptr unless `name` has a complete tensor type.
  const Dims* StaticShape(const std::string& name) const {
    auto it = static_dims_.find(name);
    return it == static_dims_.end() ? nullptr : &it->second;
  }

 private:
  absl::flat_hash_map<std::string, onnx::TypeProto> initializer_types_;
  absl::flat_hash_map<std::string, Dims> static_dims_;
};

}  // namespace

std::optional<std::vector<int64_t>> StaticDims(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return std::nullopt;
  Dims dims;
  for (const onnx::TensorShapeProto::Dimension& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() < 0) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

void RemoveNodes(onnx::GraphProto& graph, const std::vector<bool>& removed,
                 const absl::flat_hash_set<std::string>& dropped) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < graph.node_size(); ++i) {
    if (!removed[i]) kept.Add()->Swap(graph.mutable_node(i));
  }
  graph.mutable_node()->Swap(&kept);
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
  for (onnx::ValueInfoProto& vi : *graph.mutable_value_info()) {
    if (!dropped.contains(vi.name())) infos.Add()->Swap(&vi);
  }
  graph.mutable_value_info()->Swap(&infos);
}

namespace {

bool NeedsOnlyShape(const onnx::NodeProto& node) {
  return node.op_type() == "Shape" || node.op_type() == "Size";
}

// Nodes whose inputs all have static shapes while some output has not.
std::vector<int> FindFrontier(const onnx::GraphProto& graph, const TypeTable& types) {
  std::vector<int> frontier;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    bool inputs_static = true;
    for (const std::string& in : node.input()) {
      if (!in.empty() && types.StaticShape(in) == nullptr) inputs_static = false;
    }
    bool outputs_static = true;
    for (const std::string& out : node.output()) {
      if (!out.empty() && types.StaticShape(out) == nullptr) outputs_static = false;
    }
    // An If is on the frontier until its condition folds, whatever its outputs' types: its
    // branches are planned only once one is chosen. A Loop, until its trip count and
    // condition fold: its carried values are typed once it is unrolled.
    if (node.op_type() == "Loop") {
      inputs_static = true;
      for (int k = 0; k < 2 && k < node.input_size(); ++k) {
        if (!node.input(k).empty() && types.StaticShape(node.input(k)) == nullptr) {
          inputs_static = false;
        }
      }
    }
    const bool control_flow =
        node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan";
    if (inputs_static && (!outputs_static || control_flow)) frontier.push_back(i);
  }
  return frontier;
}

absl::flat_hash_map<std::string, int> Producers(const onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty()) producer[out] = i;
    }
  }
  return producer;
}

// The frontier and, backwards through foldable ops, what feeds it (Shape and Size need no
// input value, so the walk stops there).
std::vector<bool> NodesWorthEvaluating(const onnx::GraphProto& graph,
                                       const std::vector<int>& frontier,
                                       const absl::flat_hash_map<std::string, int>& producer) {
  std::vector<bool> needed(graph.node_size(), false);
  std::vector<int> stack(frontier.begin(), frontier.end());
  for (int f : frontier) needed[f] = true;
  while (!stack.empty()) {
    const onnx::NodeProto& node = graph.node(stack.back());
    stack.pop_back();
    if (NeedsOnlyShape(node)) continue;
    for (const std::string& in : node.input()) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end() || needed[it->second]) continue;
      if (!IsFoldableOp(graph.node(it->second))) continue;
      needed[it->second] = true;
      stack.push_back(it->second);
    }
  }
  return needed;
}

struct Evaluation {
  absl::flat_hash_map<std::string, ConstTensor> values;  // by value name
  std::vector<bool> folded;                               // by node
};

// Evaluates the needed nodes in node order. Initializers are decoded only for a node whose
// every input may be known, so that weights feeding activations are never read.
Evaluation EvaluateNodes(const onnx::GraphProto& graph, const std::vector<bool>& needed,
                         const TypeTable& types, int64_t max_elements) {
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers[t.name()] = &t;
  absl::flat_hash_set<std::string> undecodable;
  Evaluation e;
  e.folded.assign(graph.node_size(), false);
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!needed[i] || !IsFoldableOp(node)) continue;
    bool may_fold = true;
    for (int k = 0; k < node.input_size() && may_fold && !NeedsOnlyShape(node); ++k) {
      const std::string& name = node.input(k);
      if (name.empty() || e.values.contains(name)) continue;
      auto init = initializers.find(name);
      std::optional<ConstTensor> v;
      if (init != initializers.end() && !undecodable.contains(name)) {
        v = TensorFromProto(*init->second, max_elements);
        if (!v) undecodable.insert(name);
      }
      if (v) {
        e.values[name] = std::move(*v);
      } else {
        may_fold = false;
      }
    }
    if (!may_fold) continue;
    std::vector<FoldInput> inputs(node.input_size());
    for (int k = 0; k < node.input_size(); ++k) {
      const std::string& name = node.input(k);
      if (name.empty()) continue;
      inputs[k].present = true;
      if (auto it = e.values.find(name); it != e.values.end()) inputs[k].value = &it->second;
      inputs[k].dims = types.StaticShape(name);
    }
    auto result = EvaluateNode(node, inputs, max_elements);
    if (!result || static_cast<int>(result->size()) != node.output_size()) continue;
    e.folded[i] = true;
    for (int k = 0; k < node.output_size(); ++k) {
      if (!node.output(k).empty()) e.values[node.output(k)] = std::move((*result)[k]);
    }
  }
  return e;
}

// The nodes to turn into initializers: the folded (non-Constant: libonnx reads those already)
// producers feeding the frontier; a frontier node fed by none of them, when it folds itself.
std::vector<bool> ChooseMaterialised(const onnx::GraphProto& graph,
                                     const std::vector<int>& frontier,
                                     const absl::flat_hash_map<std::string, int>& producer,
                                     const std::vector<bool>& folded) {
  std::vector<bool> materialise(graph.node_size(), false);
  for (int f : frontier) {
    bool fed = false;
    for (const std::string& in : graph.node(f).input()) {
      auto it = producer.find(in);
      if (in.empty() || it == producer.end()) continue;
      if (folded[it->second] && graph.node(it->second).op_type() != "Constant") {
        fed = true;
        materialise[it->second] = true;
      }
    }
    if (!fed && folded[f]) materialise[f] = true;
  }
  return materialise;
}

// Replaces the chosen nodes by initializers, removes the folded nodes left without readers,
// and drops the value_info of every removed name (a partial type there would shadow the
// initializer's); graph outputs that became initializers get the initializer's type.
void Materialise(onnx::GraphProto& graph, const std::vector<bool>& materialise,
                 const Evaluation& e, FoldReport& report) {
  const int num_nodes = graph.node_size();
  absl::flat_hash_map<std::string, int> readers;
  absl::flat_hash_set<std::string> graph_outputs;
  for (const onnx::ValueInfoProto& vi : graph.output()) graph_outputs.insert(vi.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& in : node.input()) {
      if (!in.empty()) ++readers[in];
    }
    for (const std::string& in : OuterReads(node)) ++readers[in];
  }
  auto live = [&](int i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty() && (readers[out] > 0 || graph_outputs.contains(out))) return true;
    }
    return false;
  };
  // Only nodes that had a reader can lose it: unused nodes of the file stay as they are.
  std::vector<bool> was_live(num_nodes, false);
  for (int i = 0; i < num_nodes; ++i) was_live[i] = live(i);

  std::vector<bool> removed(num_nodes, false);
  absl::flat_hash_set<std::string> dropped;
  auto remove = [&](int i) {
    removed[i] = true;
    ++report.removed_nodes;
    for (const std::string& in : graph.node(i).input()) {
      if (!in.empty()) --readers[in];
    }
    for (const std::string& in : OuterReads(graph.node(i))) --readers[in];
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty()) dropped.insert(out);
    }
  };
  for (int i = 0; i < num_nodes; ++i) {
    if (!materialise[i]) continue;
    for (const std::string& out : graph.node(i).output()) {
      if (out.empty()) continue;
      *graph.add_initializer() = TensorToProto(e.values.at(out), out);
      report.folded_values.push_back(out);
    }
    remove(i);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = num_nodes - 1; i >= 0; --i) {
      if (removed[i] || !e.folded[i] || !was_live[i] || live(i)) continue;
      remove(i);
      changed = true;
    }
  }

  RemoveNodes(graph, removed, dropped);
  for (onnx::ValueInfoProto& vi : *graph.mutable_output()) {
    auto it = e.values.find(vi.name());
    if (!dropped.contains(vi.name()) || it == e.values.end()) continue;
    onnx::TypeProto_Tensor* t = vi.mutable_type()->mutable_tensor_type();
    t->set_elem_type(it->second.dtype);
    t->clear_shape();
    onnx::TensorShapeProto* shape = t->mutable_shape();
    for (int64_t d : it->second.dims) shape->add_dim()->set_dim_value(d);
  }
}

// Each one-element constant (an initializer or a Constant node's output) named in `names`.
// One pass over the graph.
absl::flat_hash_map<std::string, ConstTensor> ConstantScalars(
    const onnx::GraphProto& graph, const absl::flat_hash_set<std::string>& names) {
  absl::flat_hash_map<std::string, ConstTensor> scalars;
  auto take = [&](const std::string& name, std::optional<ConstTensor> t) {
    if (t && t->size() == 1) scalars[name] = std::move(*t);
  };
  for (const onnx::TensorProto& init : graph.initializer()) {
    if (names.contains(init.name())) take(init.name(), TensorFromProto(init, 1));
  }
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() != "Constant" || node.output_size() != 1 ||
        !names.contains(node.output(0))) {
      continue;
    }
    if (auto r = EvaluateNode(node, {}, 1); r && r->size() == 1) take(node.output(0), (*r)[0]);
  }
  return scalars;
}

bool Truth(const ConstTensor& t) { return t.is_real() ? t.reals[0] != 0 : t.ints[0] != 0; }

// Every name `graph` defines, for fresh names of inlined nodes.
absl::flat_hash_set<std::string> TakenNames(const onnx::GraphProto& graph) {
  absl::flat_hash_set<std::string> taken;
  for (const onnx::TensorProto& t : graph.initializer()) taken.insert(t.name());
  for (const onnx::ValueInfoProto& vi : graph.input()) taken.insert(vi.name());
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& out : node.output()) taken.insert(out);
  }
  return taken;
}

// Replaces every If whose condition is a constant by its branch (InlineBranch), in one pass
// over the nodes; true when one was.
bool InlineDecidedIfs(onnx::GraphProto& graph, absl::flat_hash_map<std::string, int>& derived,
                      FoldReport& report) {
  auto is_if = [](const onnx::NodeProto& node) {
    return node.op_type() == "If" && IsDefaultDomain(node.domain()) && node.input_size() == 1;
  };
  absl::flat_hash_set<std::string> names;
  for (const onnx::NodeProto& node : graph.node()) {
    if (is_if(node)) names.insert(node.input(0));
  }
  if (names.empty()) return false;
  const absl::flat_hash_map<std::string, ConstTensor> decided = ConstantScalars(graph, names);
  if (decided.empty()) return false;
  absl::flat_hash_set<std::string> taken = TakenNames(graph);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  bool inlined = false;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    const auto condition = is_if(node) ? decided.find(node.input(0)) : decided.end();
    if (condition == decided.end()) {
      nodes.Add()->Swap(&node);
      continue;
    }
    std::string note;
    std::vector<onnx::NodeProto> replacement =
        InlineBranch(node, Truth(condition->second), taken, graph, note);
    report.decided_control_flow.push_back(std::move(note));
    // A branch chosen by a bound: everything it computes is sized by that choice.
    const auto cond = derived.find(node.input(0));
    const int level = cond == derived.end() ? -1 : cond->second;  // before `derived` grows
    for (onnx::NodeProto& n : replacement) {
      for (const std::string& out : n.output()) {
        if (!out.empty() && level >= 0) derived[out] = std::max(derived[out], level);
      }
      nodes.Add()->Swap(&n);
    }
    inlined = true;
  }
  graph.mutable_node()->Swap(&nodes);
  return inlined;
}

// The nodes of `g` and of every subgraph inside it: what one copy of a body costs.
int64_t NodeCount(const onnx::GraphProto& g) {
  int64_t count = g.node_size();
  for (const onnx::NodeProto& node : g.node()) {
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) count += NodeCount(a.g());
      for (const onnx::GraphProto& sub : a.graphs()) count += NodeCount(sub);
    }
  }
  return count;
}

// Takes `copies` copies of `body` from the fold's budget of unrolled nodes (util::
// kMaxUnrolledNodes for all Loops and Scans together); Unimplemented when it does not hold them.
absl::Status SpendUnrolled(const std::string& label, int64_t copies, const onnx::GraphProto& body,
                           int64_t& budget) {
  const int64_t per_copy = std::max<int64_t>(NodeCount(body), 1);
  if (copies > budget / per_copy) {
    return absl::UnimplementedError(absl::StrCat(
        label, ": ", copies, " copies of its ", per_copy, "-node body would be more than the ",
        budget, " nodes left of the ", util::kMaxUnrolledNodes,
        " that Loops and Scans are unrolled to"));
  }
  budget -= copies * per_copy;
  return absl::OkStatus();
}

// Replaces every Loop whose trip count and condition are constants by copies of its body
// (UnrollLoop), in one pass over the nodes; true when one was. Unimplemented for such a Loop
// that may not be unrolled: a trip count or condition computed from a bound (the run would
// measure another), a body that computes its condition, more than util::kMaxUnrolledNodes.
absl::StatusOr<bool> UnrollDecidedLoops(onnx::GraphProto& graph, int opset,
                                        const absl::flat_hash_map<std::string, int>& derived,
                                        int64_t& budget, FoldReport& report) {
  auto is_loop = [](const onnx::NodeProto& node) {
    return node.op_type() == "Loop" && IsDefaultDomain(node.domain()) && node.input_size() >= 2;
  };
  absl::flat_hash_set<std::string> names;
  for (const onnx::NodeProto& node : graph.node()) {
    if (!is_loop(node)) continue;
    names.insert(node.input(0));
    names.insert(node.input(1));
    for (std::string& in : OuterReads(node)) names.insert(std::move(in));
  }
  if (names.empty()) return false;
  const absl::flat_hash_map<std::string, ConstTensor> scalars = ConstantScalars(graph, names);
  auto outer_true = [&](const std::string& name) {
    auto it = scalars.find(name);
    return it != scalars.end() && Truth(it->second);
  };
  // Every name defined before any node moves (a moved node's slot is empty).
  absl::flat_hash_set<std::string> taken = TakenNames(graph);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  bool unrolled = false;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    const std::string& count = is_loop(node) ? node.input(0) : std::string();
    const auto trips = scalars.find(count);
    const auto condition = is_loop(node) ? scalars.find(node.input(1)) : scalars.end();
    if (count.empty() || trips == scalars.end() ||
        (!node.input(1).empty() && condition == scalars.end())) {
      nodes.Add()->Swap(&node);
      continue;
    }
    const std::string label = absl::StrCat("Loop node '", node.name(), "'");
    for (const std::string& input : {node.input(0), node.input(1)}) {
      if (input.empty() || !derived.contains(input)) continue;
      return absl::UnimplementedError(absl::StrCat(
          label, ": its ", input == count ? "trip count '" : "condition '", input,
          "' follows from a size that depends on tensor values (planned at an upper bound); a "
          "Loop is unrolled only where the shapes alone decide how often it runs"));
    }
    if (trips->second.is_real()) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": its trip count '", count, "' is not an integer"));
    }
    const int64_t m = trips->second.ints[0];
    if (m < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": its trip count '", count, "' is ", m));
    }
    const bool runs = condition == scalars.end() || Truth(condition->second);
    const int64_t iterations = runs ? m : 0;
    const onnx::GraphProto& body = FindAttr(node, "body")->g();
    // Without a condition input the Loop is a `for` loop: ONNX ignores the body's condition.
    if (iterations > 0 && !node.input(1).empty() && !BodyKeepsCondition(node, outer_true)) {
      // A while loop: run as a region (LowerUndecidedControlFlow) where nothing is sized from
      // a bound.
      if (derived.empty()) {
        nodes.Add()->Swap(&node);
        continue;
      }
      return absl::UnimplementedError(absl::StrCat(
          label, ": its body computes its condition '", body.output(0).name(),
          "', so it may stop before its trip count (a `while` or a `break`); a Loop is planned "
          "only where the shapes decide how often it runs"));
    }
    MG_RETURN_IF_ERROR(SpendUnrolled(label, iterations, body, budget));
    std::string note;
    MG_ASSIGN_OR_RETURN(std::vector<onnx::NodeProto> replacement,
                        UnrollLoop(node, iterations, opset, taken, graph, note));
    report.decided_control_flow.push_back(std::move(note));
    for (onnx::NodeProto& n : replacement) nodes.Add()->Swap(&n);
    unrolled = true;
  }
  graph.mutable_node()->Swap(&nodes);
  return unrolled;
}

// Replaces every Scan whose scan inputs have static shapes by copies of its body (UnrollScan),
// in one pass over the nodes; true when one was. Unimplemented for a Scan scanning a value sized
// from a bound (the run would measure another length) or of more than util::kMaxUnrolledNodes
// nodes unrolled. (A Scan of opset 8 was refused at import: CheckControlFlowOps.)
absl::StatusOr<bool> UnrollStaticScans(onnx::GraphProto& graph, int opset, const TypeTable& types,
                                       const absl::flat_hash_map<std::string, int>& derived,
                                       int64_t& budget, FoldReport& report) {
  auto is_scan = [](const onnx::NodeProto& node) {
    return node.op_type() == "Scan" && IsDefaultDomain(node.domain());
  };
  if (std::none_of(graph.node().begin(), graph.node().end(), is_scan)) return false;
  const ScanRanks dims_of = [&](const std::string& name) -> std::optional<std::vector<int64_t>> {
    const std::vector<int64_t>* dims = types.StaticShape(name);
    if (dims == nullptr) return std::nullopt;
    return *dims;
  };
  absl::flat_hash_set<std::string> taken = TakenNames(graph);  // before any node moves
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  bool unrolled = false;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (!is_scan(node)) {
      nodes.Add()->Swap(&node);
      continue;
    }
    const std::string label = absl::StrCat("Scan node '", node.name(), "'");
    MG_ASSIGN_OR_RETURN(const int64_t length, ScanLength(node, dims_of));
    if (length < 0) {
      nodes.Add()->Swap(&node);
      continue;
    }
    const int states = node.input_size() - static_cast<int>(FindAttr(node, "num_scan_inputs")->i());
    for (int i = states; i < node.input_size(); ++i) {
      const std::string& input = node.input(i);
      if (input.empty() || !derived.contains(input)) continue;
      return absl::UnimplementedError(absl::StrCat(
          label, ": it reads '", input, "', whose size depends on tensor values (planned at an "
          "upper bound); a Scan is unrolled only where the shapes alone decide its length"));
    }
    MG_RETURN_IF_ERROR(SpendUnrolled(label, length, FindAttr(node, "body")->g(), budget));
    std::string note;
    MG_ASSIGN_OR_RETURN(std::vector<onnx::NodeProto> replacement,
                        UnrollScan(node, dims_of, opset, taken, graph, note));
    report.decided_control_flow.push_back(std::move(note));
    for (onnx::NodeProto& n : replacement) nodes.Add()->Swap(&n);
    unrolled = true;
  }
  graph.mutable_node()->Swap(&nodes);
  return unrolled;
}

// Replaces every If whose condition, and every Loop whose trip count or condition, is typed
// but no constant by a control-flow region (LowerIfToRegion, LowerLoopToRegion), once nothing
// else folds: such a value depends on tensor values, and the run decides. True when one was.
// Nothing is lowered in a net with data-dependent sizes (a bound cannot pass through a branch
// not known to run); its Ifs and Loops stay, and the importer refuses them by name.
absl::StatusOr<bool> LowerUndecidedControlFlow(onnx::ModelProto& model, int opset,
                                               const TypeTable& types,
                                               const absl::flat_hash_map<std::string, int>& derived,
                                               FoldReport& report) {
  if (!derived.empty()) return false;
  onnx::GraphProto& graph = *model.mutable_graph();
  auto typed = [&](const std::string& name) {
    return name.empty() || types.StaticShape(name) != nullptr;
  };
  auto lowers = [&](const onnx::NodeProto& node) {
    if (!IsDefaultDomain(node.domain())) return false;
    if (node.op_type() == "If") return node.input_size() == 1 && typed(node.input(0));
    return node.op_type() == "Loop" && node.input_size() >= 2 && typed(node.input(0)) &&
           typed(node.input(1));
  };
  if (std::none_of(graph.node().begin(), graph.node().end(), lowers)) return false;
  absl::flat_hash_set<std::string> taken = TakenNames(graph);  // before any node moves
  // A scan output nothing reads is dropped: it needs no bound.
  absl::flat_hash_set<std::string> read;
  for (const onnx::NodeProto& node : graph.node()) {
    read.insert(node.input().begin(), node.input().end());
    for (std::string& name : OuterReads(node)) read.insert(std::move(name));
  }
  for (const onnx::ValueInfoProto& vi : graph.output()) read.insert(vi.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto& node : *graph.mutable_node()) {
    if (!lowers(node)) {
      nodes.Add()->Swap(&node);
      continue;
    }
    std::string note;
    std::vector<onnx::NodeProto> replacement;
    if (node.op_type() == "Loop") {
      for (int k = node.input_size() - 2; k < node.output_size(); ++k) {
        if (!read.contains(node.output(k))) node.set_output(k, "");
      }
    }
    if (node.op_type() == "If") {
      replacement = LowerIfToRegion(node, taken, graph, note);
    } else {
      MG_ASSIGN_OR_RETURN(replacement, LowerLoopToRegion(node, opset, taken, graph, note));
    }
    report.decided_control_flow.push_back(std::move(note));
    for (onnx::NodeProto& n : replacement) nodes.Add()->Swap(&n);
  }
  graph.mutable_node()->Swap(&nodes);
  bool imported = false;
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    imported = imported || o.domain() == kControlDomain;
  }
  if (!imported) {
    onnx::OperatorSetIdProto* o = model.add_opset_import();
    o->set_domain(std::string(kControlDomain));
    o->set_version(1);
  }
  return true;
}

// Gives the frontier's data-dependent outputs their upper bounds (size_bounds.h) as
// value_info; true when one was bounded.
bool BoundFrontier(onnx::GraphProto& graph, const std::vector<int>& frontier,
                   const TypeTable& types, const FoldOptions& options,
                   absl::flat_hash_map<std::string, int>& derived, FoldReport& report) {
  const int64_t max_elements = options.max_elements;
  const int percent = options.bound_percent;
  absl::flat_hash_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& t : graph.initializer()) initializers[t.name()] = &t;
  absl::flat_hash_map<std::string, const onnx::NodeProto*> constants;
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "Constant" && node.output_size() == 1) constants[node.output(0)] = &node;
  }
  // A node map: a rule may hold pointers to several entries.
  absl::node_hash_map<std::string, std::optional<ConstTensor>> decoded;
  auto value_of = [&](const std::string& name) -> const ConstTensor* {
    auto [it, inserted] = decoded.try_emplace(name);
    if (inserted) {
      if (auto i = initializers.find(name); i != initializers.end()) {
        it->second = TensorFromProto(*i->second, max_elements);
      } else if (auto c = constants.find(name); c != constants.end()) {
        if (auto r = EvaluateNode(*c->second, {}, max_elements); r && r->size() == 1) {
          it->second = std::move((*r)[0]);
        }
      }
    }
    return it->second.has_value() ? &*it->second : nullptr;
  };
  auto dims_of = [&](const std::string& name) { return types.StaticShape(name); };
  // The element types libonnx inferred for the outputs.
  absl::flat_hash_map<std::string, onnx::ValueInfoProto*> infos;
  for (onnx::ValueInfoProto& vi : *graph.mutable_value_info()) infos[vi.name()] = &vi;
  for (onnx::ValueInfoProto& vi : *graph.mutable_output()) infos.try_emplace(vi.name(), &vi);
  bool bounded = false;
  for (int f : frontier) {
    const onnx::NodeProto& node = graph.node(f);
    std::optional<SizeBound> bound = BoundDataDependentOutputs(node, dims_of, value_of);
    if (!bound || static_cast<int>(bound->output_dims.size()) != node.output_size()) continue;
    bool applied = false;
    for (int k = 0; k < node.output_size(); ++k) {
      const std::string& out = node.output(k);
      if (out.empty() || types.StaticShape(out) != nullptr) continue;
      auto it = infos.find(out);
      if (it == infos.end() || !it->second->type().has_tensor_type() ||
          it->second->type().tensor_type().elem_type() == 0) {
        continue;  // no element type inferred: leave it to the importer's message
      }
      onnx::TypeProto_Tensor* t = it->second->mutable_type()->mutable_tensor_type();
      std::vector<int64_t> dims = bound->output_dims[k];
      if (t->has_shape() && t->shape().dim_size() != static_cast<int>(dims.size())) continue;
      if (options.measured != nullptr) {
        if (auto m = options.measured->find(out); m != options.measured->end()) {
          if (m->second.size() != dims.size()) continue;
          t->clear_shape();
          for (int64_t d : m->second) t->mutable_shape()->add_dim()->set_dim_value(d);
          applied = true;
          continue;
        }
      }
      // Below the bound (FoldOptions::bound_percent), only the dims libonnx left unknown: the
      // others are exact.
      for (size_t d = 0; d < dims.size() && percent != 100; ++d) {
        if (!t->has_shape() || !t->shape().dim(static_cast<int>(d)).has_dim_value()) {
          dims[d] = static_cast<int64_t>(static_cast<__int128>(dims[d]) * percent / 100);
        }
      }
      t->clear_shape();
      onnx::TensorShapeProto* shape = t->mutable_shape();
      for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
      report.bounded_values.emplace_back(out, bound->why);
      int level = 0;  // one more than what the node reads
      for (const std::string& in : node.input()) {
        if (auto d = derived.find(in); d != derived.end()) level = std::max(level, d->second);
      }
      derived[out] = level + 1;
      applied = true;
    }
    bounded = bounded || applied;
  }
  return bounded;
}

}  // namespace

namespace {

// Steps 1-5 in this process (inside RunInChild).
// Adds to `derived` the outputs of every node that reads a derived value (its inputs, or what
// its branches read), at the highest level it reads, in node order (a dependency order).
void CloseDerived(const onnx::GraphProto& graph, absl::flat_hash_map<std::string, int>& derived) {
  if (derived.empty()) return;
  for (const onnx::NodeProto& node : graph.node()) {
    int level = -1;
    auto read = [&](const std::string& in) {
      if (auto d = derived.find(in); d != derived.end()) level = std::max(level, d->second);
    };
    for (const std::string& in : node.input()) read(in);
    for (const std::string& in : OuterReads(node)) read(in);
    if (level < 0) continue;
    for (const std::string& out : node.output()) {
      if (out.empty()) continue;
      auto [it, inserted] = derived.try_emplace(out, level);
      if (!inserted) it->second = std::max(it->second, level);
    }
  }
}

// libonnx's inference without the Ifs' branches and Loops' and Scans' bodies: an If is replaced
// by its branch once its condition folds, a Loop or Scan by copies of its body once its count
// does, and libonnx types a subgraph by copying every type of the enclosing graph (a net of many
// Ifs cost Ifs x values). Their outputs stay untyped until then, and so does whatever reads
// them: libonnx 1.12 sees those nodes without their schema, as its Shape crashes on an untyped
// input (data propagation) and Scan's shape function on a node without its attributes.
absl::Status InferWithoutBranches(onnx::ModelProto& model) {
  onnx::GraphProto& graph = *model.mutable_graph();
  struct Held {
    int node;
    std::string op_type;
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> attributes;
  };
  std::vector<Held> held;
  absl::flat_hash_set<std::string> untyped;  // outputs of the nodes held so far
  const TypeTable types(graph);
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    // A region's markers (control_regions.h) have no schema libonnx knows: held like the
    // control flow they stand for, their outputs typed by our rules (shape_rules.h).
    if (IsRegionMarker(node)) {
      held.push_back({i, node.op_type(), {}});
      node.clear_op_type();
      for (const std::string& out : node.output()) {
        if (!out.empty() && types.StaticShape(out) == nullptr) untyped.insert(out);
      }
      continue;
    }
    const bool control_flow =
        node.op_type() == "If" || node.op_type() == "Loop" || node.op_type() == "Scan";
    bool downstream = false;
    if (!control_flow && !untyped.empty()) {
      for (const std::string& in : node.input()) downstream = downstream || untyped.contains(in);
      for (const std::string& in : OuterReads(node)) downstream = downstream || untyped.contains(in);
    }
    if (!control_flow && !downstream) continue;
    held.push_back({i, node.op_type(), {}});
    if (control_flow) held.back().attributes.Swap(node.mutable_attribute());
    node.clear_op_type();
    for (const std::string& out : node.output()) {
      if (!out.empty()) untyped.insert(out);
    }
  }
  const absl::Status s = InferShapesInProcess(model, /*strict=*/false);
  for (Held& h : held) {
    onnx::NodeProto& node = *graph.mutable_node(h.node);
    if (h.attributes.size() > 0) node.mutable_attribute()->Swap(&h.attributes);
    node.set_op_type(h.op_type);
  }
  return s;
}

// Steps 1-5 and the two more (the header's list) in this process, inside RunInChild.
absl::StatusOr<FoldReport> FoldHere(onnx::ModelProto& model, const FoldOptions& options) {
  FoldReport report;
  onnx::GraphProto& graph = *model.mutable_graph();
  absl::flat_hash_map<std::string, int> derived;  // FoldReport::derived_values
  int64_t budget = util::kMaxUnrolledNodes;  // nodes Loops and Scans may still unroll to
  int opset = 0;  // the default domain's
  for (const onnx::OperatorSetIdProto& o : model.opset_import()) {
    if (IsDefaultDomain(o.domain())) opset = static_cast<int>(o.version());
  }
  auto finish = [&]() {
    CloseDerived(graph, derived);
    report.derived_values.assign(derived.begin(), derived.end());
    std::sort(report.derived_values.begin(), report.derived_values.end());
    return report;
  };
  for (int round = 0;; ++round) {
    if (absl::Status s = InferWithoutBranches(model); !s.ok()) return s;
    ++report.inference_runs;
    if (round >= options.max_rounds) {
      const TypeTable types(graph);
      if (FindFrontier(graph, types).empty()) return finish();
      return absl::ResourceExhaustedError(absl::StrCat(
          "shape folding stopped after ", options.max_rounds,
          " rounds with shapes still unknown (each round folds the shape arithmetic that the "
          "previous one revealed; this model chains more of it than that)"));
    }
    // Folded values computed from derived ones are derived (their producers go with folding).
    CloseDerived(graph, derived);
    if (InlineDecidedIfs(graph, derived, report)) continue;
    MG_ASSIGN_OR_RETURN(const bool unrolled, UnrollDecidedLoops(graph, opset, derived, budget, report));
    if (unrolled || LowerSequences(graph, opset)) continue;
    const TypeTable types(graph);
    MG_ASSIGN_OR_RETURN(const bool scanned, UnrollStaticScans(graph, opset, types, derived, budget, report));
    if (scanned) continue;
    const std::vector<int> frontier = FindFrontier(graph, types);
    if (frontier.empty()) return finish();
    MG_ASSIGN_OR_RETURN(const bool ruled,
                        ApplyShapeRules(graph, frontier, [&](const std::string& name) {
                          return types.StaticShape(name);
                        }));
    if (ruled) continue;

    const absl::flat_hash_map<std::string, int> producer = Producers(graph);
    const Evaluation e = EvaluateNodes(graph, NodesWorthEvaluating(graph, frontier, producer),
                                       types, options.max_elements);
    const std::vector<bool> materialise = ChooseMaterialised(graph, frontier, producer, e.folded);
    if (std::any_of(materialise.begin(), materialise.end(), [](bool b) { return b; })) {
      Materialise(graph, materialise, e, report);
      continue;
    }
    if (BoundFrontier(graph, frontier, types, options, derived, report)) continue;
    MG_ASSIGN_OR_RETURN(const bool lowered,
                        LowerUndecidedControlFlow(model, opset, types, derived, report));
    if (!lowered) return finish();
  }
}

}  // namespace

absl::StatusOr<FoldReport> InferAndFold(onnx::ModelProto& model, const FoldOptions& options) {
  // The child folds its copy of the model and sends back what folding changes: the nodes left,
  // the inferred types, the initializers it appended (Materialise only appends, one per folded
  // value) and the two counts, ahead of them as text.
  const int initializers_before = model.graph().initializer_size();
  absl::StatusOr<std::string> reply = RunInChild([&]() -> ChildReply {
    ChildReply r;
    absl::StatusOr<FoldReport> report = FoldHere(model, options);
    if (!report.ok()) {
      r.status = report.status();
      return r;
    }
    onnx::GraphProto& graph = *model.mutable_graph();
    onnx::GraphProto changes;
    changes.mutable_node()->Swap(graph.mutable_node());
    changes.mutable_value_info()->Swap(graph.mutable_value_info());
    changes.mutable_output()->Swap(graph.mutable_output());
    for (int i = initializers_before; i < graph.initializer_size(); ++i) {
      changes.add_initializer()->Swap(graph.mutable_initializer(i));
    }
    // The bounds and the inlined Ifs ride in fields `changes` has no other use for.
    // Inputs: the derived values, an empty name, then the bounded ones with their why.
    for (const auto& [name, level] : report->derived_values) {
      onnx::ValueInfoProto* vi = changes.add_input();
      vi->set_name(name);
      vi->set_doc_string(absl::StrCat(level));
    }
    changes.add_input()->set_name("");
    for (const auto& [name, why] : report->bounded_values) {
      onnx::ValueInfoProto* vi = changes.add_input();
      vi->set_name(name);
      vi->set_doc_string(why);
    }
    changes.set_doc_string(absl::StrJoin(report->decided_control_flow, "\n"));
    r.bytes = absl::StrCat(report->inference_runs, " ", report->removed_nodes, " ",
                           changes.SerializeAsString());
    return r;
  });
  if (!reply.ok()) return reply.status();
  FoldReport report;
  onnx::GraphProto changes;
  const size_t first = reply->find(' ');
  const size_t second = first == std::string::npos ? first : reply->find(' ', first + 1);
  if (second == std::string::npos ||
      !absl::SimpleAtoi(absl::string_view(*reply).substr(0, first), &report.inference_runs) ||
      !absl::SimpleAtoi(absl::string_view(*reply).substr(first + 1, second - first - 1),
                        &report.removed_nodes) ||
      !changes.ParseFromArray(reply->data() + second + 1,
                              static_cast<int>(reply->size() - second - 1))) {
    return absl::InternalError("the folding process sent an unreadable reply");
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.mutable_node()->Swap(changes.mutable_node());
  graph.mutable_value_info()->Swap(changes.mutable_value_info());
  graph.mutable_output()->Swap(changes.mutable_output());
  // Where fork failed, the work ran on `model` itself and left the appended initializers
  // swapped out (empty): they come back from the reply.
  graph.mutable_initializer()->DeleteSubrange(
      initializers_before, graph.initializer_size() - initializers_before);
  for (onnx::TensorProto& t : *changes.mutable_initializer()) {
    report.folded_values.push_back(t.name());
    graph.add_initializer()->Swap(&t);
  }
  bool bounded = false;
  for (const onnx::ValueInfoProto& vi : changes.input()) {
    if (vi.name().empty()) {
      bounded = true;
    } else if (bounded) {
      report.bounded_values.emplace_back(vi.name(), vi.doc_string());
    } else {
      int level = 0;
      if (!absl::SimpleAtoi(vi.doc_string(), &level)) {
        return absl::InternalError("the folding process sent an unreadable reply");
      }
      report.derived_values.emplace_back(vi.name(), level);
    }
  }
  if (!changes.doc_string().empty()) {
    report.decided_control_flow = absl::StrSplit(changes.doc_string(), '\n');
  }
  return report;
}

}  // namespace memonger::graph::onnx_fold

#include "graph/onnx/control_flow.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/control_regions.h"
#include "graph/onnx/const_tensor.h"
#include "graph/onnx/fold_eval.h"
#include "graph/onnx/fold_internal.h"
#include "graph/onnx/tensor_data_check.h"
#include "util/status_macros.h"

namespace memonger::graph::onnx_fold {

namespace {

std::string Label(const onnx::NodeProto& node) {
  return absl::StrCat(node.op_type(), " node '", node.name(), "'");
}

const onnx::GraphProto* Branch(const onnx::NodeProto& node, const char* name) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a != nullptr && a->has_g() ? &a->g() : nullptr;
}

void CollectOuterReads(const onnx::GraphProto& g, absl::flat_hash_set<std::string>& reads) {
  absl::flat_hash_set<std::string> defined;
  for (const onnx::TensorProto& t : g.initializer()) defined.insert(t.name());
  for (const onnx::ValueInfoProto& vi : g.input()) defined.insert(vi.name());
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& out : n.output()) {
      if (!out.empty()) defined.insert(out);
    }
  }
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.contains(name)) reads.insert(name);
  };
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& in : n.input()) read(in);
    for (const std::string& in : OuterReads(n)) read(in);
  }
  for (const onnx::ValueInfoProto& vi : g.output()) read(vi.name());
}

// The names an If's branch may read: its enclosing scopes' sets, innermost last (not copied:
// a graph of many Ifs would copy its names once per If).
using Scopes = std::vector<const absl::flat_hash_set<std::string>*>;

bool InScopes(const Scopes& scopes, const std::string& name) {
  return std::any_of(scopes.begin(), scopes.end(),
                     [&](const absl::flat_hash_set<std::string>* s) { return s->contains(name); });
}

absl::Status CheckSubgraphNode(const onnx::NodeProto& node, const Scopes& outer);

// One subgraph of `node` (an If's branch: no inputs, the If's outputs; a Loop's body: the
// Loop's inputs, one output more) against the names its enclosing scopes define.
absl::Status CheckSubgraph(const onnx::NodeProto& node, const char* which,
                           const onnx::GraphProto& branch, const Scopes& outer) {
  const std::string where = absl::StrCat(Label(node), ": its ", which);
  const bool body = node.op_type() == "Loop" || node.op_type() == "Scan";
  const bool loop = node.op_type() == "Loop";
  const int inputs = body ? node.input_size() : 0;
  const int outputs = loop ? node.output_size() + 1 : node.output_size();
  if (branch.input_size() != inputs) {
    return absl::InvalidArgumentError(
        body ? absl::StrCat(where, " has ", branch.input_size(), " inputs, the ", node.op_type(),
                            " ", inputs,
                            loop ? " (a body takes the iteration number, the condition and the "
                                   "carried values)"
                                 : " (a body takes the states and one slice per scan input)")
             : absl::StrCat(where, " has inputs (an If's branches take none)"));
  }
  if (branch.output_size() != outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " has ", branch.output_size(), " outputs, the ", node.op_type(), " ",
        node.output_size(), loop ? " (a body writes its condition and then one per output)" : ""));
  }
  absl::flat_hash_set<std::string> own;
  Scopes scope = outer;
  scope.push_back(&own);
  auto define = [&](const std::string& name) -> absl::Status {
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has an empty name"));
    if (InScopes(outer, name) || !own.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " defines '", name,
                       "', which it or an enclosing scope defines already (ONNX values are "
                       "assigned once, and a subgraph may not shadow a name)"));
    }
    return absl::OkStatus();
  };
  for (const onnx::ValueInfoProto& vi : branch.input()) MG_RETURN_IF_ERROR(define(vi.name()));
  for (const onnx::TensorProto& t : branch.initializer()) {
    MG_RETURN_IF_ERROR(CheckTensorData(t, absl::StrCat(where, ": initializer '", t.name(), "'")));
    MG_RETURN_IF_ERROR(define(t.name()));
  }
  // A read must follow its definition in the subgraph: its nodes are inlined in order.
  for (const onnx::NodeProto& n : branch.node()) {
    for (const std::string& in : n.input()) {
      if (!in.empty() && !InScopes(scope, in)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", Label(n), " reads '", in,
            "', which nothing before it in the ", which, " or its enclosing scopes defines"));
      }
    }
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_t()) {
        MG_RETURN_IF_ERROR(CheckTensorData(
            a.t(), absl::StrCat(where, ": ", Label(n), ": attribute '", a.name(), "'")));
      }
    }
    MG_RETURN_IF_ERROR(CheckSubgraphNode(n, scope));
    for (const std::string& out : n.output()) {
      if (!out.empty()) MG_RETURN_IF_ERROR(define(out));
    }
  }
  for (const onnx::ValueInfoProto& vi : branch.output()) {
    if (!InScopes(scope, vi.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " outputs '", vi.name(), "', which nothing defines"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSubgraphNode(const onnx::NodeProto& node, const Scopes& outer) {
  if (node.op_type() == "If") {
    for (const char* which : {"then_branch", "else_branch"}) {
      const onnx::GraphProto* branch = Branch(node, which);
      if (branch != nullptr) MG_RETURN_IF_ERROR(CheckSubgraph(node, which, *branch, outer));
    }
  } else if (node.op_type() == "Loop" || node.op_type() == "Scan") {
    const onnx::GraphProto* body = Branch(node, "body");
    if (body != nullptr) MG_RETURN_IF_ERROR(CheckSubgraph(node, "body", *body, outer));
  }
  return absl::OkStatus();
}

void RenameIn(onnx::GraphProto& g, const absl::flat_hash_map<std::string, std::string>& renames) {
  for (onnx::NodeProto& n : *g.mutable_node()) {
    for (std::string& in : *n.mutable_input()) {
      if (auto it = renames.find(in); it != renames.end()) in = it->second;
    }
    RenameOuterReads(n, renames);
  }
  for (onnx::ValueInfoProto& vi : *g.mutable_output()) {
    if (auto it = renames.find(vi.name()); it != renames.end()) vi.set_name(it->second);
  }
}

}  // namespace

bool HoldsSubgraph(const onnx::AttributeProto& a) {
  return a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS ||
         a.has_g() || a.graphs_size() > 0;
}

namespace {

// A Scan's counts and per-input lists: 1 <= num_scan_inputs <= inputs, an output per state,
// each of scan_input_axes, scan_input_directions (num_scan_inputs entries), scan_output_axes,
// scan_output_directions (one per scan output) either absent or complete.
absl::Status CheckScanAttributes(const onnx::NodeProto& scan) {
  const onnx::AttributeProto* count = FindAttr(scan, "num_scan_inputs");
  const int64_t m = count != nullptr && count->type() == onnx::AttributeProto::INT ? count->i() : 0;
  if (m < 1 || m > scan.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(scan), ": num_scan_inputs must be an integer between 1 and its ", scan.input_size(),
        " inputs"));
  }
  const int64_t states = scan.input_size() - m;
  if (scan.output_size() < states) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(scan), ": it has ", states, " states but ", scan.output_size(),
        " outputs (one per state, then the scan outputs)"));
  }
  const int64_t outputs = scan.output_size() - states;
  for (const auto& [name, size] : {std::pair{"scan_input_axes", m},
                                   std::pair{"scan_input_directions", m},
                                   std::pair{"scan_output_axes", outputs},
                                   std::pair{"scan_output_directions", outputs}}) {
    const onnx::AttributeProto* a = FindAttr(scan, name);
    if (a != nullptr && a->ints_size() != size) {
      return absl::InvalidArgumentError(absl::StrCat(Label(scan), ": attribute '", name,
                                                     "' has ", a->ints_size(),
                                                     " entries for ", size));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckControlFlowOps(const onnx::GraphProto& graph, int opset) {
  for (const onnx::NodeProto& node : graph.node()) {
    const bool is_if = node.op_type() == "If" && IsDefaultDomain(node.domain());
    const bool is_loop = node.op_type() == "Loop" && IsDefaultDomain(node.domain());
    const bool is_scan = node.op_type() == "Scan" && IsDefaultDomain(node.domain());
    bool holds = false;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (!HoldsSubgraph(a)) continue;
      holds = true;
      if (!is_if && !is_loop && !is_scan) {
        return absl::UnimplementedError(absl::StrCat(
            Label(node), ": control flow subgraphs are not planned except an If's branches and "
            "a Loop's or Scan's body (its attribute '", a.name(), "' holds a graph)"));
      }
      if (a.graphs_size() > 0 || !a.has_g()) {
        return absl::InvalidArgumentError(absl::StrCat(Label(node), ": attribute '", a.name(),
                                                       "' must hold exactly one graph"));
      }
      MG_RETURN_IF_ERROR(CheckControlFlowOps(a.g(), opset));
    }
    if (is_if && (!holds || Branch(node, "then_branch") == nullptr ||
                  Branch(node, "else_branch") == nullptr || node.input_size() != 1 ||
                  node.input(0).empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          Label(node), ": an If needs one condition input and both then_branch and else_branch"));
    }
    if (is_loop && (Branch(node, "body") == nullptr || node.input_size() < 2)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Label(node), ": a Loop needs a body and its trip count and condition inputs (either "
          "may be an empty name)"));
    }
    if (is_loop && node.output_size() < node.input_size() - 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          Label(node), ": it carries ", node.input_size() - 2, " values but has ",
          node.output_size(), " outputs (one per carried value, then the scan outputs)"));
    }
    if (is_scan) MG_RETURN_IF_ERROR(CheckScanAttributes(node));
    if (is_scan && opset < 9) {
      return absl::UnimplementedError(absl::StrCat(
          Label(node), ": a Scan of opset ", opset,
          " (a batch axis and sequence lengths) is not planned; opset 9 and later are"));
    }
    if (is_scan && Branch(node, "body") == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(Label(node), ": a Scan needs a body"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> OuterReads(const onnx::NodeProto& node) {
  absl::flat_hash_set<std::string> reads;
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.has_g()) CollectOuterReads(a.g(), reads);
    for (const onnx::GraphProto& g : a.graphs()) CollectOuterReads(g, reads);
  }
  std::vector<std::string> sorted(reads.begin(), reads.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

absl::Status CheckSubgraphScopes(const onnx::GraphProto& graph,
                                 const absl::flat_hash_set<std::string>& defined) {
  for (const onnx::NodeProto& node : graph.node()) {
    MG_RETURN_IF_ERROR(CheckSubgraphNode(node, {&defined}));
  }
  return absl::OkStatus();
}

void RenameOuterReads(onnx::NodeProto& node,
                      const absl::flat_hash_map<std::string, std::string>& renames) {
  if (renames.empty()) return;
  for (onnx::AttributeProto& a : *node.mutable_attribute()) {
    if (a.has_g()) RenameIn(*a.mutable_g(), renames);
    for (onnx::GraphProto& g : *a.mutable_graphs()) RenameIn(g, renames);
  }
}

std::vector<onnx::NodeProto> InlineBranch(const onnx::NodeProto& if_node, bool condition,
                                          absl::flat_hash_set<std::string>& taken,
                                          onnx::GraphProto& graph, std::string& note) {
  const char* which = condition ? "then_branch" : "else_branch";
  onnx::GraphProto branch = *Branch(if_node, which);
  absl::flat_hash_set<std::string> branch_defined;
  absl::flat_hash_map<std::string, std::string> renames;
  auto define = [&](const std::string& name) {
    if (name.empty()) return;
    if (taken.contains(name)) {
      std::string fresh;
      for (int k = 1; fresh.empty() || taken.contains(fresh); ++k) {
        fresh = absl::StrCat(name, "/", if_node.name(), "/", which, "_", k);
      }
      renames[name] = fresh;
      taken.insert(fresh);
      branch_defined.insert(fresh);
      return;
    }
    taken.insert(name);
    branch_defined.insert(name);
  };
  for (const onnx::TensorProto& t : branch.initializer()) define(t.name());
  for (const onnx::NodeProto& n : branch.node()) {
    for (const std::string& out : n.output()) define(out);
  }
  auto renamed = [&](const std::string& name) {
    auto it = renames.find(name);
    return it == renames.end() ? name : it->second;
  };
  std::vector<onnx::NodeProto> replacement;
  const int branch_nodes = branch.node_size();
  for (onnx::NodeProto& n : *branch.mutable_node()) {
    for (std::string& in : *n.mutable_input()) in = renamed(in);
    for (std::string& out : *n.mutable_output()) out = renamed(out);
    RenameOuterReads(n, renames);
    replacement.push_back(std::move(n));
  }
  for (int k = 0; k < if_node.output_size(); ++k) {
    if (if_node.output(k).empty()) continue;
    onnx::NodeProto identity;
    identity.set_op_type("Identity");
    identity.set_name(absl::StrCat(if_node.name(), "/", which, "/output_", k));
    identity.add_input(renamed(branch.output(k).name()));
    identity.add_output(if_node.output(k));
    replacement.push_back(std::move(identity));
  }
  for (onnx::TensorProto& t : *branch.mutable_initializer()) {
    t.set_name(renamed(t.name()));
    graph.add_initializer()->Swap(&t);
  }
  // Declarations of the branch's own values only: one of an enclosing value is not the
  // branch's to make.
  for (auto* list : {branch.mutable_value_info(), branch.mutable_output()}) {
    for (onnx::ValueInfoProto& vi : *list) {
      vi.set_name(renamed(vi.name()));
      if (branch_defined.contains(vi.name()) && vi.has_type()) graph.add_value_info()->Swap(&vi);
    }
  }
  note = absl::StrCat(Label(if_node), ": its condition is ", condition ? "true" : "false",
                      " at these sizes (shapes alone decide it), so its ", which, " (",
                      branch_nodes, branch_nodes == 1 ? " node" : " nodes",
                      ") is planned in its place");
  return replacement;
}

namespace {

// A one-element constant as a condition: true when it is nonzero.
std::optional<bool> ConstantTruth(const std::optional<ConstTensor>& t) {
  if (!t || t->size() != 1) return std::nullopt;
  return t->is_real() ? t->reals[0] != 0 : t->ints[0] != 0;
}

onnx::NodeProto MakeNode(const std::string& op, std::string name, std::vector<std::string> inputs,
                         std::string output) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(std::move(name));
  for (std::string& in : inputs) n.add_input(std::move(in));
  n.add_output(std::move(output));
  return n;
}

void SetIntAttribute(onnx::NodeProto& n, const char* name, int64_t value) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

ConstTensor Int64s(std::vector<int64_t> values, std::vector<int64_t> dims) {
  ConstTensor t;
  t.dtype = onnx::TensorProto::INT64;
  t.dims = std::move(dims);
  t.ints = std::move(values);
  return t;
}

// Writes the copies of a Loop's or Scan's body in place of `owner`: fresh names, the body's
// initializers appended once, iterations stacked. Every name it makes goes into `taken`.
class Unroller {
 public:
  Unroller(const onnx::NodeProto& owner, const onnx::GraphProto& body, int opset,
           absl::flat_hash_set<std::string>& taken, onnx::GraphProto& graph)
      : owner_(owner), body_(body), opset_(opset), taken_(taken), graph_(graph) {
    // Body initializers are the same at every iteration.
    for (const onnx::TensorProto& t : body.initializer()) {
      onnx::TensorProto* copy = graph.add_initializer();
      *copy = t;
      copy->set_name(Fresh(absl::StrCat(t.name(), "/", owner.name())));
      shared_[t.name()] = copy->name();
    }
  }

  std::string Fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.contains(name); ++k) name = absl::StrCat(base, "_", k);
    taken_.insert(name);
    return name;
  }

  // Whether the body reads its input `index` (a node, a nested subgraph or an output does).
  bool Reads(int index) const {
    const std::string& name = body_.input(index).name();
    for (const onnx::NodeProto& n : body_.node()) {
      for (const std::string& in : n.input()) {
        if (in == name) return true;
      }
      for (const std::string& in : OuterReads(n)) {
        if (in == name) return true;
      }
    }
    for (const onnx::ValueInfoProto& vi : body_.output()) {
      if (vi.name() == name) return true;
    }
    return false;
  }

  // A Constant node holding `value`, named from `base`; returns its output.
  std::string Constant(const ConstTensor& value, const std::string& base) {
    const std::string name = Fresh(base);
    onnx::NodeProto n = MakeNode("Constant", name, {}, name);
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = TensorToProto(value, name);
    nodes_.push_back(std::move(n));
    return name;
  }

  void Add(onnx::NodeProto n) { nodes_.push_back(std::move(n)); }

  // Iteration `k`: the body's nodes, its input i reading inputs[i] (the unread may be empty);
  // returns the names its outputs have in this copy.
  std::vector<std::string> CopyBody(int64_t k, const std::vector<std::string>& inputs) {
    absl::flat_hash_map<std::string, std::string> renames = shared_;
    for (int i = 0; i < body_.input_size(); ++i) {
      if (!inputs[i].empty()) renames[body_.input(i).name()] = inputs[i];
    }
    for (const onnx::NodeProto& n : body_.node()) {
      for (const std::string& out : n.output()) {
        if (!out.empty()) renames[out] = Fresh(absl::StrCat(out, "/", owner_.name(), "/", k));
      }
    }
    auto renamed = [&](const std::string& name) {
      auto it = renames.find(name);
      return it == renames.end() ? name : it->second;
    };
    for (const onnx::NodeProto& original : body_.node()) {
      onnx::NodeProto n = original;
      n.set_name(Fresh(absl::StrCat(owner_.name(), "/", k, "/", original.name())));
      for (std::string& in : *n.mutable_input()) {
        if (!in.empty()) in = renamed(in);
      }
      for (std::string& out : *n.mutable_output()) {
        if (!out.empty()) out = renamed(out);
      }
      RenameOuterReads(n, renames);
      nodes_.push_back(std::move(n));
    }
    std::vector<std::string> outputs;
    for (const onnx::ValueInfoProto& vi : body_.output()) outputs.push_back(renamed(vi.name()));
    return outputs;
  }

  // `output` = the values stacked along a new axis `axis` (Unsqueeze each, one Concat).
  // REQUIRES: values not empty.
  void Stack(const std::vector<std::string>& values, int64_t axis, const std::string& output) {
    std::string axes;  // Unsqueeze's axes input, from opset 13
    if (opset_ >= 13) {
      axes = Fresh(absl::StrCat(output, "/axes"));
      *graph_.add_initializer() = TensorToProto(Int64s({axis}, {1}), axes);
    }
    onnx::NodeProto concat = MakeNode("Concat", Fresh(absl::StrCat(output, "/stack")), {}, output);
    SetIntAttribute(concat, "axis", axis);
    for (size_t k = 0; k < values.size(); ++k) {
      const std::string stacked = Fresh(absl::StrCat(output, "/", k));
      onnx::NodeProto unsqueeze = MakeNode("Unsqueeze", stacked, {values[k]}, stacked);
      if (!axes.empty()) {
        unsqueeze.add_input(axes);
      } else {
        onnx::AttributeProto* a = unsqueeze.add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        a->add_ints(axis);
      }
      nodes_.push_back(std::move(unsqueeze));
      concat.add_input(stacked);
    }
    nodes_.push_back(std::move(concat));
  }

  std::vector<onnx::NodeProto> Take() { return std::move(nodes_); }

 private:
  const onnx::NodeProto& owner_;
  const onnx::GraphProto& body_;
  const int opset_;
  absl::flat_hash_set<std::string>& taken_;
  onnx::GraphProto& graph_;
  absl::flat_hash_map<std::string, std::string> shared_;
  std::vector<onnx::NodeProto> nodes_;
};

std::string Copies(int64_t trips, int body_nodes) {
  return absl::StrCat(trips, trips == 1 ? " copy" : " copies", " of its body (", body_nodes,
                      body_nodes == 1 ? " node" : " nodes", ") are planned in its place");
}

std::vector<int64_t> IntsOf(const onnx::NodeProto& node, const char* name, size_t count) {
  std::vector<int64_t> values(count, 0);
  if (const onnx::AttributeProto* a = FindAttr(node, name)) {
    for (size_t i = 0; i < count && i < static_cast<size_t>(a->ints_size()); ++i) {
      values[i] = a->ints(static_cast<int>(i));
    }
  }
  return values;
}

}  // namespace

bool BodyKeepsCondition(const onnx::NodeProto& loop,
                        const std::function<bool(const std::string&)>& outer_true) {
  const onnx::GraphProto* body = Branch(loop, "body");
  if (body == nullptr || body->input_size() < 2 || body->output_size() < 1) return false;
  absl::flat_hash_map<std::string, const onnx::NodeProto*> producer;
  for (const onnx::NodeProto& n : body->node()) {
    for (const std::string& out : n.output()) producer[out] = &n;
  }
  absl::flat_hash_set<std::string> own;
  for (const onnx::TensorProto& t : body->initializer()) own.insert(t.name());
  for (const onnx::ValueInfoProto& vi : body->input()) own.insert(vi.name());
  std::string name = body->output(0).name();
  // Each step moves to an earlier node: the chain ends within the body's size.
  for (int step = 0; step <= body->node_size(); ++step) {
    if (name == body->input(1).name()) return true;
    auto it = producer.find(name);
    if (it == producer.end()) {
      for (const onnx::TensorProto& t : body->initializer()) {
        if (t.name() == name) return ConstantTruth(TensorFromProto(t, 1)).value_or(false);
      }
      return !own.contains(name) && outer_true(name);
    }
    const onnx::NodeProto& n = *it->second;
    if (n.op_type() == "Constant" && n.output_size() == 1) {
      std::optional<std::vector<ConstTensor>> r = EvaluateNode(n, {}, 1);
      return r && r->size() == 1 && ConstantTruth((*r)[0]).value_or(false);
    }
    if (n.op_type() != "Identity" || n.input_size() != 1) return false;
    name = n.input(0);
  }
  return false;
}

absl::StatusOr<std::vector<onnx::NodeProto>> UnrollLoop(const onnx::NodeProto& loop,
                                                        int64_t trip_count, int opset,
                                                        absl::flat_hash_set<std::string>& taken,
                                                        onnx::GraphProto& graph,
                                                        std::string& note) {
  const onnx::GraphProto& body = *Branch(loop, "body");
  const int carried = loop.input_size() - 2;
  const int scans = loop.output_size() - carried;
  for (int s = 0; s < scans && trip_count == 0; ++s) {
    if (loop.output(carried + s).empty()) continue;
    return absl::UnimplementedError(absl::StrCat(
        Label(loop), ": it runs no iteration at these sizes, and its scan output '",
        loop.output(carried + s), "' would be empty with an element shape only an iteration gives"));
  }
  Unroller u(loop, body, opset, taken, graph);
  // The body's inputs at the current iteration: number, condition, carried values.
  std::vector<std::string> inputs(body.input_size());
  for (int j = 0; j < carried; ++j) inputs[2 + j] = loop.input(2 + j);
  // The condition is true throughout (BodyKeepsCondition): one constant.
  if (trip_count > 0 && u.Reads(1)) {
    ConstTensor yes;
    yes.dtype = onnx::TensorProto::BOOL;
    yes.ints = {1};
    inputs[1] = u.Constant(yes, absl::StrCat(body.input(1).name(), "/", loop.name()));
  }
  const bool numbered = u.Reads(0);
  std::vector<std::vector<std::string>> scanned(scans);
  for (int64_t k = 0; k < trip_count; ++k) {
    if (numbered) {
      inputs[0] = u.Constant(Int64s({k}, {}),
                             absl::StrCat(body.input(0).name(), "/", loop.name(), "/", k));
    }
    const std::vector<std::string> outputs = u.CopyBody(k, inputs);
    for (int j = 0; j < carried; ++j) inputs[2 + j] = outputs[1 + j];
    for (int s = 0; s < scans; ++s) scanned[s].push_back(outputs[1 + carried + s]);
  }
  for (int j = 0; j < carried; ++j) {
    if (loop.output(j).empty()) continue;
    u.Add(MakeNode("Identity", u.Fresh(absl::StrCat(loop.name(), "/output_", j)),
                   {inputs[2 + j]}, loop.output(j)));
  }
  for (int s = 0; s < scans; ++s) {
    if (!loop.output(carried + s).empty()) u.Stack(scanned[s], 0, loop.output(carried + s));
  }
  note = absl::StrCat(Label(loop), ": it runs ", trip_count,
                      trip_count == 1 ? " iteration" : " iterations",
                      " at these sizes (shapes alone decide it), so ",
                      Copies(trip_count, body.node_size()));
  return u.Take();
}

absl::StatusOr<int64_t> ScanLength(const onnx::NodeProto& scan, const ScanRanks& dims_of) {
  const onnx::AttributeProto* count = FindAttr(scan, "num_scan_inputs");
  const int64_t m = count != nullptr ? count->i() : -1;
  if (m < 1 || m > scan.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(scan), ": num_scan_inputs must be between 1 and its ", scan.input_size(),
        " inputs"));
  }
  const int states = scan.input_size() - static_cast<int>(m);
  const std::vector<int64_t> axes = IntsOf(scan, "scan_input_axes", static_cast<size_t>(m));
  int64_t length = -1;
  for (int i = 0; i < m; ++i) {
    const std::string& name = scan.input(states + i);
    const std::optional<std::vector<int64_t>> dims = dims_of(name);
    if (!dims) return -1;
    const int64_t rank = static_cast<int64_t>(dims->size());
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          Label(scan), ": scan input '", name, "' has rank ", rank, ", no axis ", axes[i]));
    }
    const int64_t n = (*dims)[static_cast<size_t>(axis)];
    if (length >= 0 && n != length) {
      return absl::InvalidArgumentError(absl::StrCat(
          Label(scan), ": its scan inputs have ", length, " and ", n, " slices ('", name, "')"));
    }
    length = n;
  }
  return length;
}

absl::StatusOr<std::vector<onnx::NodeProto>> UnrollScan(const onnx::NodeProto& scan,
                                                        const ScanRanks& dims_of, int opset,
                                                        absl::flat_hash_set<std::string>& taken,
                                                        onnx::GraphProto& graph,
                                                        std::string& note) {
  MG_ASSIGN_OR_RETURN(const int64_t length, ScanLength(scan, dims_of));
  const onnx::GraphProto& body = *Branch(scan, "body");
  const int m = static_cast<int>(FindAttr(scan, "num_scan_inputs")->i());
  const int states = scan.input_size() - m;
  const int scans = scan.output_size() - states;
  if (body.input_size() != states + m || body.output_size() != scan.output_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(scan), ": its body has ", body.input_size(), " inputs and ", body.output_size(),
        " outputs for ", states, " states, ", m, " scan inputs and ", scans, " scan outputs"));
  }
  for (int s = 0; s < scans && length == 0; ++s) {
    if (scan.output(states + s).empty()) continue;
    return absl::UnimplementedError(absl::StrCat(
        Label(scan), ": it scans no slice at these sizes, and its scan output '",
        scan.output(states + s), "' would be empty with an element shape only an iteration gives"));
  }
  const std::vector<int64_t> in_axes = IntsOf(scan, "scan_input_axes", static_cast<size_t>(m));
  const std::vector<int64_t> in_reverse =
      IntsOf(scan, "scan_input_directions", static_cast<size_t>(m));
  const std::vector<int64_t> out_axes =
      IntsOf(scan, "scan_output_axes", static_cast<size_t>(scans));
  const std::vector<int64_t> out_reverse =
      IntsOf(scan, "scan_output_directions", static_cast<size_t>(scans));
  Unroller u(scan, body, opset, taken, graph);
  std::vector<std::string> inputs(body.input_size());
  for (int j = 0; j < states; ++j) inputs[j] = scan.input(j);
  std::vector<std::vector<std::string>> scanned(scans);
  for (int64_t k = 0; k < length; ++k) {
    for (int i = 0; i < m; ++i) {
      if (!u.Reads(states + i)) continue;
      // Slice k (from the end for a reverse direction) without its axis: a Gather of one index.
      const std::string& input = scan.input(states + i);
      const int64_t at = in_reverse[i] != 0 ? length - 1 - k : k;
      const std::string index =
          u.Constant(Int64s({at}, {}), absl::StrCat(input, "/", scan.name(), "/index_", k));
      const std::string slice = u.Fresh(absl::StrCat(input, "/", scan.name(), "/", k));
      onnx::NodeProto gather = MakeNode("Gather", slice, {input, index}, slice);
      SetIntAttribute(gather, "axis", in_axes[i]);
      u.Add(std::move(gather));
      inputs[states + i] = slice;
    }
    const std::vector<std::string> outputs = u.CopyBody(k, inputs);
    for (int j = 0; j < states; ++j) inputs[j] = outputs[j];
    for (int s = 0; s < scans; ++s) scanned[s].push_back(outputs[states + s]);
  }
  for (int j = 0; j < states; ++j) {
    if (scan.output(j).empty()) continue;
    u.Add(MakeNode("Identity", u.Fresh(absl::StrCat(scan.name(), "/output_", j)), {inputs[j]},
                   scan.output(j)));
  }
  for (int s = 0; s < scans; ++s) {
    if (scan.output(states + s).empty()) continue;
    if (out_reverse[s] != 0) std::reverse(scanned[s].begin(), scanned[s].end());
    u.Stack(scanned[s], out_axes[s], scan.output(states + s));
  }
  note = absl::StrCat(Label(scan), ": it scans ", length, length == 1 ? " slice" : " slices",
                      " at these sizes, so ", Copies(length, body.node_size()));
  return u.Take();
}

namespace {

std::string FreshName(const std::string& base, absl::flat_hash_set<std::string>& taken) {
  std::string name = base;
  for (int k = 1; taken.contains(name); ++k) name = absl::StrCat(base, "_", k);
  taken.insert(name);
  return name;
}

onnx::NodeProto Marker(absl::string_view type, std::string name, std::vector<std::string> inputs,
                       std::vector<std::string> outputs) {
  onnx::NodeProto n;
  n.set_op_type(std::string(type));
  n.set_domain(std::string(kControlDomain));
  n.set_name(std::move(name));
  for (std::string& in : inputs) n.add_input(std::move(in));
  for (std::string& out : outputs) n.add_output(std::move(out));
  return n;
}

}  // namespace

bool IsRegionMarker(const onnx::NodeProto& node) { return node.domain() == kControlDomain; }

std::vector<onnx::NodeProto> LowerIfToRegion(const onnx::NodeProto& if_node,
                                             absl::flat_hash_set<std::string>& taken,
                                             onnx::GraphProto& graph, std::string& note) {
  std::vector<onnx::NodeProto> nodes;
  const std::string& cond = if_node.input(0);
  nodes.push_back(Marker(kIfThen, FreshName(absl::StrCat(if_node.name(), "/then"), taken), {cond}, {}));
  std::vector<std::string> ends = {cond};
  int branch_nodes = 0;
  for (const bool condition : {true, false}) {
    // The branch's outputs go to names of their own; IfEnd copies the taken one's.
    onnx::NodeProto renamed = if_node;
    for (int k = 0; k < renamed.output_size(); ++k) {
      const std::string base = if_node.output(k).empty()
                                   ? absl::StrCat(if_node.name(), "/output_", k)
                                   : if_node.output(k);
      renamed.set_output(k, FreshName(absl::StrCat(base, condition ? "/then" : "/else"), taken));
      ends.push_back(renamed.output(k));
    }
    std::string inline_note;
    for (onnx::NodeProto& n : InlineBranch(renamed, condition, taken, graph, inline_note)) {
      nodes.push_back(std::move(n));
      ++branch_nodes;
    }
    if (condition) {
      nodes.push_back(Marker(kIfElse, FreshName(absl::StrCat(if_node.name(), "/else"), taken), {}, {}));
    }
  }
  std::vector<std::string> outputs;
  for (int k = 0; k < if_node.output_size(); ++k) {
    outputs.push_back(if_node.output(k).empty()
                          ? FreshName(absl::StrCat(if_node.name(), "/output_", k), taken)
                          : if_node.output(k));
  }
  nodes.push_back(Marker(kIfEnd, FreshName(absl::StrCat(if_node.name(), "/end"), taken),
                         std::move(ends), std::move(outputs)));
  note = absl::StrCat(Label(if_node), ": its condition depends on tensor values, so both "
                      "branches (", branch_nodes, " nodes) are planned in the arena and the "
                      "run takes one");
  return nodes;
}

absl::StatusOr<std::vector<onnx::NodeProto>> LowerLoopToRegion(
    const onnx::NodeProto& loop, int opset, absl::flat_hash_set<std::string>& taken,
    onnx::GraphProto& graph, std::string& note) {
  const onnx::GraphProto& body = *Branch(loop, "body");
  const int carried = loop.input_size() - 2;
  for (int s = carried; s < loop.output_size(); ++s) {
    if (loop.output(s).empty()) continue;
    return absl::UnimplementedError(absl::StrCat(
        Label(loop), ": it runs as often as tensor values say, and its scan output '",
        loop.output(s), "' would need a bound on that count; scan outputs of such Loops are "
        "not planned"));
  }
  Unroller u(loop, body, opset, taken, graph);
  const bool has_m = !loop.input(0).empty();
  const bool has_c = !loop.input(1).empty();
  std::vector<std::string> begin_inputs;
  if (has_m) begin_inputs.push_back(loop.input(0));
  if (has_c) begin_inputs.push_back(loop.input(1));
  std::vector<std::string> state;  // iter, cond_in, in_1..n
  for (int i = 0; i < body.input_size(); ++i) {
    state.push_back(u.Fresh(absl::StrCat(body.input(i).name(), "/", loop.name())));
    if (i >= 2) begin_inputs.push_back(loop.input(i));
  }
  onnx::NodeProto begin = Marker(kLoopBegin, u.Fresh(absl::StrCat(loop.name(), "/begin")),
                                 begin_inputs, state);
  SetIntAttribute(begin, "has_trip_count", has_m ? 1 : 0);
  SetIntAttribute(begin, "has_condition", has_c ? 1 : 0);
  u.Add(begin);
  const std::vector<std::string> outputs = u.CopyBody(0, state);  // cond_out, out_1..n
  std::vector<std::string> end_inputs;
  if (has_m) end_inputs.push_back(loop.input(0));
  for (const std::string& name : state) end_inputs.push_back(name);
  for (const std::string& name : outputs) end_inputs.push_back(name);
  // What the body reads from before the Loop stays live to its end: the next iteration reads
  // it again.
  for (std::string& name : OuterReads(loop)) end_inputs.push_back(std::move(name));
  std::vector<std::string> finals;
  for (int j = 0; j < carried; ++j) {
    finals.push_back(loop.output(j).empty()
                         ? u.Fresh(absl::StrCat(loop.name(), "/output_", j))
                         : loop.output(j));
  }
  onnx::NodeProto end = Marker(kLoopEnd, u.Fresh(absl::StrCat(loop.name(), "/end")),
                               end_inputs, finals);
  SetIntAttribute(end, "has_trip_count", has_m ? 1 : 0);
  SetIntAttribute(end, "has_condition", has_c ? 1 : 0);
  u.Add(end);
  note = absl::StrCat(Label(loop), ": how often it runs depends on tensor values, so one "
                      "iteration of its body (", body.node_size(), body.node_size() == 1 ? " node" : " nodes",
                      ") is planned in the arena and run as often as the values say");
  return u.Take();
}

}  // namespace memonger::graph::onnx_fold

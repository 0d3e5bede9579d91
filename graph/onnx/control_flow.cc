#include "graph/onnx/control_flow.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
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
  const bool body = node.op_type() == "Loop";
  const int inputs = body ? node.input_size() : 0;
  const int outputs = body ? node.output_size() + 1 : node.output_size();
  if (branch.input_size() != inputs) {
    return absl::InvalidArgumentError(
        body ? absl::StrCat(where, " has ", branch.input_size(), " inputs, the Loop ", inputs,
                            " (a body takes the iteration number, the condition and the "
                            "carried values)")
             : absl::StrCat(where, " has inputs (an If's branches take none)"));
  }
  if (branch.output_size() != outputs) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " has ", branch.output_size(), " outputs, the ", node.op_type(), " ",
        node.output_size(), body ? " (a body writes its condition and then one per output)" : ""));
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
  } else if (node.op_type() == "Loop") {
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

absl::Status CheckControlFlowOps(const onnx::GraphProto& graph) {
  for (const onnx::NodeProto& node : graph.node()) {
    const bool is_if = node.op_type() == "If" && IsDefaultDomain(node.domain());
    const bool is_loop = node.op_type() == "Loop" && IsDefaultDomain(node.domain());
    bool holds = false;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (!HoldsSubgraph(a)) continue;
      holds = true;
      if (!is_if && !is_loop) {
        return absl::UnimplementedError(absl::StrCat(
            Label(node), ": control flow subgraphs are not planned except an If's branches and "
            "a Loop's body (its attribute '", a.name(), "' holds a graph)"));
      }
      if (a.graphs_size() > 0 || !a.has_g()) {
        return absl::InvalidArgumentError(absl::StrCat(Label(node), ": attribute '", a.name(),
                                                       "' must hold exactly one graph"));
      }
      MG_RETURN_IF_ERROR(CheckControlFlowOps(a.g()));
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

onnx::NodeProto MakeConstant(std::string name, const ConstTensor& value, std::string output) {
  onnx::NodeProto n = MakeNode("Constant", std::move(name), {}, output);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = TensorToProto(value, output);
  return n;
}

void SetIntsAttribute(onnx::NodeProto& n, const char* name, std::vector<int64_t> values,
                      bool as_list) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name(name);
  if (as_list) {
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  } else {
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(values.at(0));
  }
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
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; taken.contains(name); ++k) name = absl::StrCat(base, "_", k);
    taken.insert(name);
    return name;
  };
  std::vector<onnx::NodeProto> replacement;
  // What the Loop's carried inputs are called at the current iteration.
  std::vector<std::string> current(loop.input().begin() + 2, loop.input().end());
  if (trip_count == 0) {
    for (int s = 0; s < scans; ++s) {
      if (loop.output(carried + s).empty()) continue;
      return absl::UnimplementedError(absl::StrCat(
          Label(loop), ": it runs no iteration at these sizes, and its scan output '",
          loop.output(carried + s),
          "' would be empty with an element shape only an iteration gives"));
    }
  }
  // Body initializers are the same at every iteration: appended once.
  absl::flat_hash_map<std::string, std::string> shared;
  for (const onnx::TensorProto& t : body.initializer()) {
    onnx::TensorProto* copy = graph.add_initializer();
    *copy = t;
    copy->set_name(fresh(absl::StrCat(t.name(), "/", loop.name())));
    shared[t.name()] = copy->name();
  }
  const std::string& iteration_input = body.input(0).name();
  const std::string& condition_input = body.input(1).name();
  std::string truth;  // the body's condition input, a constant true, made when first read
  std::vector<std::vector<std::string>> scanned(scans);
  for (int64_t k = 0; k < trip_count; ++k) {
    absl::flat_hash_map<std::string, std::string> renames = shared;
    for (int j = 0; j < carried; ++j) renames[body.input(2 + j).name()] = current[j];
    bool reads_iteration = false;
    bool reads_condition = false;
    for (const onnx::NodeProto& n : body.node()) {
      std::vector<std::string> reads(n.input().begin(), n.input().end());
      for (std::string& in : OuterReads(n)) reads.push_back(std::move(in));
      for (const std::string& in : reads) {
        reads_iteration = reads_iteration || in == iteration_input;
        reads_condition = reads_condition || in == condition_input;
      }
      for (const std::string& out : n.output()) {
        if (!out.empty()) renames[out] = fresh(absl::StrCat(out, "/", loop.name(), "/", k));
      }
    }
    for (const onnx::ValueInfoProto& vi : body.output()) {
      reads_iteration = reads_iteration || vi.name() == iteration_input;
      reads_condition = reads_condition || vi.name() == condition_input;
    }
    if (reads_iteration) {
      const std::string name = fresh(absl::StrCat(iteration_input, "/", loop.name(), "/", k));
      ConstTensor number;
      number.dtype = onnx::TensorProto::INT64;
      number.ints = {k};
      replacement.push_back(MakeConstant(name, number, name));
      renames[iteration_input] = name;
    }
    if (reads_condition) {
      if (truth.empty()) {
        truth = fresh(absl::StrCat(condition_input, "/", loop.name()));
        ConstTensor yes;
        yes.dtype = onnx::TensorProto::BOOL;
        yes.ints = {1};
        replacement.push_back(MakeConstant(truth, yes, truth));
      }
      renames[condition_input] = truth;
    }
    auto renamed = [&](const std::string& name) {
      auto it = renames.find(name);
      return it == renames.end() ? name : it->second;
    };
    for (const onnx::NodeProto& original : body.node()) {
      onnx::NodeProto n = original;
      n.set_name(fresh(absl::StrCat(loop.name(), "/", k, "/", original.name())));
      for (std::string& in : *n.mutable_input()) {
        if (!in.empty()) in = renamed(in);
      }
      for (std::string& out : *n.mutable_output()) {
        if (!out.empty()) out = renamed(out);
      }
      RenameOuterReads(n, renames);
      replacement.push_back(std::move(n));
    }
    for (int j = 0; j < carried; ++j) current[j] = renamed(body.output(1 + j).name());
    for (int s = 0; s < scans; ++s) {
      scanned[s].push_back(renamed(body.output(1 + carried + s).name()));
    }
  }
  for (int j = 0; j < carried; ++j) {
    if (loop.output(j).empty()) continue;
    replacement.push_back(MakeNode("Identity", fresh(absl::StrCat(loop.name(), "/output_", j)),
                                   {current[j]}, loop.output(j)));
  }
  std::string axes;  // Unsqueeze's axes input, from opset 13
  for (int s = 0; s < scans; ++s) {
    const std::string& output = loop.output(carried + s);
    if (output.empty()) continue;
    if (opset >= 13 && axes.empty()) {
      axes = fresh(absl::StrCat(loop.name(), "/axis_0"));
      ConstTensor zero;
      zero.dtype = onnx::TensorProto::INT64;
      zero.dims = {1};
      zero.ints = {0};
      *graph.add_initializer() = TensorToProto(zero, axes);
    }
    onnx::NodeProto concat = MakeNode(
        "Concat", fresh(absl::StrCat(loop.name(), "/scan_", s)), {}, output);
    SetIntsAttribute(concat, "axis", {0}, /*as_list=*/false);
    for (size_t k = 0; k < scanned[s].size(); ++k) {
      const std::string stacked = fresh(absl::StrCat(output, "/", k));
      onnx::NodeProto unsqueeze =
          MakeNode("Unsqueeze", stacked, {scanned[s][k]}, stacked);
      if (opset >= 13) {
        unsqueeze.add_input(axes);
      } else {
        SetIntsAttribute(unsqueeze, "axes", {0}, /*as_list=*/true);
      }
      replacement.push_back(std::move(unsqueeze));
      concat.add_input(stacked);
    }
    replacement.push_back(std::move(concat));
  }
  note = absl::StrCat(Label(loop), ": it runs ", trip_count,
                      trip_count == 1 ? " iteration" : " iterations",
                      " at these sizes (shapes alone decide it), so ", trip_count,
                      trip_count == 1 ? " copy" : " copies", " of its body (", body.node_size(),
                      body.node_size() == 1 ? " node" : " nodes", ") are planned in its place");
  return replacement;
}

}  // namespace memonger::graph::onnx_fold

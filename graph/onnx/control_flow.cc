#include "graph/onnx/control_flow.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
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

absl::Status CheckIfNode(const onnx::NodeProto& node, const Scopes& outer);

// One branch of `node` against the names its enclosing scopes define.
absl::Status CheckBranch(const onnx::NodeProto& node, const char* which,
                         const onnx::GraphProto& branch, const Scopes& outer) {
  const std::string where = absl::StrCat(Label(node), ": its ", which);
  if (branch.input_size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has inputs (an If's branches take none)"));
  }
  if (branch.output_size() != node.output_size()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has ", branch.output_size(),
                                                   " outputs, the If ", node.output_size()));
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
                       "assigned once, and a branch may not shadow a name)"));
    }
    return absl::OkStatus();
  };
  for (const onnx::TensorProto& t : branch.initializer()) {
    MG_RETURN_IF_ERROR(CheckTensorData(t, absl::StrCat(where, ": initializer '", t.name(), "'")));
    MG_RETURN_IF_ERROR(define(t.name()));
  }
  // A read must follow its definition in the branch: the branch's nodes are inlined in order.
  for (const onnx::NodeProto& n : branch.node()) {
    for (const std::string& in : n.input()) {
      if (!in.empty() && !InScopes(scope, in)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": ", Label(n), " reads '", in,
            "', which nothing before it in the branch or its enclosing scopes defines"));
      }
    }
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_t()) {
        MG_RETURN_IF_ERROR(CheckTensorData(
            a.t(), absl::StrCat(where, ": ", Label(n), ": attribute '", a.name(), "'")));
      }
    }
    if (n.op_type() == "If") MG_RETURN_IF_ERROR(CheckIfNode(n, scope));
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

absl::Status CheckIfNode(const onnx::NodeProto& node, const Scopes& outer) {
  for (const char* which : {"then_branch", "else_branch"}) {
    const onnx::GraphProto* branch = Branch(node, which);
    if (branch != nullptr) MG_RETURN_IF_ERROR(CheckBranch(node, which, *branch, outer));
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

absl::Status CheckOnlyIfs(const onnx::GraphProto& graph) {
  for (const onnx::NodeProto& node : graph.node()) {
    bool holds = false;
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (!HoldsSubgraph(a)) continue;
      holds = true;
      if (node.op_type() != "If" || !IsDefaultDomain(node.domain())) {
        return absl::UnimplementedError(absl::StrCat(
            Label(node), ": control flow subgraphs are not planned except an If's branches (its "
            "attribute '", a.name(), "' holds a graph)"));
      }
      if (a.graphs_size() > 0 || !a.has_g()) {
        return absl::InvalidArgumentError(absl::StrCat(Label(node), ": attribute '", a.name(),
                                                       "' must hold exactly one graph"));
      }
      MG_RETURN_IF_ERROR(CheckOnlyIfs(a.g()));
    }
    if (node.op_type() == "If" && IsDefaultDomain(node.domain()) &&
        (!holds || Branch(node, "then_branch") == nullptr ||
         Branch(node, "else_branch") == nullptr || node.input_size() != 1 ||
         node.input(0).empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          Label(node), ": an If needs one condition input and both then_branch and else_branch"));
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

absl::Status CheckIfScopes(const onnx::GraphProto& graph,
                           const absl::flat_hash_set<std::string>& defined) {
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() == "If") MG_RETURN_IF_ERROR(CheckIfNode(node, {&defined}));
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

}  // namespace memonger::graph::onnx_fold

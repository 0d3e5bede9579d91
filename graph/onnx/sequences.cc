#include "graph/onnx/sequences.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/onnx/const_tensor.h"
#include "graph/onnx/control_flow.h"
#include "graph/onnx/fold_internal.h"

namespace memonger::graph::onnx_fold {

namespace {

bool Is(const onnx::NodeProto& node, const char* op) {
  return node.op_type() == op && IsDefaultDomain(node.domain());
}

bool MakesSequence(const onnx::NodeProto& node) {
  return Is(node, "SequenceEmpty") || Is(node, "SequenceInsert") ||
         Is(node, "SequenceConstruct");
}

int64_t IntAttr(const onnx::NodeProto& node, const char* name, int64_t otherwise) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::INT ? a->i() : otherwise;
}

// The tensors the sequence `name` holds, in order, if a chain of inserts built it.
std::optional<std::vector<std::string>> Elements(
    std::string name, const onnx::GraphProto& graph,
    const absl::flat_hash_map<std::string, int>& producer) {
  std::vector<std::string> reversed;
  // Each step moves to an earlier node: the walk ends within the graph's size.
  for (int step = 0; step <= graph.node_size(); ++step) {
    auto it = producer.find(name);
    if (it == producer.end()) return std::nullopt;
    const onnx::NodeProto& node = graph.node(it->second);
    if (Is(node, "Identity") && node.input_size() == 1) {
      name = node.input(0);
    } else if (Is(node, "SequenceInsert") && node.input_size() == 2 && !node.input(1).empty()) {
      reversed.push_back(node.input(1));
      name = node.input(0);
    } else if (Is(node, "SequenceEmpty")) {
      break;
    } else if (Is(node, "SequenceConstruct")) {
      for (int k = node.input_size() - 1; k >= 0; --k) {
        if (node.input(k).empty()) return std::nullopt;
        reversed.push_back(node.input(k));
      }
      break;
    } else {
      return std::nullopt;
    }
  }
  std::reverse(reversed.begin(), reversed.end());
  return reversed;
}

// Removes sequence-making nodes (and Identities of their values) whose outputs nothing reads,
// with their value_info.
void RemoveUnreadSequences(onnx::GraphProto& graph) {
  absl::flat_hash_map<std::string, int> readers;
  for (const onnx::ValueInfoProto& vi : graph.output()) ++readers[vi.name()];
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& in : node.input()) ++readers[in];
    for (const std::string& in : OuterReads(node)) ++readers[in];
  }
  absl::flat_hash_set<std::string> sequences;
  for (const onnx::NodeProto& node : graph.node()) {
    const bool passes = Is(node, "Identity") && node.input_size() == 1 &&
                        sequences.contains(node.input(0));
    if (MakesSequence(node) || passes) sequences.insert(node.output().begin(), node.output().end());
  }
  std::vector<bool> removed(graph.node_size(), false);
  absl::flat_hash_set<std::string> dropped;
  // Backwards: a removed node's inputs lose a reader before their producers are looked at.
  for (int i = graph.node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.output_size() != 1 || !sequences.contains(node.output(0)) ||
        readers[node.output(0)] > 0) {
      continue;
    }
    removed[i] = true;
    dropped.insert(node.output(0));
    for (const std::string& in : node.input()) --readers[in];
  }
  RemoveNodes(graph, removed, dropped);
}

}  // namespace

bool LowerSequences(onnx::GraphProto& graph, int opset) {
  absl::flat_hash_map<std::string, int> producer;
  bool any = false;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const std::string& out : graph.node(i).output()) producer[out] = i;
    any = any || Is(graph.node(i), "ConcatFromSequence");
  }
  if (!any) return false;
  absl::flat_hash_set<std::string> taken;
  for (const onnx::TensorProto& t : graph.initializer()) taken.insert(t.name());
  for (const onnx::ValueInfoProto& vi : graph.input()) taken.insert(vi.name());
  for (const auto& [name, i] : producer) taken.insert(name);
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; taken.contains(name); ++k) name = absl::StrCat(base, "_", k);
    taken.insert(name);
    return name;
  };
  // Every chain is read before any node moves.
  std::vector<std::optional<std::vector<std::string>>> chains(graph.node_size());
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const onnx::AttributeProto* axis = FindAttr(node, "axis");
    const onnx::AttributeProto* new_axis = FindAttr(node, "new_axis");
    const bool ints = axis != nullptr && axis->type() == onnx::AttributeProto::INT &&
                      (new_axis == nullptr || new_axis->type() == onnx::AttributeProto::INT);
    if (Is(node, "ConcatFromSequence") && node.input_size() == 1 && node.output_size() == 1 &&
        ints) {
      chains[i] = Elements(node.input(0), graph, producer);
    }
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  bool lowered = false;
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    const std::optional<std::vector<std::string>>& elements = chains[i];
    if (!elements || elements->empty()) {
      nodes.Add()->Swap(&node);
      continue;
    }
    const int64_t axis = IntAttr(node, "axis", 0);
    const bool new_axis = IntAttr(node, "new_axis", 0) != 0;
    onnx::NodeProto concat;
    concat.set_op_type("Concat");
    concat.set_name(node.name());
    concat.add_output(node.output(0));
    onnx::AttributeProto* a = concat.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
    std::string axes;
    if (new_axis && opset >= 13) {
      axes = fresh(absl::StrCat(node.output(0), "/axes"));
      ConstTensor t;
      t.dtype = onnx::TensorProto::INT64;
      t.dims = {1};
      t.ints = {axis};
      *graph.add_initializer() = TensorToProto(t, axes);
    }
    for (size_t k = 0; k < elements->size(); ++k) {
      if (!new_axis) {
        concat.add_input((*elements)[k]);
        continue;
      }
      onnx::NodeProto* unsqueeze = nodes.Add();
      unsqueeze->set_op_type("Unsqueeze");
      const std::string out = fresh(absl::StrCat(node.output(0), "/", k));
      unsqueeze->set_name(out);
      unsqueeze->add_input((*elements)[k]);
      if (!axes.empty()) {
        unsqueeze->add_input(axes);
      } else {
        onnx::AttributeProto* u = unsqueeze->add_attribute();
        u->set_name("axes");
        u->set_type(onnx::AttributeProto::INTS);
        u->add_ints(axis);
      }
      unsqueeze->add_output(out);
      concat.add_input(out);
    }
    nodes.Add()->Swap(&concat);
    lowered = true;
  }
  graph.mutable_node()->Swap(&nodes);
  if (lowered) RemoveUnreadSequences(graph);
  return lowered;
}

}  // namespace memonger::graph::onnx_fold

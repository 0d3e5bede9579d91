// The dependencies every execution order respects, and the device an op writes: the one
// definition the graph builder, the schedules, liveness, happens-before and the Caffe2 replays
// share.
//
// An op depends on
//   data      the producer of each value it reads,
//   control   the producer of each value it lists as a control input,
//   in-place  every other reader of a value it overwrites in place: the write must wait for
//             them, or they would read the new contents.
//
//   std::vector<std::vector<OpId>> successors = OpSuccessors(graph);
//   std::vector<OpId> order = SmallestIndexOrder(successors);  // program order where valid
#ifndef MEMONGER_GRAPH_DEPENDENCIES_H_
#define MEMONGER_GRAPH_DEPENDENCIES_H_

#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace memonger::graph {

enum class DependencyKind { kData, kControl, kInPlace };

// Calls fn(predecessor, kind, value) for every dependency of `op`: the producer of each value
// it reads (kData) or lists as a control input (kControl), and every other reader of a value it
// overwrites in place (kInPlace, `value` the overwritten one). May repeat a predecessor; never
// names `op` itself. O(inputs + outputs + readers of the overwritten values).
// REQUIRES: the graph's consumers indexed (every built Graph).
template <typename Fn>
void ForEachPredecessor(const Graph& graph, OpId op, Fn&& fn) {
  const Op& o = graph.op(op);
  for (ValueId in : o.inputs) {
    const OpId p = graph.value(in).producer;
    if (p != kNone && p != op) fn(p, DependencyKind::kData, in);
  }
  for (ValueId in : o.control_inputs) {
    const OpId p = graph.value(in).producer;
    if (p != kNone && p != op) fn(p, DependencyKind::kControl, in);
  }
  for (ValueId out : o.outputs) {
    const ValueId base = graph.value(out).inplace_of;
    if (base == kNone) continue;
    for (OpId reader : graph.consumers(base)) {
      if (reader != op) fn(reader, DependencyKind::kInPlace, base);
    }
  }
}

// successors[op]: the ops that depend on `op`, ascending, without duplicates. O(ops + edges).
std::vector<std::vector<OpId>> OpSuccessors(const Graph& graph);

// Kahn's algorithm: among ready ops, `runs_later(a, b)` says a waits while b is ready (a strict
// weak order, as std::priority_queue takes it). Ops on a cycle (and those after them) are left
// out, so the result is shorter than the graph exactly when the dependencies have a cycle.
// O((ops + edges) log ops).
template <typename RunsLater>
std::vector<OpId> KahnOrder(const std::vector<std::vector<OpId>>& successors,
                            RunsLater runs_later) {
  std::vector<int> indegree(successors.size(), 0);
  for (const auto& list : successors) {
    for (OpId s : list) ++indegree[s];
  }
  std::priority_queue<OpId, std::vector<OpId>, RunsLater> ready(runs_later);
  for (OpId i = 0; i < static_cast<OpId>(successors.size()); ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<OpId> order;
  order.reserve(successors.size());
  while (!ready.empty()) {
    const OpId op = ready.top();
    ready.pop();
    order.push_back(op);
    for (OpId s : successors[op]) {
      if (--indegree[s] == 0) ready.push(s);
    }
  }
  return order;
}

// KahnOrder taking, among ready ops, the one with the smallest index: the net's own order
// whenever that is valid.
inline std::vector<OpId> SmallestIndexOrder(const std::vector<std::vector<OpId>>& successors) {
  return KahnOrder(successors, std::greater<OpId>());
}

// A dependency edge (from, to) that closes a cycle, found by a depth-first search from the ops
// in ascending index (successors ascending); none for a DAG. O(ops + edges).
std::optional<std::pair<OpId, OpId>> FindCycleEdge(
    const std::vector<std::vector<OpId>>& successors);

// The device an op of `type` run with `op_device` writes its outputs on: Caffe2's CopyGPUToCPU
// runs under the GPU's device option and writes host memory; every other op writes its own.
Device OutputDevice(absl::string_view type, const Device& op_device);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_DEPENDENCIES_H_

#include "memonger/schedule.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/dependencies.h"
#include "util/check.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::kNone;
using graph::OpId;
using graph::ValueId;

std::vector<int> InDegrees(const std::vector<std::vector<OpId>>& successors) {
  std::vector<int> indegree(successors.size(), 0);
  for (const auto& list : successors) {
    for (OpId s : list) ++indegree[s];
  }
  return indegree;
}

// memonger's topological_sort_traversal_longest_path; see schedule.h for the steps.
std::vector<OpId> LongestPathOrder(const std::vector<std::vector<OpId>>& successors) {
  const int n = static_cast<int>(successors.size());
  if (n == 0) return {};
  const std::vector<OpId> topo = graph::SmallestIndexOrder(successors);

  // 1. The sink: the only op without successors, else a virtual node n fed by all of them.
  std::vector<OpId> sinks;
  for (OpId i = 0; i < n; ++i) {
    if (successors[i].empty()) sinks.push_back(i);
  }
  const bool virtual_sink = sinks.size() > 1;
  const OpId root = virtual_sink ? n : sinks.front();

  // 2. Longest path to the root from every op (`height`), and the next op on it: the successor
  // with the longest remaining path, the smallest index on ties.
  std::vector<int> height(n + 1, 0);
  std::vector<OpId> next(n + 1, kNone);
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const OpId v = *it;
    if (successors[v].empty()) {
      if (virtual_sink) {
        height[v] = 1;
        next[v] = root;
      }
      continue;
    }
    for (OpId w : successors[v]) {
      if (next[v] == kNone || height[w] > height[next[v]]) next[v] = w;
    }
    height[v] = height[next[v]] + 1;
  }

  // 3. The paths from the sources (ascending) merged into a tree; children in the order the
  // paths added them. A path that meets the tree follows it to the root from there on.
  std::vector<int> indegree = InDegrees(successors);
  std::vector<OpId> sources;
  for (OpId i = 0; i < n; ++i) {
    if (indegree[i] == 0) sources.push_back(i);
  }
  std::vector<std::vector<OpId>> children(n + 1);
  std::vector<bool> in_tree(n + 1, false);
  in_tree[root] = true;
  for (OpId s : sources) {
    for (OpId v = s; !in_tree[v]; v = next[v]) {
      in_tree[v] = true;
      children[next[v]].push_back(v);
    }
  }
  // Tree heights: leaves 0, a node 1 + its highest child. Children precede their parent in
  // `topo` (the parent is a successor), and the virtual root comes last.
  std::vector<int> tree_height(n + 1, 0);
  for (OpId v : topo) {
    if (in_tree[v] && v != root) {
      tree_height[next[v]] = std::max(tree_height[next[v]], tree_height[v] + 1);
    }
  }

  // 4. Leaves (the sources) in DFS order, children in ascending height (stable).
  std::vector<OpId> sorted_sources;
  std::vector<OpId> stack = {root};
  while (!stack.empty()) {
    const OpId v = stack.back();
    stack.pop_back();
    std::vector<OpId>& c = children[v];
    if (c.empty()) {
      sorted_sources.push_back(v);
      continue;
    }
    std::stable_sort(c.begin(), c.end(),
                     [&](OpId a, OpId b) { return tree_height[a] < tree_height[b]; });
    for (auto it = c.rbegin(); it != c.rend(); ++it) stack.push_back(*it);
  }
  MG_CHECK(sorted_sources.size() == sources.size());

  // 5. The sources, then each source's descendants not yet listed, in ascending index. A node
  // listed as an earlier source's descendant has all its descendants listed already.
  std::vector<OpId> listed = sorted_sources;
  std::vector<bool> seen(n, false);
  for (OpId s : sorted_sources) seen[s] = true;
  for (OpId s : sorted_sources) {
    std::vector<OpId> found;
    std::vector<OpId> dfs = {s};
    while (!dfs.empty()) {
      const OpId u = dfs.back();
      dfs.pop_back();
      for (OpId w : successors[u]) {
        if (seen[w]) continue;
        seen[w] = true;
        found.push_back(w);
        dfs.push_back(w);
      }
    }
    std::sort(found.begin(), found.end());
    listed.insert(listed.end(), found.begin(), found.end());
  }
  MG_CHECK(static_cast<int>(listed.size()) == n);
  std::vector<int> position(n);
  for (int i = 0; i < n; ++i) position[listed[i]] = i;

  // networkx's lexicographical_topological_sort with key = n - position: the ready op listed
  // last runs first.
  std::vector<OpId> order = graph::KahnOrder(
      successors, [&](OpId a, OpId b) { return position[a] < position[b]; });
  MG_CHECK(order.size() == successors.size());  // Graph::Build rejects cycles
  return order;
}

}  // namespace

absl::string_view OrderName(OrderKind order) {
  switch (order) {
    case OrderKind::kGiven: return "given";
    case OrderKind::kTopological: return "topological";
    case OrderKind::kLongestPath: return "longest-path";
    case OrderKind::kMemoryAware: return "memory-aware";
  }
  return "given";
}

absl::StatusOr<OrderKind> ParseOrder(absl::string_view name) {
  for (OrderKind order : {OrderKind::kGiven, OrderKind::kTopological, OrderKind::kLongestPath,
                          OrderKind::kMemoryAware}) {
    if (OrderName(order) == name) return order;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown order '", util::Quote(name),
      "' (expected given, topological, longest-path, memory-aware)"));
}

absl::StatusOr<Schedule> MakeSchedule(const Graph& graph, OrderKind order) {
  Schedule schedule;
  schedule.order = order;
  switch (order) {
    case OrderKind::kGiven:
      schedule.ops = graph.TopologicalOrder();
      break;
    case OrderKind::kTopological:
      schedule.ops = graph::SmallestIndexOrder(graph::OpSuccessors(graph));
      break;
    case OrderKind::kLongestPath:
      schedule.ops = LongestPathOrder(graph::OpSuccessors(graph));
      break;
    case OrderKind::kMemoryAware:
      // A search with the plan's own options, not a fixed rule: PlanMemory runs it.
      return absl::InvalidArgumentError(
          "the memory-aware order is searched with a plan's options (FindMemoryAwareOrder, "
          "or PlanMemory with OrderKind::kMemoryAware); MakeSchedule builds the fixed orders");
  }
  schedule.step_of_op.assign(graph.num_ops(), -1);
  for (int step = 0; step < static_cast<int>(schedule.ops.size()); ++step) {
    schedule.step_of_op[schedule.ops[step]] = step;
  }
  return schedule;
}

absl::Status CheckSchedule(const Graph& graph, const std::vector<OpId>& ops) {
  if (static_cast<int>(ops.size()) != graph.num_ops()) {
    return absl::InvalidArgumentError(absl::StrCat("the schedule lists ", ops.size(),
                                                   " ops but the net has ", graph.num_ops()));
  }
  std::vector<int> step_of(graph.num_ops(), -1);
  for (int step = 0; step < static_cast<int>(ops.size()); ++step) {
    const OpId op = ops[step];
    if (op < 0 || op >= graph.num_ops()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the schedule's step ", step, " names op #", op, ", which does not exist"));
    }
    if (step_of[op] != -1) {
      return absl::InvalidArgumentError(absl::StrCat("the schedule runs ", graph.op(op).Label(),
                                                     " twice (steps ", step_of[op], " and ",
                                                     step, ")"));
    }
    step_of[op] = step;
  }
  for (int step = 0; step < static_cast<int>(ops.size()); ++step) {
    const OpId op = ops[step];
    absl::Status status;
    using graph::DependencyKind;
    graph::ForEachPredecessor(graph, op, [&](OpId pred, DependencyKind kind, ValueId value) {
      if (!status.ok() || step_of[pred] < step) return;
      const std::string name = graph.value(value).DisplayName();
      const std::string first = absl::StrCat(graph.op(op).Label(), " (step ", step, ")");
      const std::string second = absl::StrCat(graph.op(pred).Label(), " (step ", step_of[pred], ")");
      switch (kind) {
        case DependencyKind::kData:
          status = absl::InvalidArgumentError(absl::StrCat(
              "the schedule runs ", first, ", which reads '", name, "', before ", second,
              ", which writes it"));
          break;
        case DependencyKind::kControl:
          status = absl::InvalidArgumentError(absl::StrCat(
              "the schedule runs ", first, ", which has control input '", name, "', before ",
              second, ", which writes it"));
          break;
        case DependencyKind::kInPlace:
          status = absl::InvalidArgumentError(absl::StrCat(
              "the schedule runs ", first, ", which overwrites '", name, "' in place, before ",
              second, ", which reads it"));
          break;
      }
    });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace memonger

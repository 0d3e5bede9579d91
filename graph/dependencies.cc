#include "graph/dependencies.h"

namespace memonger::graph {

std::vector<std::vector<OpId>> OpSuccessors(const Graph& graph) {
  std::vector<std::vector<OpId>> successors(graph.num_ops());
  // Ops in ascending index: every list is built ascending, duplicates adjacent.
  for (OpId op = 0; op < graph.num_ops(); ++op) {
    ForEachPredecessor(graph, op, [&](OpId pred, DependencyKind, ValueId) {
      std::vector<OpId>& list = successors[pred];
      if (list.empty() || list.back() != op) list.push_back(op);
    });
  }
  return successors;
}

std::optional<std::pair<OpId, OpId>> FindCycleEdge(
    const std::vector<std::vector<OpId>>& successors) {
  enum class Color : uint8_t { kWhite, kGray, kBlack };
  const int n = static_cast<int>(successors.size());
  std::vector<Color> color(n, Color::kWhite);
  // An explicit stack of (op, index of its next successor): nets are deep enough to overflow
  // the call stack.
  std::vector<std::pair<OpId, size_t>> stack;
  for (OpId root = 0; root < n; ++root) {
    if (color[root] != Color::kWhite) continue;
    color[root] = Color::kGray;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      if (next == successors[op].size()) {
        color[op] = Color::kBlack;
        stack.pop_back();
        continue;
      }
      const OpId to = successors[op][next++];
      if (color[to] == Color::kGray) return std::make_pair(op, to);
      if (color[to] == Color::kWhite) {
        color[to] = Color::kGray;
        stack.emplace_back(to, 0);
      }
    }
  }
  return std::nullopt;
}

Device OutputDevice(absl::string_view type, const Device& op_device) {
  return type == "CopyGPUToCPU" ? Device{} : op_device;
}

}  // namespace memonger::graph

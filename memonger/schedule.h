// Schedules: the order in which ops run. A step is an op's position in the schedule.
//
//   given         the graph's dependency order: program order when the net lists its ops in a
//                 valid order (Graph::TopologicalOrder()).
//   topological   Kahn's algorithm with a deterministic tie-break: among ready ops, the one
//                 listed first in the net (memonger's "plain order", made deterministic; it
//                 equals `given` whenever the net lists its ops in a valid order).
//   longest-path  memonger's: ops on longer execution paths first, so values on the critical
//                 path are produced and consumed back to back and their lifetimes shorten.
//                 Steps (Caffe2 memonger.py, topological_sort_traversal_longest_path):
//                   1. several sinks (ops nothing depends on) get a virtual sink fed by all;
//                   2. from every source (op with no dependency), a longest path to the sink;
//                   3. the paths merged into a tree rooted at the sink, leaf height 0;
//                   4. a DFS from the root, children in ascending height (ties: the order the
//                      paths added them), lists the sources;
//                   5. that list, then each source's descendants not yet listed (ascending);
//                      the order is the topological sort that always takes the ready op listed
//                      LAST in that list.
//                 memonger took the longest paths from networkx's Bellman-Ford, whose tie-break
//                 among equally long paths follows its relaxation order; here a path always
//                 continues to the successor with the longest remaining path, the smallest op
//                 index on ties, so the paths merge into a tree. O((ops + edges) log ops).
//   memory-aware  the lowest peak found by memory_order.h's search, with the plan's own
//                 liveness options and a share of its time: PlanMemory runs it, not
//                 MakeSchedule (the order depends on how values are counted).
//
// Every schedule respects data edges, control inputs and in-place ordering (a write in place
// waits for the other readers of the memory it overwrites).
#ifndef MEMONGER_MEMONGER_SCHEDULE_H_
#define MEMONGER_MEMONGER_SCHEDULE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/dependencies.h"
#include "graph/graph.h"

namespace memonger {

enum class OrderKind { kGiven, kTopological, kLongestPath, kMemoryAware };

absl::string_view OrderName(OrderKind order);  // "given", "topological", ...
absl::StatusOr<OrderKind> ParseOrder(absl::string_view name);

struct Schedule {
  OrderKind order = OrderKind::kGiven;
  std::vector<graph::OpId> ops;  // ops[step]
  std::vector<int> step_of_op;   // step_of_op[op]
};

// One of the fixed orders (given, topological, longest-path); InvalidArgument for the
// memory-aware order, which FindMemoryAwareOrder searches.
absl::StatusOr<Schedule> MakeSchedule(const graph::Graph& graph, OrderKind order);

// The dependency edges every schedule respects: graph::OpSuccessors (graph/dependencies.h).

// Every op exactly once and every dependency (data, control, in-place) respected; else
// InvalidArgument naming the first violated dependency. Used on plans read back from files.
absl::Status CheckSchedule(const graph::Graph& graph, const std::vector<graph::OpId>& ops);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SCHEDULE_H_

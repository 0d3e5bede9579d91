// Schedules: the order in which ops run. A step is an op's position in the schedule.
//
//   given         the graph's dependency order: program order when the net lists its ops in a
//                 valid order (Graph::TopologicalOrder()).
//   topological   Kahn's algorithm with a deterministic tie-break: among ready ops, the one
//                 listed first in the net.
//   longest-path  memonger's: ops on longer execution paths first, so values on the critical
//                 path are produced and consumed back to back and their lifetimes shorten.
//
// Every schedule respects data edges, control inputs and in-place ordering (a write in place
// waits for the other readers of the memory it overwrites).
#ifndef MEMONGER_MEMONGER_SCHEDULE_H_
#define MEMONGER_MEMONGER_SCHEDULE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// Unimplemented for an order kind not built yet.
absl::StatusOr<Schedule> MakeSchedule(const graph::Graph& graph, OrderKind order);

// Every op exactly once and every dependency (data, control, in-place) respected; else
// InvalidArgument naming the first violated dependency. Used on plans read back from files.
absl::Status CheckSchedule(const graph::Graph& graph, const std::vector<graph::OpId>& ops);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SCHEDULE_H_

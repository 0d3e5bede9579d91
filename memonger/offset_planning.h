// The bridge between a graph and the raw offset problem (offset_problem.h): builds one item per
// planned alias class, runs an offset planner, and writes the offsets back into a Plan.
//
//   Plan plan;
//   InitPlan(graph, liveness, options.alignment, plan);
//   MG_RETURN_IF_ERROR(PlaceOffsets(graph, liveness, options, OffsetStrategy::kBestFit, plan));
//   // plan.buffers: one per alias class; plan.offset_of_value: every planned value's offset
//
// Items: one per planned alias class (Liveness::alias_root == id), with the class's merged
// lifetime. Its alignment is the largest of options.alignment and its members' own
// Value::alignment, and its bytes are class_bytes rounded up to that alignment.
//
// Devices: a real runtime allocates one arena per device, and values on different devices never
// share memory however their lifetimes fall. So each device's classes form a problem of their
// own, placed in a region of its own; the regions are stacked in one arena (device-major order:
// by device type, then id; each region's base aligned to the region's largest alignment), so that
// a single plan stays valid and checkable by VerifyPlan. A runtime may equally give each region
// its own base pointer: offsets inside a region never depend on the others.
#ifndef MEMONGER_MEMONGER_OFFSET_PLANNING_H_
#define MEMONGER_MEMONGER_OFFSET_PLANNING_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/records.h"
#include "memonger/liveness.h"
#include "memonger/offset_problem.h"
#include "memonger/plan.h"
#include "memonger/planner.h"

namespace memonger {

enum class OffsetStrategy { kGreedyBySize, kBestFit, kBestFitWithLocalSearch };
absl::string_view OffsetStrategyName(OffsetStrategy strategy);  // "greedy-by-size", ...

// One device's classes as a raw problem: item i is the alias class rooted at roots[i].
struct DeviceOffsetProblem {
  graph::Device device;
  OffsetProblem problem;               // num_steps = liveness.num_steps
  std::vector<graph::ValueId> roots;   // ascending
};

// Per device (device-major order), the items described above. InvalidArgument for a member
// alignment that is not a power of two, or sizes that do not fit in int64 once aligned.
absl::StatusOr<std::vector<DeviceOffsetProblem>> OffsetProblemsFor(const graph::Graph& graph,
                                                                   const Liveness& liveness,
                                                                   int64_t alignment);

// Stacks the device regions, sets plan.buffers (one per class, in root-id order: offset = region
// base + the solution's offset, size = the item's bytes, the device), buffer_of_value for every
// member of every class, then FinishPlan. proven_optimal is set when every region's height is
// its problem's OffsetLowerBound. InvalidArgument when a solution does not pass
// CheckOffsetSolution, or the stacked arena does not fit in int64.
// REQUIRES: plan initialised by InitPlan; `problems` from OffsetProblemsFor for this graph and
// liveness; one solution per problem.
absl::Status ApplyOffsetSolutions(const graph::Graph& graph, const Liveness& liveness,
                                  const std::vector<DeviceOffsetProblem>& problems,
                                  const std::vector<OffsetSolution>& solutions, Plan& plan);

// A raw problem straight from usage records (graph/records.h), without building a graph: item i
// is records[i], its steps compressed to the ranks of the sorted distinct first_step and
// last_step values (which keeps every overlap, hence the lower bound and the optimum; MiniMalloc
// traces have steps up to 2^20 but a few hundred distinct ones). Alignment as for graphs: the
// larger of `alignment` and the record's own; bytes rounded up to it. InvalidArgument for an
// alignment that is not a power of two or sizes that do not fit in int64 once aligned.
absl::StatusOr<OffsetProblem> OffsetProblemFromRecords(
    const std::vector<graph::UsageRecord>& records, int64_t alignment);

// OffsetProblemsFor, the strategy on each device's problem (local search shares
// options.time_limit_seconds among the devices, 1000 iterations at most each, seed 1), then
// ApplyOffsetSolutions. InvalidArgument for the parallel execution model: the items carry serial
// lifetimes, and disjoint serial lifetimes do not order two values under a parallel executor.
// REQUIRES: plan initialised by InitPlan.
absl::Status PlaceOffsets(const graph::Graph& graph, const Liveness& liveness,
                          const PlanOptions& options, OffsetStrategy strategy, Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSET_PLANNING_H_

// memonger/offsets/: the offset planners (greedy-by-size, best-fit, local search, exact) over
// the raw problem of offset_problem.h; this header is their entry point from a graph.
//
// The bridge between a graph and the raw offset problem (offset_problem.h): builds one item per
// planned alias class, runs an offset planner, and writes the offsets back into a Plan.
//
//   Plan plan;
//   InitPlan(graph, liveness, alignment, plan);
//   MG_RETURN_IF_ERROR(PlaceOffsets(graph, liveness, OffsetStrategy::kBestFit, {}, plan));
//   // plan.buffers: one per alias class; plan.offset_of_value: every planned value's offset
//
// Items: one per planned alias class (Liveness::alias_root == id), with the class's merged
// lifetime. Its alignment is the largest of the plan's alignment and its members' own
// Value::alignment, and its bytes are class_bytes rounded up to that alignment. Where that
// rounding adds bytes beyond the plan's alignment, the problem asks more than the values need, so
// a plan is then never said to be proven optimal (Plan::proven_optimal).
//
// Devices: a real runtime allocates one arena per device, and values on different devices never
// share memory however their lifetimes fall. So each device's classes form a problem of their
// own, placed in a region of its own; the regions are stacked in one arena (device-major order:
// by device type, then id; each region's base aligned to the region's largest alignment), so that
// a single plan stays valid and checkable by VerifyPlan. A runtime may equally give each region
// its own base pointer: offsets inside a region never depend on the others. Where a region's
// base needed padding, the arena is not said to be proven optimal (another order of the regions
// might need none), whatever each device's search proved.
#ifndef MEMONGER_MEMONGER_OFFSETS_OFFSET_PLANNING_H_
#define MEMONGER_MEMONGER_OFFSETS_OFFSET_PLANNING_H_

#include <atomic>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "graph/records.h"
#include "memonger/liveness.h"
#include "memonger/offsets/exact_offsets.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/plan.h"

namespace memonger {

// What runs on each device's problem.
enum class OffsetStrategy {
  kGreedyBySize,             // PlanGreedyBySize
  kBestFit,                  // PlanBestFit (the portfolio)
  kBestFitWithLocalSearch,   // PlanBestFitWithLocalSearch
  kExact,                    // PlanBestFit, then PlacePeakWindows with half of what is left
                             // (all of it above kMaxExactItems items), then PlaceExact from the
                             // best plan with the rest
  kAuto,                     // PlanBestFitWithLocalSearch with a quarter of the time limit,
                             // then as kExact; above kMaxExactItems items window repair gets
                             // the time windows leave, and above kMaxPeakWindowProblemItems
                             // local search gets the whole limit. Each step is skipped once the
                             // plan is proven optimal. Above kMaxExactItems (kAuto and kExact),
                             // time the searches leave goes to the portfolio's runs not made
                             // yet (ResumeBestFitPortfolio)
};
absl::string_view OffsetStrategyName(OffsetStrategy strategy);  // "greedy-by-size", ...

struct OffsetSolveOptions {
  double time_limit_seconds = 2;  // shared by every searching step, over all problems
  int threads = 1;                // for the best-fit portfolio (best_fit.h) and the exact search
                                  // (exact_offsets.h); results do not depend on it, except
                                  // where the time limit cuts a run
  // kExact and kAuto: called about once per second while the branch and bound runs.
  std::function<void(const ExactProgress&)> exact_progress;
  // kExact and kAuto: the caller's request to stop the branch and bound (ExactOffsetsOptions).
  const std::atomic<bool>* stop = nullptr;
  // kExact and kAuto with one device's problem: the searches after the best-fit portfolio are
  // skipped once a placement at most this high is found, or once OffsetLowerBound exceeds it
  // (PlanOptions::enough_arena_bytes: the caller asks only whether the arena fits). With
  // several devices the regions stack, so no one region's height decides: not applied.
  std::optional<int64_t> enough_height;
};

// One device's classes as a raw problem: item i is the alias class rooted at roots[i].
struct DeviceOffsetProblem {
  graph::Device device;
  OffsetProblem problem;               // num_steps = liveness.num_steps; step_times from
                                       // graph::RecordStepTimes for a records graph
  std::vector<graph::ValueId> roots;   // ascending
};

// Per device (device-major order), the items described above. InvalidArgument for a member
// alignment that is not a power of two, or sizes that do not fit in int64 once aligned.
absl::StatusOr<std::vector<DeviceOffsetProblem>> OffsetProblemsFor(const graph::Graph& graph,
                                                                   const Liveness& liveness,
                                                                   int64_t alignment);

// Stacks the device regions, sets plan.buffers (one per class, in root-id order: offset = region
// base + the solution's offset, size = the item's bytes, the device), buffer_of_value for every
// member of every class, then FinishPlan. proven_optimal is set when every region's solution is
// proven optimal (OffsetSolution::proven_optimal, e.g. by an exact search) or its height is its
// problem's OffsetLowerBound: each device's arena is then as small as it can be.
// InvalidArgument when a solution does not pass CheckOffsetSolution, or the stacked arena does
// not fit in int64. It takes the problems and solutions, and releases them before FinishPlan
// sets the offsets per value: on a big graph all three together were the run's peak.
// REQUIRES: plan initialised by InitPlan; `problems` from OffsetProblemsFor for this graph and
// liveness; one solution per problem.
absl::Status ApplyOffsetSolutions(const graph::Graph& graph, const Liveness& liveness,
                                  std::vector<DeviceOffsetProblem>&& problems,
                                  std::vector<OffsetSolution>&& solutions, Plan& plan);

// A raw problem straight from usage records (graph/records.h), without building a graph: item i
// is records[i], its steps compressed to the ranks of the sorted distinct first_step and
// last_step values (which keeps every overlap, hence the lower bound and the optimum; MiniMalloc
// traces have steps up to 2^20 but a few hundred distinct ones); step_times keeps those values.
// Alignment as for graphs: the
// larger of `alignment` and the record's own; bytes rounded up to it. InvalidArgument for an
// alignment that is not a power of two or sizes that do not fit in int64 once aligned.
absl::StatusOr<OffsetProblem> OffsetProblemFromRecords(
    const std::vector<graph::UsageRecord>& records, int64_t alignment);

// The strategy on one problem (local search: at most 1000 iterations, seed 1). A searching
// strategy that runs out of time returns the best plan found (proven_optimal false).
// InvalidArgument for a malformed problem or a negative time limit.
absl::StatusOr<OffsetSolution> SolveOffsetProblem(const OffsetProblem& problem,
                                                  OffsetStrategy strategy,
                                                  const OffsetSolveOptions& options);

// SolveOffsetProblem on each problem, in order; the time limit is shared (each problem gets what
// the earlier ones left).
absl::StatusOr<std::vector<OffsetSolution>> SolveOffsetProblems(
    const std::vector<DeviceOffsetProblem>& problems, OffsetStrategy strategy,
    const OffsetSolveOptions& options);

// OffsetProblemsFor at plan.alignment, SolveOffsetProblems within options (its time limit
// covers this whole call), then ApplyOffsetSolutions. InvalidArgument for plan.execution
// parallel: the items carry serial lifetimes, and disjoint serial lifetimes do not order two
// values under a parallel executor. The offsets per value are released at the start
// (FinishPlan sets them at the end): after an error the plan is not usable.
// REQUIRES: plan initialised by InitPlan, its execution set.
absl::Status PlaceOffsets(const graph::Graph& graph, const Liveness& liveness,
                          OffsetStrategy strategy, const OffsetSolveOptions& options,
                          Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_OFFSET_PLANNING_H_

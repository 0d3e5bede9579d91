// memonger/: planning. Schedules, liveness, Plan and the verifier at the top; the sharing
// planners in memonger/sharing/, the offset planners in memonger/offsets/. This header is the
// entry point: PlanMemory dispatches to every planner.
//
// PlanMemory: the library call made before a net runs. Builds the schedule, computes liveness,
// runs the chosen planner and returns a Plan (which every test passes through VerifyPlan).
//
//   PlanOptions options;
//   options.planner = PlannerKind::kExactSharing;
//   MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(graph, options));
//   // value v lives at base + plan.offset_of_value[v] during plan.lifetime[v]
#ifndef MEMONGER_MEMONGER_PLANNER_H_
#define MEMONGER_MEMONGER_PLANNER_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/offsets/exact_offsets.h"
#include "memonger/plan.h"
#include "memonger/schedule.h"
#include "memonger/sharing/sharing.h"

namespace memonger {

enum class PlannerKind {
  kNone,            // every value in memory of its own (the naive baseline)
  kMemongerDag,     // memonger's token DFS (share_grad_blobs / optimize_inference_for_dag)
  kMemongerGreedy,  // memonger's optimize_interference, GREEDY
  kMemongerDp,      // memonger's optimize_interference, DYNAMIC_PROGRAMMING
  kMemongerFast,    // memonger's optimize_inference_fast (single pass, LIFO free list)
  kExactSharing,    // optimal assignment of values to shared buffers (sum of buffer sizes)
  kGreedyBySize,    // offsets: size-descending best fit into the gaps of one arena
  kBestFit,         // offsets: a portfolio of orders x placements, the smallest kept
  kExact,           // offsets: branch and bound from the best heuristic down to the lower bound
  kAuto,            // best-fit, local search, then exact while time allows; the smallest kept
};
absl::string_view PlannerName(PlannerKind planner);
// The memonger baselines (memonger-dag, -greedy, -dp, -fast): they plan Caffe2's way, one blob
// per name (LivenessOptions::blob_per_name), and may plan size-blind (MemongerOptions).
bool IsMemongerBaseline(PlannerKind planner);
// InvalidArgument listing the known planners for an unknown name; Unimplemented for a planner
// named by DESIGN.md that is not built yet.
absl::StatusOr<PlannerKind> ParsePlanner(absl::string_view name);
// InvalidArgument, saying why and what to use instead, for a planner that cannot plan for a
// parallel executor (the offset planners and memonger's serial baselines: they rely on one
// serial op order); OK for auto, memonger-dag, exact-sharing and none. PlanMemory refuses such
// a plan with it, and optimize-net as a usage error where --execution parallel is given.
absl::Status CheckServesParallelExecution(PlannerKind planner);

// The liveness options a plan starts from: in-place reuse of dying inputs and views on, as
// every runtime we compare with does (LivenessOptions::in_place, ::views; docs/in_place.md);
// neither raises any step's live bytes. The others at their defaults.
inline LivenessOptions DefaultPlanLiveness() {
  LivenessOptions options;
  options.in_place = true;
  options.views = true;
  return options;
}

// Everything PlanMemory is asked, composed of the options of the parts it runs: liveness
// (how values are counted), the memonger baselines' (sharing/), and the whole call's order,
// executor, alignment, time and threads, from which it gives the offset planners theirs
// (offsets/offset_planning.h).
struct PlanOptions {
  PlannerKind planner = PlannerKind::kAuto;
  OrderKind order = OrderKind::kGiven;
  ExecutionModel execution = ExecutionModel::kSerial;
  int64_t alignment = 256;          // power of two, >= 1
  double time_limit_seconds = 2;    // the whole call's; searching planners return the best found
  int threads = 1;                  // offset planners' portfolio; same plan for any count, but
                                    // where the time limit cuts a run
  // plan_static, views, in_place, recycle_inputs, static_names. PlanMemory sets blob_per_name,
  // names_need_order and size_blind itself (from the planner, the executor and the types):
  // what is given for them here is not read. In-place reuse and views are on unless turned
  // off here; in-place reuse applies where LivenessOptions::in_place says.
  LivenessOptions liveness = DefaultPlanLiveness();
  MemongerOptions memonger;         // the memonger baselines (memonger-dag, -greedy, -dp)
  // The memory-aware order: orders found for this net at other sizes, tried beside the
  // portfolio, and whether its exact search runs (MemoryOrderOptions::seeds, exact).
  std::vector<std::vector<graph::OpId>> order_seeds;
  bool order_exact_search = true;
  std::string model_name;
  // `exact` and `auto`: called about once per second while the branch and bound runs.
  std::function<void(const ExactProgress&)> exact_progress;
  // `exact` and `auto`: the caller's request to stop (Python's Ctrl-C). The branch and bound
  // reads it where it reads the clock and ends as at the time limit, with the best placement
  // found; the heuristic stages before it still run their share of the limit. nullptr: none.
  const std::atomic<bool>* stop = nullptr;
  // The offset planners (`auto`, `exact`) for a caller that asks only whether the arena fits
  // this many bytes (--fit): their searches end at the first placement at most this high, or
  // once the lower bound shows that none is. The plan is valid; its arena may be above the
  // lowest (not proven optimal). nullopt: the lowest found in the time limit, as always.
  std::optional<int64_t> enough_arena_bytes;
};

absl::StatusOr<Plan> PlanMemory(const graph::Graph& graph, const PlanOptions& options);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_PLANNER_H_

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

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/offsets/exact_offsets.h"
#include "memonger/plan.h"
#include "memonger/schedule.h"

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
// per name (LivenessOptions::blob_per_name), and may plan size-blind.
bool IsMemongerBaseline(PlannerKind planner);
// InvalidArgument listing the known planners for an unknown name; Unimplemented for a planner
// named by DESIGN.md that is not built yet.
absl::StatusOr<PlannerKind> ParsePlanner(absl::string_view name);
// InvalidArgument, saying why and what to use instead, for a planner that cannot plan for a
// parallel executor (the offset planners and memonger's serial baselines: they rely on one
// serial op order); OK for auto, memonger-dag, exact-sharing and none. PlanMemory refuses such
// a plan with it, and optimize-net as a usage error where --execution parallel is given.
absl::Status CheckServesParallelExecution(PlannerKind planner);

enum class Mode { kInference, kTraining };

struct PlanOptions {
  PlannerKind planner = PlannerKind::kAuto;
  OrderKind order = OrderKind::kGiven;
  ExecutionModel execution = ExecutionModel::kSerial;
  Mode mode = Mode::kInference;
  int64_t alignment = 256;          // power of two, >= 1
  double time_limit_seconds = 2;    // for searching planners; the best found is returned
  int threads = 1;                  // offset planners' portfolio; same plan for any count, but
                                    // where the time limit cuts a run
  bool plan_static = false;         // place params and constants in the arena too
  bool views = false;               // view-capable ops alias their input
  std::string model_name;
  // `exact` and `auto`: called about once per second while the branch and bound runs.
  std::function<void(const ExactProgress&)> exact_progress;

  // Graph inputs may be recycled after their last reader (LivenessOptions::recycle_inputs);
  // by default they are live for the whole run, like outputs. `static_names` are kept live for
  // the whole run too, and never shared (Caffe2's static_blobs).
  bool recycle_inputs = false;
  std::vector<std::string> static_names;

  // memonger-dag (training, Caffe2's share_grad_blobs): the losses to start from (default: the
  // graph's declared losses) and names never shared. A gradient is a value named
  // "<namescope>...<x>_grad" (or "_<namescope>..."), not a parameter gradient; nets that declare
  // roles or set is_gradient_op also have those (docs/memonger.md). Parameter gradients:
  // `param_grads`, else the net's declared ones, else "P_grad" for each graph input P that no op
  // reads as its first input (weights and biases, not data).
  std::vector<std::string> losses;
  std::string namescope;
  std::vector<std::string> param_grads;
  // Caffe2's activation heuristic: an output b of an op that reads "b_w", not a graph output,
  // the last two such left out. share_all_activations: every activation instead (not Caffe2).
  bool share_activations = false;
  bool share_all_activations = false;
  std::vector<std::string> dont_share;
  // memonger-dag (inference): the values to start from (default: the graph's non-static inputs).
  std::vector<std::string> heads;
  // The memonger baselines decide without sizes, as Caffe2 runs them without blob shapes
  // (every value one unit). Types may then be unknown: without them the plan says which values
  // share a buffer and under what name, and its bytes mean nothing (LivenessOptions::size_blind,
  // Plan::size_blind); with them the plan has its real bytes.
  bool size_blind = false;
};

absl::StatusOr<Plan> PlanMemory(const graph::Graph& graph, const PlanOptions& options);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_PLANNER_H_

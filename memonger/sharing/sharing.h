// The common output of the sharing planners (memonger-*, exact-sharing, none): groups of alias
// classes that share one buffer. BuildSharingPlan lays the buffers side by side in the arena.
//
// memonger/sharing/: the planners whose answer is such a grouping (memonger_dag.h,
// interference.h, exact_sharing.h); PlanMemory (memonger/planner.h) turns it into a plan:
//
//   Plan plan;
//   InitPlan(graph, liveness, run.alignment, plan);
//   MG_ASSIGN_OR_RETURN(SharingGroups groups, PlanMemongerInterference(
//                           graph, liveness, MemongerOptions{}, run, /*dynamic_programming=*/false));
//   BuildSharingPlan(graph, liveness, groups, plan);
#ifndef MEMONGER_MEMONGER_SHARING_SHARING_H_
#define MEMONGER_MEMONGER_SHARING_SHARING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "memonger/execution.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"

namespace memonger {

enum class Mode { kInference, kTraining };

// The memonger baselines' own options: what Caffe2's share_grad_blobs,
// optimize_inference_for_dag and optimize_interference are given (memonger_dag.h and
// interference.h say how each is read).
struct MemongerOptions {
  Mode mode = Mode::kInference;
  // Training (share_grad_blobs): the losses to start from (default: the graph's declared
  // losses) and names never shared. A gradient is a value named "<namescope>...<x>_grad" (or
  // "_<namescope>..."), not a parameter gradient; nets that declare roles or set is_gradient_op
  // also have those (docs/memonger.md). Parameter gradients: `param_grads`, else the net's
  // declared ones, else "P_grad" for each graph input P that no op reads as its first input
  // (weights and biases, not data).
  std::vector<std::string> losses;
  std::string namescope;
  std::vector<std::string> param_grads;
  // Caffe2's activation heuristic: an output b of an op that reads "b_w", not a graph output,
  // the last two such left out. share_all_activations: every activation instead (not Caffe2).
  bool share_activations = false;
  bool share_all_activations = false;
  std::vector<std::string> dont_share;
  // Inference (optimize_inference_for_dag): the values to start from (default: the graph's
  // non-static inputs).
  std::vector<std::string> heads;
  // Decide without sizes, as Caffe2 runs memonger without blob shapes (every value one unit).
  // Types may then be unknown: without them the plan says which values share a buffer and
  // under what name, and its bytes mean nothing (LivenessOptions::size_blind); with them the
  // plan has its real bytes.
  bool size_blind = false;
};

// What a sharing planner is given besides the liveness and its own options: the plan's.
struct SharingRun {
  int64_t alignment = 256;  // items' bytes aligned up to it
  ExecutionModel execution = ExecutionModel::kSerial;
  double time_limit_seconds = 2;  // for the planners that search
};

// Each group: alias-class roots (Liveness::alias_root) sharing one buffer. Every planned class
// must appear in exactly one group.
using SharingGroups = std::vector<std::vector<graph::ValueId>>;

// Buffers in group order, each sized to its largest class (aligned), at increasing offsets
// (each a multiple of the plan's alignment and of its members' own alignments); every member of
// every class gets its group's buffer; then FinishPlan. Empty groups are skipped.
// REQUIRES: plan initialised by InitPlan; every planned class in exactly one group (MG_CHECKed).
void BuildSharingPlan(const graph::Graph& graph, const Liveness& liveness,
                      const SharingGroups& groups, Plan& plan);

// A raw lifetime problem for the assignment planners: one item per alias class.
struct SharingItem {
  graph::ValueId root = graph::kNone;
  Lifetime lifetime;
  int64_t bytes = 0;  // aligned
  graph::Device device;
};
std::vector<SharingItem> SharingItems(const graph::Graph& graph, const Liveness& liveness,
                                      int64_t alignment);

// Per value, true at the roots of the alias classes Caffe2's callers pass to memonger as
// static_blobs: classes holding a graph input (unless liveness.options.recycle_inputs), a graph
// output, a declared parameter gradient or a name in liveness.options.static_names. The
// memonger baselines never share them (the offset planners see them live for the whole run).
std::vector<bool> StaticClasses(const graph::Graph& graph, const Liveness& liveness);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_SHARING_H_

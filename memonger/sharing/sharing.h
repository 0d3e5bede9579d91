// The common output of the sharing planners (memonger-*, exact-sharing, none): groups of alias
// classes that share one buffer. BuildSharingPlan lays the buffers side by side in the arena.
//
// memonger/sharing/: the planners whose answer is such a grouping (memonger_dag.h,
// interference.h, exact_sharing.h); PlanMemory (memonger/planner.h) turns it into a plan:
//
//   Plan plan;
//   InitPlan(graph, liveness, options.alignment, plan);
//   MG_ASSIGN_OR_RETURN(SharingGroups groups,
//                       PlanMemongerInterference(graph, liveness, options, /*dp=*/false));
//   BuildSharingPlan(graph, liveness, groups, plan);
#ifndef MEMONGER_MEMONGER_SHARING_SHARING_H_
#define MEMONGER_MEMONGER_SHARING_SHARING_H_

#include <vector>

#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"

namespace memonger {

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

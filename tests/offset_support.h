// Planning a graph with one offset strategy directly (schedule, liveness, InitPlan,
// PlaceOffsets), bypassing PlanMemory's planner registry: for the strategies that have no
// `--planner` of their own (best-fit with local search) and for tests that need the liveness.
//
//   absl::StatusOr<Plan> plan =
//       PlanWithOffsetStrategy(g, PlanOptions{}, OffsetStrategy::kBestFit);
#ifndef MEMONGER_TESTS_OFFSET_SUPPORT_H_
#define MEMONGER_TESTS_OFFSET_SUPPORT_H_

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/plan.h"
#include "memonger/planner.h"

namespace memonger::testing {

// An offset item of the raw problem (memonger/offsets/offset_problem.h): steps inclusive.
OffsetItem Item(int first, int last, int64_t bytes, int64_t alignment = 1);

// The optimum of a small problem by exhaustive search, independent of any compaction argument:
// every aligned offset of every item below the best height so far, depth first (exponential:
// a handful of items only).
int64_t OptimumByGrid(const OffsetProblem& problem);

// Uses options.order, execution, alignment, plan_static, views and time_limit_seconds;
// `liveness_out`, when given, receives the liveness the plan was made from.
absl::StatusOr<Plan> PlanWithOffsetStrategy(const graph::Graph& g, const PlanOptions& options,
                                            OffsetStrategy strategy,
                                            Liveness* liveness_out = nullptr);

}  // namespace memonger::testing

#endif  // MEMONGER_TESTS_OFFSET_SUPPORT_H_

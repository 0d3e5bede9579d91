// VerifyPlan: the independent checker every plan passes in tests. It shares only the graph and
// the liveness computation with the planners: it recomputes lifetimes from the plan's own
// schedule and checks, for every pair of planned values whose byte ranges overlap:
//   serial:   their lifetimes do not intersect, unless they are one alias class, or (a plan
//             made with in-place reuse) the later one is output 0 of an op taking exactly the
//             bytes of an input that dies there, as graph/in_place.h allows: checked from the
//             table and the types, not from the planner's alias classes;
//   parallel: also, every reader of one (its writer when it has none) happens-before the writer
//             of the other in every legal execution.
// And: the schedule is a valid order of all ops; every planned value has an offset, aligned
// to the plan's alignment (and its own), and fits its buffer; in-place pairs share their bytes;
// graph inputs and outputs are never overwritten while live (covered by the lifetime rules,
// since inputs live from step 0 and outputs to the end); no buffer holds values of two devices.
// On failure, the Status names both values, their lifetimes and byte ranges.
//
// Complexity: a sweep over the values sorted by offset; O(n log n + k) for k overlapping pairs
// (serial); parallel adds a happens-before query per overlapping pair.
#ifndef MEMONGER_MEMONGER_VERIFY_PLAN_H_
#define MEMONGER_MEMONGER_VERIFY_PLAN_H_

#include "absl/status/status.h"
#include "graph/graph.h"
#include "memonger/plan.h"

namespace memonger {

absl::Status VerifyPlan(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_VERIFY_PLAN_H_

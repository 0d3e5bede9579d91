// greedy-by-size: the offset placement of TFLite's GPU delegate (Pisarchyk & Lee 2020,
// "GREEDY_BY_SIZE" for offsets) and, with its tie-break, of TFLite's CPU arena planner, XNNPACK
// and PyTorch Static Runtime.
//
//   MG_ASSIGN_OR_RETURN(OffsetSolution s, PlanGreedyBySize(problem));
//   // item i lives at [s.offsets[i], s.offsets[i] + problem.items[i].bytes)
//
// 1. Order the items by size, largest first. Ties, in turn: the longer lifetime first (in
//    steps), the earlier first_step, the lower index; so plans reproduce exactly.
// 2. Place each item, in that order, in the smallest byte gap that is free during its whole
//    lifetime among the items already placed (ties: the lowest offset), at the gap's start
//    rounded up to the item's alignment; an item that fits no gap goes on top of the highest
//    item it meets in time. Zero-byte items get offset 0.
//
//   offset ^
//          |      [ c ]         c (smallest) fits the gap left between a and b
//          | [  a  ][   b   ]
//          +-------------------> step
//
// Under a time limit (PlanGreedyBySizeWithin, as optimize-net runs it) the pass is the first
// greedy run of the other planners: cut where it would overrun the limit, and completed by a
// quick rule (GreedyPlacer::PlaceUntil, docs/offset-planners.md "Time limits"), with
// cut_pass_seconds_short saying how much more time a whole pass needs. Only a cut pass differs
// from TFLite's plan.
//
// Complexity: O(n log n) to sort plus one IntervalIndex query and insert per item (see
// interval_index.h): milliseconds for a thousand items, 0.3-0.6 s for the 62,185 of Y_1, and
// about 10 s for 100,000 items each living across thousands of others.
// Not optimal: dynamic storage allocation is NP-hard, and greedy placement never revisits a
// decision. It is within a few percent of the lower bound on DNN traces and 30-40 % above it on
// hard synthetic ones.
#ifndef MEMONGER_MEMONGER_OFFSETS_GREEDY_BY_SIZE_H_
#define MEMONGER_MEMONGER_OFFSETS_GREEDY_BY_SIZE_H_

#include <chrono>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"
#include "util/deadline.h"

namespace memonger {

// The order of step 1 above. REQUIRES: ValidateOffsetProblem(problem).ok().
std::vector<int> SizeDescendingOrder(const OffsetProblem& problem);

// InvalidArgument for a malformed problem (ValidateOffsetProblem). proven_optimal is set when
// the height equals OffsetLowerBound.
absl::StatusOr<OffsetSolution> PlanGreedyBySize(const OffsetProblem& problem);

// As PlanGreedyBySize, within `limit`: the pass is cut at time_shares::kOffsetSearches of it
// (less the completion's share, PlaceUntil), unless on course to end within
// time_shares::kFinishingPassOverrun past it, and then completed quickly. The plan is
// PlanGreedyBySize's wherever the pass is not cut. InvalidArgument as PlanGreedyBySize, or for a
// negative limit.
absl::StatusOr<OffsetSolution> PlanGreedyBySizeWithin(const OffsetProblem& problem,
                                                      const util::Deadline& limit);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_GREEDY_BY_SIZE_H_

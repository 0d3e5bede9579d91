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
// Complexity: O(n log n) to sort plus one IntervalIndex query and insert per item (see
// interval_index.h): milliseconds for a thousand items, 0.3-0.6 s for the 62,185 of Y_1.
// Not optimal: dynamic storage allocation is NP-hard, and greedy placement never revisits a
// decision. It is within a few percent of the lower bound on DNN traces and 30-40 % above it on
// hard synthetic ones.
#ifndef MEMONGER_MEMONGER_OFFSETS_GREEDY_BY_SIZE_H_
#define MEMONGER_MEMONGER_OFFSETS_GREEDY_BY_SIZE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// The order of step 1 above. REQUIRES: ValidateOffsetProblem(problem).ok().
std::vector<int> SizeDescendingOrder(const OffsetProblem& problem);

// InvalidArgument for a malformed problem (ValidateOffsetProblem). proven_optimal is set when
// the height equals OffsetLowerBound.
absl::StatusOr<OffsetSolution> PlanGreedyBySize(const OffsetProblem& problem);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_GREEDY_BY_SIZE_H_

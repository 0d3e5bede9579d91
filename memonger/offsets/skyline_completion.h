// Skyline completion: finishes a partial placement in O(n log n + steps), without an interval
// index. What a time-limited greedy pass does with the items it has not reached when its
// deadline passes: the plan is complete at about the deadline, whatever the problem's size.
//
//   int64_t height = CompleteOnSkyline(problem, placed, not_placed, offsets);
//
// Algorithm. The skyline is, per step, the highest top (offset + bytes) of the placed items
// live there (a sweep over the steps with a max-heap of the live tops). Each item not placed,
// in the order given, goes on the skyline: at the lowest aligned offset at or above the highest
// skyline point of its lifetime, which then rises to its top over that lifetime (a segment tree
// with range maximum and range assignment: O(log steps) per item). Zero-byte items get offset 0.
// Valid by construction: an item lies above everything live at any of its steps.
// Not guaranteed: anything near the lower bound. Holes under the skyline are never filled
// (that is what makes it fast); an item only rests on what is below it. Deterministic.
#ifndef MEMONGER_MEMONGER_OFFSETS_SKYLINE_COMPLETION_H_
#define MEMONGER_MEMONGER_OFFSETS_SKYLINE_COMPLETION_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// Sets offsets[i] for every i in `not_placed` and returns the height of the whole placement
// (the placed items' and the new ones'). `placed` must be a valid placement at `offsets`.
// REQUIRES: ValidateOffsetProblem(problem).ok(), offsets.size() == problem.items.size(),
// `placed` and `not_placed` disjoint.
int64_t CompleteOnSkyline(const OffsetProblem& problem, absl::Span<const int> placed,
                          absl::Span<const int> not_placed, std::vector<int64_t>& offsets);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_SKYLINE_COMPLETION_H_

// Lane stacking: places items above a given height in O(k log k), without an interval index.
// What a time-limited greedy pass does with the items it has not reached when its deadline
// passes: the plan is complete at about the deadline, whatever the problem's size.
//
//   int64_t height = StackInLanes(problem, not_placed, placed_height, offsets);
//
// Algorithm. The items (k of them, bytes > 0) fall into size classes: class c holds the sizes
// in [2^c, 2^(c+1)). Within a class, interval partitioning by first step (each item takes the
// lowest-numbered lane whose last item ended before it starts, else a new lane) uses as few
// lanes as the class has items live at one step, which is optimal for equal sizes. Every lane
// of class c is as tall as the class's largest item (rounded up to its largest alignment), and
// the classes' lanes are stacked from `base` up, the largest class lowest. A class whose lanes
// would take more bytes than its members one above the other is stacked that way instead.
// Zero-byte items get offset 0.
// Bounds: a lane holds an item at least half its height, so the lanes of a class take at most
// twice the bytes live at its busiest step, and the whole stack at most twice the sum of the
// classes' peaks; and never more than the items one above the other, each rounded up to its
// own alignment (each class's start rounded up to its largest alignment aside), so no
// completion is worse than not sharing at all. Where the
// lanes would pass 2^63 bytes (only possible above 2^62), the items are stacked one above the
// other instead (ValidateOffsetProblem bounds that sum).
// Not guaranteed: anything near the lower bound; items of different classes never share bytes.
// Deterministic.
#ifndef MEMONGER_MEMONGER_OFFSETS_LANE_STACKING_H_
#define MEMONGER_MEMONGER_OFFSETS_LANE_STACKING_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// Sets offsets[i] for every i in `items`, all at or above `base`, and returns the highest top
// (offset + bytes) among them, or `base` when that is higher. Items of `items` never overlap each other where their
// lifetimes meet; items outside it are not looked at, so any placement below `base` stays
// valid. REQUIRES: ValidateOffsetProblem(problem).ok(), base >= 0, base plus the padded bytes
// of `items` below 2^63, offsets.size() == problem.items.size(), `items` distinct.
int64_t StackInLanes(const OffsetProblem& problem, absl::Span<const int> items, int64_t base,
                     std::vector<int64_t>& offsets);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_LANE_STACKING_H_

// Window repair: lowers a valid placement by re-placing, one time window at a time, the items
// that stick out above a target height and their neighbours, with everything else held fixed.
// A large-neighbourhood search made for problems too large to place again as a whole.
//
//   MG_ASSIGN_OR_RETURN(RepairResult r, RepairWindows(problem, solution, options));
//   // r.solution: valid, r.solution.height <= solution.height
//
// Why: on large graphs a greedy pass leaves the arena above the lower bound because of a few
// items, each in a sparse stretch of time whose free bytes earlier placements fragmented (on a
// million-value graph, best-fit in `peak` order ends 8% above the bound because of one item
// whose steps are 58% full). Placing those few items again needs only their neighbourhood: an
// item's offset can conflict only with items that share a step with it.
//
// Algorithm. The target starts at the lower bound (OffsetLowerBound).
//   1. Violators: the items whose top (offset + bytes) exceeds the target, highest top first.
//   2. For each violator v still above the target, windows W of steps around v's lifetime,
//      widened by a margin that grows 4-fold (0, 1, 4, 16, ... steps on each side) until the
//      window holds more than max_window_items items:
//        free  F = v and every item whose lifetime lies inside W;
//        fixed C = every other item sharing a step with W (kept at its offset, an obstacle).
//      F is placed again greedily around C (IntervalIndex over the window, ChooseOffset) in a
//      few orders: the most bytes live at a step of the item's life inside W (C included),
//      bytes, duration (each descending; ties: bytes, then index), and then seeded shuffles of
//      the first, each with best fit and lowest offset. The first placement that keeps every
//      item of F at or below the target replaces F's offsets; else the next window.
//   3. When a pass leaves violators, the target rises halfway towards the highest top left,
//      and the pass repeats, until the target reaches that top or the deadline passes.
// Every accepted window keeps the placement valid: F's items avoid C and each other by
// construction, and no item outside F and C shares a step with an item of F. The input is
// checked by CheckOffsetSolution; the result is not checked again (ApplyOffsetSolutions checks
// every solution it applies, and the tests check every result).
//
// Complexity: a window of w items (F and C) costs O(w log w) per order tried, plus
// O((w + 1) log n) to find its items (a max tree over the items sorted by first step). A
// violator costs at most about max_window_items x (orders x fit rules) x (log of the window
// growth) placements; the deadline is checked before every window.
// Not guaranteed: reaching the lower bound, or any improvement at all (a violator whose windows
// all fail stays where it was). Deterministic for a given problem, solution and seed, except
// where the deadline stops it.
#ifndef MEMONGER_MEMONGER_OFFSETS_WINDOW_REPAIR_H_
#define MEMONGER_MEMONGER_OFFSETS_WINDOW_REPAIR_H_

#include <chrono>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

struct RepairOptions {
  // Items (free and fixed) in the widest window tried. Measured on the 1.1M items of the
  // 2^20-op random graph, as a trace, with 10 s: 4,096 leaves it at 1.21 x the lower bound,
  // 16,384 reaches the bound, 65,536 spends the time on windows too wide to work (1.014).
  int max_window_items = 16384;
  int shuffles = 2;             // seeded shuffles tried per window, after the fixed orders
  uint64_t seed = 1;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Check `solution` before repairing it (O(n log n)). A caller whose solution comes from its
  // own greedy passes, and whose result is checked where it is applied, may skip it: a tenth
  // of a second on a million items, out of a time limit of two.
  bool check_input = true;
};

struct RepairResult {
  OffsetSolution solution;  // proven_optimal when the height reached the lower bound
  int windows_tried = 0;
  int windows_repaired = 0;
};

// InvalidArgument for a malformed problem (ValidateOffsetProblem) or a solution that is not a
// valid placement of it (CheckOffsetSolution).
absl::StatusOr<RepairResult> RepairWindows(const OffsetProblem& problem,
                                           const OffsetSolution& solution,
                                           const RepairOptions& options = {});

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_WINDOW_REPAIR_H_

// The offset-placement problem (dynamic storage allocation): place rectangles of fixed height
// (bytes) and fixed horizontal extent (lifetime in steps) at vertical positions (offsets) so
// that no two rectangles whose lifetimes intersect overlap in bytes, minimising the height of
// the tallest stack (the arena). NP-hard; the lower bound is the most bytes live at one step.
//
//   step ->     0   1   2   3
//   offset 0   [a.......]           a: [0,1], 32 bytes
//          32      [b...........]   b: [1,3], 28 bytes
//          0               [c...]   c: [3,3] reuses a's bytes
//
// Offset planners (greedy-by-size, best-fit, exact, ...) work on this raw form; PlanMemory
// builds it from the liveness of a graph (one item per alias class and device) and turns the
// solution into a Plan (one buffer per alias class).
#ifndef MEMONGER_MEMONGER_OFFSETS_OFFSET_PROBLEM_H_
#define MEMONGER_MEMONGER_OFFSETS_OFFSET_PROBLEM_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace memonger {

struct OffsetItem {
  int first_step = 0;     // inclusive
  int last_step = 0;      // inclusive
  int64_t bytes = 0;      // already rounded up to `alignment`
  int64_t alignment = 1;  // the offset must be a multiple of this (power of two)
};

struct OffsetProblem {
  std::vector<OffsetItem> items;
  int num_steps = 0;  // every item lies in [0, num_steps)
  // Optional: when each step happens, in the problem's own time unit (strictly increasing, one
  // per step), for problems whose steps were compressed from sparse times (usage records and
  // MiniMalloc traces keep only their distinct lifetime boundaries as steps). Empty: step s
  // happens at time s. Only the planners' search orders read it (how long a value lives
  // decides which to place first); no placement rule and no check depends on it.
  std::vector<int64_t> step_times;
};

// How long `item` lives in the problem's time unit: last_step - first_step + 1 steps, or the
// time between its first and last step (plus one) when the problem has step_times.
// REQUIRES: the item is one of problem's (steps inside [0, num_steps)).
int64_t Duration(const OffsetProblem& problem, const OffsetItem& item);

struct OffsetSolution {
  std::vector<int64_t> offsets;  // per item
  int64_t height = 0;            // OffsetHeight: max over items with bytes of offset + bytes
  bool proven_optimal = false;   // height equals the optimum (for example the lower bound)
  // > 0: a time limit cut the first greedy pass short (the items it had not reached were
  // placed by a quick rule); about this many seconds more would have let the pass finish
  // (infinity: unknown, the limit left no time to place any item).
  double cut_pass_seconds_short = 0;
};

// The most bytes live at one step: no placement is lower. O(n + steps).
int64_t OffsetLowerBound(const OffsetProblem& problem);

// Bytes live at each step, by a difference array: O(n + steps). REQUIRES: every item inside
// [0, num_steps) with first <= last (ValidateOffsetProblem), sums within int64.
std::vector<int64_t> StepLoads(const OffsetProblem& problem);

// The height of a placement: the highest top (offset + bytes) of an item with bytes; zero-byte
// items occupy nothing, wherever they are. REQUIRES: one offset per item. O(n).
int64_t OffsetHeight(const OffsetProblem& problem, const std::vector<int64_t>& offsets);

// Recomputes the height of `offsets`; InvalidArgument naming two items whose lifetimes intersect
// while their byte ranges [offset, offset + bytes) overlap, or a misaligned or negative offset.
// O(n log n + k) with k overlapping pairs. Independent of every planner.
absl::Status CheckOffsetSolution(const OffsetProblem& problem, const std::vector<int64_t>& offsets);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_OFFSET_PROBLEM_H_

// Peak windows: a lower plan, or a higher lower bound, from the stretch of time around the
// busiest step, solved exactly on its own.
//
//   MG_ASSIGN_OR_RETURN(PeakWindowResult r, PlacePeakWindows(problem, incumbent, options));
//   // r.solution: valid, no higher than the incumbent; r.lower_bound: no plan is lower
//
// Why: on real traces whose greedy plans end a few hundred bytes above the lower bound
// (bert_large, bert_nezha), the reason lies in a few dozen steps around the busiest one. There
// the live items tile [0, LB) exactly; twenty steps later, where five alignment units are free,
// the items born since must fit the holes left by those that died. Which tiling of the peak
// leaves the right holes is a question no greedy order asks, and the branch and bound on the
// whole problem (10-12k items) does not settle it in 10 s; on the 1.5k items live around the
// peak it does in a tenth of a second, and the far slacker steps elsewhere take the rest
// greedily.
//
// Algorithm. Let p be the busiest step (the first of equals) and T the lower bound
// (OffsetLowerBound). For margins m = 8, 32, 128, ... steps, the window W = [p - m, p + m]
// (within the problem's steps):
//   1. The window problem: every item with bytes live at a step of W, its lifetime clipped to W.
//      It is a restriction of the problem: two lifetimes that each meet W and meet each other
//      meet inside W, so every placement of the problem places the window problem validly, and
//      the window's optimum is a lower bound of the problem's.
//   2. PlaceExact (exact_offsets.h) solves it from scratch (the incumbent's
//      placement of these items is the one that failed). Proven optimal above T: T rises to that
//      height, a lower bound beyond the most bytes live at one step.
//   3. Its offsets are held fixed and every other item is placed greedily around them, in the
//      portfolio's orders (best_fit.h) with best fit and lowest offset each
//      (GreedyPlacer::PlaceFrom, which gives up as soon as the height passes the window's: no
//      plan holding the window's offsets is lower, and most failures show early). A plan at the
//      window's height replaces the incumbent; at T it is optimal, and the search ends.
//   4. A window the branch and bound left above T without a proof ends the widening (a wider
//      window is no easier). So does a window of more than max_window_items items or
//      max_window_share of the problem's (the branch and bound on the whole is then the better
//      search).
// Skipped where no step has slack (every step with a live item has T bytes live): a window is
// then a no-slack problem itself, and perfect packing (perfect_packing.h) searches the whole.
//
// Complexity: O(n + steps) for the peak; per window O(n) to collect its items, the branch and
// bound's time (bounded by the deadline), and up to twelve greedy passes of O(n log n) (the
// six orders are built once, O(n log n) each).
// Not guaranteed: a lower plan. The fill around the window is greedy, so slack that is scarce
// far from the peak can defeat it, and only the first busiest step is windowed (a second
// region as tight, elsewhere in time, is not). Deterministic for a given problem and incumbent,
// except where the deadline cuts the search (PlaceExact's threads do not change its answer).
#ifndef MEMONGER_MEMONGER_OFFSETS_PEAK_WINDOW_H_
#define MEMONGER_MEMONGER_OFFSETS_PEAK_WINDOW_H_

#include <chrono>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// Larger problems are not windowed: each fill is a whole greedy pass (about 50 ms at 65k items;
// a million-item graph's takes a second), and `auto` gives them its whole time limit for local
// search and window repair.
inline constexpr int kMaxPeakWindowProblemItems = 65536;

struct PeakWindowOptions {
  // Items (with bytes) in the widest window solved. On bert_large and bert_nezha the window
  // that works holds about 1,500 items, on S_1 5,221 (its branch and bound takes 3.4 s).
  int max_window_items = 8192;
  // Nor a window holding more than this share of the problem's items (with bytes): the branch
  // and bound on the whole is then the better search, its bounds seeing every item. On mm_H a
  // window of 264 of its 316 items ran 5 s unsolved; the whole is solved in 0.1 s.
  double max_window_share = 0.25;
  int first_margin = 8;  // steps on each side of the peak in the first window; then 4-fold
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int threads = 1;  // of each window's branch and bound
};

struct PeakWindowResult {
  OffsetSolution solution;  // proven_optimal when its height reached lower_bound
  // Proven: no placement of the problem is lower. At least OffsetLowerBound(problem); higher
  // where a window's optimum was proven above it.
  int64_t lower_bound = 0;
  int windows_solved = 0;  // windows the branch and bound ran on
  int fills = 0;           // greedy placements around a solved window
};

// InvalidArgument for a malformed problem (ValidateOffsetProblem) or an incumbent that is not
// a valid placement of it (CheckOffsetSolution).
absl::StatusOr<PeakWindowResult> PlacePeakWindows(const OffsetProblem& problem,
                                                  const OffsetSolution& incumbent,
                                                  const PeakWindowOptions& options = {});

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_PEAK_WINDOW_H_

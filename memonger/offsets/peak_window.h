// Peak windows: a lower plan, or a higher lower bound, from the steps around the busiest one
// (and around wherever placing the rest fails), solved exactly on their own.
//
//   MG_ASSIGN_OR_RETURN(PeakWindowResult r, PlacePeakWindows(problem, incumbent, options));
//   // r.solution: valid, no higher than the incumbent; r.lower_bound: no plan is lower
//
// Why: on real traces whose greedy plans end a few hundred bytes above the lower bound
// (bert_large, bert_nezha), the reason lies in a few dozen steps around the busiest one. There
// the live items tile [0, LB) exactly; twenty steps later, where five alignment units are free,
// the items born since must fit the holes left by those that died. Which tiling of the peak
// leaves the right holes is a question no greedy order asks, and the branch and bound on the
// whole problem (10-12k items; S_1, 28k, is too large for it) does not settle it in 10 s; on
// the 1.5k items live around the peak it does in a tenth of a second, and the far slacker steps
// elsewhere take the rest greedily.
//
// Algorithm. T is the lower bound (OffsetLowerBound). A window is a set of disjoint ranges of
// steps; the first is [p - m, p + m] around the busiest step p (the first of equals), m =
// first_margin.
//   1. The window problem: every item with bytes that meets a range, its lifetime clipped to
//      the ranges' hull H. It is a restriction of the problem: a subset of its items, on parts
//      of their lifetimes. So every placement of the problem places it validly, and its optimum
//      is a lower bound of the problem's. Conversely, a placement of it is valid for those items'
//      whole lifetimes: two lifetimes that each meet H and meet each other meet inside H.
//   2. PlaceExact (exact_offsets.h) solves it from scratch (the incumbent's placement of these
//      items is the one that failed), with at most half of the time left. Proven optimal above
//      T: T rises to that height, a lower bound beyond the most bytes live at one step.
//   3. Its offsets are held fixed and every other item is placed greedily around them: the
//      portfolio's peak order (best_fit.h), best fit (GreedyPlacer::PlaceFrom). The fill
//      replaces the incumbent where it is lower. At the window's height (no plan holding the
//      window's offsets is lower) the search ends; at T that plan is optimal.
//   4. Where the fill ends above the window's height, the item it left highest lies outside
//      every range (the window's items stay at or below that height). A range [s - m, s + m]
//      around its busiest step s joins the window (merged with any it touches), and the search
//      goes back to 1. On S_1 the window around the peak is solved at the bound, but 256 MB
//      items 15,000 steps earlier then find no room between long-lived items the window had
//      placed; a second range around them settles both.
//   5. It ends at a plan at the window's height (optimal where the window was proven); at a
//      window the branch and bound leaves above T without a proof (a larger one is no easier);
//      at a window of more than max_window_items items or max_window_share of the problem's, or
//      of all of them (the branch and bound on the whole is then the better search); or at the
//      deadline, which may cut a fill short (it is then dropped).
//   One fill per window, in one order: wherever a window worked (the corpus, random graphs),
//   this fill was the one at its height, and the portfolio's other eleven orders and fit rules
//   only took time from the next window. With twelve fills a window,
//   random:ops=50000,seed=4,reach=50000 ended 8.8% above the bound under auto's 2 s; with one,
//   at it.
// Skipped where no step has slack (every step with a live item has T bytes live): a window is
// then a no-slack problem itself, and perfect packing (perfect_packing.h) searches the whole.
//
// Complexity: O(n + steps) for the loads, O(n log n) for the peak order (once); per window
// O(n log r) to collect its items (r ranges), the branch and bound's time (bounded by the
// deadline), and one greedy pass, O(n log n). Each window holds at least one more item than the
// last (the one that failed), so the share limit bounds the rounds.
// Not guaranteed: a lower plan. The fill is greedy, and a range is added only where it fails
// worst, so a problem whose slack is scarce in many places may exhaust the limits first.
// Deterministic for a given problem and incumbent, except where the deadline cuts the search
// (PlaceExact's threads do not change its answer).
#ifndef MEMONGER_MEMONGER_OFFSETS_PEAK_WINDOW_H_
#define MEMONGER_MEMONGER_OFFSETS_PEAK_WINDOW_H_

#include <atomic>
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
  // Items (with bytes) in the largest window solved. The windows that reach the bound hold
  // 1,485 items on bert_large, 1,640 on bert_nezha and 2,682 on S_1 (three ranges).
  int max_window_items = 8192;
  // Nor a window holding more than this share of the problem's items (with bytes): the branch
  // and bound on the whole is then the better search, its bounds seeing every item. On mm_H a
  // window of 264 of its 316 items ran 5 s unsolved; the whole is solved in 0.1 s.
  double max_window_share = 0.25;
  int first_margin = 8;  // steps on each side of the busiest step in each range
  // Without one, nothing bounds a window's branch and bound: the search may run for as long as
  // an exact proof takes.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int threads = 1;  // of each window's branch and bound
  // The caller's request to stop (ExactOffsetsOptions::stop): no window starts once it is set.
  const std::atomic<bool>* stop = nullptr;
};

struct PeakWindowResult {
  OffsetSolution solution;  // proven_optimal when its height reached lower_bound
  // Proven: no placement of the problem is lower. At least OffsetLowerBound(problem); higher
  // where a window's optimum was proven above it.
  int64_t lower_bound = 0;
  int windows_solved = 0;  // windows the branch and bound ran on
  int fills = 0;           // greedy placements around a solved window (at most one each)
};

// InvalidArgument for a malformed problem (ValidateOffsetProblem), an incumbent that is not a
// valid placement of it (CheckOffsetSolution; its height is computed from the offsets, never
// taken from the caller), or options out of range. An incumbent marked proven_optimal is
// returned as it is.
absl::StatusOr<PeakWindowResult> PlacePeakWindows(const OffsetProblem& problem,
                                                  const OffsetSolution& incumbent,
                                                  const PeakWindowOptions& options = {});

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_PEAK_WINDOW_H_

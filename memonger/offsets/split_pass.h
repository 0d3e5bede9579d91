// Split pass: one greedy pass over a large problem, cut in time into pieces placed in parallel.
//
//   if (std::optional<TimeSplit> split = SplitInTime(problem, order)) {
//     SplitPassResult r = PlaceSplit(problem, *split, FitRule::kBestFit, options);
//   }
//
// Time is cut at a few steps s_1 < ... < s_{K-1}. An item crosses cut s when it is live at both
// s and s + 1 (first_step <= s < last_step); every other item lives between two cuts, in one
// piece. The pass then
//   1. places the crossing items greedily, in the order's order (an index of their own);
//   2. places each piece greedily, in the order's order, around the crossing items that share
//      a step with it (put back first where step 1 put them), on an index of its own.
// Items of different pieces share no step, and every item a piece's item shares a step with is
// in that piece's problem, so the union is a valid placement. The pieces are independent: they
// go on `threads` threads, and each piece's index covers only its own stretch of time, which
// keeps it in cache: on the 651,663-item random graph of BENCHMARKS.md (bench/
// offset_scale_bench, ordering included), the whole pass takes 1.31 s, eight pieces 1.07 s on
// one thread and 0.72 s on two.
//
// Cuts. K = the item count / kSplitPieceItems (piece_items), at most kMaxSplitPieces; K < 2:
// no split. Cut k is the step, among those whose range of items started (before it, by its
// end) meets [k n / K - n / 4K, k n / K + n / 4K], that the fewest bytes cross (ties: the
// earlier step; a step where many items start can take a window alone): the crossing
// items go first, out of the order's sequence, and the fewer bytes they hold the less the pass
// changes (on the random graph, cutting where the fewest items cross left the pass at 1.19 x the
// lower bound, where the fewest bytes cross at 1.075; the whole pass ends at 1.080). No split
// either when more than n / kMaxCrossingShare items cross the cuts: so many items out of the
// order's sequence would change the pass too much (a training net's forward activations all
// live across its middle).
//
// The result depends on the problem and the order only: the same for any thread count. It is
// not the whole pass's: the crossing items go first. Under a deadline each part is a
// GreedyPlacer::PlaceUntil of its own: a cut part completes its items quickly, and the union
// stays valid (the crossing items are never cut in a piece: they are put back whole); a part
// that starts after the deadline builds no index and completes its items at once.
// Complexity: O(n log K + steps) to split; the greedy passes as in interval_index.h, over
// n + (K - 1) x crossing items in all. Memory: each thread holds one piece's problem and index.
#ifndef MEMONGER_MEMONGER_OFFSETS_SPLIT_PASS_H_
#define MEMONGER_MEMONGER_OFFSETS_SPLIT_PASS_H_

#include <chrono>
#include <optional>
#include <vector>

#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

inline constexpr int kSplitPieceItems = 1 << 16;
inline constexpr int kMaxSplitPieces = 8;
inline constexpr int kMaxCrossingShare = 16;

struct TimeSplit {
  std::vector<int> cuts;                 // the steps cut after, ascending
  std::vector<int> crossing;             // items crossing a cut, in the order's order
  std::vector<std::vector<int>> pieces;  // per piece, its items in the order's order
};

// REQUIRES: ValidateOffsetProblem(problem).ok(); `order` a permutation of the items;
// piece_items >= 1 (tests split small problems with a smaller one).
std::optional<TimeSplit> SplitInTime(const OffsetProblem& problem, const std::vector<int>& order,
                                     int piece_items = kSplitPieceItems);

struct SplitPassOptions {
  int threads = 1;
  // As GreedyPlacer::PlaceUntil's, for every part; none: each part runs to its end.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::optional<std::chrono::steady_clock::time_point> finish_by;
};

struct SplitPassResult {
  OffsetSolution solution;
  int placed_greedily = 0;  // items the greedy rule placed (all of them unless a part was cut)
  // The parts' times added up: about what the pass costs one thread (a caller sizing work
  // that runs on one thread, as local search's steps do, reads this, not the wall time).
  double thread_seconds = 0;
};

// REQUIRES: `split` came from SplitInTime(problem, ...); options.threads >= 1.
SplitPassResult PlaceSplit(const OffsetProblem& problem, const TimeSplit& split, FitRule rule,
                           const SplitPassOptions& options);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_SPLIT_PASS_H_

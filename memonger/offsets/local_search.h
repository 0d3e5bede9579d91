// Local search over the placement order: hill climbing that re-runs the greedy placer (in the
// spirit of TVM USMP's hill_climb), started from the best-fit portfolio's winner.
//
//   LocalSearchOptions options;
//   options.time_limit_seconds = 2;
//   MG_ASSIGN_OR_RETURN(OffsetSolution s, PlanBestFitWithLocalSearch(problem, options));
//
// Each iteration:
// 1. Pick, at random, an item t whose top (offset + bytes) is the height: it sits on a stack
//    that makes the arena as high as it is.
// 2. Change the order, at random, by one of two moves: move t to a random earlier position
//    (placed earlier, it sits lower and the others go around it); or swap t with a random item
//    that meets it in time and comes before it (that item is one of those under t).
// 3. Place again from the first changed position (the items before it keep their offsets).
//    Keep the new order if the height did not grow (equal heights are kept too, so the search
//    walks across plateaus), else restore the old one.
// Stops at the lower bound (proven optimal), after max_iterations, or at the deadline.
//
// Deterministic for a given seed and iteration cap: the random numbers come from a SplitMix64
// generator of our own (std:: distributions differ between standard libraries); the deadline can
// only stop the search earlier, on a slow machine.
// Complexity: per iteration O(n) to find the top items and the ones under them, plus one greedy
// placement of the changed suffix (the prefix is re-inserted, not re-placed), which stops as soon
// as it passes the current height (see interval_index.h): about 0.3 ms for the 150-450 items of
// MiniMalloc's hard traces, 1-2 ms for a thousand items, up to a second for 62,185.
// Not optimal: a hill climber stalls in local minima. With 1000 iterations it takes MiniMalloc's
// hard traces from 1.28-1.39 x the lower bound (best-fit) to 1.13-1.28 x, and resnet50 from
// 1.0051 to 1.0030 (an exact search such as MiniMalloc reaches the bound on 9 of the 11).
#ifndef MEMONGER_MEMONGER_OFFSETS_LOCAL_SEARCH_H_
#define MEMONGER_MEMONGER_OFFSETS_LOCAL_SEARCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

struct LocalSearchOptions {
  int max_iterations = 1000;
  uint64_t seed = 1;
  double time_limit_seconds = 10;  // wall clock, for the whole call (portfolio included)
  int threads = 1;                 // the portfolio's (RunBestFitPortfolio); the rest is serial
  // PlanBestFitWithLocalSearch's portfolio behaves as under this limit (unset: the call's own):
  // it starts no run after a quarter of it, and its first run may take it whole. A caller that
  // gives this call only a part of its own limit (auto: a quarter, where peak windows follow)
  // passes its whole limit here, so that the portfolio and its first pass keep the time they
  // have without windows: cut at a sixteenth of 2 s, S_1's portfolio left 1.016 instead of
  // 1.0012, and a first pass cut at a quarter of a short limit is far above the bound.
  std::optional<double> portfolio_time_limit_seconds;
  // PlanBestFitWithLocalSearch: no search after the portfolio where its placement already
  // decides whether the height is at most this (DecidesEnough). nullopt: search on.
  std::optional<int64_t> enough_height;
};

// True when `enough` is given and `solution` already answers "is the height at most enough?":
// its height is, or the problem's lower bound is above it (no placement is). O(items log items).
bool DecidesEnough(const OffsetProblem& problem, const OffsetSolution& solution,
                   std::optional<int64_t> enough);

struct LocalSearchResult {
  OffsetSolution solution;  // proven_optimal when the height reached the lower bound
  std::vector<int> order;   // the order that produced it
  int iterations = 0;
  int improvements = 0;     // iterations that lowered the height
};

// Improves the placement of `order` under `rule`. InvalidArgument for a malformed problem or an
// `order` that is not a permutation of the items, or a negative iteration cap or time limit.
absl::StatusOr<LocalSearchResult> ImproveByLocalSearch(const OffsetProblem& problem,
                                                       std::vector<int> order, FitRule rule,
                                                       const LocalSearchOptions& options);

// RunBestFitPortfolio (no run started after a quarter of the time limit, or of
// portfolio_time_limit_seconds where given; the first runs until that whole limit at most,
// stacking what it has not placed by then in lanes), then
// ImproveByLocalSearch from its winner (same order and fit rule) for at most half of what is
// left (skipped when half a greedy pass of the portfolio took longer than that: no climbing
// step would finish), then RepairWindows (window_repair.h) on the result for the rest; where
// repair ends early, the portfolio's runs not made yet (ResumeBestFitPortfolio) get what is
// left. (That happens only where the portfolio's quarter of its limit ends before this call's
// deadline: not under auto's windows, which give this call a quarter of the limit and the
// portfolio the whole.) Returns within about the time limit however large the problem (plus
// O(n log n) to order the items). `portfolio`, when given, receives where the portfolio stands
// after all of this: where a caller with time left over may resume it.
absl::StatusOr<OffsetSolution> PlanBestFitWithLocalSearch(const OffsetProblem& problem,
                                                          const LocalSearchOptions& options = {},
                                                          PortfolioProgress* portfolio = nullptr);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_LOCAL_SEARCH_H_

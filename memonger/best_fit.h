// best-fit: a portfolio of greedy placements (XLA's "choose best" over orders and fit rules,
// widened), keeping the lowest arena.
//
//   MG_ASSIGN_OR_RETURN(OffsetSolution s, PlanBestFit(problem));
//
// 1. Build five orders of the items (each ends its ties with: larger size, earlier first_step,
//    lower index):
//      size           bytes descending                (TFLite CPU; earlier start on ties)
//      size-duration  bytes, then lifetime length      (greedy-by-size, XLA "spatial")
//      duration       lifetime length, then bytes      (XLA "temporal")
//      area           bytes * lifetime length          (XLA "spatial-temporal")
//      conflicts      how many items meet it in time   (TVM USMP greedy_by_conflicts)
// 2. Place each order greedily (GreedyPlacer) twice: best fit (the smallest free gap that fits)
//    and lowest offset (first fit). An order equal to an earlier one is not placed again.
// 3. Keep the lowest height; ties go to the earlier run (order-major, best fit before lowest
//    offset, in the listing above). A run stops as soon as its height (which only grows) passes
//    the best so far minus one, since it can no longer win; this changes no result. Stop
//    altogether when a run reaches OffsetLowerBound: nothing is lower, and the result is marked
//    proven optimal.
//
// Single-threaded and deterministic. Complexity: up to ten greedy runs (see interval_index.h)
// plus O(n log n) per order: under 0.1 s for a thousand items, about 0.5 s for 28,526 (S_1) and
// 3-5 s for 62,185 (Y_1), where the runs end within 0.03 % of each other and stop late.
// Not optimal: every run is greedy. Tie-breaking alone moves some traces by 2-3 %, which is why
// several orders are tried; on hard synthetic traces the result stays 30-40 % above the lower
// bound, where local search (local_search.h) or the exact planner do better.
#ifndef MEMONGER_MEMONGER_BEST_FIT_H_
#define MEMONGER_MEMONGER_BEST_FIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/interval_index.h"
#include "memonger/offset_problem.h"

namespace memonger {

enum class PortfolioOrder { kSize, kSizeThenDuration, kDuration, kArea, kConflicts };
inline constexpr PortfolioOrder kPortfolioOrders[] = {
    PortfolioOrder::kSize, PortfolioOrder::kSizeThenDuration, PortfolioOrder::kDuration,
    PortfolioOrder::kArea, PortfolioOrder::kConflicts};
const char* PortfolioOrderName(PortfolioOrder order);  // "size", "size-duration", ...

// The item order of step 1. REQUIRES: ValidateOffsetProblem(problem).ok().
std::vector<int> PortfolioItemOrder(const OffsetProblem& problem, PortfolioOrder order);

// For each item, how many other items' lifetimes intersect its own: O(n log n) by binary search
// over the sorted first and last steps.
std::vector<int64_t> ConflictCounts(const OffsetProblem& problem);

struct BestFitResult {
  OffsetSolution solution;  // the winner's; proven_optimal when it reached the lower bound
  PortfolioOrder order_kind = PortfolioOrder::kSize;
  FitRule rule = FitRule::kBestFit;
  std::vector<int> order;   // the winner's placement order (a start for local search)
  int64_t lower_bound = 0;  // OffsetLowerBound(problem)
  int runs = 0;             // greedy placements made
};

// InvalidArgument for a malformed problem (ValidateOffsetProblem).
absl::StatusOr<BestFitResult> RunBestFitPortfolio(const OffsetProblem& problem);
absl::StatusOr<OffsetSolution> PlanBestFit(const OffsetProblem& problem);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_BEST_FIT_H_

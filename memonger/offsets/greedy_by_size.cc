#include "memonger/offsets/greedy_by_size.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/time_shares.h"
#include "util/deadline.h"
#include "util/status_macros.h"

namespace memonger {

std::vector<int> SizeDescendingOrder(const OffsetProblem& problem) {
  std::vector<int> order(problem.items.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const OffsetItem& x = problem.items[a];
    const OffsetItem& y = problem.items[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    const int64_t dx = Duration(problem, x);
    const int64_t dy = Duration(problem, y);
    if (dx != dy) return dx > dy;
    if (x.first_step != y.first_step) return x.first_step < y.first_step;
    return a < b;
  });
  return order;
}

absl::StatusOr<OffsetSolution> PlanGreedyBySize(const OffsetProblem& problem) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  GreedyPlacer placer(problem);
  OffsetSolution solution = placer.Place(SizeDescendingOrder(problem), FitRule::kBestFit);
  solution.proven_optimal = solution.height == OffsetLowerBound(problem);
  return solution;
}

absl::StatusOr<OffsetSolution> PlanGreedyBySizeWithin(const OffsetProblem& problem,
                                                      const util::Deadline& limit) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  if (!(limit.limit_seconds() >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("greedy-by-size: time limit ",
                                                   limit.limit_seconds(), " s is not >= 0"));
  }
  const std::vector<int> order = SizeDescendingOrder(problem);
  const auto run_start = std::chrono::steady_clock::now();
  GreedyPlacer placer(problem);
  int placed_greedily = 0;
  OffsetSolution solution = placer.PlaceUntil(
      order, FitRule::kBestFit, limit.EndOfShare(time_shares::kOffsetSearches),
      limit.EndOfShare(1 + time_shares::kFinishingPassOverrun), &placed_greedily);
  if (placed_greedily < static_cast<int>(order.size())) {
    solution.cut_pass_seconds_short =
        CutPassSecondsShort(run_start, placed_greedily, order.size());
  }
  solution.proven_optimal = solution.height == OffsetLowerBound(problem);
  return solution;
}

}  // namespace memonger

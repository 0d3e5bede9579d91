#include "memonger/offsets/greedy_by_size.h"

#include <algorithm>
#include <numeric>

#include "memonger/offsets/interval_index.h"
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

}  // namespace memonger

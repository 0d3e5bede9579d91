#include "memonger/offsets/best_fit.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "util/check.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

// Sorts item indices by a key (larger first), then size descending, earlier first_step, index.
template <typename Key>
std::vector<int> SortedByKeyDescending(const OffsetProblem& problem, Key key) {
  std::vector<int> order(problem.items.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ka = key(a);
    const auto kb = key(b);
    if (ka != kb) return ka > kb;
    const OffsetItem& x = problem.items[a];
    const OffsetItem& y = problem.items[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.first_step != y.first_step) return x.first_step < y.first_step;
    return a < b;
  });
  return order;
}

}  // namespace

const char* PortfolioOrderName(PortfolioOrder order) {
  switch (order) {
    case PortfolioOrder::kSize: return "size";
    case PortfolioOrder::kSizeThenDuration: return "size-duration";
    case PortfolioOrder::kDuration: return "duration";
    case PortfolioOrder::kArea: return "area";
    case PortfolioOrder::kConflicts: return "conflicts";
    case PortfolioOrder::kPeak: return "peak";
  }
  return "size";
}

std::vector<int64_t> ConflictCounts(const OffsetProblem& problem) {
  const size_t n = problem.items.size();
  std::vector<int> firsts(n);
  std::vector<int> lasts(n);
  for (size_t i = 0; i < n; ++i) {
    firsts[i] = problem.items[i].first_step;
    lasts[i] = problem.items[i].last_step;
  }
  std::sort(firsts.begin(), firsts.end());
  std::sort(lasts.begin(), lasts.end());
  std::vector<int64_t> counts(n);
  for (size_t i = 0; i < n; ++i) {
    const OffsetItem& item = problem.items[i];
    // Items starting no later than i ends, minus those that ended before i starts, minus i.
    const int64_t started =
        std::upper_bound(firsts.begin(), firsts.end(), item.last_step) - firsts.begin();
    const int64_t ended =
        std::lower_bound(lasts.begin(), lasts.end(), item.first_step) - lasts.begin();
    counts[i] = started - ended - 1;
  }
  return counts;
}

std::vector<int64_t> PeakLoads(const OffsetProblem& problem) {
  const int steps = problem.num_steps;
  // Per-step loads by a difference array, then a sparse table: level k holds the maximum over
  // 2^k steps from each step.
  std::vector<int64_t> delta(static_cast<size_t>(steps) + 1, 0);
  for (const OffsetItem& item : problem.items) {
    delta[item.first_step] += item.bytes;
    delta[item.last_step + 1] -= item.bytes;
  }
  std::vector<std::vector<int64_t>> table(1, std::vector<int64_t>(steps));
  int64_t load = 0;
  for (int s = 0; s < steps; ++s) table[0][s] = load += delta[s];
  for (int k = 1; (1 << k) <= steps; ++k) {
    const std::vector<int64_t>& prev = table[k - 1];
    std::vector<int64_t> level(steps - (1 << k) + 1);
    for (size_t s = 0; s < level.size(); ++s) {
      level[s] = std::max(prev[s], prev[s + (size_t{1} << (k - 1))]);
    }
    table.push_back(std::move(level));
  }
  std::vector<int64_t> peaks(problem.items.size());
  for (size_t i = 0; i < problem.items.size(); ++i) {
    const OffsetItem& item = problem.items[i];
    const int length = item.last_step - item.first_step + 1;
    int k = 0;
    while ((2 << k) <= length) ++k;
    peaks[i] = std::max(table[k][item.first_step], table[k][item.last_step + 1 - (1 << k)]);
  }
  return peaks;
}

std::vector<int> PortfolioItemOrder(const OffsetProblem& problem, PortfolioOrder order) {
  const std::vector<OffsetItem>& items = problem.items;
  switch (order) {
    case PortfolioOrder::kSize:
      return SortedByKeyDescending(problem, [](int) { return 0; });
    case PortfolioOrder::kSizeThenDuration:
      return SortedByKeyDescending(problem, [&](int i) {
        return std::make_pair(items[i].bytes, Duration(problem, items[i]));
      });
    case PortfolioOrder::kDuration:
      return SortedByKeyDescending(problem, [&](int i) { return Duration(problem, items[i]); });
    case PortfolioOrder::kArea:
      return SortedByKeyDescending(problem, [&](int i) {
        return static_cast<unsigned __int128>(items[i].bytes) *
               static_cast<unsigned __int128>(Duration(problem, items[i]));
      });
    case PortfolioOrder::kConflicts: {
      const std::vector<int64_t> conflicts = ConflictCounts(problem);
      return SortedByKeyDescending(problem, [&](int i) { return conflicts[i]; });
    }
    case PortfolioOrder::kPeak: {
      const std::vector<int64_t> peaks = PeakLoads(problem);
      return SortedByKeyDescending(problem, [&](int i) { return peaks[i]; });
    }
  }
  return SortedByKeyDescending(problem, [](int) { return 0; });
}

absl::StatusOr<BestFitResult> RunBestFitPortfolio(
    const OffsetProblem& problem, std::optional<std::chrono::steady_clock::time_point> stop_after) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  BestFitResult best;
  best.lower_bound = OffsetLowerBound(problem);
  GreedyPlacer placer(problem);
  std::vector<std::vector<int>> tried;
  bool have = false;
  for (PortfolioOrder kind : kPortfolioOrders) {
    std::vector<int> order = PortfolioItemOrder(problem, kind);
    if (std::find(tried.begin(), tried.end(), order) != tried.end()) continue;
    for (FitRule rule : {FitRule::kBestFit, FitRule::kLowestOffset}) {
      if (have && stop_after.has_value() && std::chrono::steady_clock::now() >= *stop_after) {
        return best;
      }
      // A run that cannot end strictly lower than the best so far (an earlier run, which wins
      // ties) stops early.
      // Every run but the first gives up at the deadline, so that the portfolio never overruns
      // it by a whole pass (the first run is the plan it returns).
      std::optional<OffsetSolution> solution = placer.PlaceFrom(
          order, rule, 0, {},
          have ? best.solution.height - 1 : std::numeric_limits<int64_t>::max(),
          have ? stop_after : std::nullopt);
      ++best.runs;
      if (solution.has_value()) {
        MG_CHECK(!have || solution->height < best.solution.height);
        have = true;
        best.solution = *std::move(solution);
        best.order_kind = kind;
        best.rule = rule;
        best.order = order;
      }
      if (best.solution.height == best.lower_bound) {
        best.solution.proven_optimal = true;
        return best;
      }
    }
    tried.push_back(std::move(order));
  }
  return best;
}

absl::StatusOr<OffsetSolution> PlanBestFit(const OffsetProblem& problem) {
  MG_ASSIGN_OR_RETURN(BestFitResult result, RunBestFitPortfolio(problem));
  return std::move(result.solution);
}

}  // namespace memonger

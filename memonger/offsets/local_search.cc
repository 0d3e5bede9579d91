#include "memonger/offsets/local_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/window_repair.h"
#include "memonger/time_shares.h"
#include "util/deadline.h"
#include "util/splitmix64.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

bool Intersect(const OffsetItem& a, const OffsetItem& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

absl::Status ValidateOptions(const LocalSearchOptions& options) {
  if (options.max_iterations < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("local search: max_iterations ", options.max_iterations, " is negative"));
  }
  if (std::isnan(options.time_limit_seconds) || options.time_limit_seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local search: time limit ", options.time_limit_seconds, " s is not >= 0"));
  }
  if (options.portfolio_time_limit_seconds.has_value() &&
      !(*options.portfolio_time_limit_seconds >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("local search: portfolio time limit ",
                                                   *options.portfolio_time_limit_seconds,
                                                   " s is not >= 0"));
  }
  return absl::OkStatus();
}

// `placed`, when given, is the portfolio's plan for `order` (placed with `rule`; on a large
// problem a split pass, whose crossing items went first): the search starts from it instead of
// placing the whole order again, a pass that at a million items alone would overrun the
// deadline. Any valid placement serves: a step keeps the prefix where `placed` put it.
absl::StatusOr<LocalSearchResult> ImproveUntil(const OffsetProblem& problem,
                                               std::vector<int> order, FitRule rule,
                                               const LocalSearchOptions& options,
                                               Clock::time_point deadline,
                                               std::optional<OffsetSolution> placed = std::nullopt) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  MG_RETURN_IF_ERROR(ValidateOptions(options));
  const int n = static_cast<int>(problem.items.size());
  if (static_cast<int>(order.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("local search: the order has ", order.size(),
                                                   " entries for ", n, " items"));
  }
  std::vector<int> position(n, -1);
  for (int k = 0; k < n; ++k) {
    if (order[k] < 0 || order[k] >= n || position[order[k]] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local search: the order is not a permutation of the items (entry ", k, ": ",
          order[k], ")"));
    }
    position[order[k]] = k;
  }

  const std::vector<OffsetItem>& items = problem.items;
  const int64_t lower_bound = OffsetLowerBound(problem);
  GreedyPlacer placer(problem);
  LocalSearchResult result;
  if (placed.has_value() && placed->offsets.size() == items.size()) {
    result.solution = *std::move(placed);
  } else {
    result.solution = placer.Place(order, rule);
  }
  util::SplitMix64 rng(options.seed);
  std::vector<int> top;
  std::vector<int> under;
  while (result.iterations < options.max_iterations &&
         result.solution.height > lower_bound && Clock::now() < deadline) {
    ++result.iterations;
    const OffsetSolution& current = result.solution;
    top.clear();
    for (int i = 0; i < n; ++i) {
      if (items[i].bytes > 0 && current.offsets[i] + items[i].bytes == current.height) {
        top.push_back(i);
      }
    }
    if (top.empty()) break;  // unreachable: the height exceeds the lower bound >= 0
    const int t = top[rng.Below(top.size())];
    const int pt = position[t];
    under.clear();
    for (int j = 0; j < n; ++j) {
      if (items[j].bytes > 0 && position[j] < pt && Intersect(items[j], items[t])) {
        under.push_back(j);
      }
    }
    if (pt == 0) continue;  // unreachable: the first item placed sits at 0, below the bound

    // The move: promote t to an earlier position, or swap it with an item under it.
    const bool promote = under.empty() || rng.Below(2) == 0;
    int from;
    int partner = -1;
    if (promote) {
      from = static_cast<int>(rng.Below(pt));
      std::rotate(order.begin() + from, order.begin() + pt, order.begin() + pt + 1);
    } else {
      partner = under[rng.Below(under.size())];
      from = position[partner];
      std::swap(order[from], order[pt]);
    }
    // Placements that grow past the current height stop early (they would be rejected).
    // A placement the deadline cuts short counts as rejected.
    std::optional<OffsetSolution> candidate =
        placer.PlaceFrom(order, rule, from, current.offsets, current.height, deadline);
    if (candidate.has_value()) {
      if (candidate->height < current.height) ++result.improvements;
      result.solution = *std::move(candidate);
      for (int k = from; k <= pt; ++k) position[order[k]] = k;
    } else if (promote) {  // undo
      std::rotate(order.begin() + from, order.begin() + from + 1, order.begin() + pt + 1);
    } else {
      std::swap(order[from], order[pt]);
    }
  }
  result.solution.proven_optimal = result.solution.height == lower_bound;
  result.order = std::move(order);
  return result;
}

}  // namespace

absl::StatusOr<LocalSearchResult> ImproveByLocalSearch(const OffsetProblem& problem,
                                                       std::vector<int> order, FitRule rule,
                                                       const LocalSearchOptions& options) {
  MG_RETURN_IF_ERROR(ValidateOptions(options));
  return ImproveUntil(problem, std::move(order), rule, options,
                      util::DeadlineAfter(Clock::now(), options.time_limit_seconds));
}

bool DecidesEnough(const OffsetProblem& problem, const OffsetSolution& solution,
                   std::optional<int64_t> enough) {
  if (!enough.has_value()) return false;
  return solution.height <= *enough || OffsetLowerBound(problem) > *enough;
}

absl::StatusOr<OffsetSolution> PlanBestFitWithLocalSearch(const OffsetProblem& problem,
                                                          const LocalSearchOptions& options,
                                                          PortfolioProgress* portfolio) {
  MG_RETURN_IF_ERROR(ValidateOptions(options));
  const Clock::time_point now = Clock::now();
  const util::Deadline limit(now, options.time_limit_seconds);
  // The searches end at their share of the limit: applying the offsets and checking them
  // follows (time_shares::kOffsetSearches).
  const Clock::time_point deadline = limit.EndOfShare(time_shares::kOffsetSearches);
  // The portfolio starts no run after its share of the limit (of portfolio_time_limit_seconds
  // where given); its first pass stops at that limit's search deadline (GreedyPlacer::PlaceUntil
  // completes it quickly) unless on course to end just past it (time_shares.h).
  const util::Deadline portfolio_limit(
      now, options.portfolio_time_limit_seconds.value_or(options.time_limit_seconds));
  MG_ASSIGN_OR_RETURN(BestFitResult start,
                      RunBestFitPortfolioWithin(problem, portfolio_limit,
                                                time_shares::kPortfolioStarts, options.threads));
  PortfolioProgress progress{start.settled_runs, start.first_run_seconds};
  if (portfolio != nullptr) *portfolio = progress;
  if (start.solution.proven_optimal || start.first_run_cut || Clock::now() >= deadline ||
      DecidesEnough(problem, start.solution, options.enough_height)) {
    return std::move(start.solution);
  }
  // The hill climber gets half of what is left (on a small problem it ends at its iteration cap
  // long before), window repair the rest. Each climbing step places a suffix of the order again,
  // half of it on average: where the portfolio's greedy passes say that half a pass does not fit
  // in the climber's time, it would not finish one step, and window repair gets all the time.
  const Clock::time_point after_portfolio = Clock::now();
  const Clock::duration climb_time =
      util::ShareOfTimeLeft(after_portfolio, deadline, time_shares::kHillClimb);
  // The first run's own time (the runs may have gone in parallel).
  const Clock::duration pass_time = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(start.first_run_seconds));
  OffsetSolution climbed = std::move(start.solution);
  if (pass_time / 2 < climb_time) {
    MG_ASSIGN_OR_RETURN(LocalSearchResult improved,
                        ImproveUntil(problem, std::move(start.order), start.rule, options,
                                     after_portfolio + climb_time, std::move(climbed)));
    climbed = std::move(improved.solution);
    if (climbed.proven_optimal) return climbed;
  }
  RepairOptions repair;
  repair.seed = options.seed;
  repair.deadline = deadline;
  repair.check_input = false;  // our own greedy placement; checked where it is applied
  MG_ASSIGN_OR_RETURN(RepairResult repaired, RepairWindows(problem, climbed, repair));
  // Each step starts from the one before and never accepts a higher placement.
  if (repaired.solution.proven_optimal) return std::move(repaired.solution);
  // Where repair ended early, the portfolio's runs not made get the rest.
  MG_ASSIGN_OR_RETURN(ResumedPortfolio resumed,
                      ResumeBestFitPortfolio(problem, progress, repaired.solution.height, deadline,
                                             options.threads));
  if (portfolio != nullptr) *portfolio = resumed.progress;
  if (resumed.solution.has_value()) return *std::move(resumed.solution);
  return std::move(repaired.solution);
}

}  // namespace memonger

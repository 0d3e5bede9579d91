#include "memonger/offsets/peak_window.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/exact_offsets.h"
#include "memonger/offsets/interval_index.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes live at each step: a difference array, O(n + steps).
std::vector<int64_t> StepLoads(const OffsetProblem& problem) {
  std::vector<int64_t> load(static_cast<size_t>(problem.num_steps) + 1, 0);
  for (const OffsetItem& item : problem.items) {
    load[item.first_step] += item.bytes;
    load[item.last_step + 1] -= item.bytes;
  }
  for (int s = 1; s <= problem.num_steps; ++s) load[s] += load[s - 1];
  load.pop_back();
  return load;
}

// The items with bytes live at a step of [lo, hi], and the problem of them with their lifetimes
// clipped to [lo, hi] (steps renumbered from lo).
struct Window {
  std::vector<int> items;  // indices into the whole problem, ascending
  OffsetProblem problem;
};

Window CollectWindow(const OffsetProblem& problem, int lo, int hi) {
  Window window;
  for (int i = 0; i < static_cast<int>(problem.items.size()); ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0 || item.first_step > hi || item.last_step < lo) continue;
    window.items.push_back(i);
    OffsetItem clipped = item;
    clipped.first_step = std::max(item.first_step, lo) - lo;
    clipped.last_step = std::min(item.last_step, hi) - lo;
    window.problem.items.push_back(clipped);
  }
  window.problem.num_steps = hi - lo + 1;
  if (!problem.step_times.empty()) {
    window.problem.step_times.assign(problem.step_times.begin() + lo,
                                     problem.step_times.begin() + hi + 1);
  }
  return window;
}

double SecondsUntil(Clock::time_point deadline) {
  return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
}

}  // namespace

absl::StatusOr<PeakWindowResult> PlacePeakWindows(const OffsetProblem& problem,
                                                  const OffsetSolution& incumbent,
                                                  const PeakWindowOptions& options) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  if (incumbent.offsets.size() != problem.items.size()) {
    return absl::InvalidArgumentError(absl::StrCat("peak windows: the incumbent has ",
                                                   incumbent.offsets.size(), " offsets for ",
                                                   problem.items.size(), " items"));
  }
  if (const absl::Status valid = CheckOffsetSolution(problem, incumbent.offsets); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("peak windows: invalid incumbent: ", valid.message()));
  }
  if (options.max_window_items < 1 || options.first_margin < 1 || options.threads < 1 ||
      !(options.max_window_share > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peak windows: max_window_items ", options.max_window_items, ", max_window_share ",
        options.max_window_share, ", first_margin ", options.first_margin, " and threads ",
        options.threads, " must be positive"));
  }
  PeakWindowResult result;
  result.solution = incumbent;
  result.lower_bound = OffsetLowerBound(problem);
  auto proven = [&] { return result.solution.height <= result.lower_bound; };
  if (proven()) {
    result.solution.proven_optimal = true;
    return result;
  }
  const auto searched = std::count_if(problem.items.begin(), problem.items.end(),
                                      [](const OffsetItem& item) { return item.bytes > 0; });
  const std::vector<int64_t> load = StepLoads(problem);
  const int peak = static_cast<int>(std::max_element(load.begin(), load.end()) - load.begin());
  const bool slack = std::any_of(load.begin(), load.end(), [&](int64_t bytes) {
    return bytes > 0 && bytes < result.lower_bound;
  });
  if (!slack) return result;
  auto out_of_time = [&] {
    return options.deadline.has_value() && Clock::now() >= *options.deadline;
  };

  // The fill's orders, made once: the window's items go first whatever the order.
  std::vector<std::vector<int>> orders;
  GreedyPlacer placer(problem);
  std::vector<char> in_window(problem.items.size(), 0);
  const int last_step = problem.num_steps - 1;
  for (int64_t margin = options.first_margin; !out_of_time(); margin *= 4) {
    const int lo = static_cast<int>(std::max<int64_t>(0, peak - margin));
    const int hi = static_cast<int>(std::min<int64_t>(last_step, peak + margin));
    if (lo == 0 && hi == last_step) break;
    Window window = CollectWindow(problem, lo, hi);
    if (static_cast<int>(window.items.size()) > options.max_window_items ||
        static_cast<double>(window.items.size()) > options.max_window_share * searched) {
      break;
    }

    ExactOffsetsOptions exact;
    exact.threads = options.threads;
    exact.time_limit_seconds = options.deadline.has_value() ? SecondsUntil(*options.deadline) : 1e9;
    MG_ASSIGN_OR_RETURN(const OffsetSolution solved,
                        PlaceExact(window.problem, OffsetSolution{}, exact));
    ++result.windows_solved;
    if (solved.proven_optimal) result.lower_bound = std::max(result.lower_bound, solved.height);
    if (proven()) break;  // the window proved the incumbent optimal

    if (solved.height < result.solution.height) {
      std::vector<int64_t> offsets(problem.items.size(), 0);
      std::fill(in_window.begin(), in_window.end(), 0);
      for (size_t k = 0; k < window.items.size(); ++k) {
        offsets[window.items[k]] = solved.offsets[k];
        in_window[window.items[k]] = 1;
      }
      if (orders.empty()) {
        for (PortfolioOrder kind : kPortfolioOrders) {
          orders.push_back(PortfolioItemOrder(problem, kind));
        }
      }
      for (const std::vector<int>& base : orders) {
        std::vector<int> order = window.items;
        for (int i : base) {
          if (!in_window[i]) order.push_back(i);
        }
        for (FitRule rule : {FitRule::kBestFit, FitRule::kLowestOffset}) {
          if (out_of_time() || proven()) break;
          ++result.fills;
          std::optional<OffsetSolution> filled =
              placer.PlaceFrom(order, rule, static_cast<int>(window.items.size()), offsets,
                               solved.height, options.deadline);
          if (filled.has_value()) result.solution = *std::move(filled);
        }
      }
    }
    // A window left above the bound unproven: a wider one is no easier.
    if (proven() || (!solved.proven_optimal && solved.height > result.lower_bound)) break;
  }
  result.solution.proven_optimal = proven();
  return result;
}

}  // namespace memonger

#include "memonger/offsets/peak_window.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/exact_offsets.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/time_shares.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

// A window: sorted, disjoint ranges of steps [first, second]. Its problem holds every item with
// bytes that meets one of the ranges, its lifetime clipped to the ranges' hull (steps
// renumbered from the hull's first). Clipping every item to one interval keeps every overlap
// between them: two lifetimes that meet the hull and each other meet inside it.
using StepRange = std::pair<int, int>;

struct Window {
  std::vector<int> items;  // indices into the whole problem, ascending
  OffsetProblem problem;
};

Window CollectWindow(const OffsetProblem& problem, const std::vector<StepRange>& ranges) {
  const int lo = ranges.front().first;
  const int hi = ranges.back().second;
  Window window;
  for (int i = 0; i < static_cast<int>(problem.items.size()); ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0 || item.first_step > hi || item.last_step < lo) continue;
    // The first range that ends at or after the item's first step must begin by its last.
    const auto range =
        std::lower_bound(ranges.begin(), ranges.end(), item.first_step,
                         [](const StepRange& r, int step) { return r.second < step; });
    if (range == ranges.end() || range->first > item.last_step) continue;
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

// Adds [step - margin, step + margin] (within the problem) to `ranges`, merging ranges that
// overlap or touch.
void AddRange(const OffsetProblem& problem, int step, int margin, std::vector<StepRange>& ranges) {
  ranges.emplace_back(static_cast<int>(std::max<int64_t>(0, int64_t{step} - margin)),
                      static_cast<int>(std::min<int64_t>(problem.num_steps - 1,
                                                         int64_t{step} + margin)));
  std::sort(ranges.begin(), ranges.end());
  std::vector<StepRange> merged;
  for (const StepRange& range : ranges) {
    if (!merged.empty() && range.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  ranges = std::move(merged);
}

// The busiest step of the item's lifetime (the first of equals).
int BusiestStep(const std::vector<int64_t>& load, const OffsetItem& item) {
  return static_cast<int>(std::max_element(load.begin() + item.first_step,
                                           load.begin() + item.last_step + 1) -
                          load.begin());
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
  result.solution.height = OffsetHeight(problem, incumbent.offsets);  // not the caller's word
  auto proven = [&] { return result.solution.height <= result.lower_bound; };
  // Proven by the caller (perhaps above the most live bytes): nothing to lower.
  if (incumbent.proven_optimal) return result;
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
    if (options.stop != nullptr && options.stop->load(std::memory_order_relaxed)) return true;
    return options.deadline.has_value() && Clock::now() >= *options.deadline;
  };

  // The fill's order, made once: the window's items go first, then the rest in peak order.
  std::vector<int> peak_order;
  std::optional<GreedyPlacer> placer;  // built for the first fill
  std::vector<char> in_window(problem.items.size(), 0);
  std::vector<StepRange> ranges;
  AddRange(problem, peak, options.first_margin, ranges);
  while (!out_of_time()) {
    Window window = CollectWindow(problem, ranges);
    if (static_cast<int>(window.items.size()) > options.max_window_items ||
        static_cast<double>(window.items.size()) > options.max_window_share * searched ||
        static_cast<int64_t>(window.items.size()) == searched) {  // the whole problem
      break;
    }
    ExactOffsetsOptions exact;
    exact.threads = options.threads;
    exact.stop = options.stop;
    // At most half of the time left: a window the branch and bound cannot settle must leave
    // time for what follows (the next phase's search, or a plan from elsewhere).
    exact.time_limit_seconds = options.deadline.has_value()
                                   ? SecondsUntil(*options.deadline) * time_shares::kWindowSearch
                                   : 1e9;
    MG_ASSIGN_OR_RETURN(const OffsetSolution solved,
                        PlaceExact(window.problem, OffsetSolution{}, exact));
    ++result.windows_solved;
    if (solved.proven_optimal) result.lower_bound = std::max(result.lower_bound, solved.height);
    // Proven: the window's optimum meets the incumbent. Left above the bound unproven: a larger
    // window is no easier to solve, and a fill could not beat the incumbent.
    if (proven() || solved.height >= result.solution.height) break;

    std::vector<int64_t> offsets(problem.items.size(), 0);
    std::fill(in_window.begin(), in_window.end(), 0);
    for (size_t k = 0; k < window.items.size(); ++k) {
      offsets[window.items[k]] = solved.offsets[k];
      in_window[window.items[k]] = 1;
    }
    if (!placer.has_value()) {
      placer.emplace(problem);
      peak_order = PortfolioItemOrder(problem, PortfolioOrder::kPeak);
    }
    std::vector<int> order = window.items;
    for (int i : peak_order) {
      if (!in_window[i]) order.push_back(i);
    }
    ++result.fills;
    std::optional<OffsetSolution> filled =
        placer->PlaceFrom(order, FitRule::kBestFit, static_cast<int>(window.items.size()),
                          std::move(offsets), std::numeric_limits<int64_t>::max(),
                          options.deadline);
    if (!filled.has_value()) break;  // the deadline
    // The item the fill leaves highest, where it fails.
    int worst = -1;
    int64_t highest = solved.height;
    for (size_t i = 0; i < problem.items.size(); ++i) {
      const int64_t top = filled->offsets[i] + problem.items[i].bytes;
      if (problem.items[i].bytes > 0 && top > highest) {
        highest = top;
        worst = static_cast<int>(i);
      }
    }
    // Above the window's height the fill may still beat the incumbent.
    if (filled->height < result.solution.height) result.solution = *std::move(filled);
    const bool unsettled = !solved.proven_optimal && solved.height > result.lower_bound;
    if (proven() || unsettled || worst < 0) break;
    // That item lies outside every range (the window's items stay at or below its height): a
    // range around its busiest step joins the window.
    AddRange(problem, BusiestStep(load, problem.items[worst]), options.first_margin, ranges);
  }
  result.solution.proven_optimal = proven();
  return result;
}

}  // namespace memonger

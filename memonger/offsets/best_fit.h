// best-fit: a portfolio of greedy placements (XLA's "choose best" over orders and fit rules,
// widened), keeping the lowest arena.
//
//   MG_ASSIGN_OR_RETURN(OffsetSolution s, PlanBestFit(problem));
//
// 1. Build six orders of the items (each ends its ties with: larger size, earlier first_step,
//    lower index):
//      peak           the most bytes live at one step of its lifetime, descending: the items
//                     of the busiest steps go first and stack from offset 0, so those steps
//                     are packed without holes (TFLite's "greedy by breadth" idea, per item)
//      size           bytes descending                (TFLite CPU; earlier start on ties)
//      size-duration  bytes, then lifetime length      (greedy-by-size, XLA "spatial")
//      duration       lifetime length, then bytes      (XLA "temporal")
//      area           bytes * lifetime length          (XLA "spatial-temporal")
//      conflicts      how many items meet it in time   (TVM USMP greedy_by_conflicts)
//    Lifetime lengths are in the problem's time unit (Duration: step_times when present).
// 2. Place each order greedily (GreedyPlacer) twice: best fit (the smallest free gap that fits)
//    and lowest offset (first fit). An order equal to an earlier one is not placed again. On a
//    problem of 2 x kSplitPieceItems items or more the first run (peak, best fit) is a split
//    pass (split_pass.h): time cut into pieces placed in parallel, where a cut leaves few bytes
//    crossing it.
// 3. Keep the lowest height; ties go to the earlier run (order-major, best fit before lowest
//    offset, in the listing above). A run stops as soon as its height (which only grows) passes
//    what it must stay under to win (below every finished earlier run, no higher than every
//    finished later one); this changes no result. Start no run after one reaches
//    OffsetLowerBound: nothing is lower, and the result is marked proven optimal.
//
// Parallel: with `threads` > 1 the runs are taken in order by that many threads (each with its
// own GreedyPlacer; an order is made once, by the first run that needs it). The winner is the
// same for every thread count: step 3's rules never let a run that could win stop early. Under
// a deadline (`stop_after`) the other runs wait for the first to finish: where one run takes
// the whole time they would only be cut, and slow it down.
// Deterministic, except where `stop_after` cuts runs. Complexity: up to twelve greedy runs (see
// interval_index.h) plus O(n log n) per order: about 10 ms for a thousand items, 0.3 s for the
// 28,526 of S_1; the 62,185 of Y_1 take 0.3 s because the first run (peak) reaches the lower
// bound and ends the portfolio.
// Not optimal: every run is greedy. Tie-breaking alone moves some traces by 2-3 %, which is why
// several orders are tried; on hard synthetic traces the result stays 30-40 % above the lower
// bound, where local search (local_search.h) or the exact planner do better.
#ifndef MEMONGER_MEMONGER_OFFSETS_BEST_FIT_H_
#define MEMONGER_MEMONGER_OFFSETS_BEST_FIT_H_

#include <cstdint>
#include <chrono>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/offset_problem.h"
#include "util/deadline.h"

namespace memonger {

enum class PortfolioOrder { kSize, kSizeThenDuration, kDuration, kArea, kConflicts, kPeak };
inline constexpr PortfolioOrder kPortfolioOrders[] = {
    PortfolioOrder::kPeak, PortfolioOrder::kSize, PortfolioOrder::kSizeThenDuration,
    PortfolioOrder::kDuration, PortfolioOrder::kArea, PortfolioOrder::kConflicts};
const char* PortfolioOrderName(PortfolioOrder order);  // "size", "size-duration", ...

// The item order of step 1. REQUIRES: ValidateOffsetProblem(problem).ok().
std::vector<int> PortfolioItemOrder(const OffsetProblem& problem, PortfolioOrder order);

// For each item, how many other items' lifetimes intersect its own: O(n log n) by binary search
// over the sorted first and last steps.
std::vector<int64_t> ConflictCounts(const OffsetProblem& problem);

// For each item, the most bytes live at one step of its lifetime (OffsetLowerBound restricted
// to the item's steps): O(n + steps) time and about three words per step (blocks of steps with
// in-block prefix and suffix maxima, a sparse table over the blocks).
std::vector<int64_t> PeakLoads(const OffsetProblem& problem);

struct BestFitResult {
  OffsetSolution solution;  // the winner's; proven_optimal when it reached the lower bound
  PortfolioOrder order_kind = PortfolioOrder::kSize;
  FitRule rule = FitRule::kBestFit;
  // The winner's placement order (a start for local search); a split pass placed its crossing
  // items first.
  std::vector<int> order;
  int64_t lower_bound = 0;  // OffsetLowerBound(problem)
  int runs = 0;             // greedy placements made
  // What the first run cost one thread: its wall time, or a split pass's parts added up.
  double first_run_seconds = 0;
  // The first run met `first_run_deadline` before it placed every item: the rest got a quick
  // placement (GreedyPlacer::PlaceUntil), and solution.cut_pass_seconds_short says about how
  // much longer a whole pass takes.
  bool first_run_cut = false;
  // Runs 0 .. settled_runs - 1 (of kPortfolioRuns: run t places order kPortfolioOrders[t / 2]
  // by best fit for even t, lowest offset for odd) each ended: placed, given up because it
  // could not win, or not placed again as a duplicate order. Run settled_runs was cut by
  // `stop_after` or never started (runs after it may have ended too, on other threads), unless
  // a run reached the lower bound (then nothing is left to try). A run that gave up because it
  // could not win just as `stop_after` passed counts as cut. ResumeBestFitPortfolio makes the
  // runs from settled_runs on with time a caller has left over.
  int settled_runs = 0;
};

inline constexpr int kPortfolioRuns = 2 * static_cast<int>(std::size(kPortfolioOrders));

// Where a time-limited portfolio stopped, for a caller that may resume it.
struct PortfolioProgress {
  int settled_runs = kPortfolioRuns;  // BestFitResult::settled_runs (kPortfolioRuns: none left)
  double pass_seconds = 0;            // about what a run costs one thread: the first run's time
};

// InvalidArgument for a malformed problem (ValidateOffsetProblem) or threads < 1. With
// `stop_after`, no run starts after that time and every run but the first gives up there:
// how a time-limited caller (auto, local search) keeps its limit on problems where each greedy
// run takes seconds. The first run is the plan returned, so it never gives up: it runs to the
// end, or with `first_run_deadline` until then, when the items it has not reached get a quick
// placement (GreedyPlacer::PlaceUntil): the portfolio then ends at about that deadline however
// large the problem. A first run on course to end by `first_run_finish_by` (when later) goes
// on to the end. The result depends on the clock where either time cuts
// a run; without them the portfolio is deterministic.
absl::StatusOr<BestFitResult> RunBestFitPortfolio(
    const OffsetProblem& problem,
    std::optional<std::chrono::steady_clock::time_point> stop_after = std::nullopt,
    int threads = 1,
    std::optional<std::chrono::steady_clock::time_point> first_run_deadline = std::nullopt,
    std::optional<std::chrono::steady_clock::time_point> first_run_finish_by = std::nullopt);
absl::StatusOr<OffsetSolution> PlanBestFit(const OffsetProblem& problem, int threads = 1);

// The runs a time-limited portfolio left (PortfolioProgress), for time its caller's later
// searches left over: on 60,000 long-lived items a greedy pass takes about a second, so a
// portfolio that starts no run after a quarter of the limit made one (1.071 x the lower bound)
// where the third run ends at 1.0007, and the searches after it (peak windows, window repair)
// finished early. Makes the runs from progress.settled_runs on, by `threads` threads; each
// gives up at `deadline`, and once it cannot end below `height_to_beat` (the caller's plan).
// Makes none where less than progress.pass_seconds is left (each thread builds its index and
// its orders before the clock is read again: about a fifth of a pass each), where
// `height_to_beat` is at most the lower bound, or where no run is left. A run whose order
// equals that of a run before settled_runs is placed again (those orders are not built to
// compare): it cannot beat a `height_to_beat` no higher than the first portfolio's plan.
// `solution`: the lowest run below `height_to_beat` (ties to the earlier run), proven_optimal
// at the lower bound; none where no run beat it. InvalidArgument for a malformed problem,
// threads < 1, settled_runs outside [1, kPortfolioRuns] or a negative pass_seconds.
struct ResumedPortfolio {
  std::optional<OffsetSolution> solution;
  PortfolioProgress progress;  // where a later resume would start
};
absl::StatusOr<ResumedPortfolio> ResumeBestFitPortfolio(
    const OffsetProblem& problem, const PortfolioProgress& progress, int64_t height_to_beat,
    std::chrono::steady_clock::time_point deadline, int threads = 1);

// RunBestFitPortfolio within `limit`: no run starts after `start_share` of it, and every run but
// the first gives up then; the first is cut at time_shares::kOffsetSearches of it (and completed
// quickly), unless on course to end within time_shares::kFinishingPassOverrun past the limit.
// On a million items the whole portfolio takes seconds (12 greedy passes).
absl::StatusOr<BestFitResult> RunBestFitPortfolioWithin(const OffsetProblem& problem,
                                                        const util::Deadline& limit,
                                                        double start_share, int threads);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_BEST_FIT_H_

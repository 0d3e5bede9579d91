#include "memonger/offsets/best_fit.h"

#include <algorithm>
#include <condition_variable>
#include <iterator>
#include <mutex>
#include <thread>
#include <limits>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "memonger/offsets/split_pass.h"
#include "memonger/time_shares.h"
#include "util/check.h"
#include "util/deadline.h"
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
  // Per-step loads by a difference array. Then the steps in blocks of kBlock: per step, the
  // maximum from its block's start (prefix) and to its block's end (suffix), and a sparse table
  // over the blocks' maxima (level k: the maximum over 2^k blocks). A lifetime across blocks is
  // the suffix of its first block, the table over the blocks between, and the prefix of its
  // last; one inside a block is scanned (at most kBlock steps). A sparse table over the steps
  // themselves held steps x log2(steps) words: 285 MB for a million-record trace.
  constexpr int kBlock = 64;
  const std::vector<int64_t> load = StepLoads(problem);
  std::vector<int64_t> prefix(steps);
  std::vector<int64_t> suffix(steps);
  const int blocks = (steps + kBlock - 1) / kBlock;
  std::vector<std::vector<int64_t>> table(1, std::vector<int64_t>(blocks));
  for (int b = 0; b < blocks; ++b) {
    const int begin = b * kBlock;
    const int end = std::min(steps, begin + kBlock);
    for (int s = begin; s < end; ++s) prefix[s] = s == begin ? load[s] : std::max(prefix[s - 1], load[s]);
    for (int s = end; s-- > begin;) suffix[s] = s == end - 1 ? load[s] : std::max(suffix[s + 1], load[s]);
    table[0][b] = prefix[end - 1];
  }
  for (int k = 1; (1 << k) <= blocks; ++k) {
    const std::vector<int64_t>& prev = table[k - 1];
    std::vector<int64_t> level(blocks - (1 << k) + 1);
    for (size_t b = 0; b < level.size(); ++b) {
      level[b] = std::max(prev[b], prev[b + (size_t{1} << (k - 1))]);
    }
    table.push_back(std::move(level));
  }
  std::vector<int64_t> peaks(problem.items.size());
  for (size_t i = 0; i < problem.items.size(); ++i) {
    const int first = problem.items[i].first_step;
    const int last = problem.items[i].last_step;
    const int first_block = first / kBlock;
    const int last_block = last / kBlock;
    if (first_block == last_block) {
      peaks[i] = *std::max_element(load.begin() + first, load.begin() + last + 1);
      continue;
    }
    int64_t peak = std::max(suffix[first], prefix[last]);
    if (last_block - first_block > 1) {
      const int from = first_block + 1;
      const int count = last_block - from;  // blocks strictly between
      int k = 0;
      while ((2 << k) <= count) ++k;
      peak = std::max({peak, table[k][from], table[k][last_block - (1 << k)]});
    }
    peaks[i] = peak;
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

namespace {

constexpr int kOrders = static_cast<int>(std::size(kPortfolioOrders));
constexpr FitRule kRules[] = {FitRule::kBestFit, FitRule::kLowestOffset};
constexpr int kRuns = kPortfolioRuns;  // run t: order t / 2, rule t % 2
static_assert(kRuns == kOrders * 2);

// What RunBestFitPortfolio and ResumeBestFitPortfolio share: the runs from `first_run` on.
struct PortfolioSpec {
  int first_run = 0;
  // Every run must end below this to count (a resumed portfolio beats the caller's plan).
  int64_t height_to_beat = std::numeric_limits<int64_t>::max();
  std::optional<std::chrono::steady_clock::time_point> stop_after;
  int threads = 1;
  // Run 0's (first_run 0 only): GreedyPlacer::PlaceUntil's deadline and finish_by.
  std::optional<std::chrono::steady_clock::time_point> first_run_deadline;
  std::optional<std::chrono::steady_clock::time_point> first_run_finish_by;
};

struct PortfolioRuns {
  std::optional<BestFitResult> best;  // none: no run ended below height_to_beat
  int settled_runs = 0;               // BestFitResult::settled_runs
};

PortfolioRuns RunPortfolio(const OffsetProblem& problem, const PortfolioSpec& spec) {
  const int64_t lower_bound = OffsetLowerBound(problem);
  const int first_run = spec.first_run;
  const int threads = spec.threads;
  const std::optional<std::chrono::steady_clock::time_point>& stop_after = spec.stop_after;
  const std::optional<std::chrono::steady_clock::time_point>& first_run_deadline =
      spec.first_run_deadline;
  const std::optional<std::chrono::steady_clock::time_point>& first_run_finish_by =
      spec.first_run_finish_by;

  // Shared state, under `mutex`: each order made once (by whichever run needs it first), the
  // results of finished runs, and the best so far.
  std::mutex mutex;
  std::vector<std::once_flag> made(kOrders);
  std::vector<std::vector<int>> orders(kOrders);
  std::vector<std::optional<OffsetSolution>> results(kRuns);
  // Per run: it ended (placed, given up because it could not win, or a duplicate). A run cut
  // by stop_after, or never started, did not.
  std::vector<char> settled(kRuns, 0);
  for (int t = 0; t < first_run; ++t) settled[t] = 1;
  int next_run = first_run;
  int placed = 0;  // runs placed (duplicates are not)
  bool first_finished = first_run > 0;  // resumed runs have no first run to wait for
  bool first_run_cut = false;
  double first_run_seconds = 0;
  double first_run_seconds_short = 0;
  std::condition_variable first_done;
  int best_run = -1;  // the finished run with the lowest (height, run)
  auto order_of = [&](int k) -> const std::vector<int>& {
    std::call_once(made[k], [&] { orders[k] = PortfolioItemOrder(problem, kPortfolioOrders[k]); });
    return orders[k];
  };

  // Run t can win only with a height below every finished earlier run's and no higher than any
  // later one's; it gives up as soon as it cannot (heights only grow). So the winner, the
  // lowest height with ties to the earliest run, is the one a single thread running the runs in
  // order would keep, whatever the thread count, unless the deadline cuts a run.
  auto worker = [&]() {
    // Built for the first run this thread takes (none, where an earlier run reached the bound).
    std::optional<GreedyPlacer> placer;
    for (;;) {
      int t;
      int64_t limit = std::numeric_limits<int64_t>::max();
      {
        std::unique_lock<std::mutex> lock(mutex);
        // Under a deadline, later runs wait for the first: on a problem where one run takes the
        // whole time they would only be cut (and slow the first down by sharing the memory bus).
        if (stop_after.has_value()) {
          first_done.wait(lock, [&] { return first_finished || next_run == 0; });
        }
        if (next_run >= kRuns) return;
        if (best_run >= 0 && results[best_run]->height == lower_bound) {
          return;  // a run reached the bound: no run after it can win
        }
        // The first run always runs: it is the plan returned whatever the clock says.
        if (next_run > 0 && stop_after.has_value() &&
            std::chrono::steady_clock::now() >= *stop_after) {
          return;
        }
        t = next_run++;
        if (spec.height_to_beat != std::numeric_limits<int64_t>::max()) {
          limit = spec.height_to_beat - 1;
        }
        if (best_run >= 0) {
          const int64_t h = results[best_run]->height;
          limit = std::min(limit, best_run < t ? h - 1 : h);
        }
      }
      if (!placer.has_value()) placer.emplace(problem);
      const int k = t / 2;
      const std::vector<int>& order = order_of(k);
      bool duplicate = false;  // an order equal to an earlier one is not placed again
      // (A resumed portfolio compares only the orders it builds itself: ResumeBestFitPortfolio.)
      for (int j = first_run / 2; j < k && !duplicate; ++j) duplicate = order_of(j) == order;
      std::optional<OffsetSolution> solution;
      const auto run_start = std::chrono::steady_clock::now();
      bool cut = false;
      double seconds_short = 0;
      if (t == 0 && first_run_deadline.has_value()) {
        int placed_greedily = 0;
        solution = placer->PlaceUntil(order, kRules[0], *first_run_deadline, first_run_finish_by,
                                      &placed_greedily);
        cut = placed_greedily < static_cast<int>(order.size());
        if (cut) seconds_short = CutPassSecondsShort(run_start, placed_greedily, order.size());
      } else if (!duplicate) {
        solution = placer->PlaceFrom(order, kRules[t % 2], 0, {}, limit,
                                     t > 0 ? stop_after : std::nullopt);
      }
      // A run that gave up once stop_after had passed counts as cut (one that gave up over its
      // limit just before is taken for cut too, and may run again when resumed: time only).
      const bool run_cut = t > 0 && !duplicate && !solution.has_value() &&
                           stop_after.has_value() &&
                           std::chrono::steady_clock::now() >= *stop_after;
      std::lock_guard<std::mutex> lock(mutex);
      settled[t] = run_cut ? 0 : 1;
      if (t == 0) {
        first_run_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
        first_finished = true;
        first_run_cut = cut;
        first_run_seconds_short = seconds_short;
        first_done.notify_all();
      }
      if (!duplicate) ++placed;
      if (!solution.has_value()) continue;
      const int64_t h = solution->height;
      results[t] = std::move(solution);
      if (best_run < 0 || h < results[best_run]->height ||
          (h == results[best_run]->height && t < best_run)) {
        best_run = t;
      }
    }
  };
  // On a large problem the first run is a split pass (split_pass.h): its pieces take every
  // thread, and the other runs start after it, as they would under a deadline anyway.
  std::optional<TimeSplit> split;
  if (first_run == 0) split = SplitInTime(problem, order_of(0));
  if (split.has_value()) {
    const auto run_start = std::chrono::steady_clock::now();
    SplitPassOptions options;
    options.threads = threads;
    options.deadline = first_run_deadline;
    options.finish_by = first_run_finish_by;
    SplitPassResult run = PlaceSplit(problem, *split, kRules[0], options);
    // What one greedy pass costs a thread: local search's steps are whole passes on one.
    first_run_seconds = run.thread_seconds;
    first_run_cut = run.placed_greedily < static_cast<int>(problem.items.size());
    if (first_run_cut) {
      first_run_seconds_short =
          CutPassSecondsShort(run_start, run.placed_greedily, problem.items.size());
    }
    results[0] = std::move(run.solution);
    best_run = 0;
    placed = 1;
    next_run = 1;
    settled[0] = 1;
    first_finished = true;
  }

  const int workers = std::min(threads, kRuns);
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();

  PortfolioRuns runs;
  runs.settled_runs = static_cast<int>(
      std::find(settled.begin(), settled.end(), 0) - settled.begin());
  // Run 0 has no deadline, and gives up only for a finished winner.
  MG_CHECK(best_run >= 0 || first_run > 0);
  if (best_run < 0) return runs;
  BestFitResult& best = runs.best.emplace();
  best.settled_runs = runs.settled_runs;
  best.lower_bound = lower_bound;
  best.runs = placed;
  best.first_run_seconds = first_run_seconds;
  best.first_run_cut = first_run_cut;
  best.solution = *std::move(results[best_run]);
  if (best_run == 0) best.solution.cut_pass_seconds_short = first_run_seconds_short;
  best.order_kind = kPortfolioOrders[best_run / 2];
  best.rule = kRules[best_run % 2];
  best.order = orders[best_run / 2];
  best.solution.proven_optimal = best.solution.height == lower_bound;
  return runs;
}

absl::Status ValidatePortfolio(const OffsetProblem& problem, int threads) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  if (threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("best-fit: ", threads, " threads"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BestFitResult> RunBestFitPortfolio(
    const OffsetProblem& problem, std::optional<std::chrono::steady_clock::time_point> stop_after,
    int threads, std::optional<std::chrono::steady_clock::time_point> first_run_deadline,
    std::optional<std::chrono::steady_clock::time_point> first_run_finish_by) {
  MG_RETURN_IF_ERROR(ValidatePortfolio(problem, threads));
  PortfolioSpec spec;
  spec.stop_after = stop_after;
  spec.threads = threads;
  spec.first_run_deadline = first_run_deadline;
  spec.first_run_finish_by = first_run_finish_by;
  PortfolioRuns runs = RunPortfolio(problem, spec);
  return *std::move(runs.best);
}

absl::StatusOr<ResumedPortfolio> ResumeBestFitPortfolio(
    const OffsetProblem& problem, const PortfolioProgress& progress, int64_t height_to_beat,
    std::chrono::steady_clock::time_point deadline, int threads) {
  MG_RETURN_IF_ERROR(ValidatePortfolio(problem, threads));
  if (progress.settled_runs < 1 || progress.settled_runs > kPortfolioRuns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "best-fit: resuming at run ", progress.settled_runs, " of ", kPortfolioRuns));
  }
  if (!(progress.pass_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("best-fit: a pass of ", progress.pass_seconds, " s"));
  }
  ResumedPortfolio resumed;
  resumed.progress = progress;
  const std::chrono::duration<double> left = deadline - std::chrono::steady_clock::now();
  if (progress.settled_runs == kPortfolioRuns || left.count() <= 0 ||
      left.count() < progress.pass_seconds || height_to_beat <= OffsetLowerBound(problem)) {
    return resumed;
  }
  PortfolioSpec spec;
  spec.first_run = progress.settled_runs;
  spec.height_to_beat = height_to_beat;
  spec.stop_after = deadline;
  spec.threads = threads;
  PortfolioRuns runs = RunPortfolio(problem, spec);
  resumed.progress.settled_runs = runs.settled_runs;
  if (runs.best.has_value()) resumed.solution = std::move(runs.best->solution);
  return resumed;
}

absl::StatusOr<BestFitResult> RunBestFitPortfolioWithin(const OffsetProblem& problem,
                                                        const util::Deadline& limit,
                                                        double start_share, int threads) {
  return RunBestFitPortfolio(problem, limit.EndOfShare(start_share), threads,
                             limit.EndOfShare(time_shares::kOffsetSearches),
                             limit.EndOfShare(1 + time_shares::kFinishingPassOverrun));
}

absl::StatusOr<OffsetSolution> PlanBestFit(const OffsetProblem& problem, int threads) {
  MG_ASSIGN_OR_RETURN(BestFitResult result, RunBestFitPortfolio(problem, std::nullopt, threads));
  return std::move(result.solution);
}

}  // namespace memonger

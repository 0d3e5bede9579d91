#include "memonger/offsets/split_pass.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <thread>
#include <utility>

#include "util/check.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

// The offsets one part gives its items, how many it placed greedily, and how long it took.
struct Part {
  std::vector<int64_t> offsets;  // per item of the part, in its order
  int placed_greedily = 0;
  double seconds = 0;
};

// Places `items` (in that order) as a problem of their own, the first `keep` put back at `kept`.
Part PlacePart(const OffsetProblem& problem, const std::vector<int>& items, int keep,
               std::vector<int64_t> kept, FitRule rule, const SplitPassOptions& options) {
  OffsetProblem part;
  part.num_steps = problem.num_steps;
  part.items.reserve(items.size());
  for (int i : items) part.items.push_back(problem.items[i]);
  std::vector<int> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  kept.resize(items.size(), 0);
  const Clock::time_point started = Clock::now();
  Part result;

  // Past the deadline already (threads fewer than pieces, or the crossing part took the time):
  // no index is built, the part's own items get the quick completion at once, as a cut pass's
  // do, so that pieces left waiting add no greedy work after the deadline.
  if (options.deadline.has_value() && started >= *options.deadline) {
    OffsetSolution s;
    s.offsets = std::move(kept);
    for (int k = 0; k < keep; ++k) {
      s.height = std::max(s.height, s.offsets[k] + part.items[k].bytes);
    }
    CompleteCutPass(part, order, keep, keep, s);
    result.offsets = std::move(s.offsets);
    result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    return result;
  }

  GreedyPlacer placer(part);
  if (options.deadline.has_value()) {
    int placed = 0;
    OffsetSolution s = placer.PlaceUntil(order, rule, *options.deadline, options.finish_by,
                                         &placed, keep, std::move(kept));
    result.offsets = std::move(s.offsets);
    result.placed_greedily = placed - keep;
  } else {
    std::optional<OffsetSolution> s = placer.PlaceFrom(order, rule, keep, std::move(kept));
    MG_CHECK(s.has_value());  // no limit, no deadline
    result.offsets = std::move(s->offsets);
    result.placed_greedily = static_cast<int>(items.size()) - keep;
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

}  // namespace

std::optional<TimeSplit> SplitInTime(const OffsetProblem& problem, const std::vector<int>& order,
                                     int piece_items) {
  const int n = static_cast<int>(problem.items.size());
  MG_CHECK(static_cast<int>(order.size()) == n);
  MG_CHECK(piece_items >= 1);
  const int pieces = std::min(kMaxSplitPieces, n / piece_items);
  if (pieces < 2 || problem.num_steps < 2) return std::nullopt;

  // Per step: the items starting there, and the change in the bytes of the items crossing the
  // cut after it (an item crosses the cuts after first_step, ..., last_step - 1).
  const int steps = problem.num_steps;
  std::vector<int32_t> starting(static_cast<size_t>(steps), 0);
  std::vector<int64_t> crossing_change(static_cast<size_t>(steps) + 1, 0);
  for (const OffsetItem& item : problem.items) {
    ++starting[item.first_step];
    if (item.first_step < item.last_step) {
      crossing_change[item.first_step] += item.bytes;
      crossing_change[item.last_step] -= item.bytes;
    }
  }
  // One sweep: cut k (1 <= k < pieces) goes at the step, among those whose count of items
  // started by then reaches within `window` of k n / pieces, that the fewest bytes cross.
  const int64_t window = n / (4 * pieces);
  std::vector<int> cuts;
  int k = 1;
  int best_step = -1;
  int64_t best_crossing = 0;
  int64_t started_before = 0;  // items starting before step s
  int64_t crossing = 0;        // bytes crossing the cut after step s
  for (int s = 0; s + 1 < steps && k < pieces; ++s) {
    const int64_t started_by = started_before + starting[s];
    crossing += crossing_change[s];
    const int64_t target = static_cast<int64_t>(k) * n / pieces;
    if (started_before > target + window) {  // past cut k's window: settle it
      if (best_step >= 0) cuts.push_back(best_step);
      best_step = -1;
      ++k;
      // The next cut's window lies beyond this one's: this step may be in it.
      if (k < pieces) {
        const int64_t next = static_cast<int64_t>(k) * n / pieces;
        if (started_by >= next - window && started_before <= next + window) {
          best_step = s;
          best_crossing = crossing;
        }
      }
    } else if (started_by >= target - window && (best_step < 0 || crossing < best_crossing)) {
      best_step = s;
      best_crossing = crossing;
    }
    started_before = started_by;
  }
  if (k < pieces && best_step >= 0) cuts.push_back(best_step);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  if (cuts.empty()) return std::nullopt;

  TimeSplit split;
  split.cuts = std::move(cuts);
  split.pieces.resize(split.cuts.size() + 1);
  for (int i : order) {
    const OffsetItem& item = problem.items[i];
    // The first cut at or after the item's first step: it crosses that cut if it lives past it.
    const auto at = std::lower_bound(split.cuts.begin(), split.cuts.end(), item.first_step);
    if (at != split.cuts.end() && *at < item.last_step) {
      split.crossing.push_back(i);
    } else {
      split.pieces[static_cast<size_t>(at - split.cuts.begin())].push_back(i);
    }
  }
  if (split.crossing.size() * kMaxCrossingShare > static_cast<size_t>(n)) return std::nullopt;
  return split;
}

SplitPassResult PlaceSplit(const OffsetProblem& problem, const TimeSplit& split, FitRule rule,
                           const SplitPassOptions& options) {
  MG_CHECK(options.threads >= 1);
  SplitPassResult result;
  std::vector<int64_t>& offsets = result.solution.offsets;
  offsets.assign(problem.items.size(), 0);

  // 1. The crossing items.
  Part crossing = PlacePart(problem, split.crossing, 0, {}, rule, options);
  for (size_t k = 0; k < split.crossing.size(); ++k) {
    offsets[split.crossing[k]] = crossing.offsets[k];
  }

  // 2. The pieces, each with the crossing items that share a step with it put back first.
  const int num_pieces = static_cast<int>(split.pieces.size());
  std::vector<int> placed_greedily(static_cast<size_t>(num_pieces), 0);
  std::vector<double> seconds(static_cast<size_t>(num_pieces), 0);
  std::atomic<int> next_piece{0};
  auto worker = [&] {
    for (int p = next_piece++; p < num_pieces; p = next_piece++) {
      const int first = p == 0 ? 0 : split.cuts[p - 1] + 1;
      const int last = p + 1 == num_pieces ? problem.num_steps - 1 : split.cuts[p];
      std::vector<int> items;
      std::vector<int64_t> kept;
      for (int i : split.crossing) {
        if (problem.items[i].first_step <= last && problem.items[i].last_step >= first) {
          items.push_back(i);
          kept.push_back(offsets[i]);
        }
      }
      const int keep = static_cast<int>(items.size());
      items.insert(items.end(), split.pieces[p].begin(), split.pieces[p].end());
      const Part part = PlacePart(problem, items, keep, std::move(kept), rule, options);
      // Each piece writes only its own items (the crossing ones stay as step 1 put them).
      for (size_t k = static_cast<size_t>(keep); k < items.size(); ++k) {
        offsets[items[k]] = part.offsets[k];
      }
      placed_greedily[p] = part.placed_greedily;
      seconds[p] = part.seconds;
    }
  };
  const int threads = std::min(options.threads, num_pieces);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();

  result.placed_greedily =
      crossing.placed_greedily + std::accumulate(placed_greedily.begin(), placed_greedily.end(), 0);
  result.thread_seconds = crossing.seconds + std::accumulate(seconds.begin(), seconds.end(), 0.0);
  for (size_t i = 0; i < problem.items.size(); ++i) {
    result.solution.height =
        std::max(result.solution.height, offsets[i] + problem.items[i].bytes);
  }
  return result;
}

}  // namespace memonger

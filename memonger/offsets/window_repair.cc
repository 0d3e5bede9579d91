#include "memonger/offsets/window_repair.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/interval_index.h"
#include "util/check.h"
#include "util/splitmix64.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

// Insertions into a window's index between two reads of the clock.
constexpr int64_t kItemsPerClock = 256;

// The items sharing a step with a window [a, b]: items sorted by first step, and a max tree of
// their last steps over that order, so that a query visits only subtrees holding a hit.
class StepFinder {
 public:
  explicit StepFinder(const OffsetProblem& problem) : items_(problem.items) {
    const int n = static_cast<int>(items_.size());
    by_first_.resize(n);
    std::iota(by_first_.begin(), by_first_.end(), 0);
    std::sort(by_first_.begin(), by_first_.end(), [&](int x, int y) {
      return items_[x].first_step != items_[y].first_step
                 ? items_[x].first_step < items_[y].first_step
                 : x < y;
    });
    firsts_.resize(n);
    for (int k = 0; k < n; ++k) firsts_[k] = items_[by_first_[k]].first_step;
    leaves_ = 1;
    while (leaves_ < n) leaves_ *= 2;
    max_last_.assign(2 * static_cast<size_t>(leaves_), -1);
    for (int k = 0; k < n; ++k) max_last_[leaves_ + k] = items_[by_first_[k]].last_step;
    for (int node = leaves_ - 1; node >= 1; --node) {
      max_last_[node] = std::max(max_last_[2 * node], max_last_[2 * node + 1]);
    }
  }

  // Appends to `out` the items with first_step <= b and last_step >= a, in first-step order.
  void Meeting(int a, int b, std::vector<int>& out) const {
    const int count =
        static_cast<int>(std::upper_bound(firsts_.begin(), firsts_.end(), b) - firsts_.begin());
    Collect(1, 0, leaves_ - 1, count, a, out);
  }

 private:
  void Collect(int node, int lo, int hi, int count, int a, std::vector<int>& out) const {
    if (lo >= count || max_last_[node] < a) return;
    if (lo == hi) {
      out.push_back(by_first_[lo]);
      return;
    }
    const int mid = lo + (hi - lo) / 2;
    Collect(2 * node, lo, mid, count, a, out);
    Collect(2 * node + 1, mid + 1, hi, count, a, out);
  }

  const std::vector<OffsetItem>& items_;
  std::vector<int> by_first_;
  std::vector<int> firsts_;
  int leaves_ = 1;
  std::vector<int> max_last_;  // heap order, root 1
};

int64_t AlignUp(int64_t x, int64_t alignment) { return (x + alignment - 1) & ~(alignment - 1); }

// The offset for `bytes` among `occupied` (sorted, disjoint) whose top stays at or below
// `limit`, by `rule`; nullopt when no gap below the limit fits.
std::optional<int64_t> ChooseOffsetBelow(const std::vector<ByteRange>& occupied, int64_t bytes,
                                         int64_t alignment, FitRule rule, int64_t limit) {
  int64_t gap_begin = 0;
  std::optional<int64_t> best;
  int64_t best_size = std::numeric_limits<int64_t>::max();
  auto consider = [&](int64_t gap_end) {  // [gap_begin, gap_end), gap_end <= limit
    const int64_t offset = AlignUp(gap_begin, alignment);
    if (offset + bytes > gap_end) return false;
    const int64_t size = gap_end - gap_begin;
    if (!best.has_value() || (rule == FitRule::kBestFit && size < best_size)) {
      best = offset;
      best_size = size;
    }
    return rule == FitRule::kLowestOffset;  // the first fit is the answer
  };
  for (const ByteRange& r : occupied) {
    if (gap_begin >= limit) break;
    if (consider(std::min(r.begin, limit))) return best;
    gap_begin = std::max(gap_begin, r.end);
  }
  if (gap_begin < limit) consider(limit);
  return best;
}

// One window's local problem: items `local_items` (free ones first) with steps compressed to
// the distinct boundaries of their lifetimes clipped to the window.
struct Window {
  OffsetProblem problem;
  std::vector<int> items;  // global ids; [0, free_count) are free, the rest fixed
  int free_count = 0;
};

Window BuildWindow(const OffsetProblem& problem, int a, int b, const std::vector<int>& free,
                   const std::vector<int>& fixed) {
  Window w;
  w.items = free;
  w.items.insert(w.items.end(), fixed.begin(), fixed.end());
  w.free_count = static_cast<int>(free.size());
  std::vector<int> bounds;
  bounds.reserve(2 * w.items.size());
  for (int i : w.items) {
    bounds.push_back(std::max(problem.items[i].first_step, a));
    bounds.push_back(std::min(problem.items[i].last_step, b) + 1);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  auto rank = [&](int step) {
    return static_cast<int>(std::lower_bound(bounds.begin(), bounds.end(), step) -
                            bounds.begin());
  };
  w.problem.num_steps = static_cast<int>(bounds.size()) - 1;
  w.problem.items.reserve(w.items.size());
  for (int i : w.items) {
    OffsetItem item = problem.items[i];
    item.first_step = rank(std::max(item.first_step, a));
    item.last_step = rank(std::min(item.last_step, b) + 1) - 1;
    w.problem.items.push_back(item);
  }
  // Durations for the search orders: the original times of the boundaries kept.
  w.problem.step_times.reserve(w.problem.num_steps);
  for (int s = 0; s < w.problem.num_steps; ++s) {
    w.problem.step_times.push_back(problem.step_times.empty() ? bounds[s]
                                                              : problem.step_times[bounds[s]]);
  }
  return w;
}

class Repairer {
 public:
  Repairer(const OffsetProblem& problem, const RepairOptions& options, RepairResult& result)
      : problem_(problem), options_(options), result_(result), finder_(problem),
        rng_(options.seed) {}

  // Places v's neighbourhood again so that every free item's top is <= target; true when some
  // window succeeded (offsets updated).
  bool RepairItem(int v, int64_t target) {
    const OffsetItem& item = problem_.items[v];
    size_t last_free = 0;
    for (int64_t margin = 0;; margin = margin == 0 ? 1 : 4 * margin) {
      if (TimeUp()) return false;
      const int a = static_cast<int>(std::max<int64_t>(0, item.first_step - margin));
      const int b = static_cast<int>(
          std::min<int64_t>(problem_.num_steps - 1, int64_t{item.last_step} + margin));
      meeting_.clear();
      finder_.Meeting(a, b, meeting_);
      free_.clear();
      fixed_.clear();
      free_.push_back(v);
      for (int i : meeting_) {
        if (i == v || problem_.items[i].bytes == 0) continue;
        const OffsetItem& o = problem_.items[i];
        (o.first_step >= a && o.last_step <= b ? free_ : fixed_).push_back(i);
      }
      if (static_cast<int>(free_.size() + fixed_.size()) > options_.max_window_items) {
        return false;
      }
      const bool whole = a == 0 && b == problem_.num_steps - 1;
      if (free_.size() > last_free) {  // a window with the same free items changes nothing
        last_free = free_.size();
        ++result_.windows_tried;
        if (PlaceWindow(a, b, target)) {
          ++result_.windows_repaired;
          return true;
        }
      }
      if (whole) return false;
    }
  }

  bool TimeUp() const {
    return options_.deadline.has_value() && Clock::now() >= *options_.deadline;
  }

  std::vector<int64_t>& offsets() { return offsets_; }

 private:
  bool PlaceWindow(int a, int b, int64_t target) {
    const Window w = BuildWindow(problem_, a, b, free_, fixed_);
    IntervalIndex index(w.problem);
    std::vector<std::vector<int>> orders;
    for (PortfolioOrder kind :
         {PortfolioOrder::kPeak, PortfolioOrder::kSize, PortfolioOrder::kDuration}) {
      std::vector<int> order;
      for (int local : PortfolioItemOrder(w.problem, kind)) {
        if (local < w.free_count) order.push_back(local);
      }
      if (std::find(orders.begin(), orders.end(), order) == orders.end()) {
        orders.push_back(std::move(order));
      }
    }
    for (int s = 0; s < options_.shuffles; ++s) {
      std::vector<int> order = orders.front();
      // A local shuffle: each item trades places with one at most 8 positions later, so the
      // order keeps its shape (busy items first) with its ties and near-ties broken anew.
      for (size_t k = 0; k + 1 < order.size(); ++k) {
        const size_t reach = std::min<size_t>(8, order.size() - 1 - k);
        std::swap(order[k], order[k + rng_.Below(reach + 1)]);
      }
      orders.push_back(std::move(order));
    }
    std::vector<ByteRange> occupied;
    std::vector<int64_t> placed(w.free_count);
    // One attempt inserts up to max_window_items items, and an item living for thousands of
    // steps costs as many buckets of the index: the deadline is checked every kItemsPerClock
    // insertions, not only between windows (a 20,000-item trace of long lifetimes overran a
    // 1 s limit by 0.45 s in one window).
    int64_t inserted = 0;
    const auto time_up = [&] { return ++inserted % kItemsPerClock == 0 && TimeUp(); };
    for (const std::vector<int>& order : orders) {
      for (FitRule rule : {FitRule::kBestFit, FitRule::kLowestOffset}) {
        index.Clear();
        for (int local = w.free_count; local < static_cast<int>(w.items.size()); ++local) {
          if (time_up()) return false;
          index.Insert(local, offsets_[w.items[local]], w.problem.items[local].bytes);
        }
        bool fits = true;
        for (int local : order) {
          if (time_up()) return false;
          const OffsetItem& it = w.problem.items[local];
          index.OccupiedDuring(local, occupied);
          const std::optional<int64_t> offset =
              ChooseOffsetBelow(occupied, it.bytes, it.alignment, rule, target);
          if (!offset.has_value()) {
            fits = false;
            break;
          }
          placed[local] = *offset;
          index.Insert(local, *offset, it.bytes);
        }
        if (fits) {
          for (int local = 0; local < w.free_count; ++local) {
            offsets_[w.items[local]] = placed[local];
          }
          return true;
        }
      }
    }
    return false;
  }

  const OffsetProblem& problem_;
  const RepairOptions& options_;
  RepairResult& result_;
  StepFinder finder_;
  util::SplitMix64 rng_;
  std::vector<int64_t> offsets_;
  std::vector<int> meeting_;
  std::vector<int> free_;
  std::vector<int> fixed_;
};

}  // namespace

absl::StatusOr<RepairResult> RepairWindows(const OffsetProblem& problem,
                                           const OffsetSolution& solution,
                                           const RepairOptions& options) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  if (solution.offsets.size() != problem.items.size()) {
    return absl::InvalidArgumentError("window repair: the solution has the wrong item count");
  }
  if (options.check_input) MG_RETURN_IF_ERROR(CheckOffsetSolution(problem, solution.offsets));
  RepairResult result;
  result.solution = solution;
  result.solution.height = OffsetHeight(problem, solution.offsets);
  const int64_t lower_bound = OffsetLowerBound(problem);
  if (result.solution.height <= lower_bound || options.max_window_items < 1) {
    result.solution.proven_optimal = result.solution.height == lower_bound;
    return result;
  }
  Repairer repairer(problem, options, result);
  std::vector<int64_t>& offsets = repairer.offsets();
  offsets = solution.offsets;
  // The floor: every item should end at or below it. It starts at the lower bound and rises
  // only when the highest item left cannot get down to it, to the lowest top found for that
  // item by bisection (at most kBisections windows cascades).
  constexpr int kBisections = 6;
  int64_t floor = lower_bound;
  std::vector<int> above;
  while (!repairer.TimeUp()) {
    above.clear();
    for (int i = 0; i < static_cast<int>(problem.items.size()); ++i) {
      if (problem.items[i].bytes > 0 && offsets[i] + problem.items[i].bytes > floor) {
        above.push_back(i);
      }
    }
    if (above.empty()) break;
    std::sort(above.begin(), above.end(), [&](int x, int y) {
      const int64_t tx = offsets[x] + problem.items[x].bytes;
      const int64_t ty = offsets[y] + problem.items[y].bytes;
      return tx != ty ? tx > ty : x < y;
    });
    bool stuck = false;
    for (int v : above) {
      if (repairer.TimeUp()) break;
      const int64_t top = offsets[v] + problem.items[v].bytes;
      if (top <= floor) continue;  // an earlier window moved it
      if (repairer.RepairItem(v, floor)) continue;
      // v cannot get down to the floor: find how low it can get, and raise the floor there.
      int64_t lo = floor;  // v cannot end at or below lo
      int64_t hi = top;    // v ends at hi now
      for (int k = 0; k < kBisections && hi - lo > 1 && !repairer.TimeUp(); ++k) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (repairer.RepairItem(v, mid)) {
          hi = offsets[v] + problem.items[v].bytes;
        } else {
          lo = mid;
        }
      }
      if (hi == top) {  // v does not move: the height is at least its top
        stuck = true;
        break;
      }
      floor = hi;
      break;  // the items between the old and the new floor need no work: list them again
    }
    if (stuck) break;
  }
  const int64_t height = OffsetHeight(problem, offsets);
  MG_CHECK(height <= result.solution.height);  // windows only accept tops below a higher one
  // Valid by construction (see the header); not checked again here: every offset solution is
  // checked where it is applied to a plan (ApplyOffsetSolutions), and a second O(n log n) check
  // after the deadline kept a million-item run over its time limit.
  result.solution.offsets = offsets;
  result.solution.height = height;
  result.solution.proven_optimal = result.solution.height == lower_bound;
  return result;
}

}  // namespace memonger

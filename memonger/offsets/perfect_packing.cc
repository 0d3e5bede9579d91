#include "memonger/offsets/perfect_packing.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "memonger/offsets/interval_index.h"
#include "util/check.h"
#include "util/ordered_race.h"
#include "util/splitmix64.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

// The problem in sections: item i lives in sections [first[i], last[i]].
struct Sections {
  int count = 0;
  std::vector<int> first;
  std::vector<int> last;
  std::vector<int64_t> load;  // bytes live per section
};

Sections ToSections(const OffsetProblem& problem) {
  std::vector<int64_t> bounds;
  for (const OffsetItem& item : problem.items) {
    if (item.bytes == 0) continue;
    bounds.push_back(item.first_step);
    bounds.push_back(int64_t{item.last_step} + 1);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  Sections s;
  s.count = bounds.empty() ? 0 : static_cast<int>(bounds.size()) - 1;
  auto index = [&](int64_t step) {
    return static_cast<int>(std::lower_bound(bounds.begin(), bounds.end(), step) -
                            bounds.begin());
  };
  s.first.assign(problem.items.size(), 0);
  s.last.assign(problem.items.size(), -1);
  std::vector<int64_t> delta(s.count + 1, 0);
  for (size_t i = 0; i < problem.items.size(); ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0) continue;
    s.first[i] = index(item.first_step);
    s.last[i] = index(int64_t{item.last_step} + 1) - 1;
    delta[s.first[i]] += item.bytes;
    delta[s.last[i] + 1] -= item.bytes;
  }
  s.load.resize(s.count);
  int64_t load = 0;
  for (int k = 0; k < s.count; ++k) s.load[k] = load += delta[k];
  return s;
}

class Search {
 public:
  // `round` picks the order candidates are tried in: 0, largest first (bytes, then lifetime);
  // 1, longest first (lifetime, then bytes); later rounds, a seeded shuffle.
  // `stop`, when given, is polled at every node: the search stops (kStopped) once it is true.
  Search(const OffsetProblem& problem, const Sections& sections, int64_t height,
         std::optional<Clock::time_point> deadline, int64_t node_limit, int round,
         const util::RaceStop* stop)
      : items_(problem.items), sec_(sections), height_(height), deadline_(deadline),
        node_limit_(node_limit), stop_(stop),
        clock_stride_(std::clamp<int64_t>((int64_t{1} << 20) / (sections.count + 1), 1, 1024)),
        skyline_(sections.count, 0),
        offsets_(problem.items.size(), 0), placed_(problem.items.size(), false),
        starting_(sections.count) {
    ending_.resize(sections.count);
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].bytes == 0) continue;
      starting_[sec_.first[i]].push_back(static_cast<int>(i));
      ending_[sec_.last[i]].push_back(static_cast<int>(i));
    }
    util::SplitMix64 rng(static_cast<uint64_t>(round));
    for (std::vector<int>& list : starting_) {
      if (round >= 2) {
        for (size_t k = list.size(); k > 1; --k) std::swap(list[k - 1], list[rng.Below(k)]);
        continue;
      }
      std::sort(list.begin(), list.end(), [&](int a, int b) {
        const auto key = [&](int i) {
          const int64_t bytes = items_[i].bytes;
          const int64_t width = sec_.last[i] - sec_.first[i];
          return round == 0 ? std::make_tuple(-bytes, -width, i)
                            : std::make_tuple(-width, -bytes, i);
        };
        return key(a) < key(b);
      });
    }
  }

  PerfectPacking Run() {
    PerfectPacking result;
    // The empty skyline: every run between walls is a well.
    for (int s = 0; s < sec_.count; ++s) {
      if (sec_.load[s] != 0 && (s == 0 || sec_.load[s - 1] == 0) && !WellOk(s)) {
        result.outcome = PerfectPacking::kInfeasible;
        return result;
      }
    }
    // Frames of the depth-first search: the candidates of a node and the one being tried.
    struct Frame {
      std::vector<int> candidates;
      size_t next = 0;
      int placed = -1;  // the candidate placed now, -1 before the first
    };
    std::vector<Frame> stack;
    for (;;) {
      // A node costs O(sections): the clock is read often enough that about 2^20 section visits
      // pass between two reads, however many sections there are.
      if (++result.nodes % clock_stride_ == 0 && deadline_.has_value() &&
          Clock::now() >= *deadline_) {
        result.outcome = PerfectPacking::kStopped;
        return result;
      }
      if (result.nodes > node_limit_ || (stop_ != nullptr && (*stop_)())) {
        result.outcome = PerfectPacking::kStopped;
        return result;
      }
      const int lowest = LowestCell();
      if (lowest < 0) {  // every section full: every item is placed (the loads are LB)
        result.outcome = PerfectPacking::kFound;
        result.offsets = offsets_;
        return result;
      }
      stack.push_back(Frame{Candidates(lowest)});
      // Advance: place the next candidate of the top frame that leaves every well tileable,
      // backtracking through exhausted frames.
      for (;;) {
        if (stack.empty()) {
          result.outcome = PerfectPacking::kInfeasible;
          return result;
        }
        Frame& top = stack.back();
        if (top.placed >= 0) {
          Unplace(top.placed);
          top.placed = -1;
        }
        while (top.next < top.candidates.size()) {
          const int c = top.candidates[top.next++];
          Place(c, skyline_[sec_.first[c]]);
          if (WellsAround(c)) {
            top.placed = c;
            break;
          }
          Unplace(c);
        }
        if (top.placed >= 0) break;
        stack.pop_back();
      }
    }
  }

 private:
  // The leftmost section of least height below the target among those with live bytes, or -1.
  int LowestCell() const {
    int best = -1;
    for (int s = 0; s < sec_.count; ++s) {
      if (sec_.load[s] == 0 || skyline_[s] >= height_) continue;
      if (best < 0 || skyline_[s] < skyline_[best]) best = s;
    }
    return best;
  }

  // A wall: outside the sections, or a section nothing lives in (no item crosses it).
  bool Wall(int s) const { return s < 0 || s >= sec_.count || sec_.load[s] == 0; }

  // The run of equal height around active section s: [a, e].
  std::pair<int, int> RunAround(int s) const {
    int a = s;
    int e = s;
    while (!Wall(a - 1) && skyline_[a - 1] == skyline_[s]) --a;
    while (!Wall(e + 1) && skyline_[e + 1] == skyline_[s]) ++e;
    return {a, e};
  }

  // Whether item i could cover the bottom cells of a run at height h: unplaced, aligned there
  // and fitting under the target.
  bool Fits(int i, int64_t h) const {
    return !placed_[i] && h % items_[i].alignment == 0 && h + items_[i].bytes <= height_;
  }

  // A run's bottom cells are each covered, in a plan at the target, by an item at the run's
  // height. Beside a wall or a higher section no item crosses at that height (neighbours only
  // rise), so: with such a left side, some item that fits starts at the run's first section;
  // with such a right side, some item that fits ends at its last; with both (a well), the items
  // inside it must partition it, checked by a reachability pass over the items starting in it.
  bool WellOk(int s) const {
    if (Wall(s) || skyline_[s] >= height_) return true;
    const auto [a, e] = RunAround(s);
    const int64_t h = skyline_[s];
    const bool left_closed = Wall(a - 1) || skyline_[a - 1] > h;
    const bool right_closed = Wall(e + 1) || skyline_[e + 1] > h;
    if (left_closed && !right_closed) {
      return std::any_of(starting_[a].begin(), starting_[a].end(),
                         [&](int i) { return Fits(i, h); });
    }
    if (right_closed && !left_closed) {
      return std::any_of(ending_[e].begin(), ending_[e].end(), [&](int i) { return Fits(i, h); });
    }
    if (!left_closed) return true;
    reach_.assign(e - a + 2, false);
    reach_[0] = true;
    for (int t = a; t <= e; ++t) {
      if (!reach_[t - a]) continue;
      for (int i : starting_[t]) {
        if (sec_.last[i] <= e && Fits(i, h)) reach_[sec_.last[i] + 1 - a] = true;
      }
    }
    return reach_[e - a + 1];
  }

  // After item i rose over its sections: the wells it may have made or changed, at its run and
  // at the runs beside it.
  bool WellsAround(int i) const {
    return WellOk(sec_.first[i]) && WellOk(sec_.first[i] - 1) && WellOk(sec_.last[i] + 1);
  }

  std::vector<int> Candidates(int section) const {
    const int64_t floor = skyline_[section];
    std::vector<int> out;
    for (int i : starting_[section]) {
      if (placed_[i]) continue;
      const OffsetItem& item = items_[i];
      if (floor % item.alignment != 0 || floor + item.bytes > height_) continue;
      bool flat = true;
      for (int s = sec_.first[i] + 1; s <= sec_.last[i] && flat; ++s) flat = skyline_[s] == floor;
      if (!flat) continue;
      // One of each kind: an equal item (lifetime, bytes, alignment) could take its place.
      const bool seen = std::any_of(out.begin(), out.end(), [&](int j) {
        return sec_.last[j] == sec_.last[i] && items_[j].bytes == item.bytes &&
               items_[j].alignment == item.alignment;
      });
      if (!seen) out.push_back(i);
    }
    // Items that reach the end of the lowest run go first: they fill its bottom whole.
    const int run_end = RunAround(section).second;
    std::stable_partition(out.begin(), out.end(), [&](int i) { return sec_.last[i] == run_end; });
    return out;
  }

  void Place(int i, int64_t offset) {
    placed_[i] = true;
    offsets_[i] = offset;
    for (int s = sec_.first[i]; s <= sec_.last[i]; ++s) skyline_[s] += items_[i].bytes;
  }

  void Unplace(int i) {
    placed_[i] = false;
    for (int s = sec_.first[i]; s <= sec_.last[i]; ++s) skyline_[s] -= items_[i].bytes;
  }

  const std::vector<OffsetItem>& items_;
  const Sections& sec_;
  const int64_t height_;
  const std::optional<Clock::time_point> deadline_;
  const int64_t node_limit_;
  const util::RaceStop* const stop_;
  const int64_t clock_stride_ = 1;
  std::vector<int64_t> skyline_;
  std::vector<int64_t> offsets_;
  std::vector<bool> placed_;
  std::vector<std::vector<int>> starting_;  // per section, the items starting there
  std::vector<std::vector<int>> ending_;    // per section, the items ending there
  mutable std::vector<bool> reach_;         // WellOk's scratch
};

// A round's stack: the search keeps its path on the heap.
constexpr size_t kRoundStackBytes = size_t{1} << 20;
// Rounds are numbered in an int; a deadline or the node limit ends them long before.
constexpr int kMaxRounds = 1 << 30;

// Round k's node limit, and the nodes the rounds before it take where each runs out of nodes
// (limit + 1: a round stops at its first node over the limit). Both depend on k alone, so the
// rounds can run side by side and still count as the serial loop does.
struct RoundBudget {
  int64_t limit = 0;  // <= 0: the rounds before it used up node_limit
  int64_t used = 0;
};
RoundBudget BudgetOf(int round, int64_t first_limit, int64_t node_limit) {
  int64_t round_limit = first_limit;
  RoundBudget b;
  for (int r = 0; r <= round; ++r) {
    b.limit = std::min(round_limit, node_limit - b.used);
    if (r == round || b.limit <= 0) break;
    b.used = b.limit >= node_limit - b.used ? node_limit : b.used + b.limit + 1;
    if (r % 4 == 3 && round_limit < (int64_t{1} << 60)) round_limit *= 2;
  }
  return b;
}

}  // namespace

absl::StatusOr<PerfectPacking> SolvePerfectPacking(const OffsetProblem& problem,
                                                   std::optional<Clock::time_point> deadline,
                                                   int64_t node_limit, int threads) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  if (threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("perfect packing: ", threads, " threads"));
  }
  const int64_t lower_bound = OffsetLowerBound(problem);
  const Sections sections = ToSections(problem);
  for (int s = 0; s < sections.count; ++s) {
    if (sections.load[s] != 0 && sections.load[s] != lower_bound) return PerfectPacking{};
  }
  // Restarts: the search either succeeds in about one node per item or loses itself in a wrong
  // early choice (heavy-tailed), so rounds with other candidate orders and a node limit that
  // doubles every fourth round beat one long run. A round that exhausts its tree proves the
  // bound unreachable (every order explores the same complete tree). The rounds run side by
  // side on `threads` (util/ordered_race.h); the answer is the first decisive round's, as on
  // one thread.
  const int64_t items = static_cast<int64_t>(problem.items.size());
  const int64_t first_limit = std::max<int64_t>(1024, 4 * items);
  // Odd rounds search the problem backwards in time (a plan serves both ways: offsets do not
  // depend on the direction), whose tree is another one, often easy where the first is not.
  Sections reversed = sections;
  for (size_t i = 0; i < problem.items.size(); ++i) {
    if (problem.items[i].bytes == 0) continue;
    reversed.first[i] = sections.count - 1 - sections.last[i];
    reversed.last[i] = sections.count - 1 - sections.first[i];
  }
  std::reverse(reversed.load.begin(), reversed.load.end());

  std::mutex mutex;
  std::map<int, PerfectPacking> results;  // by round, for rounds that ran
  const int last = util::RaceInOrder(
      threads, kRoundStackBytes, kMaxRounds, [&](int round, const util::RaceStop& stop) {
        const RoundBudget budget = BudgetOf(round, first_limit, node_limit);
        if (budget.limit <= 0 || (deadline.has_value() && Clock::now() >= *deadline)) {
          return util::TaskEnd::kNoMore;
        }
        PerfectPacking result = Search(problem, round % 2 == 0 ? sections : reversed,
                                       lower_bound, deadline, budget.limit, round / 2, &stop)
                                    .Run();
        const util::TaskEnd end = result.outcome == PerfectPacking::kStopped
                                      ? util::TaskEnd::kUndecided
                                      : util::TaskEnd::kDecisive;
        const std::lock_guard<std::mutex> lock(mutex);
        results[round] = std::move(result);
        return end;
      });
  PerfectPacking answer;
  answer.outcome = PerfectPacking::kStopped;
  for (auto& [round, result] : results) {
    if (round > last) break;
    answer.nodes += result.nodes;
    if (round == last) {
      answer.outcome = result.outcome;
      answer.offsets = std::move(result.offsets);
    }
  }
  if (answer.outcome == PerfectPacking::kFound) {
    MG_CHECK(CheckOffsetSolution(problem, answer.offsets).ok());
  }
  return answer;
}

}  // namespace memonger

#include "memonger/offsets/perfect_packing.h"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

#include "memonger/offsets/interval_index.h"
#include "util/check.h"
#include "util/deep_stack.h"
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

// A range of sections [from, to], grown to cover others (empty while from > to). Why a search
// node failed: any state equal to the failing one on these sections fails too.
struct Region {
  int from = std::numeric_limits<int>::max();
  int to = std::numeric_limits<int>::min();
  void Add(const Region& r) {
    from = std::min(from, r.from);
    to = std::max(to, r.to);
  }
  bool Meets(int a, int e) const { return from <= e && a <= to; }
};

// A part's state, as Search::KeyOf hashes it.
struct StateKey {
  uint64_t a = 0;
  uint64_t b = 0;
  friend bool operator==(const StateKey& x, const StateKey& y) { return x.a == y.a && x.b == y.b; }
  template <typename H>
  friend H AbslHashValue(H h, const StateKey& k) {
    return H::combine(std::move(h), k.a, k.b);
  }
};

// One round of the search (the header describes it). Recursive: Solve() places one item and
// calls itself, so a round needs a stack of kStackBytesPerItem per item.
class Search {
 public:
  // `round` picks the order candidates are tried in: 0, largest first (bytes, then lifetime);
  // 1, longest first (lifetime, then bytes); later rounds, a seeded shuffle; and rounds 2 and 3
  // of every 4, flush first (Candidates).
  // `stop`, when given, is polled at every node: the search stops (kStopped) once it is true.
  Search(const OffsetProblem& problem, const Sections& sections, int64_t height,
         std::optional<Clock::time_point> deadline, int64_t node_limit, int round,
         const util::RaceStop* stop)
      : items_(problem.items), sec_(sections), height_(height), deadline_(deadline),
        node_limit_(node_limit), flush_first_(round % 4 >= 2), stop_(stop),
        clock_stride_(std::clamp<int64_t>((int64_t{1} << 20) / (sections.count + 1), 1, 1024)),
        skyline_(sections.count, 0),
        offsets_(problem.items.size(), 0), placed_(problem.items.size(), false),
        starting_(sections.count), ending_(sections.count),
        crossing_(std::max(0, sections.count - 1), 0), code_(problem.items.size()),
        started_code_(sections.count) {
    util::SplitMix64 codes(0x5eedc0de);
    for (StateKey& code : code_) code = {codes.Next(), codes.Next()};
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].bytes == 0) continue;
      starting_[sec_.first[i]].push_back(static_cast<int>(i));
      ending_[sec_.last[i]].push_back(static_cast<int>(i));
      for (int b = sec_.first[i]; b < sec_.last[i]; ++b) ++crossing_[b];
    }
    util::SplitMix64 rng(static_cast<uint64_t>(round));
    const auto key = [&](int i) {
      const int64_t bytes = items_[i].bytes;
      const int64_t width = sec_.last[i] - sec_.first[i];
      return round % 2 == 0 ? std::make_tuple(-bytes, -width, i)
                            : std::make_tuple(-width, -bytes, i);
    };
    for (std::vector<std::vector<int>>* lists : {&starting_, &ending_}) {
      for (std::vector<int>& list : *lists) {
        if (round >= 2) {
          for (size_t k = list.size(); k > 1; --k) std::swap(list[k - 1], list[rng.Below(k)]);
        } else {
          std::sort(list.begin(), list.end(), [&](int a, int b) { return key(a) < key(b); });
        }
      }
    }
  }

  PerfectPacking Run() {
    PerfectPacking result;
    // The empty skyline: every run between walls is a well.
    for (int s = 0; s < sec_.count; ++s) {
      Region unused;
      if (!Wall(s) && Separated(s - 1) && !WellOk(s, unused)) {
        result.outcome = PerfectPacking::kInfeasible;
        return result;
      }
    }
    std::vector<int> cuts;  // boundaries no item crosses: independent parts from the start
    for (int b = 0; b + 1 < sec_.count; ++b) {
      if (crossing_[b] == 0) cuts.push_back(b);
    }
    Region why;
    const Result r = SolveParts(0, sec_.count - 1, cuts, why);
    result.nodes = nodes_;
    result.repeats = repeats_;
    result.jumps = jumps_;
    result.outcome = r == Result::kSolved   ? PerfectPacking::kFound
                     : r == Result::kFailed ? PerfectPacking::kInfeasible
                                            : PerfectPacking::kStopped;
    if (r == Result::kSolved) result.offsets = offsets_;
    return result;
  }

 private:
  enum class Result { kSolved, kFailed, kStopped };

  // Counts a node; false once the deadline, the node limit or the stop flag has come.
  bool Tick() {
    // A node costs O(sections): the clock is read often enough that about 2^20 section visits
    // pass between two reads, however many sections there are.
    if (++nodes_ % clock_stride_ == 0 && deadline_.has_value() && Clock::now() >= *deadline_) {
      return false;
    }
    return nodes_ <= node_limit_ && !(stop_ != nullptr && (*stop_)());
  }

  // Fills sections [lo, hi], which no unplaced item crosses out of, up to the target: one item
  // at a time, at the cell where the fewest items can go (FewestChoices). Where a placement
  // leaves no unplaced item crossing some boundary, the two sides are independent: each is
  // solved on its own, and a side that fails fails the placement without retrying the other
  // side's choices. On kSolved the items stay placed; on kFailed, `why` holds the failure's
  // region (the header's backjumping), and the part's state is remembered as failed (while the
  // table has room).
  Result Solve(int lo, int hi, Region& why) {
    if (!Tick()) return Result::kStopped;
    const StateKey key = KeyOf(lo, hi);
    if (const auto hit = failed_.find(key); hit != failed_.end()) {
      ++repeats_;
      why = hit->second;
      return Result::kFailed;
    }
    std::vector<int> choices;
    std::pair<int, int> well_sections;
    if (!FewestChoices(lo, hi, choices, well_sections)) return Result::kSolved;
    why = RunRegion(well_sections.first, well_sections.second);
    std::vector<int> cuts;
    for (const int c : choices) {
      Place(c, skyline_[sec_.first[c]], cuts);
      Result r = Result::kFailed;
      Region child;
      if (WellsAround(c, lo, hi, child)) {
        r = cuts.empty() ? Solve(lo, hi, child) : SolveParts(lo, hi, cuts, child);
      }
      if (r == Result::kSolved) return r;
      Unplace(c);
      if (r == Result::kStopped) return r;
      // Every choice here lies inside the well: one whose failure was decided elsewhere would
      // fail the same way with any of them.
      if (!child.Meets(well_sections.first, well_sections.second)) {
        why = child;
        if (c != choices.back()) ++jumps_;
        break;
      }
      why.Add(child);
    }
    // The key holds the part's state only, so only a failure decided inside the part is the
    // part's (regions do not reach past a separated boundary, so this holds by construction).
    if (lo <= why.from && why.to <= hi &&
        static_cast<int64_t>(failed_.size()) < kMaxPerfectPackingFailedStates) {
      failed_.emplace(key, why);
    }
    return Result::kFailed;
  }

  // The state of part [lo, hi], which no unplaced item crosses out of: which of the items
  // starting in it are placed. That decides the rest: the items crossing in from before lo
  // are all placed, and with no hole below the skyline, each section's height is the bytes of
  // the placed items living there. Two 64-bit words of XORed random codes per item (Zobrist
  // hashing): two different states share a key with probability about 2^-128 per pair.
  StateKey KeyOf(int lo, int hi) const {
    StateKey key = {Mix(static_cast<uint64_t>(lo) << 32 | static_cast<uint32_t>(hi)),
                    Mix((static_cast<uint64_t>(hi) << 32 | static_cast<uint32_t>(lo)) ^ 1)};
    for (int s = lo; s <= hi; ++s) {
      key.a ^= started_code_[s].a;
      key.b ^= started_code_[s].b;
    }
    return key;
  }

  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Solve() on each part of [lo, hi] between `cuts` (ascending boundaries: a cut b separates
  // sections b and b + 1), and on the parts of [lo, hi] no unplaced item joins.
  Result SolveParts(int lo, int hi, const std::vector<int>& cuts, Region& why) {
    std::vector<std::pair<int, int>> parts;
    int from = lo;
    for (const int b : cuts) {
      if (b < from || b >= hi) continue;
      parts.emplace_back(from, b);
      from = b + 1;
    }
    parts.emplace_back(from, hi);
    // If a later part fails, the items the earlier ones placed are taken back.
    const size_t mark = trail_.size();
    for (const auto& [a, e] : parts) {
      const Result r = Solve(a, e, why);
      if (r != Result::kSolved) {
        while (trail_.size() > mark) Unplace(trail_.back());
        return r;
      }
    }
    return Result::kSolved;
  }

  // A wall: outside the sections, or a section nothing lives in (no item crosses it).
  bool Wall(int s) const { return s < 0 || s >= sec_.count || sec_.load[s] == 0; }

  // Whether no unplaced item lives in both section b and section b + 1 (or either is a wall):
  // a run never extends across, and the cells beside it are covered from one side only.
  bool Separated(int b) const { return Wall(b) || Wall(b + 1) || crossing_[b] == 0; }

  // The run of equal height around active section s: [a, e].
  std::pair<int, int> RunAround(int s) const {
    int a = s;
    int e = s;
    while (!Separated(a - 1) && skyline_[a - 1] == skyline_[s]) --a;
    while (!Separated(e) && skyline_[e + 1] == skyline_[s]) ++e;
    return {a, e};
  }

  bool LeftClosed(int a, int64_t h) const { return Separated(a - 1) || skyline_[a - 1] > h; }
  bool RightClosed(int e, int64_t h) const { return Separated(e) || skyline_[e + 1] > h; }

  // Whether item i could cover the bottom cells of a run at height h: unplaced, aligned there
  // and fitting under the target.
  bool Fits(int i, int64_t h) const {
    return !placed_[i] && h % items_[i].alignment == 0 && h + items_[i].bytes <= height_;
  }

  // A run's bottom cells are each covered, in a plan at the target, by an item at the run's
  // height. Beside a wall, a higher section or a boundary no unplaced item crosses, no item
  // crosses at that height, so: with such a left side, some item that fits starts at the run's
  // first section; with such a right side, some item that fits ends at its last; with both (a
  // well), the items inside it must partition it, checked by a reachability pass over the
  // items starting in it.
  bool WellOk(int s, Region& why) const {
    if (Wall(s) || skyline_[s] >= height_) return true;
    const auto [a, e] = RunAround(s);
    if (RunOk(a, e)) return true;
    why = RunRegion(a, e);
    return false;
  }

  // Whether run [a, e] can still be covered (WellOk's test).
  bool RunOk(int a, int e) const {
    const int64_t h = skyline_[a];
    const bool left_closed = LeftClosed(a, h);
    const bool right_closed = RightClosed(e, h);
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

  // The sections whose state decides what RunOk and Candidates say of run [a, e]: the run, and
  // each neighbour whose height was read (beside a separated boundary, none is).
  Region RunRegion(int a, int e) const {
    return Region{Separated(a - 1) ? a : a - 1, Separated(e) ? e : e + 1};
  }

  // After item i rose over its sections in part [lo, hi]: the wells it may have made or changed,
  // at its run and at the runs beside it in the part (beyond the part's ends nothing changed:
  // no unplaced item crosses them). On false, `why` holds the failing run's region.
  bool WellsAround(int i, int lo, int hi, Region& why) const {
    const auto ok = [&](int s) { return s < lo || s > hi || WellOk(s, why); };
    return ok(sec_.first[i]) && ok(sec_.first[i] - 1) && ok(sec_.last[i] + 1);
  }

  // The well of [lo, hi] (a run whose sides are closed) with the fewest items that can cover
  // its first cell, or its last: those items go to `out`. Every well's first cell must be
  // covered by an item that starts there, at the well's height, inside the well (and its last
  // cell by one that ends there), so branching on any one well's end is complete; the fewest
  // choices fail first. Ties go to the lowest well, then the leftmost (the lowest run is always
  // a well). False when [lo, hi] is full.
  // `sections` receives the well's sections.
  bool FewestChoices(int lo, int hi, std::vector<int>& out, std::pair<int, int>& sections) const {
    bool any = false;
    int64_t best_height = 0;
    for (int s = lo; s <= hi;) {
      if (Wall(s) || skyline_[s] >= height_) {
        ++s;
        continue;
      }
      const auto [a, e] = RunAround(s);
      s = e + 1;
      const int64_t h = skyline_[a];
      if (!LeftClosed(a, h) || !RightClosed(e, h)) continue;
      for (const bool from_right : {false, true}) {
        std::vector<int> candidates = Candidates(a, e, from_right);
        if (!any || candidates.size() < out.size() ||
            (candidates.size() == out.size() && h < best_height)) {
          out = std::move(candidates);
          best_height = h;
          any = true;
          sections = {a, e};
          if (out.size() <= 1) return true;  // none (a dead end) or forced
        }
      }
    }
    return any;
  }

  // The items that can cover the first cell of well [a, e] at its height (from_right: its last
  // cell): unplaced, starting at a (ending at e), inside the well, aligned at its height and
  // fitting under the target. One of each kind: an equal item (lifetime, bytes, alignment)
  // could take its place. Those spanning the whole well go first: they fill its bottom whole.
  std::vector<int> Candidates(int a, int e, bool from_right) const {
    const int64_t floor = skyline_[a];
    std::vector<int> out;
    for (int i : from_right ? ending_[e] : starting_[a]) {
      if (placed_[i] || sec_.first[i] < a || sec_.last[i] > e) continue;
      const OffsetItem& item = items_[i];
      if (floor % item.alignment != 0 || floor + item.bytes > height_) continue;
      const bool seen = std::any_of(out.begin(), out.end(), [&](int j) {
        return sec_.first[j] == sec_.first[i] && sec_.last[j] == sec_.last[i] &&
               items_[j].bytes == item.bytes && items_[j].alignment == item.alignment;
      });
      if (!seen) out.push_back(i);
    }
    if (!flush_first_) {
      std::stable_partition(out.begin(), out.end(),
                            [&](int i) { return sec_.first[i] == a && sec_.last[i] == e; });
      return out;
    }
    // Spanning the well counts most; then each side whose top would be flush with its
    // neighbour's, and a left side beside a separated boundary whose top would reach the target.
    const auto flush = [&](int i) {
      const int64_t top = floor + items_[i].bytes;
      const int before = sec_.first[i] - 1;
      const int after = sec_.last[i] + 1;
      int score = sec_.first[i] == a && sec_.last[i] == e ? 4 : 0;
      if (!Separated(before) && skyline_[before] == top) ++score;
      if (!Separated(after - 1) && skyline_[after] == top) ++score;
      if (Separated(before) && top == height_) ++score;
      return score;
    };
    std::vector<std::pair<int, int>> scored;  // (-score, position): a stable order
    scored.reserve(out.size());
    for (size_t k = 0; k < out.size(); ++k) scored.emplace_back(-flush(out[k]), out[k]);
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t k = 0; k < out.size(); ++k) out[k] = scored[k].second;
    return out;
  }

  // Places item i at `offset`; `cuts` receives the boundaries inside its lifetime that no
  // unplaced item crosses any more (ascending).
  void Place(int i, int64_t offset, std::vector<int>& cuts) {
    placed_[i] = true;
    offsets_[i] = offset;
    trail_.push_back(i);
    started_code_[sec_.first[i]].a ^= code_[i].a;
    started_code_[sec_.first[i]].b ^= code_[i].b;
    cuts.clear();
    for (int s = sec_.first[i]; s <= sec_.last[i]; ++s) skyline_[s] += items_[i].bytes;
    for (int b = sec_.first[i]; b < sec_.last[i]; ++b) {
      if (--crossing_[b] == 0) cuts.push_back(b);
    }
  }

  // Undoes the latest placement, which must be item i's.
  void Unplace(int i) {
    MG_CHECK(!trail_.empty() && trail_.back() == i);
    trail_.pop_back();
    placed_[i] = false;
    started_code_[sec_.first[i]].a ^= code_[i].a;
    started_code_[sec_.first[i]].b ^= code_[i].b;
    for (int s = sec_.first[i]; s <= sec_.last[i]; ++s) skyline_[s] -= items_[i].bytes;
    for (int b = sec_.first[i]; b < sec_.last[i]; ++b) ++crossing_[b];
  }

  const std::vector<OffsetItem>& items_;
  const Sections& sec_;
  const int64_t height_;
  const std::optional<Clock::time_point> deadline_;
  const int64_t node_limit_;
  const bool flush_first_;
  const util::RaceStop* const stop_;
  const int64_t clock_stride_ = 1;
  int64_t nodes_ = 0;
  std::vector<int64_t> skyline_;
  std::vector<int64_t> offsets_;
  std::vector<bool> placed_;
  std::vector<std::vector<int>> starting_;  // per section, the items starting there
  std::vector<std::vector<int>> ending_;    // per section, the items ending there
  std::vector<int> crossing_;               // per boundary b: unplaced items in b and b + 1
  std::vector<int> trail_;                  // the placed items, in order
  mutable std::vector<bool> reach_;         // WellOk's scratch
  std::vector<StateKey> code_;              // per item, its random code
  std::vector<StateKey> started_code_;      // per section, the codes of placed items starting there
  // Parts proven unfillable in this round, by state, each with its failure's region.
  absl::flat_hash_map<StateKey, Region> failed_;
  int64_t repeats_ = 0;  // nodes answered by failed_
  int64_t jumps_ = 0;    // nodes left with choices untried (backjumps)
};

// A round recurses once per placement (Solve, and SolveParts where the problem splits: 464 and
// 144 bytes with GCC 12 -O2, 632 and 184 with clang's sanitizers at -O1): its stack is sized for
// every item placed on one path.
constexpr size_t kStackBytesPerItem = 2048;
// Rounds are numbered in an int; a deadline or the node limit ends them long before.
constexpr int kMaxRounds = 1 << 30;

// The Luby sequence (1-based): 1 1 2 1 1 2 4 1 1 2 1 1 2 4 8 ... Restarts whose lengths follow it
// are within a logarithmic factor of the best fixed restart length for any heavy-tailed run
// time (Luby, Sinclair and Zuckerman, 1993), which no one can know in advance.
int64_t Luby(int64_t i) {
  for (;;) {
    int k = 1;
    while ((int64_t{1} << k) - 1 < i) ++k;
    if ((int64_t{1} << k) - 1 == i) return int64_t{1} << (k - 1);
    i -= (int64_t{1} << (k - 1)) - 1;
  }
}

// Round k's node limit: its term of the restart schedule, cut to what the rounds before it
// leave of `node_limit` where each of them ran out of nodes (a round stops at its first node
// over its limit, so it takes limit + 1). It depends on k alone, so the rounds can run side by
// side and still count as the serial loop does; <= 0 where the rounds before used it all.
int64_t RoundLimit(int round, int64_t first_limit, int64_t node_limit) {
  int64_t used = 0;  // by the rounds before `round`
  for (int r = 0;; ++r) {
    // Rounds come in pairs (forwards, backwards), each pair one term of the Luby sequence.
    const int64_t luby = Luby(r / 2 + 1);
    const int64_t round_limit =
        luby > (int64_t{1} << 60) / first_limit ? int64_t{1} << 60 : first_limit * luby;
    const int64_t limit = std::min(round_limit, node_limit - used);
    if (r == round || limit <= 0) return limit;
    used = limit >= node_limit - used ? node_limit : used + limit + 1;
  }
}

}  // namespace

absl::StatusOr<PerfectPacking> SolvePerfectPacking(const OffsetProblem& problem,
                                                   std::optional<Clock::time_point> deadline,
                                                   int64_t node_limit, int threads) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  if (threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("perfect packing: ", threads, " threads"));
  }
  const int64_t items = static_cast<int64_t>(problem.items.size());
  if (items > kMaxPerfectPackingItems) {
    PerfectPacking too_large;
    too_large.outcome = PerfectPacking::kTooLarge;
    return too_large;
  }
  const int64_t lower_bound = OffsetLowerBound(problem);
  const Sections sections = ToSections(problem);
  for (int s = 0; s < sections.count; ++s) {
    if (sections.load[s] != 0 && sections.load[s] != lower_bound) return PerfectPacking{};
  }
  // Restarts: the search either succeeds in about one node per item or loses itself in a wrong
  // early choice (heavy-tailed), so rounds with other candidate orders and node limits that
  // follow the Luby sequence (times 4n) beat one long run. A round that exhausts its tree
  // proves the bound unreachable (every order explores the same complete tree). The rounds run
  // side by side on `threads` (util/ordered_race.h); the answer is the first decisive round's,
  // as on one thread.
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
  const size_t stack_bytes = (size_t{1} << 20) + static_cast<size_t>(items) * kStackBytesPerItem;
  int last = 0;
  MG_RETURN_IF_ERROR(util::RunWithStack(stack_bytes, [&] {
    last = util::RaceInOrder(
        threads, stack_bytes, kMaxRounds, [&](int round, const util::RaceStop& stop) {
          const int64_t limit = RoundLimit(round, first_limit, node_limit);
          if (limit <= 0 || (deadline.has_value() && Clock::now() >= *deadline)) {
            return util::TaskEnd::kNoMore;
          }
          PerfectPacking result = Search(problem, round % 2 == 0 ? sections : reversed,
                                         lower_bound, deadline, limit, round / 2, &stop)
                                      .Run();
          const util::TaskEnd end = result.outcome == PerfectPacking::kStopped
                                        ? util::TaskEnd::kUndecided
                                        : util::TaskEnd::kDecisive;
          const std::lock_guard<std::mutex> lock(mutex);
          results[round] = std::move(result);
          return end;
        });
  }));
  PerfectPacking answer;
  answer.outcome = PerfectPacking::kStopped;
  for (auto& [round, result] : results) {
    if (round > last) break;
    answer.nodes += result.nodes;
    answer.repeats += result.repeats;
    answer.jumps += result.jumps;
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

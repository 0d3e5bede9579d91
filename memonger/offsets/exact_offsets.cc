#include "memonger/offsets/exact_offsets.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/perfect_packing.h"
#include "memonger/time_shares.h"
#include "util/check.h"
#include "util/deadline.h"
#include "util/deep_stack.h"
#include "util/ordered_race.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kNoOffset = -1;
constexpr int64_t kInfinity = std::numeric_limits<int64_t>::max();

// The static preorders, tried round-robin: W = lifetime width in steps, A = area (bytes x
// width), T = the largest unplaced total over the item's sections; each descending, ties by
// item index.
constexpr const char* kPreorders[] = {"WAT", "TAW", "TWA"};
constexpr int kNumPreorders = static_cast<int>(std::size(kPreorders));

// A search counts its nodes into the shared budget, reads the clock and polls its stop flag
// once per this many nodes.
constexpr int64_t kNodesPerTick = 64;

// A probe runs its preorders side by side only where the problem's section memberships, which
// every search copies (members_ and member_position_: 32 MB per search at this limit), are at
// most this many; larger problems search their preorders in turn.
constexpr int64_t kMaxParallelMemberships = int64_t{1} << 22;

// An upper bound on the stack one level of the search takes (Search, with Place and Recurse
// inlined, is under 400 bytes with GCC 12 -O2; SolveGroup adds about 200 when a group splits).
constexpr size_t kStackBytesPerPlacement = 2048;

// Probes above the lowest open height get this fraction of the round's node limit.
constexpr int64_t kUpperProbeShare = 8;

bool IsPowerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// REQUIRES: `alignment` is a power of two and x + alignment does not overflow.
int64_t AlignUp(int64_t x, int64_t alignment) { return (x + alignment - 1) & ~(alignment - 1); }

int Size(const std::vector<int>& v) { return static_cast<int>(v.size()); }

// ValidateOffsetProblem, plus what the search assumes besides.
absl::Status ValidateProblem(const OffsetProblem& problem) {
  MG_RETURN_IF_ERROR(ValidateOffsetProblem(problem));
  for (size_t i = 0; i < problem.items.size(); ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.last_step < item.first_step) {
      return absl::InvalidArgumentError(absl::StrCat("exact: item ", i, " has lifetime [",
                                                     item.first_step, ", ", item.last_step,
                                                     "] with last_step < first_step"));
    }
    if (item.bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("exact: item ", i, " has negative bytes ", item.bytes));
    }
    if (!IsPowerOfTwo(item.alignment)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "exact: item ", i, " has alignment ", item.alignment, ", not a power of two"));
    }
    if (item.bytes % item.alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat("exact: item ", i, " has ", item.bytes,
                                                     " bytes, not a multiple of its alignment ",
                                                     item.alignment));
    }
    // Keeps every sum the search forms (a height plus one size or alignment) inside int64.
    if (item.bytes > (int64_t{1} << 56) || item.alignment > (int64_t{1} << 56)) {
      return absl::InvalidArgumentError(absl::StrCat("exact: item ", i, " is too large (",
                                                     item.bytes, " bytes, alignment ",
                                                     item.alignment, ")"));
    }
  }
  return absl::OkStatus();
}

// Items stacked in input order, each at the aligned top of the previous one.
std::vector<int64_t> StackedOffsets(const OffsetProblem& problem) {
  std::vector<int64_t> offsets(problem.items.size(), 0);
  int64_t top = 0;
  for (size_t i = 0; i < problem.items.size(); ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0) continue;
    offsets[i] = AlignUp(top, item.alignment);
    top = offsets[i] + item.bytes;
  }
  return offsets;
}

// The problem as the search sees it: items with bytes > 0 only (the others conflict with
// nothing), time cut into sections, and the overlapping pairs.
struct Prepared {
  std::vector<int> original;  // search item -> problem item
  std::vector<int64_t> bytes;
  std::vector<int64_t> alignment;
  std::vector<int64_t> width;      // Duration(): in the problem's own time unit
  std::vector<int> section_begin;  // sections [section_begin, section_end) of each item
  std::vector<int> section_end;
  int num_sections = 0;
  std::vector<int> overlap_start;  // CSR: the items sharing a step with item i are
  std::vector<int> overlaps;       //   overlaps[overlap_start[i] .. overlap_start[i + 1])
  std::vector<int> members_start;  // CSR: the items live in section s are
  std::vector<int> members;        //   members[members_start[s] .. members_start[s + 1])
  std::vector<int> membership_start;  // item i in section s is the membership
                                      //   membership_start[i] + s - section_begin[i]
  std::vector<int> member_position;   // per membership: its index in `members`
  std::vector<int64_t> section_total;  // bytes live in each section
  std::vector<int> cuts;               // per boundary b: items live in sections b and b + 1
  int64_t max_total = 0;               // the lower bound
  int64_t granule = 0;                 // every offset of a compacted plan is a multiple
};

// Preparing a problem of a few thousand long-lived items walks tens of millions of (item,
// section) memberships and overlapping pairs (0.2 s for bert_nezha): the loops read the clock
// every kPrepareStepsPerClock steps and give up at the deadline, so that a short time limit
// left by the phases before is kept.
constexpr int64_t kPrepareStepsPerClock = int64_t{1} << 16;

enum class Preparation { kReady, kTooLarge, kOutOfTime };

// kTooLarge when the problem exceeds kMaxExactItems or kMaxExactOverlaps (not searched).
Preparation Prepare(const OffsetProblem& problem, Clock::time_point deadline, Prepared& p) {
  int64_t steps = 0;
  const auto out_of_time = [&] {
    return ++steps % kPrepareStepsPerClock == 0 && Clock::now() >= deadline;
  };
  for (size_t i = 0; i < problem.items.size(); ++i) {
    if (problem.items[i].bytes > 0) p.original.push_back(static_cast<int>(i));
  }
  const int n = Size(p.original);
  if (n > kMaxExactItems) return Preparation::kTooLarge;

  // Sections lie between consecutive distinct lifetime boundaries (first_step, last_step + 1).
  std::vector<int64_t> points;
  points.reserve(2 * static_cast<size_t>(n));
  for (int i : p.original) {
    points.push_back(problem.items[i].first_step);
    points.push_back(int64_t{problem.items[i].last_step} + 1);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  p.num_sections = std::max(0, static_cast<int>(points.size()) - 1);
  auto point_index = [&](int64_t t) {
    return static_cast<int>(std::lower_bound(points.begin(), points.end(), t) - points.begin());
  };

  int64_t memberships = 0;
  for (int i : p.original) {
    const OffsetItem& item = problem.items[i];
    p.bytes.push_back(item.bytes);
    p.alignment.push_back(item.alignment);
    p.width.push_back(Duration(problem, item));
    p.section_begin.push_back(point_index(item.first_step));
    p.section_end.push_back(point_index(int64_t{item.last_step} + 1));
    memberships += p.section_end.back() - p.section_begin.back();
    p.granule = std::gcd(p.granule, item.bytes);
  }
  if (memberships > kMaxExactOverlaps) return Preparation::kTooLarge;
  // A compacted plan's offsets are 0 or tops of items rounded up to an alignment. Tops are
  // sums of sizes, multiples of their gcd; rounding keeps a multiple of the gcd where the
  // alignment divides it, and gives a multiple of the alignment otherwise. Alignments are
  // powers of two, so after the first one that does not divide it the granule is a power of two
  // that every larger alignment is a multiple of. An alignment of 1 (or 256 under sizes in KiB)
  // thus leaves the granule at the sizes' gcd instead of cutting it to the alignment.
  for (int i : p.original) {
    const int64_t alignment = problem.items[i].alignment;
    if (p.granule % alignment != 0) p.granule = std::gcd(p.granule, alignment);
  }

  // Overlapping pairs: in order of first section, every later item that starts before i ends.
  std::vector<int> by_begin(n);
  std::iota(by_begin.begin(), by_begin.end(), 0);
  std::stable_sort(by_begin.begin(), by_begin.end(),
                   [&](int a, int b) { return p.section_begin[a] < p.section_begin[b]; });
  std::vector<int> degree(n, 0);
  int64_t pairs = 0;
  for (int a = 0; a < n; ++a) {
    const int i = by_begin[a];
    for (int b = a + 1; b < n && p.section_begin[by_begin[b]] < p.section_end[i]; ++b) {
      ++degree[i];
      ++degree[by_begin[b]];
      if (++pairs > kMaxExactOverlaps) return Preparation::kTooLarge;
      if (out_of_time()) return Preparation::kOutOfTime;
    }
  }
  p.overlap_start.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) p.overlap_start[i + 1] = p.overlap_start[i] + degree[i];
  p.overlaps.resize(p.overlap_start[n]);
  std::vector<int> fill(p.overlap_start.begin(), p.overlap_start.end() - 1);
  for (int a = 0; a < n; ++a) {
    const int i = by_begin[a];
    for (int b = a + 1; b < n && p.section_begin[by_begin[b]] < p.section_end[i]; ++b) {
      const int j = by_begin[b];
      p.overlaps[fill[i]++] = j;
      p.overlaps[fill[j]++] = i;
      if (out_of_time()) return Preparation::kOutOfTime;
    }
  }

  // Section members, totals and cuts.
  p.members_start.assign(p.num_sections + 1, 0);
  p.section_total.assign(p.num_sections, 0);
  for (int i = 0; i < n; ++i) {
    for (int s = p.section_begin[i]; s < p.section_end[i]; ++s) {
      ++p.members_start[s + 1];
      p.section_total[s] += p.bytes[i];
      if (out_of_time()) return Preparation::kOutOfTime;
    }
  }
  for (int s = 0; s < p.num_sections; ++s) p.members_start[s + 1] += p.members_start[s];
  p.members.resize(p.members_start[p.num_sections]);
  fill.assign(p.members_start.begin(), p.members_start.end() - 1);
  p.membership_start.assign(n + 1, 0);
  p.member_position.resize(p.members.size());
  for (int i = 0; i < n; ++i) {
    p.membership_start[i + 1] = p.membership_start[i] + p.section_end[i] - p.section_begin[i];
  }
  // Each section lists its members shortest-lived first (in sections, ties by index): the
  // floor scan (RaiseFloors) stops at the first member not pushed above the floor, and an item
  // live in few sections is pushed up by fewer placements elsewhere.
  std::vector<int> by_span(n);
  std::iota(by_span.begin(), by_span.end(), 0);
  std::stable_sort(by_span.begin(), by_span.end(), [&](int a, int b) {
    return p.section_end[a] - p.section_begin[a] < p.section_end[b] - p.section_begin[b];
  });
  for (int i : by_span) {
    for (int s = p.section_begin[i]; s < p.section_end[i]; ++s) {
      p.member_position[p.membership_start[i] + s - p.section_begin[i]] = fill[s];
      p.members[fill[s]++] = i;
      if (out_of_time()) return Preparation::kOutOfTime;
    }
  }
  for (int64_t total : p.section_total) p.max_total = std::max(p.max_total, total);
  p.cuts.assign(std::max(0, p.num_sections - 1), 0);
  for (int i = 0; i < n; ++i) {
    for (int b = p.section_begin[i]; b + 1 < p.section_end[i]; ++b) ++p.cuts[b];
  }
  return Preparation::kReady;
}

// Time and node accounting shared by every probe and by the searches a probe runs side by side,
// and the progress callback (called by one of them at a time).
class Budget {
 public:
  Budget(const ExactOffsetsOptions& options, Clock::time_point start)
      : start_(start),
        deadline_(util::DeadlineAfter(start, options.time_limit_seconds)),
        progress_(options.progress),
        stop_(options.stop),
        next_report_(start + std::chrono::seconds(1)) {}

  // Counts `nodes` more nodes and reads the clock; false once the time limit has passed.
  bool Add(int64_t nodes) {
    nodes_.fetch_add(nodes, std::memory_order_relaxed);
    Poll();
    return !expired_.load(std::memory_order_relaxed);
  }
  bool Expired() {
    Poll();
    return expired_.load(std::memory_order_relaxed);
  }
  // What the progress reports show; set between probes.
  void SetProbe(int64_t lower_bound, int64_t best_height, int64_t probing_height) {
    const std::lock_guard<std::mutex> lock(report_mutex_);
    state_.lower_bound = lower_bound;
    state_.best_height = best_height;
    state_.probing_height = probing_height;
  }

 private:
  void Poll() {
    const Clock::time_point now = Clock::now();
    if (now >= deadline_ || (stop_ != nullptr && stop_->load(std::memory_order_relaxed))) {
      expired_.store(true, std::memory_order_relaxed);
    }
    if (!progress_) return;
    // One search reports; the others go on searching.
    std::unique_lock<std::mutex> lock(report_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || now < next_report_) return;
    state_.seconds = std::chrono::duration<double>(now - start_).count();
    state_.nodes = nodes_.load(std::memory_order_relaxed);
    progress_(state_);
    next_report_ = now + std::chrono::seconds(1);
  }

  const Clock::time_point start_;
  const Clock::time_point deadline_;
  const std::function<void(const ExactProgress&)>& progress_;
  const std::atomic<bool>* const stop_;
  std::atomic<int64_t> nodes_{0};
  std::atomic<bool> expired_{false};
  std::mutex report_mutex_;  // guards state_ and next_report_
  Clock::time_point next_report_;
  ExactProgress state_;
};

// The largest of n values over index ranges, with point updates: a segment tree kept in an
// array (leaves at [size, 2 * size)). O(log n) per update and per query.
class MaxTree {
 public:
  explicit MaxTree(const std::vector<int64_t>& values) {
    size_ = 1;
    while (size_ < values.size()) size_ *= 2;
    tree_.assign(2 * size_, 0);
    std::copy(values.begin(), values.end(), tree_.begin() + static_cast<std::ptrdiff_t>(size_));
    for (size_t k = size_ - 1; k >= 1; --k) tree_[k] = std::max(tree_[2 * k], tree_[2 * k + 1]);
  }
  void Set(int index, int64_t value) {
    size_t k = size_ + static_cast<size_t>(index);
    tree_[k] = value;
    for (k /= 2; k >= 1; k /= 2) tree_[k] = std::max(tree_[2 * k], tree_[2 * k + 1]);
  }
  // The largest value in [begin, end); 0 when the range is empty (every value is >= 0).
  int64_t Max(int begin, int end) const {
    int64_t best = 0;
    size_t lo = size_ + static_cast<size_t>(begin);
    size_t hi = size_ + static_cast<size_t>(end);
    for (; lo < hi; lo /= 2, hi /= 2) {
      if (lo & 1) best = std::max(best, tree_[lo++]);
      if (hi & 1) best = std::max(best, tree_[--hi]);
    }
    return best;
  }

 private:
  size_t size_ = 1;
  std::vector<int64_t> tree_;
};

// Decides whether the prepared problem has a placement within `capacity` (see the header).
class DecisionSearch {
 public:
  enum class Outcome { kFeasible, kInfeasible, kNodeLimit, kTimeout };

  // `stop`, when given, is polled every kNodesPerTick nodes: the search then gives up
  // (kNodeLimit), its answer no longer wanted.
  DecisionSearch(const Prepared& p, int64_t capacity, Budget& budget,
                 const util::RaceStop* stop = nullptr)
      : p_(p),
        capacity_(capacity),
        budget_(budget),
        stop_(stop),
        offset_(p.bytes.size(), kNoOffset),
        solution_(p.bytes.size(), kNoOffset),
        min_offset_(p.bytes.size(), 0),
        floor_(p.num_sections, 0),
        total_(p.section_total),
        max_total_(p.section_total),
        cuts_(p.cuts),
        members_(p.members),
        member_position_(p.member_position),
        unplaced_members_(p.num_sections) {
    for (int s = 0; s < p.num_sections; ++s) {
      unplaced_members_[s] = p.members_start[s + 1] - p.members_start[s];
    }
  }

  // One preorder (an index into kPreorders) searches with at most `node_limit` nodes: kFeasible
  // (offsets() holds the plan), kInfeasible (the search finished: proven), kNodeLimit or
  // kTimeout. Every change is undone before returning, so a search object can run again.
  Outcome Run(int64_t node_limit, int preorder) {
    const int n = Size(p_.original);
    if (n == 0) return Outcome::kFeasible;
    for (int i = 0; i < n; ++i) {
      if (p_.bytes[i] > capacity_) return Outcome::kInfeasible;
    }
    if (p_.max_total > capacity_) return Outcome::kInfeasible;
    if (groups_.empty()) groups_ = InitialGroups();
    nodes_left_ = node_limit;
    Outcome outcome = Outcome::kFeasible;
    for (const Group& group : groups_) {
      outcome = SolveGroup(group, kPreorders[preorder]);
      if (outcome != Outcome::kFeasible) break;
    }
    budget_.Add(ticks_ % kNodesPerTick);
    ticks_ = 0;
    return outcome;
  }

  // Per search item; valid after Run() returned kFeasible.
  const std::vector<int64_t>& offsets() const { return solution_; }

 private:
  // Unplaced items that share no step with unplaced items outside the group, and the
  // sections [section_begin, section_end) they live in.
  struct Group {
    std::vector<int> items;
    int section_begin = 0;
    int section_end = 0;
  };
  // A child of a node: an item at its minimum offset, with its rank in the group's preorder.
  struct Candidate {
    int64_t offset;
    int rank;
    int item;
  };
  // An undo stack of old values, newest last: Mark() before a change, RestoreTo(mark) to undo
  // it. A placement saves the floor of every section of its item (tens of millions of entries
  // on windows of thousands of long-lived items), and neighbouring sections mostly had the same
  // floor, so a push that continues the newest entry's range with its value extends the entry
  // instead (never an entry made before the latest mark, which RestoreTo must undo whole).
  // With children_ (below), this cut the peak memory of S_1's windows from 322 MB to 122 MB.
  class Trail {
   public:
    size_t Mark() {
      sealed_ = size_;
      return size_;
    }
    void Push(int index, int64_t value) {
      if (size_ > sealed_) {
        Entry& newest = entries_[size_ - 1];
        if (newest.end == index && newest.value == value) {
          ++newest.end;
          return;
        }
      }
      if (size_ == entries_.size()) entries_.resize(2 * size_ + 64);
      entries_[size_++] = {index, index + 1, value};
    }
    // Writes every entry above `mark` back into `values`, newest first.
    void RestoreTo(size_t mark, std::vector<int64_t>& values) {
      while (size_ > mark) {
        const Entry& entry = entries_[--size_];
        std::fill(values.begin() + entry.begin, values.begin() + entry.end, entry.value);
      }
      sealed_ = size_;  // whoever restored holds `mark` still
    }

   private:
    struct Entry {
      int begin;  // values[begin, end) held `value`
      int end;
      int64_t value;
    };
    std::vector<Entry> entries_;
    size_t size_ = 0;
    size_t sealed_ = 0;  // entries below this were made before the latest mark
  };

  // Splits the whole problem at the section boundaries no item crosses.
  std::vector<Group> InitialGroups() const {
    std::vector<int> cutpoints;
    for (int b = 0; b + 1 < p_.num_sections; ++b) {
      if (p_.cuts[b] == 0) cutpoints.push_back(b + 1);
    }
    std::vector<int> all(p_.bytes.size());
    std::iota(all.begin(), all.end(), 0);
    return Split(all, 0, p_.num_sections, cutpoints);
  }

  // Splits the unplaced items of `items` (sections [begin, end)) at `cutpoints`: ascending
  // section indices inside (begin, end) that no unplaced item crosses.
  std::vector<Group> Split(const std::vector<int>& items, int begin, int end,
                           const std::vector<int>& cutpoints) const {
    std::vector<Group> groups(cutpoints.size() + 1);
    for (size_t g = 0; g < groups.size(); ++g) {
      groups[g].section_begin = g == 0 ? begin : cutpoints[g - 1];
      groups[g].section_end = g == cutpoints.size() ? end : cutpoints[g];
    }
    for (int item : items) {
      if (offset_[item] != kNoOffset) continue;
      const size_t g =
          std::upper_bound(cutpoints.begin(), cutpoints.end(), p_.section_begin[item]) -
          cutpoints.begin();
      MG_CHECK(p_.section_end[item] <= groups[g].section_end);
      groups[g].items.push_back(item);
    }
    groups.erase(std::remove_if(groups.begin(), groups.end(),
                                [](const Group& g) { return g.items.empty(); }),
                 groups.end());
    return groups;
  }

  // Ranks the group's items by `preorder` and searches the group from the current state.
  Outcome SolveGroup(const Group& group, const char* preorder) {
    struct Key {
      int64_t width;
      __int128 area;
      int64_t total;
      int item;
    };
    std::vector<Key> keys;
    keys.reserve(group.items.size());
    for (int item : group.items) {
      int64_t total = 0;
      for (int s = p_.section_begin[item]; s < p_.section_end[item]; ++s) {
        total = std::max(total, total_[s]);
      }
      keys.push_back({p_.width[item], static_cast<__int128>(p_.bytes[item]) * p_.width[item],
                      total, item});
    }
    auto before = [preorder](const Key& a, const Key& b) {
      for (const char* c = preorder; *c != '\0'; ++c) {
        if (*c == 'W' && a.width != b.width) return a.width > b.width;
        if (*c == 'A' && a.area != b.area) return a.area > b.area;
        if (*c == 'T' && a.total != b.total) return a.total > b.total;
      }
      return a.item < b.item;
    };
    std::sort(keys.begin(), keys.end(), before);
    std::vector<int> ranked;  // the group's items in preorder: an item's rank is its index
    ranked.reserve(keys.size());
    for (const Key& key : keys) ranked.push_back(key.item);
    return Search(group, ranked, /*last_offset=*/0, /*last_rank=*/-1, preorder);
  }

  // One node: `ranked` holds the group's items in preorder (placed ones are skipped);
  // (last_offset, last_rank) is the previous placement in this group.
  Outcome Search(const Group& group, const std::vector<int>& ranked, int64_t last_offset,
                 int last_rank, const char* preorder) {
    if (++ticks_ % kNodesPerTick == 0) {
      if (!budget_.Add(kNodesPerTick)) return Outcome::kTimeout;
      if (stop_ != nullptr && (*stop_)()) return Outcome::kNodeLimit;
    }
    if (--nodes_left_ < 0) return Outcome::kNodeLimit;

    bool any_unplaced = false;
    int64_t lowest_top = kInfinity;  // min over unplaced k of m(k) + bytes(k)
    for (int item : ranked) {
      if (offset_[item] != kNoOffset) continue;
      any_unplaced = true;
      lowest_top = std::min(lowest_top, min_offset_[item] + p_.bytes[item]);
    }
    if (!any_unplaced) return Outcome::kFeasible;
    // The children: only candidates below lowest_top (dominance: any other would leave a hole an
    // unplaced item fits in) that come after the previous placement in (offset, rank) order
    // (canonical: each layout is built in one order only). They go on `children_`, above the
    // children of the nodes on the path to this one, as ranks: 4 bytes each, where a list per
    // node held 16 and up to as much again in spare capacity (most of the search's memory on
    // windows of thousands of items, whose paths are thousands of nodes deep).
    const size_t begin = children_.size();
    for (int rank = 0; rank < Size(ranked); ++rank) {
      const int item = ranked[rank];
      if (offset_[item] != kNoOffset) continue;
      const int64_t m = min_offset_[item];
      if (m >= lowest_top) continue;
      if (m < last_offset || (m == last_offset && rank < last_rank)) continue;
      children_.push_back(rank);
    }
    // Minimum offsets are restored after each child, so they order the list for the whole node.
    std::sort(children_.begin() + static_cast<std::ptrdiff_t>(begin), children_.end(),
              [&](int a, int b) {
                const int64_t offset_a = min_offset_[ranked[a]];
                const int64_t offset_b = min_offset_[ranked[b]];
                return offset_a != offset_b ? offset_a < offset_b : a < b;
              });
    const size_t end = children_.size();
    const int64_t fullest = max_total_.Max(group.section_begin, group.section_end);
    Outcome outcome = Outcome::kInfeasible;
    for (size_t k = begin; k < end; ++k) {  // by index: children below may grow the vector
      const int item = ranked[children_[k]];
      const Candidate c{min_offset_[item], children_[k], item};
      // The fullest section's unplaced bytes would all lie above c.offset (in c.item's own
      // sections too: their floor becomes its top). Later candidates are no lower.
      if (c.offset + fullest > capacity_) break;
      if (c.offset + p_.bytes[c.item] > capacity_) continue;
      outcome = Place(group, ranked, c, preorder);
      if (outcome != Outcome::kInfeasible) break;
    }
    children_.resize(begin);
    return outcome;
  }

  // Places c.item at c.offset, propagates, recurses (splitting the group when a cut drops to
  // zero) and undoes everything before returning.
  Outcome Place(const Group& group, const std::vector<int>& ranked, const Candidate& c,
                const char* preorder) {
    const int item = c.item;
    const int64_t top = c.offset + p_.bytes[item];
    const size_t offsets_mark = saved_offsets_.Mark();

    // Raise the minimum offsets of the unplaced items sharing a step with `item`. Their
    // sections and those of `item` form one range [changed_begin, changed_end): each of them
    // overlaps `item`'s sections.
    bool fits = true;
    int changed_begin = p_.section_begin[item];
    int changed_end = p_.section_end[item];
    for (int e = p_.overlap_start[item]; e < p_.overlap_start[item + 1]; ++e) {
      const int other = p_.overlaps[e];
      if (offset_[other] != kNoOffset || min_offset_[other] >= top) continue;
      saved_offsets_.Push(other, min_offset_[other]);
      min_offset_[other] = AlignUp(top, p_.alignment[other]);
      if (min_offset_[other] + p_.bytes[other] > capacity_) {
        fits = false;
        break;
      }
      changed_begin = std::min(changed_begin, p_.section_begin[other]);
      changed_end = std::max(changed_end, p_.section_end[other]);
    }
    Outcome outcome = Outcome::kInfeasible;
    if (fits) {
      offset_[item] = c.offset;
      solution_[item] = c.offset;
      const size_t floors_mark = saved_floors_.Mark();
      Remove(item, top);
      RaiseFloors(changed_begin, changed_end);
      // Sections outside the changed range passed this check at the parent (their totals are
      // unchanged: `item` lies inside the range); now their unplaced items also lie at or above
      // c.offset.
      const int64_t unchanged_total =
          std::max(max_total_.Max(group.section_begin, changed_begin),
                   max_total_.Max(changed_end, group.section_end));
      if (c.offset + unchanged_total <= capacity_ &&
          RangeFits(changed_begin, changed_end, c.offset)) {
        outcome = Recurse(group, ranked, c, preorder);
      }
      Restore(item);
      saved_floors_.RestoreTo(floors_mark, floor_);
      offset_[item] = kNoOffset;
    }
    saved_offsets_.RestoreTo(offsets_mark, min_offset_);
    return outcome;
  }

  // The sections of `item`, now placed with its top at `top`: the floor rises to the top, the
  // unplaced total falls, and `item` leaves the unplaced members (swapped to the end of their
  // prefix, where it stays until Restore, as placements are undone in LIFO order).
  void Remove(int item, int64_t top) {
    for (int s = p_.section_begin[item]; s < p_.section_end[item]; ++s) {
      saved_floors_.Push(s, floor_[s]);
      floor_[s] = top;
      total_[s] -= p_.bytes[item];
      max_total_.Set(s, total_[s]);
      const int membership = p_.membership_start[item] + s - p_.section_begin[item];
      const int from = member_position_[membership];
      const int to = p_.members_start[s] + --unplaced_members_[s];
      const int moved = members_[to];
      members_[from] = moved;
      member_position_[p_.membership_start[moved] + s - p_.section_begin[moved]] = from;
      members_[to] = item;
      member_position_[membership] = to;
    }
  }

  // Swaps the members at positions a and b of section s (both unplaced).
  void SwapMembers(int s, std::ptrdiff_t a, std::ptrdiff_t b) {
    int* const front = &members_[p_.members_start[s]];
    const int x = front[a];
    const int y = front[b];
    front[a] = y;
    front[b] = x;
    member_position_[p_.membership_start[x] + s - p_.section_begin[x]] =
        p_.members_start[s] + static_cast<int>(b);
    member_position_[p_.membership_start[y] + s - p_.section_begin[y]] =
        p_.members_start[s] + static_cast<int>(a);
  }

  void Restore(int item) {
    for (int s = p_.section_begin[item]; s < p_.section_end[item]; ++s) {
      total_[s] += p_.bytes[item];
      max_total_.Set(s, total_[s]);
      ++unplaced_members_[s];
    }
  }

  // A section's floor is at least the least minimum offset of its unplaced items.
  void RaiseFloors(int begin, int end) {
    for (int s = begin; s < end; ++s) {
      const int64_t floor = floor_[s];
      int64_t least = kInfinity;
      int* const front = &members_[p_.members_start[s]];
      int* member = front;
      int* const last = member + unplaced_members_[s];
      for (; member != last; ++member) {
        const int64_t m = min_offset_[*member];
        if (m <= floor) break;  // the floor stays
        least = std::min(least, m);
      }
      if (member == last) {
        if (least != kInfinity) {
          saved_floors_.Push(s, floor);
          floor_[s] = least;
        }
      } else if (member != front) {
        // The member that kept the floor goes first: it often keeps it at the next scan too.
        // Only unplaced members move, so Remove's and Restore's last-in-first-out order holds.
        SwapMembers(s, member - front, 0);
      }
    }
  }

  // Section inference on [begin, end): a section's unplaced items lie at or above its floor
  // and the last placed offset, in disjoint bytes below the capacity.
  bool RangeFits(int begin, int end, int64_t last_offset) const {
    for (int s = begin; s < end; ++s) {
      if (total_[s] > 0 && std::max(floor_[s], last_offset) + total_[s] > capacity_) {
        return false;
      }
    }
    return true;
  }

  // Continues after placing c.item: in the same group, or in each part the group split into.
  Outcome Recurse(const Group& group, const std::vector<int>& ranked, const Candidate& c,
                  const char* preorder) {
    const int item = c.item;
    std::vector<int> cutpoints;
    for (int b = p_.section_begin[item]; b + 1 < p_.section_end[item]; ++b) {
      if (--cuts_[b] == 0) cutpoints.push_back(b + 1);
    }
    Outcome outcome = Outcome::kFeasible;
    if (cutpoints.empty()) {
      outcome = Search(group, ranked, c.offset, c.rank, preorder);
    } else {
      for (const Group& part :
           Split(group.items, group.section_begin, group.section_end, cutpoints)) {
        outcome = SolveGroup(part, preorder);
        if (outcome != Outcome::kFeasible) break;
      }
    }
    for (int b = p_.section_begin[item]; b + 1 < p_.section_end[item]; ++b) ++cuts_[b];
    return outcome;
  }

  const Prepared& p_;
  const int64_t capacity_;
  Budget& budget_;
  const util::RaceStop* const stop_;
  int64_t ticks_ = 0;  // nodes not yet counted in budget_
  int64_t nodes_left_ = 0;
  std::vector<Group> groups_;  // the whole problem, split where no item crosses

  std::vector<int64_t> offset_;      // per item: its offset, or kNoOffset while unplaced
  std::vector<int64_t> solution_;    // per item: its offset on the latest successful path
  std::vector<int64_t> min_offset_;  // per unplaced item: m(i)
  std::vector<int64_t> floor_;       // per section: no unplaced member lies below
  std::vector<int64_t> total_;       // per section: bytes of its unplaced members
  MaxTree max_total_;                // total_, for range maxima
  std::vector<int> cuts_;            // per boundary: unplaced items crossing it
  Trail saved_offsets_;              // undo stacks of min_offset_ and floor_
  // The children of every node on the current path, as ranks in their group's preorder: a
  // node's list lies above its parent's and is dropped when the node returns.
  std::vector<int> children_;
  Trail saved_floors_;
  // Per section s, its unplaced members come first: members_[members_start[s] ..
  // members_start[s] + unplaced_members_[s]). member_position_ locates each membership.
  std::vector<int> members_;
  std::vector<int> member_position_;
  std::vector<int> unplaced_members_;
};

}  // namespace

absl::StatusOr<OffsetSolution> PlaceExact(const OffsetProblem& problem,
                                          const OffsetSolution& incumbent,
                                          const ExactOffsetsOptions& options) {
  const Clock::time_point start = Clock::now();
  MG_RETURN_IF_ERROR(ValidateProblem(problem));
  if (!(options.time_limit_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("exact: negative time limit ", options.time_limit_seconds));
  }
  if (options.threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("exact: ", options.threads, " threads"));
  }
  OffsetSolution best;
  if (incumbent.offsets.empty() && !problem.items.empty()) {
    best.offsets = StackedOffsets(problem);
  } else {
    if (incumbent.offsets.size() != problem.items.size()) {
      return absl::InvalidArgumentError(absl::StrCat("exact: the incumbent has ",
                                                     incumbent.offsets.size(),
                                                     " offsets for ", problem.items.size(),
                                                     " items"));
    }
    const absl::Status valid = CheckOffsetSolution(problem, incumbent.offsets);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("exact: invalid incumbent: ", valid.message()));
    }
    best.offsets = incumbent.offsets;
  }
  // Zero-byte items conflict with nothing: offset 0 (never raises the height).
  for (size_t i = 0; i < problem.items.size(); ++i) {
    if (problem.items[i].bytes == 0) best.offsets[i] = 0;
  }
  best.height = OffsetHeight(problem, best.offsets);
  const int64_t lower_bound = OffsetLowerBound(problem);
  MG_CHECK(best.height >= lower_bound);
  if (best.height <= std::max(lower_bound, options.proven_lower_bound)) {
    best.proven_optimal = true;
    return best;
  }
  // No time left (auto's greedy passes used it all): preparing the search alone costs
  // O(n log n), which a million items make seconds.
  if (std::chrono::duration<double>(Clock::now() - start).count() >= options.time_limit_seconds) {
    return best;
  }

  // No slack at the bound (every step with a live item has LB bytes live): the skyline search
  // of perfect_packing.h decides the bound itself, for half of the time left; a plan there is
  // optimal, and an exhausted search proves the bound unreachable.
  bool bound_unreachable = false;
  {
    const Clock::time_point now = Clock::now();
    absl::StatusOr<PerfectPacking> perfect = SolvePerfectPacking(
        problem,
        now + util::ShareOfTimeLeft(now, util::DeadlineAfter(start, options.time_limit_seconds),
                                    time_shares::kPerfectPacking),
        std::numeric_limits<int64_t>::max(), options.threads);
    // No thread with the stack it needs: the branch and bound below still runs.
    if (!perfect.ok() && !absl::IsResourceExhausted(perfect.status())) return perfect.status();
    if (perfect.ok() && perfect->outcome == PerfectPacking::kFound) {
      best.offsets = std::move(perfect->offsets);
      best.height = OffsetHeight(problem, best.offsets);
      MG_CHECK(best.height == lower_bound);
      best.proven_optimal = true;
      return best;
    }
    bound_unreachable = perfect.ok() && perfect->outcome == PerfectPacking::kInfeasible;
  }

  Prepared prepared;
  // Too large to search, or no time left to prepare the search: the plan so far.
  if (Prepare(problem, util::DeadlineAfter(start, options.time_limit_seconds), prepared) !=
      Preparation::kReady) {
    return best;
  }
  MG_CHECK(prepared.max_total == lower_bound);
  MG_CHECK(prepared.granule > 0 && lower_bound % prepared.granule == 0);
  const int64_t granule = prepared.granule;

  // Heights below `low` are proven infeasible and best.height is feasible, so the optimum is
  // a multiple of the granule in [low, best.height]. Each round gives every probe a node
  // limit per preorder, doubled from round to round: first `low` itself (a plan there is
  // optimal), then a binary search over (low, high] with a smaller limit, where an unsettled
  // probe counts as infeasible for the rest of the round (plans found there lower the upper
  // end early, so a time limit still returns a good plan). Node limits, not clocks, decide
  // every step, so only where the time limit cuts depends on the machine.
  Budget budget(options, start);
  int64_t low = bound_unreachable ? lower_bound + granule : lower_bound;
  // Every height the search probes is a multiple of the granule, and so is the optimum.
  low = std::max(low, (options.proven_lower_bound + granule - 1) / granule * granule);
  int64_t high = (best.height - 1) / granule * granule;  // the highest height worth probing
  int64_t node_limit = 2 * static_cast<int64_t>(prepared.original.size());
  // The search recurses once per placement (and once more per split): it runs on a stack of
  // its own, sized for the deepest path, and so does each search a probe runs side by side.
  const size_t stack_bytes =
      (size_t{1} << 20) + prepared.original.size() * kStackBytesPerPlacement;
  const int64_t memberships = static_cast<int64_t>(prepared.members.size());
  // A feasible probe lowers best and high, an infeasible one raises low; false on timeout.
  auto probe = [&](int64_t capacity, int64_t limit, DecisionSearch::Outcome& outcome) {
    budget.SetProbe(low, best.height, capacity);
    // The preorders in turn; the first that settles the probe answers it. Side by side
    // (util/ordered_race.h) the answer is the same; in turn they share one search object, since
    // building one copies the section lists.
    const bool side_by_side = options.threads > 1 && limit >= options.min_nodes_side_by_side &&
                              memberships <= kMaxParallelMemberships;
    std::optional<DecisionSearch> shared;
    if (!side_by_side) shared.emplace(prepared, capacity, budget);
    std::vector<DecisionSearch::Outcome> outcomes(kNumPreorders,
                                                  DecisionSearch::Outcome::kNodeLimit);
    std::vector<std::vector<int64_t>> plans(kNumPreorders);  // search item -> offset
    const int first = util::RaceInOrder(
        side_by_side ? options.threads : 1, stack_bytes, kNumPreorders,
        [&](int k, const util::RaceStop& stop) {
          std::optional<DecisionSearch> own;
          DecisionSearch& search =
              shared ? *shared : own.emplace(prepared, capacity, budget, &stop);
          outcomes[k] = search.Run(limit, k);
          if (outcomes[k] == DecisionSearch::Outcome::kFeasible) plans[k] = search.offsets();
          if (outcomes[k] == DecisionSearch::Outcome::kNodeLimit) return util::TaskEnd::kUndecided;
          if (outcomes[k] != DecisionSearch::Outcome::kTimeout) return util::TaskEnd::kDecisive;
          // In turn, the time limit ends the probe; side by side, a later preorder may have
          // settled it before the limit came.
          return side_by_side ? util::TaskEnd::kUndecided : util::TaskEnd::kNoMore;
        });
    if (first < kNumPreorders) {
      outcome = outcomes[first];
    } else {
      outcome = std::count(outcomes.begin(), outcomes.end(), DecisionSearch::Outcome::kTimeout)
                    ? DecisionSearch::Outcome::kTimeout
                    : DecisionSearch::Outcome::kNodeLimit;
    }
    if (outcome == DecisionSearch::Outcome::kTimeout) return false;
    if (outcome == DecisionSearch::Outcome::kInfeasible) low = capacity + granule;
    if (outcome == DecisionSearch::Outcome::kFeasible) {
      std::vector<int64_t> offsets(problem.items.size(), 0);
      const std::vector<int64_t>& found = plans[first];
      for (size_t k = 0; k < prepared.original.size(); ++k) {
        MG_CHECK(found[k] != kNoOffset);
        offsets[prepared.original[k]] = found[k];
      }
      const int64_t height = OffsetHeight(problem, offsets);
      MG_CHECK(height <= capacity);
      best.offsets = std::move(offsets);
      best.height = height;
      high = height - granule;
    }
    return true;
  };
  auto search = [&] {
    while (low <= high && !budget.Expired()) {
      DecisionSearch::Outcome outcome;
      if (!probe(low, node_limit, outcome)) break;
      if (outcome != DecisionSearch::Outcome::kNodeLimit) continue;
      int64_t unsettled_from = low + granule;
      while (unsettled_from <= high) {
        const int64_t capacity = unsettled_from + (high - unsettled_from) / granule / 2 * granule;
        if (!probe(capacity, std::max<int64_t>(1, node_limit / kUpperProbeShare), outcome)) break;
        if (outcome != DecisionSearch::Outcome::kFeasible) unsettled_from = capacity + granule;
      }
      if (outcome == DecisionSearch::Outcome::kTimeout) break;
      node_limit = node_limit > kInfinity / 2 ? kInfinity : 2 * node_limit;
    }
  };
  MG_RETURN_IF_ERROR(util::RunWithStack(stack_bytes, search));
  best.proven_optimal = low > high;
  return best;
}

}  // namespace memonger

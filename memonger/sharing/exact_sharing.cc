#include "memonger/sharing/exact_sharing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "memonger/sharing/free_group_index.h"
#include "util/check.h"

namespace memonger {
namespace {

using Clock = std::chrono::steady_clock;

// One device's problem: items sorted by (bytes desc, first_step, root, input position), their
// lifetimes on compressed steps (segment s = [bounds[s], bounds[s+1]) of original steps).
struct Problem {
  std::vector<int> input_index;  // position in the caller's vector
  std::vector<int64_t> bytes;
  std::vector<int> first, last;  // original steps, inclusive
  std::vector<int> seg_lo, seg_hi;  // compressed: segments [seg_lo, seg_hi)
  int num_segments = 0;
  // Conflicts besides overlapping lifetimes (a parallel executor's unordered pairs), per item:
  // the other items, sorted.
  std::vector<std::vector<int>> extra;
  int size() const { return static_cast<int>(bytes.size()); }
};

Problem MakeProblem(const std::vector<SharingItem>& items, std::vector<int> members,
                    const std::vector<std::pair<int, int>>& extra_conflicts = {}) {
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    const SharingItem& x = items[a];
    const SharingItem& y = items[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.lifetime.first_step != y.lifetime.first_step) {
      return x.lifetime.first_step < y.lifetime.first_step;
    }
    return x.root < y.root;
  });
  Problem p;
  std::vector<int> bounds;
  for (int i : members) {
    p.input_index.push_back(i);
    p.bytes.push_back(items[i].bytes);
    p.first.push_back(items[i].lifetime.first_step);
    p.last.push_back(items[i].lifetime.last_step);
    bounds.push_back(items[i].lifetime.first_step);
    bounds.push_back(items[i].lifetime.last_step + 1);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  p.num_segments = std::max(0, static_cast<int>(bounds.size()) - 1);
  for (int k = 0; k < p.size(); ++k) {
    p.seg_lo.push_back(static_cast<int>(
        std::lower_bound(bounds.begin(), bounds.end(), p.first[k]) - bounds.begin()));
    p.seg_hi.push_back(static_cast<int>(
        std::lower_bound(bounds.begin(), bounds.end(), p.last[k] + 1) - bounds.begin()));
  }
  p.extra.assign(p.size(), {});
  if (!extra_conflicts.empty()) {
    std::map<int, int> local;  // caller's index -> sorted position
    for (int k = 0; k < p.size(); ++k) local[p.input_index[k]] = k;
    for (const auto& [a, b] : extra_conflicts) {
      auto ia = local.find(a);
      auto ib = local.find(b);
      if (ia == local.end() || ib == local.end() || a == b) continue;  // another device
      p.extra[ia->second].push_back(ib->second);
      p.extra[ib->second].push_back(ia->second);
    }
    for (std::vector<int>& list : p.extra) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
  }
  return p;
}

// Range add, global max over [0, n): for the root bound on large problems.
class MaxSegmentTree {
 public:
  explicit MaxSegmentTree(int n) : n_(std::max(n, 1)), max_(4 * n_, 0), add_(4 * n_, 0) {}
  void Add(int lo, int hi) { Add(1, 0, n_, lo, hi); }
  int Max() const { return max_[1]; }

 private:
  void Add(int node, int l, int r, int lo, int hi) {
    if (hi <= l || r <= lo) return;
    if (lo <= l && r <= hi) {
      ++max_[node];
      ++add_[node];
      return;
    }
    const int m = (l + r) / 2;
    Add(2 * node, l, m, lo, hi);
    Add(2 * node + 1, m, r, lo, hi);
    max_[node] = add_[node] + std::max(max_[2 * node], max_[2 * node + 1]);
  }
  int n_;
  std::vector<int> max_, add_;
};

// The layered clique bound with no group opened yet (see the header).
int64_t RootBound(const Problem& p) {
  MaxSegmentTree tree(p.num_segments);
  int64_t bound = 0;
  for (int k = 0; k < p.size(); ++k) {
    tree.Add(p.seg_lo[k], p.seg_hi[k]);
    const int64_t next = k + 1 < p.size() ? p.bytes[k + 1] : 0;
    bound += (p.bytes[k] - next) * tree.Max();
  }
  return bound;
}

int64_t CostOf(const Problem& p, const std::vector<int>& group_of) {
  std::vector<int64_t> group_max;
  for (int k = 0; k < p.size(); ++k) {
    const int g = group_of[k];
    if (g >= static_cast<int>(group_max.size())) group_max.resize(g + 1, 0);
    group_max[g] = std::max(group_max[g], p.bytes[k]);
  }
  return std::accumulate(group_max.begin(), group_max.end(), int64_t{0});
}

// The searches read the clock after about this many units of work.
constexpr int64_t kWorkPerClockCheck = int64_t{1} << 17;

// The items after `from` (in sorted order), grouped quickly where first fit ran out of time:
// in order of first step, each joins the group whose members all end earliest, if they end
// before it starts, else opens a group (interval partitioning, with the groups first fit
// opened taking part). O(n log n). Every such group fits: its members end before the item
// starts. Items with extra conflicts open groups of their own (only a parallel executor has
// them, and its problems are small enough for first fit). Groups opened here are numbered
// after first fit's, by descending cost.
void GroupRestQuickly(const Problem& p, int from, const std::vector<std::map<int, int>>& groups,
                      std::vector<int>& group_of) {
  const int num_groups = static_cast<int>(groups.size());
  std::vector<int> rest(p.size() - from);
  std::iota(rest.begin(), rest.end(), from);
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return p.first[a] < p.first[b]; });
  using Free = std::pair<int, int>;  // (last step of the group's members, group)
  std::priority_queue<Free, std::vector<Free>, std::greater<Free>> free_after;
  // A group's intervals are disjoint and keyed by first step: its last ends last.
  for (int g = 0; g < num_groups; ++g) free_after.emplace(groups[g].rbegin()->second, g);
  std::vector<int64_t> new_cost;  // per group opened here
  for (const int k : rest) {
    int g = -1;
    if (p.extra[k].empty() && !free_after.empty() && free_after.top().first < p.first[k]) {
      g = free_after.top().second;
      free_after.pop();
    } else {
      g = num_groups + static_cast<int>(new_cost.size());
      new_cost.push_back(p.bytes[k]);
    }
    group_of[k] = g;
    if (g >= num_groups) new_cost[g - num_groups] = std::max(new_cost[g - num_groups], p.bytes[k]);
    if (p.extra[k].empty()) free_after.emplace(p.last[k], g);
  }
  // Descending cost among the new groups (first fit's all cost at least as much: they opened
  // with larger items), ties in opening order.
  std::vector<int> rank(new_cost.size());
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(),
                   [&](int a, int b) { return new_cost[a] > new_cost[b]; });
  std::vector<int> renumber(new_cost.size());
  for (size_t r = 0; r < rank.size(); ++r) renumber[rank[r]] = num_groups + static_cast<int>(r);
  for (const int k : rest) {
    if (group_of[k] >= num_groups) group_of[k] = renumber[group_of[k] - num_groups];
  }
}

// First fit in sorted order, any size: each group keeps its intervals in a map first -> last,
// and a FreeGroupIndex rules out most groups for an item without a look at their maps (an
// item of a 100,000-op training net tried 5,800 of 30,380 groups one by one). Where that index
// would grow too large, the groups are tried one by one. Where `deadline` passes (the clock is
// read after about kWorkPerClockCheck units of work), the items not reached yet are grouped by
// GroupRestQuickly, and `cut` is set to how many there were.
std::vector<int> FirstFit(const Problem& p, Clock::time_point deadline, int* cut) {
  std::vector<std::map<int, int>> groups;
  std::vector<int> group_of(p.size());
  FreeGroupIndex index(p.num_segments);
  *cut = 0;
  int64_t work = 0;
  for (int k = 0; k < p.size(); ++k) {
    if (work >= kWorkPerClockCheck) {
      work = 0;
      if (Clock::now() > deadline) {
        *cut = p.size() - k;
        GroupRestQuickly(p, k, groups, group_of);
        return group_of;
      }
    }
    // Whether k may join group g: no interval of g meets k's (unless the index is sure), and
    // no earlier item of g conflicts with k otherwise (only earlier items have groups).
    const auto fits = [&](int g, bool sure) {
      if (!sure) {
        auto it = groups[g].upper_bound(p.last[k]);  // first interval starting after k ends
        if (it != groups[g].begin() && std::prev(it)->second >= p.first[k]) return false;
      }
      return std::none_of(p.extra[k].begin(), p.extra[k].end(), [&](int j) {
        return j < k && group_of[j] == g;
      });
    };
    int chosen = -1;
    if (index.usable()) {
      chosen = index.FirstFree(p.seg_lo[k], p.seg_hi[k], fits, work);
    } else {
      work += 1 + static_cast<int64_t>(groups.size());
      for (size_t g = 0; g < groups.size() && chosen < 0; ++g) {
        if (fits(static_cast<int>(g), false)) chosen = static_cast<int>(g);
      }
    }
    if (chosen < 0) {
      chosen = index.AddGroup();
      groups.emplace_back();
    }
    groups[chosen].emplace(p.first[k], p.last[k]);
    group_of[k] = chosen;
    index.Add(chosen, p.seg_lo[k], p.seg_hi[k]);
  }
  return group_of;
}

// Dense bit rows over the items of one problem.
class BitRows {
 public:
  BitRows(int rows, int bits) : words_((bits + 63) / 64), data_(size_t(rows) * words_, 0) {}
  int words() const { return words_; }
  uint64_t* row(int r) { return data_.data() + size_t(r) * words_; }
  const uint64_t* row(int r) const { return data_.data() + size_t(r) * words_; }
  static bool Test(const uint64_t* row, int bit) { return (row[bit >> 6] >> (bit & 63)) & 1; }
  static void Set(uint64_t* row, int bit) { row[bit >> 6] |= uint64_t{1} << (bit & 63); }

 private:
  int words_;
  std::vector<uint64_t> data_;
};

// Portable (no -mpopcnt): the SWAR count, faster than libgcc's out-of-line __popcountdi2.
inline int PopCount(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
}


// Search states already explored: (next item, the sorted non-empty sets of remaining items
// that each group still fits) -> the lowest cost at which that state was explored. Reaching
// it again at no lower cost cannot lead to a cheaper grouping (the costs of existing groups
// are fixed, and what remains depends only on those sets). Open addressing over a word arena;
// emptied when full, which only forgets (sound).
class StateTable {
 public:
  StateTable(size_t max_slots, size_t max_words) : max_slots_(max_slots), max_words_(max_words) {
    slots_.resize(1024);
  }

  // The cost stored for the key, or -1.
  int64_t Find(const uint64_t* key, int len, uint64_t hash) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.len == 0) return -1;
      if (s.hash == hash && Equal(s, key, len)) return s.cost;
    }
  }

  void Remember(const uint64_t* key, int len, uint64_t hash, int64_t cost) {
    if (size_t(len) > max_words_) return;
    if (2 * (used_ + 1) > slots_.size()) {
      if (slots_.size() < max_slots_) {
        Grow();
      } else {
        Clear();
      }
    }
    if (arena_.size() + len > max_words_) Clear();
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.len == 0) {
        s = {hash, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(len), cost};
        arena_.insert(arena_.end(), key, key + len);
        ++used_;
        return;
      }
      if (s.hash == hash && Equal(s, key, len)) {
        s.cost = std::min(s.cost, cost);
        return;
      }
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t len = 0;  // 0: empty (keys hold at least the item index)
    int64_t cost = 0;
  };

  bool Equal(const Slot& s, const uint64_t* key, int len) const {
    return s.len == uint32_t(len) && std::equal(key, key + len, arena_.begin() + s.offset);
  }

  void Grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.len == 0) continue;
      size_t i = s.hash & mask;
      while (slots_[i].len != 0) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  void Clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    arena_.clear();
    used_ = 0;
  }

  size_t max_slots_, max_words_;
  std::vector<Slot> slots_;
  std::vector<uint64_t> arena_;
  size_t used_ = 0;
};

uint64_t Mix(uint64_t h, uint64_t w) {
  h ^= w + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

// Branch and bound over one device's problem (see the header for the rules).
//
// State while placing item k (items 0..k-1 placed): per group g, conflict_[g] = the items
// overlapping one of its members, so C_g = later items not in conflict_[g] are those g still
// fits; per item j >= k, fit_[j] = the groups j fits (the transpose, kept for the bound).
class Search {
 public:
  Search(const Problem& p, Clock::time_point deadline)
      : p_(p),
        n_(p.size()),
        deadline_(deadline),
        overlaps_(n_, n_),
        later_(n_, n_),
        conflict_(n_, n_),
        fit_(n_, n_),
        words_(overlaps_.words()),
        level_excess_(n_, 0),
        group_of_(n_, -1),
        later_overlaps_(n_),
        frames_(n_ + 1),
        memo_(size_t{1} << 20, size_t{1} << 22) {
    std::vector<int> by_first(n_);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int a, int b) { return p.first[a] < p.first[b]; });
    for (int x = 0; x < n_; ++x) {
      const int a = by_first[x];
      for (int y = x; y < n_ && p.first[by_first[y]] <= p.last[a]; ++y) {
        const int b = by_first[y];
        BitRows::Set(overlaps_.row(a), b);
        BitRows::Set(overlaps_.row(b), a);
        if (a != b) later_overlaps_[std::min(a, b)].push_back(std::max(a, b));
      }
    }
    for (int a = 0; a < n_; ++a) {
      for (int b : p.extra[a]) {
        if (BitRows::Test(overlaps_.row(a), b)) continue;
        BitRows::Set(overlaps_.row(a), b);
        BitRows::Set(overlaps_.row(b), a);
        later_overlaps_[std::min(a, b)].push_back(std::max(a, b));
      }
    }
    for (int k = 0; k < n_; ++k) {
      for (int j = k + 1; j < n_; ++j) BitRows::Set(later_.row(k), j);
      std::sort(later_overlaps_[k].begin(), later_overlaps_[k].end());
      later_overlaps_[k].erase(std::unique(later_overlaps_[k].begin(), later_overlaps_[k].end()),
                               later_overlaps_[k].end());
    }
    // Maximal cliques: segments where an item starts and an item ends (the live set of any
    // other segment is contained in a neighbour's).
    std::vector<char> starts(p.num_segments, 0), ends(p.num_segments, 0);
    for (int k = 0; k < n_; ++k) {
      starts[p.seg_lo[k]] = 1;
      ends[p.seg_hi[k] - 1] = 1;
    }
    std::vector<int> clique_of_segment(p.num_segments, -1);
    for (int t = 0; t < p.num_segments; ++t) {
      if (!starts[t] || !ends[t]) continue;
      clique_of_segment[t] = static_cast<int>(cliques_.size());
      cliques_.emplace_back();
    }
    for (int k = 0; k < n_; ++k) {  // ascending k: each clique's items come out sorted
      for (int t = p.seg_lo[k]; t < p.seg_hi[k]; ++t) {
        if (clique_of_segment[t] >= 0) cliques_[clique_of_segment[t]].push_back(k);
      }
    }
  }

  // The least-damage heuristic (see the header): group_of, or empty when the deadline passes.
  std::vector<int> LeastDamage() {
    Reset();
    for (int k = 0; k < n_; ++k) {
      if (Clock::now() > deadline_) return {};
      int chosen = -1;
      int chosen_damage = std::numeric_limits<int>::max();
      for (int g = 0; g < num_groups_; ++g) {
        if (!BitRows::Test(fit_.row(k), g)) continue;
        const int damage = Damage(k, g);
        if (damage < chosen_damage) {
          chosen_damage = damage;
          chosen = g;
        }
      }
      if (chosen >= 0) {
        Join(k, chosen);
      } else {
        Open(k);
      }
    }
    std::vector<int> result = group_of_;
    Reset();
    return result;
  }

  // Searches for a grouping cheaper than `incumbent`; returns true when the search finished.
  bool Run(std::vector<int> incumbent) {
    best_group_of_ = std::move(incumbent);
    best_cost_ = CostOf(p_, best_group_of_);
    Reset();
    Dfs(0);
    return !stopped_;
  }

  const std::vector<int>& best_group_of() const { return best_group_of_; }
  int64_t nodes() const { return nodes_; }

 private:
  // Scratch of one depth of the search, kept to avoid allocating per node.
  struct Frame {
    std::vector<int> fitting;          // groups item k fits
    std::vector<uint64_t> fits;        // their C_g rows
    std::vector<int> damage;           // |C_g & O_k|
    std::vector<std::pair<int, int>> candidates;  // (damage, group) to branch on
    std::vector<uint64_t> saved;       // a conflict row before a join
    std::vector<uint64_t> key;         // the state key
    std::vector<int> order;            // key row order
  };

  void Reset() {
    for (int g = 0; g < n_; ++g) std::fill(conflict_.row(g), conflict_.row(g) + words_, 0);
    for (int j = 0; j < n_; ++j) std::fill(fit_.row(j), fit_.row(j) + words_, 0);
    std::fill(group_of_.begin(), group_of_.end(), -1);
    num_groups_ = 0;
    cost_ = 0;
    cleared_.clear();
  }

  // Later items that overlap k and that group g still fits.
  int Damage(int k, int g) const {
    const uint64_t* ov = overlaps_.row(k);
    const uint64_t* later = later_.row(k);
    const uint64_t* conflict = conflict_.row(g);
    int damage = 0;
    for (int w = 0; w < words_; ++w) damage += PopCount(ov[w] & later[w] & ~conflict[w]);
    return damage;
  }

  // Puts k into g; later items overlapping k no longer fit g (their bits go on cleared_).
  void Join(int k, int g) {
    uint64_t* conflict = conflict_.row(g);
    const uint64_t* ov = overlaps_.row(k);
    for (int w = 0; w < words_; ++w) conflict[w] |= ov[w];
    for (int j : later_overlaps_[k]) {
      uint64_t& word = fit_.row(j)[g >> 6];
      const uint64_t bit = uint64_t{1} << (g & 63);
      if (word & bit) {
        word &= ~bit;
        cleared_.push_back(j);
      }
    }
    group_of_[k] = g;
    work_ += static_cast<int64_t>(later_overlaps_[k].size()) + words_;
  }

  // Undoes Join(k, g): `saved` is g's conflict row before it, `mark` the size of cleared_.
  void Unjoin(int k, int g, const uint64_t* saved, size_t mark) {
    std::copy(saved, saved + words_, conflict_.row(g));
    while (cleared_.size() > mark) {
      fit_.row(cleared_.back())[g >> 6] |= uint64_t{1} << (g & 63);
      cleared_.pop_back();
    }
    group_of_[k] = -1;
  }

  // Later items not overlapping k, one word at a time.
  template <typename F>
  void ForLaterDisjoint(int k, F f) const {
    const uint64_t* ov = overlaps_.row(k);
    const uint64_t* later = later_.row(k);
    for (int w = k >> 6; w < words_; ++w) {
      for (uint64_t m = later[w] & ~ov[w]; m != 0; m &= m - 1) f(w * 64 + __builtin_ctzll(m));
    }
  }

  void Open(int k) {
    const int g = num_groups_++;
    std::copy(overlaps_.row(k), overlaps_.row(k) + words_, conflict_.row(g));
    ForLaterDisjoint(k, [&](int j) { BitRows::Set(fit_.row(j), g); });
    cost_ += p_.bytes[k];
    group_of_[k] = g;
    work_ += n_ - k + words_;
  }

  void Close(int k) {  // undoes Open(k)
    const int g = --num_groups_;
    ForLaterDisjoint(k, [&](int j) { fit_.row(j)[g >> 6] &= ~(uint64_t{1} << (g & 63)); });
    std::fill(conflict_.row(g), conflict_.row(g) + words_, 0);
    cost_ -= p_.bytes[k];
    group_of_[k] = -1;
  }

  // The layered clique bound on the cost of the new groups items k.. still need (header).
  // For each maximal clique C and level j, the remaining items of C down to j lie in distinct
  // groups; at most |union of the existing groups they fit| of them join existing groups, the
  // rest need distinct new groups. A step's live set is contained in some maximal clique's,
  // and the excess only grows with the set, so the maximal cliques stand for every step.
  int64_t NewGroupBound(int k) {
    const int gw = (num_groups_ + 63) / 64;  // words of group bits in use
    std::fill(level_excess_.begin() + k, level_excess_.end(), 0);
    for (const std::vector<int>& clique : cliques_) {
      auto it = std::lower_bound(clique.begin(), clique.end(), k);
      if (it == clique.end()) continue;
      std::fill(union_.begin(), union_.begin() + gw, 0);
      int excess = 0;
      for (; it != clique.end(); ++it) {
        const uint64_t* fit = fit_.row(*it);
        int newly = 0;
        for (int w = 0; w < gw; ++w) {
          newly += PopCount(fit[w] & ~union_[w]);
          union_[w] |= fit[w];
        }
        excess += 1 - newly;
        level_excess_[*it] = std::max(level_excess_[*it], excess);
        work_ += gw + 1;
      }
    }
    int running_max = 0;
    int64_t bound = 0;
    for (int j = k; j < n_; ++j) {
      running_max = std::max(running_max, level_excess_[j]);
      const int64_t next = j + 1 < n_ ? p_.bytes[j + 1] : 0;
      bound += (p_.bytes[j] - next) * running_max;
    }
    work_ += n_ - k;
    return bound;
  }

  // The state key (see StateTable) into frame.key; returns its hash.
  uint64_t StateKey(int k, Frame& frame) {
    const int first_word = k >> 6;
    const int row_words = words_ - first_word;
    const uint64_t* later = later_.row(k);
    const uint64_t k_bit = uint64_t{1} << (k & 63);
    // Rows of items >= k that each group fits, non-empty ones only.
    std::vector<uint64_t>& rows = frame.fits;  // reused: the fits are computed after this
    rows.clear();
    for (int g = 0; g < num_groups_; ++g) {
      const uint64_t* conflict = conflict_.row(g);
      bool any = false;
      const size_t at = rows.size();
      for (int w = first_word; w < words_; ++w) {
        uint64_t m = later[w] | (w == first_word ? k_bit : 0);
        rows.push_back(m & ~conflict[w]);
        any = any || rows.back() != 0;
      }
      if (!any) rows.resize(at);
    }
    const int num_rows = static_cast<int>(rows.size()) / row_words;
    frame.order.resize(num_rows);
    std::iota(frame.order.begin(), frame.order.end(), 0);
    std::sort(frame.order.begin(), frame.order.end(), [&](int a, int b) {
      return std::lexicographical_compare(rows.begin() + size_t(a) * row_words,
                                          rows.begin() + size_t(a + 1) * row_words,
                                          rows.begin() + size_t(b) * row_words,
                                          rows.begin() + size_t(b + 1) * row_words);
    });
    frame.key.assign(1, static_cast<uint64_t>(k));
    uint64_t hash = Mix(0, static_cast<uint64_t>(k));
    for (int r : frame.order) {
      for (int w = 0; w < row_words; ++w) {
        const uint64_t v = rows[size_t(r) * row_words + w];
        frame.key.push_back(v);
        hash = Mix(hash, v);
      }
    }
    work_ += int64_t{num_groups_} * row_words * 4;
    return hash;
  }

  void Dfs(int k) {
    if (stopped_) return;
    ++nodes_;
    // The clock is read after about kWorkPerClockCheck units of work, so the limit holds
    // whether nodes are cheap (small problems) or expensive (thousands of items).
    if (work_ >= kWorkPerClockCheck) {
      work_ = 0;
      if (Clock::now() > deadline_) {
        stopped_ = true;
        return;
      }
    }
    if (k == n_) {
      if (cost_ < best_cost_) {
        best_cost_ = cost_;
        best_group_of_ = group_of_;
      }
      return;
    }
    Frame& frame = frames_[k];
    const uint64_t hash = StateKey(k, frame);
    const int key_len = static_cast<int>(frame.key.size());
    // A state explored before at cost c <= cost_ either led to the incumbent or was proven
    // unable to beat an incumbent at least as costly as today's: prune (StateTable).
    const int64_t seen = memo_.Find(frame.key.data(), key_len, hash);
    if (seen >= 0 && seen <= cost_) return;
    if (cost_ + NewGroupBound(k) >= best_cost_) {
      memo_.Remember(frame.key.data(), key_len, hash, cost_);
      return;
    }

    // Groups item k fits, with C_g and the damage |C_g & O| (O: later items overlapping k).
    const uint64_t* overlap = overlaps_.row(k);
    const uint64_t* later = later_.row(k);
    frame.fitting.clear();
    frame.fits.clear();
    frame.damage.clear();
    for (int g = 0; g < num_groups_; ++g) {
      if (!BitRows::Test(fit_.row(k), g)) continue;
      frame.fitting.push_back(g);
      const uint64_t* conflict = conflict_.row(g);
      int d = 0;
      for (int w = 0; w < words_; ++w) {
        const uint64_t c = later[w] & ~conflict[w];
        frame.fits.push_back(c);
        d += PopCount(c & overlap[w]);
      }
      frame.damage.push_back(d);
    }
    const int f = static_cast<int>(frame.fitting.size());
    work_ += int64_t{f} * f * words_ + int64_t{num_groups_} * words_;
    auto fit_row = [&](int i) { return frame.fits.data() + size_t(i) * words_; };

    // Dominance (each pruned branch has a kept branch whose best completion is no worse; a
    // completion puts set X_g of later items into existing group g, X_new into new groups):
    // - Free fit, C_g & O empty: take any completion of another branch; k's group there
    //   holds k and other items; move k into g. g's later members X_g lie in C_g, so none
    //   overlaps k; g's cost is fixed and >= bytes(k); k's old group only loses a member.
    // - Join g1 over join g2 when C_g1 <= C_g2 <= C_g1 | O: from a completion of "k in g2",
    //   swap the later members: X_g1 goes to g2 (X_g1 <= C_g1 <= C_g2) and X_g2 goes to g1
    //   (X_g2 <= C_g2 minus O <= C_g1, and none overlaps k). Costs are fixed: same total.
    //   Equal sets in both directions: the lower index is kept, so no cycle.
    // - Join g over a new group when every later item outside O fits g: from a completion of
    //   "k opens N", the later members of N avoid O, so they fit g next to k; g's own later
    //   members X_g form a group of their own costing max(X_g) <= bytes(k) = cost of N.
    // The rules hold in every node, so by induction over depth the kept branches reach the
    // optimum of the node's subtree.
    std::vector<std::pair<int, int>>& candidates = frame.candidates;
    candidates.clear();
    bool open_new = true;
    for (int i = 0; i < f; ++i) {
      if (frame.damage[i] == 0) {
        candidates.emplace_back(0, frame.fitting[i]);
        open_new = false;
        break;
      }
    }
    if (candidates.empty()) {
      for (int i = 0; i < f; ++i) {
        const uint64_t* ci = fit_row(i);
        bool dominated = false;
        for (int h = 0; h < f && !dominated; ++h) {
          if (h == i) continue;
          const uint64_t* ch = fit_row(h);
          bool subset = true, equal = true, within = true;
          for (int w = 0; w < words_; ++w) {
            subset = subset && (ch[w] & ~ci[w]) == 0;
            equal = equal && ch[w] == ci[w];
            within = within && (ci[w] & ~(ch[w] | overlap[w])) == 0;
          }
          dominated = subset && within && (!equal || h < i);
        }
        if (dominated) continue;
        candidates.emplace_back(frame.damage[i], frame.fitting[i]);
        bool takes_new = true;
        for (int w = 0; w < words_ && takes_new; ++w) {
          takes_new = (later[w] & ~overlap[w] & ~ci[w]) == 0;
        }
        if (takes_new) open_new = false;
      }
      std::stable_sort(candidates.begin(), candidates.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }

    frame.saved.resize(words_);
    for (size_t c = 0; c < candidates.size(); ++c) {
      const int g = candidates[c].second;
      std::copy(conflict_.row(g), conflict_.row(g) + words_, frame.saved.begin());
      const size_t mark = cleared_.size();
      Join(k, g);
      Dfs(k + 1);
      Unjoin(k, g, frame.saved.data(), mark);
      if (stopped_) return;
    }
    if (open_new) {
      Open(k);
      Dfs(k + 1);
      Close(k);
      if (stopped_) return;
    }
    memo_.Remember(frame.key.data(), key_len, hash, cost_);
  }

  const Problem& p_;
  const int n_;
  const Clock::time_point deadline_;
  BitRows overlaps_;   // per item: the items overlapping it (itself included)
  BitRows later_;      // per item k: the items after k
  BitRows conflict_;   // per group: the items overlapping one of its members
  BitRows fit_;        // per item: the groups it fits
  const int words_;
  std::vector<std::vector<int>> cliques_;  // maximal cliques, items ascending
  // Scratch of NewGroupBound.
  std::vector<int> level_excess_;
  std::vector<uint64_t> union_ = std::vector<uint64_t>(words_);
  std::vector<int> group_of_;
  std::vector<std::vector<int>> later_overlaps_;  // per item k: items j > k overlapping it
  std::vector<int> cleared_;  // undo stack of Join
  std::vector<Frame> frames_;
  StateTable memo_;
  int num_groups_ = 0;
  int64_t cost_ = 0;
  std::vector<int> best_group_of_;
  int64_t best_cost_ = 0;
  int64_t nodes_ = 0;
  int64_t work_ = 0;
  bool stopped_ = false;
};

struct DeviceSolution {
  std::vector<int> group_of;  // per sorted item
  bool proven = false;
  int64_t cost = 0;
  int64_t bound = 0;
  int64_t nodes = 0;
  int first_fit_cut = 0;  // items first fit left to GroupRestQuickly
};

DeviceSolution Solve(const Problem& p, Clock::time_point deadline) {
  DeviceSolution sol;
  sol.bound = RootBound(p);
  sol.group_of = FirstFit(p, deadline, &sol.first_fit_cut);
  sol.cost = CostOf(p, sol.group_of);
  if (sol.cost <= sol.bound) {
    sol.proven = true;
    return sol;
  }
  if (p.size() > kMaxSearchItems) return sol;
  Search search(p, deadline);
  std::vector<int> least_damage = search.LeastDamage();
  if (!least_damage.empty() && CostOf(p, least_damage) < sol.cost) {
    sol.group_of = std::move(least_damage);
  }
  sol.proven = search.Run(sol.group_of);
  sol.group_of = search.best_group_of();
  sol.cost = CostOf(p, sol.group_of);
  sol.nodes = search.nodes();
  return sol;
}

absl::Status CheckItems(const std::vector<SharingItem>& items) {
  for (const SharingItem& item : items) {
    if (item.bytes < 0 || item.lifetime.first_step > item.lifetime.last_step) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharing item for value ", item.root, " is invalid: lifetime [",
          item.lifetime.first_step, ", ", item.lifetime.last_step, "], bytes ", item.bytes));
    }
  }
  return absl::OkStatus();
}

// Item indices per device, devices in order of their first item.
std::vector<std::vector<int>> ByDevice(const std::vector<SharingItem>& items) {
  std::vector<graph::Device> devices;
  std::vector<std::vector<int>> members;
  for (size_t i = 0; i < items.size(); ++i) {
    auto it = std::find(devices.begin(), devices.end(), items[i].device);
    if (it == devices.end()) {
      devices.push_back(items[i].device);
      members.emplace_back();
      it = devices.end() - 1;
    }
    members[it - devices.begin()].push_back(static_cast<int>(i));
  }
  return members;
}

}  // namespace

absl::StatusOr<ExactSharingResult> PlanExactSharing(
    const std::vector<SharingItem>& items, double time_limit_seconds,
    const std::vector<std::pair<int, int>>& extra_conflicts) {
  if (!(time_limit_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("exact-sharing: time limit must be >= 0 seconds, got ", time_limit_seconds));
  }
  if (absl::Status s = CheckItems(items); !s.ok()) return s;
  const auto start = Clock::now();
  // Clamp so that a huge limit does not overflow the clock.
  const double limit = std::min(time_limit_seconds, 1e9);
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));

  ExactSharingResult result;
  result.proven_optimal = true;
  for (const std::vector<int>& members : ByDevice(items)) {
    const Problem p = MakeProblem(items, members, extra_conflicts);
    const DeviceSolution sol = Solve(p, deadline);
    result.proven_optimal = result.proven_optimal && sol.proven;
    result.cost += sol.cost;
    result.lower_bound += sol.bound;
    result.nodes += sol.nodes;
    result.first_fit_cut += sol.first_fit_cut;
    // Group ids are in opening order, i.e. descending cost; members by first step.
    int num_groups = 0;
    for (int g : sol.group_of) num_groups = std::max(num_groups, g + 1);
    std::vector<std::vector<int>> groups(num_groups);
    for (int k = 0; k < p.size(); ++k) groups[sol.group_of[k]].push_back(k);
    for (std::vector<int>& group : groups) {
      MG_CHECK(!group.empty());
      std::sort(group.begin(), group.end(), [&](int a, int b) {
        return std::make_pair(p.first[a], a) < std::make_pair(p.first[b], b);
      });
      std::vector<graph::ValueId> roots;
      for (size_t m = 0; m < group.size(); ++m) {
        if (m > 0) MG_CHECK(p.last[group[m - 1]] < p.first[group[m]]);
        roots.push_back(items[p.input_index[group[m]]].root);
      }
      result.groups.push_back(std::move(roots));
    }
  }
  if (result.proven_optimal) MG_CHECK(result.lower_bound <= result.cost);
  if (result.proven_optimal) result.lower_bound = result.cost;
  return result;
}

std::vector<std::pair<int, int>> ParallelConflicts(const graph::Graph& graph,
                                                   const Liveness& liveness,
                                                   const std::vector<SharingItem>& items) {
  const HappensBefore order(graph);
  // Per item: the ops touching its class, and the op writing its oldest member.
  std::vector<std::vector<graph::OpId>> touchers(items.size());
  std::vector<graph::OpId> writer(items.size(), graph::kNone);
  for (size_t i = 0; i < items.size(); ++i) {
    for (graph::ValueId m : liveness.members[items[i].root]) {
      const graph::Value& v = graph.value(m);
      if (v.producer != graph::kNone) touchers[i].push_back(v.producer);
      const absl::Span<const graph::OpId> readers = graph.consumers(m);
      touchers[i].insert(touchers[i].end(), readers.begin(), readers.end());
    }
    std::sort(touchers[i].begin(), touchers[i].end());
    touchers[i].erase(std::unique(touchers[i].begin(), touchers[i].end()), touchers[i].end());
    writer[i] = graph.value(items[i].root).producer;
  }
  // b may follow a (same device, a ends before b starts) only if every op touching a happens
  // before b's writer. Queries grouped by source (each toucher of a against every b): the
  // search HappensBefore keeps per source serves them all.
  std::vector<std::pair<int, int>> conflicts;
  std::vector<char> ordered(items.size());
  for (size_t a = 0; a < items.size(); ++a) {
    for (size_t b = 0; b < items.size(); ++b) {
      ordered[b] = b != a && items[a].device == items[b].device &&
                   items[a].lifetime.last_step < items[b].lifetime.first_step &&
                   writer[b] != graph::kNone;
    }
    for (graph::OpId t : touchers[a]) {
      for (size_t b = 0; b < items.size(); ++b) {
        if (ordered[b]) ordered[b] = t != writer[b] && order.Before(t, writer[b]);
      }
    }
    for (size_t b = 0; b < items.size(); ++b) {
      const bool candidate = b != a && items[a].device == items[b].device &&
                             items[a].lifetime.last_step < items[b].lifetime.first_step;
      if (candidate && !ordered[b]) {
        conflicts.emplace_back(static_cast<int>(a), static_cast<int>(b));
      }
    }
  }
  return conflicts;
}

int64_t SharingLowerBound(const std::vector<SharingItem>& items) {
  MG_CHECK(CheckItems(items).ok());
  int64_t bound = 0;
  for (const std::vector<int>& members : ByDevice(items)) {
    bound += RootBound(MakeProblem(items, members));
  }
  return bound;
}

}  // namespace memonger

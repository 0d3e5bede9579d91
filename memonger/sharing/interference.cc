#include "memonger/sharing/interference.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"
#include "util/check.h"

namespace memonger {
namespace {

// Indices of `ranges` stably sorted by `used` (memonger: sorted(..., key=used)).
std::vector<int> SortedByUsed(const std::vector<LiveRange>& ranges) {
  std::vector<int> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return ranges[a].used < ranges[b].used; });
  return order;
}

int64_t ChainMax(const std::vector<LiveRange>& ranges, const Chain& chain) {
  int64_t best = 0;
  for (int i : chain) best = std::max(best, ranges[i].size);
  return best;
}

// compute_assignments_dp and its _find_best, over the ranges sorted by `used`. Every sequence
// the recursion works on is a contiguous slice [lo, hi) of that order, so slices are passed as
// index pairs; chains hold indices into the caller's `ranges`.
class MemongerDp {
 public:
  MemongerDp(const std::vector<LiveRange>& ranges, std::vector<int> sorted, const DpLimits& limits)
      : ranges_(ranges),
        sorted_(std::move(sorted)),
        limits_(limits),
        start_(limits.since.value_or(std::chrono::steady_clock::now())) {}

  absl::StatusOr<Chains> Run() {
    if (sorted_.empty()) return Chains{};  // memonger raised IndexError here
    Chains best = Dp(0, static_cast<int>(sorted_.size()), Chains{});
    if (!status_.ok()) return status_;
    return best;
  }

 private:
  const LiveRange& At(int sorted_pos) const { return ranges_[sorted_[sorted_pos]]; }

  bool CompatibleWithChain(int sorted_pos, const Chain& chain) const {
    MG_CHECK(!chain.empty());
    return IsCompatible(At(sorted_pos), ranges_[chain.back()]);
  }

  int64_t Cost(const Chains& chains) const { return ChainsCost(ranges_, chains); }

  static int Count(const Chains& chains) {
    int n = 0;
    for (const Chain& c : chains) n += static_cast<int>(c.size());
    return n;
  }

  // Counts a call; false (with status_ set) once the budget is spent.
  bool Tick() {
    if (!status_.ok()) return false;
    ++calls_;
    bool over = calls_ > limits_.max_calls;
    if (!over && (calls_ & 1023) == 0) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      over = elapsed > limits_.time_limit_seconds;
    }
    if (over) {
      status_ = absl::DeadlineExceededError(absl::StrCat(
          "memonger-dp's exponential DP did not finish within its budget (", calls_,
          " recursive calls; its limits: ", limits_.max_calls, " calls, and ",
          limits_.time_limit_seconds, " s, what --time-limit left it) on ", sorted_.size(),
          " values; use exact-sharing (provably optimal, returns its best plan at the time "
          "limit) or memonger-greedy"));
      return false;
    }
    return true;
  }

  // f(b[lo..hi), init): the best chains for the slice on top of `init`.
  Chains Dp(int lo, int hi, const Chains& init) {
    if (!Tick()) return {};
    std::vector<Chains> best;  // best[k]: best chains for slice positions lo..lo+k
    best.reserve(hi - lo);
    for (int ii = lo; ii < hi; ++ii) {
      const int k = ii - lo;
      // _get_compatible_prev: nearest prefix whose every chain is compatible with ii.
      int prev = -1;
      for (int j = k - 1; j >= 0; --j) {
        const Chains& cba = best[j];
        if (std::all_of(cba.begin(), cba.end(),
                        [&](const Chain& c) { return CompatibleWithChain(ii, c); })) {
          prev = j;
          break;
        }
      }
      const Chains& prev_best = prev < 0 ? init : best[prev];
      const Chains& prev_best_assignment = best.empty() ? init : best.back();
      Chains cur = FindBest(lo + prev + 1, ii + 1, prev_best, prev_best_assignment);
      if (!status_.ok()) return {};
      MG_CHECK(Count(cur) == Count(prev_best) + (ii - (lo + prev)));
      best.push_back(std::move(cur));
    }
    return std::move(best.back());
  }

  // _find_best: the window [lo, hi) whose ranges before hi-1 are all incompatible with hi-1.
  Chains FindBest(int lo, int hi, const Chains& init, const Chains& prev_best_assignment) {
    const int find = hi - 1;
    for (int x = lo; x < find; ++x) MG_CHECK(!IsCompatible(At(x), At(find)));
    Chains best;
    int64_t best_cost = std::numeric_limits<int64_t>::max();
    for (size_t ii = 0; ii < init.size(); ++ii) {
      if (!CompatibleWithChain(find, init[ii])) continue;
      Chain extended = init[ii];
      extended.push_back(sorted_[find]);
      Chains candidate;
      if (hi - lo > 1) {
        Chains others;
        others.reserve(init.size() - 1);
        for (size_t j = 0; j < init.size(); ++j) {
          if (j != ii) others.push_back(init[j]);
        }
        candidate = Dp(lo, hi - 1, others);
        if (!status_.ok()) return {};
        candidate.push_back(std::move(extended));
      } else {
        candidate = init;
        candidate[ii] = std::move(extended);
      }
      const int64_t cost = Cost(candidate);
      if (cost < best_cost) {  // Python's min(): the first minimum wins
        best_cost = cost;
        best = std::move(candidate);
      }
    }
    Chains fresh = prev_best_assignment;
    fresh.push_back(Chain{sorted_[find]});
    if (Cost(fresh) < best_cost) best = std::move(fresh);
    return best;
  }

  const std::vector<LiveRange>& ranges_;
  const std::vector<int> sorted_;
  const DpLimits limits_;
  const std::chrono::steady_clock::time_point start_;
  int64_t calls_ = 0;
  absl::Status status_;
};

void CheckRanges(const std::vector<LiveRange>& ranges) {
  for (const LiveRange& r : ranges) MG_CHECK(r.defined <= r.used && r.size >= 0);
}

// GREEDY's scan over the chains, indexed: each range finds the chain memonger's linear scan
// would pick in O(log n) instead of O(chains). Chains are bucketed by their largest size (the
// distinct range sizes, ascending). Per bucket, a segment tree over chain numbers holds each
// member chain's last use (the minimum per node; nodes made on demand), so the lowest-numbered
// chain of a bucket whose last use is below d is one descent. Over the buckets, a segment tree
// of those minima finds the nearest bucket at or below (at or above) a size that has a chain
// with last use below d. The scan's choice, the compatible chain nearest in size with ties to
// the lowest number, is the lower-numbered of the best chains of those two buckets: no bucket
// between them and the range's size has a compatible chain.
class ChainIndex {
 public:
  static constexpr int kNoUse = std::numeric_limits<int>::max();

  ChainIndex(int buckets, int max_chains)
      : buckets_(PowerOfTwoAtLeast(buckets)), chains_(std::max(max_chains, 1)),
        root_(buckets_, -1), bucket_min_(2 * static_cast<size_t>(buckets_), kNoUse) {}

  // Chain `chain` is in `bucket` with last use `last_used` (kNoUse: it left the bucket).
  void Set(int bucket, int chain, int last_used) {
    root_[bucket] = SetAt(root_[bucket], 0, chains_ - 1, chain, last_used);
    size_t node = static_cast<size_t>(bucket) + buckets_;
    bucket_min_[node] = nodes_[root_[bucket]].min;
    for (node /= 2; node >= 1; node /= 2) {
      bucket_min_[node] = std::min(bucket_min_[2 * node], bucket_min_[2 * node + 1]);
    }
  }

  // The largest bucket <= b (smallest >= b with `above`) holding a chain with last use < d,
  // or -1.
  int NearestBucket(int b, int d, bool above) const {
    // Walk up from leaf b to the first node whose other side (towards the search) has a
    // chain below d, then down that side to the nearest such leaf.
    size_t node = static_cast<size_t>(b) + buckets_;
    if (bucket_min_[node] < d) return b;
    while (node > 1) {
      const bool is_right = node % 2 == 1;
      const size_t sibling = node ^ 1;
      if (is_right != above && bucket_min_[sibling] < d) {  // the sibling lies towards the search
        node = sibling;
        while (node < static_cast<size_t>(buckets_)) {
          // Nearest first: the right child when looking down, the left when looking up.
          const size_t near = above ? 2 * node : 2 * node + 1;
          node = bucket_min_[near] < d ? near : (near ^ 1);
        }
        return static_cast<int>(node - buckets_);
      }
      node /= 2;
    }
    return -1;
  }

  // The lowest-numbered chain of `bucket` with last use < d. REQUIRES: there is one.
  int LowestChain(int bucket, int d) const {
    int node = root_[bucket];
    int lo = 0;
    int hi = chains_ - 1;
    MG_CHECK(node >= 0 && nodes_[node].min < d);
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      const int left = nodes_[node].left;
      if (left >= 0 && nodes_[left].min < d) {
        node = left;
        hi = mid;
      } else {
        node = nodes_[node].right;
        lo = mid + 1;
      }
    }
    return lo;
  }

 private:
  struct Node {
    int left = -1;
    int right = -1;
    int min = kNoUse;
  };

  int SetAt(int node, int lo, int hi, int chain, int last_used) {
    if (node < 0) {
      node = static_cast<int>(nodes_.size());
      nodes_.push_back(Node{});
    }
    if (lo == hi) {
      nodes_[node].min = last_used;
      return node;
    }
    const int mid = lo + (hi - lo) / 2;
    if (chain <= mid) {
      const int child = SetAt(nodes_[node].left, lo, mid, chain, last_used);
      nodes_[node].left = child;
    } else {
      const int child = SetAt(nodes_[node].right, mid + 1, hi, chain, last_used);
      nodes_[node].right = child;
    }
    const int left = nodes_[node].left;
    const int right = nodes_[node].right;
    nodes_[node].min = std::min(left < 0 ? kNoUse : nodes_[left].min,
                                right < 0 ? kNoUse : nodes_[right].min);
    return node;
  }

  static int PowerOfTwoAtLeast(int n) {
    int p = 1;
    while (p < n) p *= 2;
    return p;
  }

  // Buckets padded to a power of two (the padding never holds a chain): the bucket tree is a
  // complete heap of 2 x buckets_ nodes, so a descent meets the leaves in order.
  int buckets_;
  int chains_;
  std::vector<int> root_;           // per bucket: its tree's root in nodes_, -1 while empty
  std::vector<Node> nodes_;
  std::vector<int> bucket_min_;     // heap-ordered: leaf b at buckets_ + b
};

}  // namespace

int64_t ChainsCost(const std::vector<LiveRange>& ranges, const Chains& chains) {
  int64_t total = 0;
  for (const Chain& chain : chains) total += ChainMax(ranges, chain);
  return total;
}

Chains AssignChainsGreedy(const std::vector<LiveRange>& ranges) {
  CheckRanges(ranges);
  std::vector<int64_t> sizes;
  sizes.reserve(ranges.size());
  for (const LiveRange& r : ranges) sizes.push_back(r.size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const auto bucket_of = [&](int64_t size) {
    return static_cast<int>(std::lower_bound(sizes.begin(), sizes.end(), size) - sizes.begin());
  };
  ChainIndex index(static_cast<int>(sizes.size()), static_cast<int>(ranges.size()));
  Chains chains;
  std::vector<int> chain_bucket;  // per chain: the bucket of its largest size
  for (int i : SortedByUsed(ranges)) {
    const LiveRange& r = ranges[i];
    const int own = bucket_of(r.size);
    // memonger's scan: among chains whose last member ends before r starts, the nearest in
    // size, ties to the first; the index answers it (see ChainIndex).
    int best = -1;
    int64_t best_distance = 0;
    for (const bool above : {false, true}) {
      const int bucket = index.NearestBucket(own, r.defined, above);
      if (bucket < 0) continue;
      const int chain = index.LowestChain(bucket, r.defined);
      const int64_t distance = std::abs(sizes[bucket] - r.size);
      if (best < 0 || distance < best_distance || (distance == best_distance && chain < best)) {
        best = chain;
        best_distance = distance;
      }
    }
    if (best >= 0) {
      chains[best].push_back(i);
      if (own > chain_bucket[best]) {  // its largest size grows: it moves bucket
        index.Set(chain_bucket[best], best, ChainIndex::kNoUse);
        chain_bucket[best] = own;
      }
      index.Set(chain_bucket[best], best, r.used);
    } else {
      best = static_cast<int>(chains.size());
      chains.push_back(Chain{i});
      chain_bucket.push_back(own);
      index.Set(own, best, r.used);
    }
  }
  return chains;
}

absl::StatusOr<Chains> AssignChainsDp(const std::vector<LiveRange>& ranges,
                                      const DpLimits& limits) {
  CheckRanges(ranges);
  MemongerDp dp(ranges, SortedByUsed(ranges), limits);
  return dp.Run();
}

absl::StatusOr<SharingGroups> AssignMemongerChains(const std::vector<SharingItem>& items,
                                                   bool dynamic_programming,
                                                   const DpLimits& limits) {
  // Devices in order of their first item; each device is one independent memonger problem.
  std::vector<graph::Device> devices;
  std::vector<std::vector<int>> items_of_device;
  for (size_t i = 0; i < items.size(); ++i) {
    const SharingItem& item = items[i];
    if (item.bytes < 0 || item.lifetime.first_step > item.lifetime.last_step) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sharing item for value ", item.root, " is invalid: lifetime [",
          item.lifetime.first_step, ", ", item.lifetime.last_step, "], bytes ", item.bytes));
    }
    auto it = std::find(devices.begin(), devices.end(), item.device);
    if (it == devices.end()) {
      devices.push_back(item.device);
      items_of_device.emplace_back();
      it = devices.end() - 1;
    }
    items_of_device[it - devices.begin()].push_back(static_cast<int>(i));
  }

  DpLimits budget = limits;  // one time budget for all devices
  if (!budget.since.has_value()) budget.since = std::chrono::steady_clock::now();
  SharingGroups groups;
  for (const std::vector<int>& members : items_of_device) {
    std::vector<LiveRange> ranges;
    ranges.reserve(members.size());
    for (int i : members) {
      ranges.push_back({items[i].lifetime.first_step, items[i].lifetime.last_step,
                        items[i].bytes});
    }
    Chains chains;
    if (dynamic_programming) {
      absl::StatusOr<Chains> dp = AssignChainsDp(ranges, budget);
      if (!dp.ok()) return dp.status();
      chains = *std::move(dp);
    } else {
      chains = AssignChainsGreedy(ranges);
    }
    for (const Chain& chain : chains) {
      std::vector<graph::ValueId> group;
      group.reserve(chain.size());
      for (int r : chain) group.push_back(items[members[r]].root);
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

absl::StatusOr<SharingGroups> PlanMemongerInterference(const graph::Graph& graph,
                                                       const Liveness& liveness,
                                                       const MemongerOptions& options,
                                                       const SharingRun& run,
                                                       bool dynamic_programming,
                                                       std::vector<std::string>* names) {
  MG_RETURN_IF_ERROR(CheckSerialExecution(run.execution,
                                          dynamic_programming ? "memonger-dp" : "memonger-greedy",
                                          SerialReliance::kInterference));
  DpLimits limits;
  limits.time_limit_seconds = run.time_limit_seconds;
  // memonger's compute_assignments: static blobs are left out of the chains and appended as
  // chains of their own; a blob nobody reads counts as used after every other (memonger's
  // max_live), so it ends its chain and sorts last.
  const std::vector<bool> is_static = StaticClasses(graph, liveness);
  std::vector<SharingItem> items;
  SharingGroups statics;
  for (SharingItem& item : SharingItems(graph, liveness, run.alignment)) {
    if (is_static[item.root]) {
      statics.push_back({item.root});
      continue;
    }
    bool read = false;
    for (graph::ValueId m : liveness.members[item.root]) {
      read = read || !graph.consumers(m).empty();
    }
    if (!read) item.lifetime.last_step = liveness.num_steps;
    if (options.size_blind) item.bytes = 1;  // memonger without blob_sizes: every size 1
    items.push_back(item);
  }
  MG_ASSIGN_OR_RETURN(SharingGroups groups,
                      AssignMemongerChains(items, dynamic_programming, limits));
  if (names != nullptr) {
    // compute_blob_assignments: every member of a chain of two or more takes the name of the
    // chain's last member.
    names->clear();
    for (const std::vector<graph::ValueId>& group : groups) {
      names->push_back(group.size() >= 2 ? graph.value(group.back()).name : std::string());
    }
    names->resize(groups.size() + statics.size());
  }
  groups.insert(groups.end(), statics.begin(), statics.end());
  return groups;
}

}  // namespace memonger

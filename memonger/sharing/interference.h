// memonger-greedy and memonger-dp: Caffe2 memonger's `optimize_interference` assignment of
// blobs to reuse chains, reproduced with its behaviour (named baselines, not improved).
//
// The problem: one LiveRange per alias class, `defined` = first step (first write), `used` =
// last step (last read), both inclusive, and its size. A *chain* is a list of ranges that share
// one buffer; its cost is its largest member; a plan's cost is the sum of its chains' costs.
//
//   Chains chains = AssignChainsGreedy({{1, 3, 10}, {3, 4, 1}, {5, 6, 1}, {5, 7, 10}});
//   // chains == {{0, 3}, {1, 2}}, ChainsCost(...) == 11
//
// Both algorithms first sort the ranges by `used` (stable: ties keep the caller's order), then:
//
// GREEDY (compute_assignments_greedy), per range in that order:
//   1. a chain is compatible when the range starts strictly after the chain's LAST member's
//      last use (`candidate.defined > last.used`; memonger's is_compatible looks at nothing
//      else);
//   2. among compatible chains take the one minimising |chain max - size| (first wins ties),
//      else open a new chain.
//   memonger scans every chain per range, O(ranges x chains): 42 s on a 400,000-op training
//   net. Here an index of the chains by largest size and last use finds the same chain in
//   O(log ranges) (interference.cc, ChainIndex), so O(ranges log ranges) in all; its memory is
//   a path of log2(ranges) + 1 nodes of 12 bytes per new chain and per chain moving to a larger
//   size, O(ranges log ranges) at worst (the 400,000-op net's run peaks at the same RSS as the
//   other planners').
//
// DYNAMIC_PROGRAMMING (compute_assignments_dp): best[i] = best chains for the prefix 0..i; for
//   range i, prev = the nearest prefix whose best solution is compatible with i in every chain
//   (-1: the initial chains); the window prev+1..i is then solved by trying i on every
//   compatible chain of best[prev] and recursively running the whole DP for the rest of the
//   window on the other chains, plus best[i-1] with i in a new chain; the cheapest (first wins
//   ties) is kept. No memoization: exponential in the window size and the number of chains, as
//   in memonger. memonger's docstring calls it optimal; it is not (docs/sharing-planners.md has
//   the 5-range counterexample). A budget guards it: DeadlineExceeded when the recursion takes
//   more calls or more time than allowed.
//
// Deviation from memonger: memonger ignored devices. Here ranges on different devices never
// share: PlanMemongerInterference runs the algorithm once per device (in order of each device's
// first class) and concatenates the chains. With one device this is exactly memonger.
#ifndef MEMONGER_MEMONGER_SHARING_INTERFERENCE_H_
#define MEMONGER_MEMONGER_SHARING_INTERFERENCE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/sharing/sharing.h"

namespace memonger {

// memonger's LiveRange. REQUIRES (MG_CHECKed): defined <= used, size >= 0.
struct LiveRange {
  int defined = 0;    // first step writing the value (inclusive)
  int used = 0;       // last step reading it (inclusive)
  int64_t size = 0;
};

// One chain: indices into the ranges given to the assigner, in the order they were appended.
using Chain = std::vector<int>;
using Chains = std::vector<Chain>;

// memonger's is_compatible: only the chain's last member is looked at.
inline bool IsCompatible(const LiveRange& candidate, const LiveRange& chain_last) {
  return candidate.defined > chain_last.used;
}

// Sum over chains of the largest member size (memonger's get_memory_usage).
int64_t ChainsCost(const std::vector<LiveRange>& ranges, const Chains& chains);

Chains AssignChainsGreedy(const std::vector<LiveRange>& ranges);

struct DpLimits {
  double time_limit_seconds = 10;
  int64_t max_calls = 200'000'000;  // recursive compute_assignments_dp calls
  // Where the time limit is counted from (one budget over several calls, as over a plan's
  // devices); unset: the call's own start.
  std::optional<std::chrono::steady_clock::time_point> since;
};
// DeadlineExceeded when `limits` are exceeded (the message suggests exact-sharing).
absl::StatusOr<Chains> AssignChainsDp(const std::vector<LiveRange>& ranges,
                                      const DpLimits& limits = {});

// The assignment on raw items: one LiveRange per item (defined = lifetime.first_step, used =
// lifetime.last_step, size = bytes), run per device; groups hold the items' roots. Every group
// is a chain: its members' lifetimes are pairwise disjoint. InvalidArgument for an item with
// negative bytes or first_step > last_step.
absl::StatusOr<SharingGroups> AssignMemongerChains(const std::vector<SharingItem>& items,
                                                   bool dynamic_programming,
                                                   const DpLimits& limits = {});

// The planner: liveness -> one LiveRange per planned alias class (defined = first_step, used =
// last_step, or after every step for a class nobody reads; size = class bytes aligned to
// run.alignment, or 1 with options.size_blind) -> chains per device -> groups of alias-class
// roots, then each static class (StaticClasses) alone, as memonger appends its static blobs. `names`, when given, gets one
// entry per group: the name memonger gives the chain's blobs (its last member's), or "" for a
// group of one. InvalidArgument for the parallel execution model (optimize_interference
// assumes the serial order it computed); DeadlineExceeded from memonger-dp as above, within
// run.time_limit_seconds.
absl::StatusOr<SharingGroups> PlanMemongerInterference(const graph::Graph& graph,
                                                       const Liveness& liveness,
                                                       const MemongerOptions& options,
                                                       const SharingRun& run,
                                                       bool dynamic_programming,
                                                       std::vector<std::string>* names = nullptr);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_INTERFERENCE_H_

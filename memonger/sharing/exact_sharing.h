// exact-sharing: a provably optimal assignment of alias classes to shared buffers, for
// memonger's objective (the sum of buffer sizes, a buffer being as large as its largest member).
//
//   MG_ASSIGN_OR_RETURN(ExactSharingResult r, PlanExactSharing(items, /*time_limit_seconds=*/10));
//   // r.groups: roots sharing one buffer each; r.cost: sum of group maxima;
//   // r.proven_optimal: the search finished, no grouping is cheaper.
//
// The problem: partition the items into groups whose lifetimes are pairwise disjoint ([first,
// last] inclusive: a and b are disjoint iff a.last < b.first or b.last < a.first) and whose
// devices are equal, minimising the sum over groups of the largest item bytes ("max-coloring"
// of an interval graph, NP-hard). Any such group is also a valid memonger chain (sorted by last
// step, each member starts after the previous one's last read), so the optimum here is the
// optimum of memonger's chain model too, which memonger-dp claimed and does not reach.
//
// The algorithm (per device; devices never share, so they are independent problems):
//   1. Sort items by (bytes desc, first_step, root, input position).
//   2. Incumbent: the better of first-fit (each item into the first group it fits, else a new
//      group) and least-damage fit (into the fitting group that the fewest later overlapping
//      items still fit), both in that order. Stop at once if it meets the root bound. A
//      timeout returns the best grouping found so far. An index of free groups
//      (free_group_index.h) finds the group first fit would take, ruling most out 64 at a
//      time, rather than trying every group in turn (thousands per item on a 100,000-op
//      training net). First fit also stops at the time limit, and the items it has not reached
//      are grouped by a quick rule (first_fit_cut).
//   3. Depth-first branch and bound over the items in that order. Since items come largest
//      first, a group's cost is its first item's bytes and never changes: an item either joins
//      an existing group where it overlaps no member (cost + 0) or opens a new group (cost +
//      its bytes). Joins are tried first, least damage first; a new group last.
//   4. Pruning, for item k with O = the later items overlapping k and C_g = the later items
//      group g still fits (each rule keeps at least one optimal completion; proofs in the .cc):
//      - bound: cost + NewGroupBound(k..) >= incumbent (below);
//      - free fit: if k fits g and C_g and O are disjoint, only "join g" is explored;
//      - join vs join: "join g1" dominates "join g2" when C_g1 <= C_g2 <= C_g1 | O (ties, i.e.
//        equal sets, keep the lower index: interchangeable groups are tried once);
//      - join vs new: "join g" dominates "new group" when every later item outside O fits g;
//      - state table: the state after k-1 items is the multiset of the groups' C sets over
//        the items >= k (group costs are fixed); a state already explored at no higher cost
//        is not explored again.
//
// The lower bound (the "layered clique bound"). With R the remaining items, let Q(C, s) be
// the remaining items of a maximal clique C (all live at one step) with bytes >= s, and
// F(C, s) the existing groups that at least one item of Q(C, s) fits. Then
//     cost of the new groups >= integral over s > 0 of  max_C max(0, |Q(C, s)| - |F(C, s)|) ds.
// Soundness: the items of Q(C, s) overlap pairwise, so they lie in distinct groups; at most
// |F(C, s)| of them lie in existing groups (each such group fits the item it holds), so at
// least |Q(C, s)| - |F(C, s)| lie in distinct new groups, each with a maximum >= s. Hence for
// every s the number N(s) of new groups with maximum >= s is at least the integrand, and the
// sum of the new groups' maxima is the integral of N(s) ds over s > 0. A step's live set lies
// inside a maximal clique's and the integrand only grows with the set, so maximal cliques
// (at most one per item) stand for every step. With no group yet this is the integral of the
// largest clique among the items >= s, at least the classic max-live-bytes bound (max of
// integrals <= integral of max); on the counterexample it gives 17 where max-live gives 16.
// Cost per node: O(sum over maximal cliques of their remaining items x group words).
//
// Measured (bench/sharing_bench.cc, docs/sharing-planners.md): random sets of 60 values live
// 1-6 steps, sizes 1-100: most are proven in milliseconds; 2-3 of 40 needed more than 1 s
// (one about 40 s, one not proven within 60 s). Problems above kMaxSearchItems items on one
// device get the incumbent only (proven when it meets the root bound).
// Deterministic: the same input gives the same groups, except where the time limit cuts the
// search at a machine-dependent point.
#ifndef MEMONGER_MEMONGER_SHARING_EXACT_SHARING_H_
#define MEMONGER_MEMONGER_SHARING_EXACT_SHARING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/sharing/sharing.h"

namespace memonger {

// Larger single-device problems are not searched (the search keeps several n x n bit
// matrices and the maximal cliques).
inline constexpr int kMaxSearchItems = 2048;

struct ExactSharingResult {
  // Roots sharing one buffer; devices in order of their first item, groups of a device in
  // descending cost, members by first_step. Every item exactly once.
  SharingGroups groups;
  bool proven_optimal = false;  // the search finished: no valid grouping is cheaper
  int64_t cost = 0;             // sum over groups of the largest member bytes
  int64_t lower_bound = 0;      // the root bound summed over devices; == cost when proven
  int64_t nodes = 0;            // search nodes visited
  // Items the time limit kept first fit from reaching (step 2), grouped by a quick rule
  // instead: each joins the group whose members all end earliest if they end before it
  // starts, else opens one. 0 where first fit ran to the end.
  int64_t first_fit_cut = 0;
};

// InvalidArgument for an item with negative bytes or first_step > last_step, or a negative
// time limit. A time limit of 0 returns the incumbent.
//
// `extra_conflicts`: pairs of items (indices into `items`) that may not share although their
// lifetimes are disjoint: for a parallel executor, pairs not ordered by happens-before
// (ParallelConflicts). The search, its pruning rules and the clique bound hold for any conflict
// graph that contains the interval overlaps: the rules are stated on the sets of items each
// group still fits, and a clique of overlapping lifetimes is a clique of conflicts.
absl::StatusOr<ExactSharingResult> PlanExactSharing(
    const std::vector<SharingItem>& items, double time_limit_seconds,
    const std::vector<std::pair<int, int>>& extra_conflicts = {});

// The pairs of `items` (same device, disjoint lifetimes) that a parallel executor may still run
// at once: the later one's writer does not wait for every op touching the earlier one
// (HappensBefore). O(items^2 x touchers) queries, grouped by source; PlanMemory refuses more
// than kMaxSearchItems items under --execution parallel.
std::vector<std::pair<int, int>> ParallelConflicts(const graph::Graph& graph,
                                                   const Liveness& liveness,
                                                   const std::vector<SharingItem>& items);

// The layered clique bound of the items (summed over devices): no grouping costs less.
// REQUIRES: items valid as above.
int64_t SharingLowerBound(const std::vector<SharingItem>& items);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_EXACT_SHARING_H_

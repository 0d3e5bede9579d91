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
//      group) and least-damage fit (into the compatible group that removes the fewest options
//      from later items that overlap it), both in that order. A timeout returns the incumbent.
//   3. Depth-first branch and bound over the items in that order. Since items come largest
//      first, a group's cost is its first item's bytes and never changes: an item either joins
//      an existing group where it overlaps no member (cost + 0) or opens a new group (cost +
//      its bytes). Joins are tried first, least damage first; a new group last.
//   4. Pruning: cost + LowerBound(remaining) >= incumbent (below). Dominance: if the item fits
//      a group g and every later item overlapping it already conflicts with g, joining g is at
//      least as good as any alternative (moving the item into g from wherever an optimal
//      solution puts it keeps that solution valid and never raises a group's maximum, since
//      g's maximum is >= the item), so only that branch is explored. Symmetry: two groups
//      compatible with exactly the same later items lead to isomorphic subtrees; only the first
//      is tried.
//
// The lower bound (the "layered clique bound"). With G existing groups, A_t assigned items
// live at step t, and R the remaining items, let R_t(>= s) be the remaining items live at t
// with bytes >= s. Then
//     cost of the new groups >= integral over s > 0 of  max_t max(0, |R_t(>= s)| - (G - A_t)) ds.
// Soundness: items live at a common step t overlap pairwise, so they lie in distinct groups. A
// group holds at most one item live at t, so exactly G - A_t existing groups are free at t; at
// most that many of R_t(>= s) join existing groups and the others lie in distinct new groups,
// each of which therefore has a maximum >= s. Hence for every s the number N(s) of new groups
// with maximum >= s is at least the integrand, and the sum of the new groups' maxima equals
// the integral of N(s) ds over s > 0. With G = 0 this is at least the classic bound max_t
// (bytes live at t), since the max of integrals is at most the integral of the max. Computed
// in O(remaining lifetimes' lengths in compressed steps) per node: add the remaining items in
// descending bytes and keep the running maximum.
//
// Complexity: exponential in the worst case; the time limit bounds it. Problems above
// kMaxSearchItems items on one device get the incumbent only (proven when it meets the bound).
// Deterministic: the same input gives the same groups, except where the time limit cuts the
// search at a machine-dependent point.
#ifndef MEMONGER_MEMONGER_EXACT_SHARING_H_
#define MEMONGER_MEMONGER_EXACT_SHARING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/sharing.h"

namespace memonger {

// Larger single-device problems are not searched (the search keeps several n x n bit
// matrices and the maximal cliques).
inline constexpr int kMaxSearchItems = 2048;

struct ExactSharingResult {
  // Roots sharing one buffer; groups in descending cost, members by first_step. Every item
  // exactly once.
  SharingGroups groups;
  bool proven_optimal = false;  // the search finished: no valid grouping is cheaper
  int64_t cost = 0;             // sum over groups of the largest member bytes
  int64_t lower_bound = 0;      // the root bound (== cost when proven)
  int64_t nodes = 0;            // search nodes visited
};

// InvalidArgument for an item with negative bytes or first_step > last_step, or a negative
// time limit. A time limit of 0 returns the incumbent.
absl::StatusOr<ExactSharingResult> PlanExactSharing(const std::vector<SharingItem>& items,
                                                    double time_limit_seconds);

// The layered clique bound of the items (summed over devices): no grouping costs less.
// REQUIRES: items valid as above.
int64_t SharingLowerBound(const std::vector<SharingItem>& items);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_EXACT_SHARING_H_

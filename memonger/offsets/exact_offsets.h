// exact: offsets that are provably optimal, found by branch and bound (the ideas of MiniMalloc,
// Moffitt, ASPLOS 2023, without a constraint solver).
//
//   OffsetSolution incumbent = ...;  // any valid placement, e.g. from best-fit
//   ExactOffsetsOptions options;
//   options.time_limit_seconds = 10;
//   MG_ASSIGN_OR_RETURN(OffsetSolution exact, PlaceExact(problem, incumbent, options));
//   // exact.height <= incumbent's height; exact.proven_optimal: no placement is lower.
//
// The outer loop searches the arena height H between the lower bound LB (OffsetLowerBound: the
// most bytes live at one step) and the incumbent's height. Each probe asks a decision question,
// "is there a placement within H?", with a node limit:
//   1. Probe H = LB first (or the caller's proven bound, ExactOffsetsOptions::
//      proven_lower_bound, where it is higher): most real and benchmark problems have an optimum
//      equal to LB, and a plan that reaches it is optimal, so the search stops there.
//   2. If that probe runs out of nodes, binary search the heights above it with a smaller
//      limit (an unsettled probe counts as infeasible for the rest of the round): plans found
//      there lower the upper end early, so a time limit still returns a good plan.
//   3. Double the node limit and repeat. A plan found within H of height h lowers the upper
//      end to h - g; a probe whose search finishes without a plan proves optimum > H and
//      raises the lower end to H + g. g is the granule: the gcd of every size, cut to an
//      alignment that does not divide it. The offsets the search produces are sums of sizes
//      rounded up to alignments, hence multiples of g, so the optimum is one too (with sizes
//      in KiB, g is 1 KiB at alignment 1 or 256, not 1 or 256 bytes).
//   4. When the range is empty the best plan is optimal. When the time limit cuts a probe, the
//      best plan so far is returned (possibly the incumbent) with proven_optimal = false.
//
// The decision search for H is a depth-first search over partial placements.
//   - Time is cut into sections: maximal step ranges where the live set is constant. Each
//     item spans a contiguous range of sections. The cut of a section boundary is the number of
//     unplaced items live on both sides of it.
//   - Each unplaced item i has a minimum offset m(i): the top of the highest placed item that
//     overlaps i in time, rounded up to i's alignment. A child places one unplaced item at
//     exactly m(i), so every offset is 0 or an aligned top of an item below ("bottom-left").
//   - Candidates are tried in order of (m(i), rank(i)); rank comes from a static preorder
//     (below). Canonical rule: a placement's (offset, rank) must be >= the previous one's, so
//     each layout is built in only one order.
//   - Dominance: with h* = min over unplaced k of m(k) + bytes(k), a candidate with m(i) >= h*
//     is skipped (it would leave a hole below it that k fits in).
//   - Section inference: a section's floor is the top of the last item placed in it, raised to
//     the least m(k) over its unplaced items; the section is dead when max(floor, offset of the
//     last placement) + (bytes of its unplaced items) > H. Only the sections a placement
//     touches are rescanned; for the others a max tree over the sections' unplaced bytes
//     suffices, and a candidate whose offset plus the fullest section's unplaced bytes exceeds
//     H ends the node (every later candidate is at least as high).
//   - Temporal decomposition: when a placement drops a cut to zero, the unplaced items fall
//     into groups that share no step; each group is solved on its own (fresh preorder), and the
//     node fails if any group fails. Groups never interact, so no backtracking across them.
//   - Preorders (ties by item index): "WAT" (lifetime width in steps, area, section total:
//     each descending), "TAW" and "TWA" (MiniMalloc's defaults), tried in turn with the round's
//     node limit (2n in the first round), so that one lucky order finds a feasible plan
//     quickly; a run that exhausts its tree within the limit proves the probe infeasible.
//     With `threads` > 1 the three run side by side (util/ordered_race.h) where each may take
//     at least min_nodes_side_by_side nodes; the first preorder in the list that settles the
//     probe answers it, as in turn, so the plan and proof do not depend on the thread count.
//     The widths are in the problem's steps: a trace whose times were compressed to distinct
//     boundaries loses them, and some hard traces then take far longer (docs/offset-planners.md).
//
// Soundness (the search is complete for "is there a placement within H?"). Every placement
// within H can be compacted: while some item can move to a lower aligned offset without
// overlapping an item that shares a step with it, move it there. The sum of offsets falls, so
// this ends, at a placement S within H where no item can move down at all. Sort S by (offset,
// rank); zero-byte items are left out of the search (they go to offset 0 and conflict with
// nothing). Follow that order in the tree: when the next item i is due, every item that shares
// a step with i and lies below it in S is already placed, and every placed item that shares a
// step with i lies below it, so m(i) equals i's offset in S (a lower aligned offset would be
// free, so S could move i down). Hence no child on this path is pruned:
//   - canonical: the path follows (offset, rank) order by construction;
//   - dominance: if some unplaced k had m(k) + bytes(k) <= m(i), then in S, k sits at >= m(i)
//     and [m(k), m(k) + bytes(k)) is free for k (items placed so far lie below m(k), the rest
//     lie at >= m(i)), so k could move down, contradicting compaction;
//   - section inference: items still unplaced sit, in S, at or above every placed item they
//     share a step with and at or above the last placed offset; items live in one section
//     share a step, so their bytes are disjoint and fit between the floor and H;
//   - decomposition: a group's items share no step with other groups' items, so compaction
//     of S restricted to one group still holds, and the argument above applies within each
//     group with its own order (the fresh order only widens the search).
// So the search finds a plan whenever one exists within H, and any plan it reports is built
// without overlaps by construction (and checked again by CheckOffsetSolution). An "infeasible"
// answer therefore proves optimum > H.
//
// Complexity: the decision problem is NP-complete (dynamic storage allocation), so the search
// is exponential in the worst case; the time limit bounds it. Per node: O(g) to scan the g items
// of the current group and O(c log c) to order the c candidates that pass dominance and the
// canonical rule, O(overlaps of the placed item + sections touched x log sections) to update
// minimum offsets, floors and a max tree of the sections' unplaced bytes, O(log sections) for
// inference outside the touched sections. Memory: O(n + sections + overlapping pairs), plus the
// candidate lists along the current path. Problems above kMaxExactItems items (after dropping
// zero-byte items) or kMaxExactOverlaps overlapping pairs are not searched: the incumbent is
// returned, proven only when it already meets the lower bound.
//
// Not guaranteed: proving optimality within the time limit (some instances, where the optimum
// is above LB, need a full proof of infeasibility for every height below it). Deterministic:
// the same input gives the same plan for any thread count, except where the time limit cuts
// the search. Threads shorten a probe to its slowest preorder up to the one that settles it
// (at most 3 x); the perfect-packing rounds side by side scale with the threads.
#ifndef MEMONGER_MEMONGER_OFFSETS_EXACT_OFFSETS_H_
#define MEMONGER_MEMONGER_OFFSETS_EXACT_OFFSETS_H_

#include <cstdint>
#include <atomic>
#include <functional>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// Larger problems get the incumbent only: the search keeps every overlapping pair and every
// (item, section) membership (a few hundred MB at these limits). It recurses once per placement
// on a thread of its own whose stack is sized for the problem (util/deep_stack.h).
inline constexpr int kMaxExactItems = 16384;
inline constexpr int64_t kMaxExactOverlaps = int64_t{16} << 20;

struct ExactProgress {
  int64_t lower_bound = 0;     // proven: no placement is lower (LB or the caller's bound, raised
                               // by infeasible probes)
  int64_t best_height = 0;     // the lowest plan found so far
  int64_t probing_height = 0;  // the height H being decided now
  double seconds = 0;          // since PlaceExact started
  int64_t nodes = 0;           // search nodes visited so far, over all probes
};

struct ExactOffsetsOptions {
  double time_limit_seconds = 10;
  // The perfect-packing search's rounds, and each probe's three preorders, run side by side on
  // up to this many threads; the plan and proof are those of one thread (util/ordered_race.h),
  // except where the time limit cuts the search.
  int threads = 1;
  // A probe runs its preorders side by side only where each may search at least this many
  // nodes: below, starting the threads costs more than the search saves.
  int64_t min_nodes_side_by_side = int64_t{1} << 14;
  // Called from the search at most about once per second (and never after PlaceExact returns),
  // on one of the search's threads, never on two at once.
  std::function<void(const ExactProgress&)> progress;
  // The caller's request to stop (a Ctrl-C in Python): read where the clock is, and once set
  // the search ends as at its time limit, with the best found. nullptr: none.
  const std::atomic<bool>* stop = nullptr;
  // A lower bound proven by the caller (peak_window.h's window optima); the search starts
  // there instead of at OffsetLowerBound where it is higher, and an incumbent at it is optimal.
  int64_t proven_lower_bound = 0;
};

// Returns a placement no higher than `incumbent` (which must be valid for `problem`; an empty
// `incumbent.offsets` means "none": items stacked in input order). proven_optimal is set when
// the search proved that no placement is lower, or the plan meets LB or the caller's
// proven_lower_bound. Zero-byte items get offset 0.
// InvalidArgument: an item with last_step < first_step, negative bytes, an alignment that is not
// a power of two, bytes not a multiple of the alignment; an incumbent with the wrong number of
// offsets or that fails CheckOffsetSolution; a negative time limit; threads < 1.
absl::StatusOr<OffsetSolution> PlaceExact(const OffsetProblem& problem,
                                          const OffsetSolution& incumbent,
                                          const ExactOffsetsOptions& options);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_EXACT_OFFSETS_H_

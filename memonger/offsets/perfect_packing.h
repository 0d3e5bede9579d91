// Perfect packing: the exact search for problems that leave no slack at the lower bound, where
// every step that has a live item has exactly LB bytes live (OffsetLowerBound). A plan at LB
// then fills every byte of every such step, so no placement may leave a hole below another,
// and a far narrower search than the general branch and bound (exact_offsets.h) is complete.
//
//   MG_ASSIGN_OR_RETURN(PerfectPacking p, SolvePerfectPacking(problem, deadline));
//   if (p.outcome == PerfectPacking::kFound) ... p.offsets reach the lower bound
//
// Such problems arise where buffers are cut from one region over time, as in the guillotine
// workload (workloads/workload_guillotine.h): greedy placement leaves holes there, and the
// general search and MiniMalloc's alike stay 15-20% above the optimum from a few hundred
// buffers on.
//
// Search. Steps are compressed to sections (between distinct lifetime boundaries); the state
// is a skyline: every section is filled from 0 up to h(s), with no hole. A run is a maximal
// range of sections at one height that unplaced items join (some unplaced item lives in both
// sections of each inner boundary); a well is a run whose sides are closed: beside each end is
// a higher section, a section nothing lives in, or a boundary no unplaced item crosses. In a
// plan at LB the bottom cells of a well at height h are covered by items at offset h (the bytes
// below are taken) that lie inside the well (beyond its ends, no item can sit at h), so its
// first cell is covered by an unplaced item that starts there, and its last by one that ends
// there, each inside the well, aligned at h and fitting under LB. The search branches on the
// well end with the fewest such items (fail first: none ends the node, one is forced; ties to
// the lowest well, then the leftmost; the lowest run is always a well), one child per item,
// with items equal in lifetime, bytes and alignment tried once per node (they could trade
// places). Any plan at LB is found this way: follow it, and the item covering the chosen cell
// is among the children. So an exhausted search proves that no plan reaches LB.
//
// Pruning: after a placement, the runs at and beside the item must still be coverable: with a
// closed left side some item that fits starts at the run's first section, with a closed right
// side one ends at its last, and a well's items must partition it (a reachability pass).
//
// Decomposition: when a placement leaves no unplaced item crossing some boundary, the two sides
// are independent (they share no unplaced item, and each side's skyline is what it is): each
// is solved on its own, and a side that fails fails that placement at once, without trying the
// other side's alternatives. Guillotine-cut instances split this way again and again, which is
// what keeps their search from thrashing between independent parts.
//
// Backjumping: a failure carries its region, the sections whose state decided it (the well and
// the neighbours whose heights were read; a node's region spans its well's and its children's,
// or after a backjump only the failed child's).
// Every choice at a node lies inside its well, so where a child's failure region misses the
// well, no other choice there can change it: the node fails at once with that region, and the
// search backs up past placements made elsewhere, to the first one the failure depends on.
// Without this, a dead end in one place is re-proved under every combination of the choices
// made in other places since (thrashing).
//
// Failed states: a part whose state (which of the items starting in it are placed: that
// decides its skyline and its unplaced items) has failed, for a reason inside the part, fails
// again wherever the round meets it, as when two items trade places below it. Each round
// remembers up to kMaxPerfectPackingFailedStates of them by a 128-bit Zobrist key (a false
// match, which would drop a state that has a plan, has a probability of about 2^-128 per pair
// of states).
//
// Restarts: a round searches with a node limit; rounds alternate forwards and backwards in time
// (a plan serves both ways) and candidate orders (largest first, longest first, then seeded
// shuffles, every other pair of these with the candidates whose tops would lie flush with their
// neighbours' first), with node limits of 4n times the Luby sequence (1 1 2 1 1 2 4 ..., a pair
// of rounds per term). `threads` run rounds side by side (util/ordered_race.h); the answer is the
// first decisive round's, as on one thread.
//
// Complexity: per node O(sections + the candidates at the wells' ends); exponential in the
// worst case, bounded by the deadline and the node limit. Memory O(n + sections) per round, its
// failed states (at most kMaxPerfectPackingFailedStates of 24 bytes plus the table's overhead)
// and a stack of 2 KiB per item (the search recurses once per placement): problems above
// kMaxPerfectPackingItems items are not searched. Deterministic: the same problem gives the
// same plan for any thread count, except where the deadline stops the search.
#ifndef MEMONGER_MEMONGER_OFFSETS_PERFECT_PACKING_H_
#define MEMONGER_MEMONGER_OFFSETS_PERFECT_PACKING_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// The search keeps one stack frame per placed item on its path: each thread reserves 2 KiB of
// stack per item (128 MiB at this limit; only the depth reached is touched).
inline constexpr int64_t kMaxPerfectPackingItems = int64_t{1} << 16;

// Failed states a round remembers: at most about 3.3 MiB each round, and a thread runs one round
// at a time, so even 256 threads stay under 1 GiB. It must not depend on the thread count (it
// changes which nodes are searched, so the plan would). 2^18 found no plan sooner on guillotine
// instances of 500 to 1,000 pieces.
inline constexpr int64_t kMaxPerfectPackingFailedStates = int64_t{1} << 16;

struct PerfectPacking {
  enum Outcome {
    kNotApplicable,  // some step with a live item has fewer than LB bytes live
    kTooLarge,       // more than kMaxPerfectPackingItems items: not searched
    kFound,          // `offsets` reach the lower bound
    kInfeasible,     // proven: no placement reaches the lower bound
    kStopped,        // the deadline or the node limit came first
  };
  Outcome outcome = kNotApplicable;
  std::vector<int64_t> offsets;  // kFound only; zero-byte items at 0
  // Of the rounds up to the one answering, counted as on one thread: nodes searched; of those,
  // nodes a round had already seen fail (repeats), and nodes left with choices untried because
  // no choice there could change what failed below (jumps).
  int64_t nodes = 0;
  int64_t repeats = 0;
  int64_t jumps = 0;
};

// The search restarts in rounds (other candidate orders, backwards in time, node limits that
// follow the Luby sequence); `threads` run rounds side by side, and the answer is the first
// decisive round's, the same as on one thread (util/ordered_race.h) unless the deadline cuts.
// `node_limit` bounds the nodes of all rounds together, counted as on one thread (a round
// stops at its first node over its share, so the count may pass the limit by one).
// InvalidArgument for a malformed problem (ValidateOffsetProblem) or threads < 1;
// ResourceExhausted when no thread with the search's stack can be started.
absl::StatusOr<PerfectPacking> SolvePerfectPacking(
    const OffsetProblem& problem,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt,
    int64_t node_limit = std::numeric_limits<int64_t>::max(), int threads = 1);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_PERFECT_PACKING_H_

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
// is a skyline: every section is filled from 0 up to h(s), with no hole. Take the lowest cell
// of the skyline, leftmost among the lowest: section s* at height h(s*). In a plan at LB some
// item covers that cell; its offset is h(s*) (the bytes below are taken), it starts at s*
// (the sections to the left are higher, and it could not sit in them), and every section it
// lives in is at h(s*) (none is lower, and a higher one is taken at h(s*)). So the children
// are exactly the unplaced items starting at s* whose sections are all at h(s*), whose offset
// h(s*) is aligned for them and that fit under LB; items equal in lifetime, bytes and alignment
// are tried once per node (they could trade places). Candidates go largest first (bytes, then
// lifetime). Any plan at LB is found this way: follow it, and the item covering each lowest
// cell is among the children. So an exhausted search proves that no plan reaches LB.
//
// Complexity: per node O(sections + the candidates' lifetimes); exponential in the worst case,
// bounded by the deadline and a node limit. Memory O(n + sections). Deterministic: the same
// problem gives the same plan, except where the deadline stops the search.
#ifndef MEMONGER_MEMONGER_OFFSETS_PERFECT_PACKING_H_
#define MEMONGER_MEMONGER_OFFSETS_PERFECT_PACKING_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

struct PerfectPacking {
  enum Outcome {
    kNotApplicable,  // some step with a live item has fewer than LB bytes live
    kFound,          // `offsets` reach the lower bound
    kInfeasible,     // proven: no placement reaches the lower bound
    kStopped,        // the deadline or the node limit came first
  };
  Outcome outcome = kNotApplicable;
  std::vector<int64_t> offsets;  // kFound only; zero-byte items at 0
  int64_t nodes = 0;  // of the rounds up to the one answering, counted as on one thread
};

// The search restarts in rounds (other candidate orders, backwards in time, a node limit that
// doubles every fourth round); `threads` run rounds side by side, and the answer is the first
// decisive round's, the same as on one thread (util/ordered_race.h) unless the deadline cuts.
// `node_limit` bounds the nodes of all rounds together, counted as on one thread.
// InvalidArgument for a malformed problem (ValidateOffsetProblem) or threads < 1.
absl::StatusOr<PerfectPacking> SolvePerfectPacking(
    const OffsetProblem& problem,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt,
    int64_t node_limit = std::numeric_limits<int64_t>::max(), int threads = 1);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_PERFECT_PACKING_H_

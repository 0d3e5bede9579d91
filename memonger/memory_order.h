// The memory-aware order (`--order memory-aware`): the schedule with the lowest peak we can
// find, where the peak is exactly the lower bound every planner reports for a schedule (the
// largest sum of aligned live alias-class bytes at one step, LiveBytesPerStep). A lower peak of
// the schedule is a lower arena for every offset planner that reaches its bound.
//
//   MemoryOrderOptions options;            // alignment, views, plan_static as the plan's
//   MG_ASSIGN_OR_RETURN(MemoryOrder best, FindMemoryAwareOrder(graph, options));
//   // best.ops: a valid order; best.peak_bytes <= the peak of every order tried;
//   // best.proven_optimal: no valid order has a lower peak
//
// The memory model. Each planned alias class c is live from the first step of an op that
// touches it (writes or reads a member) to the last, or from step 0 when a member is a graph
// input, or to the last step when a member is a graph output or parameter gradient; liveness.h
// defines exactly that, and the model is checked against it (tests). Running the ops of a set S
// leaves a fixed set of classes live whatever the order inside S, so the memory after S, M(S),
// and the memory while op o runs next, M(S) + the bytes of the classes o starts, depend on S
// alone: the search can work on sets of ops rather than on orders.
//
// The portfolio (every member is evaluated with the model; the lowest peak wins, ties go to the
// earlier member):
//   given, topological, longest-path  the orders of schedule.h;
//   lpmf   list scheduling, least peak memory first: among ready ops the one whose step peaks
//          lowest, then the one that frees the most (PyTorch Inductor's LPMF);
//   bfs, dfs  Kahn's algorithm with a FIFO queue and with a LIFO stack;
//   seed   the caller's orders for the same net at other sizes (MemoryOrderOptions::seeds);
//   local-search  hill climbing from the best of those: an op at or near the peak step moves to
//          another position its dependencies allow; a move is kept when the peak drops (or
//          stays and the sum of live bytes over the steps drops). Deterministic: bounded by a
//          move count, and by the time limit as a safety net.
//   exact  Serenity's dynamic programming over the sets of ops already run (each set closed
//          under predecessors), with divide and conquer at cut ops (an op every other op must
//          precede or follow): the cut ops split the graph into segments that every valid order
//          runs one after another, with the same memory at each cut, so each segment is solved
//          alone. A segment of at most kMaxExactSegmentOps ops is searched state by state,
//          layer by layer (sets of k ops, then k + 1), keeping for each set the lowest peak of
//          any order that runs it and pruning sets whose peak already reaches the best order's
//          peak in that segment; the segment is then proven. Larger segments keep the best
//          heuristic order.
// The result is proven optimal when the segment where its peak occurs was searched to the end
// (no order can beat a segment's own optimum), or when its peak equals what every order needs:
// at each op's step, the classes it touches, those live from the first step to the last, and
// those with a toucher among the op's ancestors and one among its descendants (for graphs of
// at most kMaxExactGraphOps ops; checked before the exact search, which it then skips).
//
// Complexity: the heuristics O(ops log ops + touches) each; local search O(moves x (ops +
// touches)); the exact search at most kMaxExactStates sets per segment (each O(ops + touches of
// one op)), and O(ops^2 / 64) bits of reachability to find the cut ops (done for graphs of at
// most kMaxExactGraphOps ops). Bounded by `time_limit_seconds`: a search cut short keeps what it
// has and says it is not proven.
//
// What it does not guarantee: optimality on large segments, or for a different planner
// objective (sharing planners minimise the sum of buffer sizes, not the peak).
#ifndef MEMONGER_MEMONGER_MEMORY_ORDER_H_
#define MEMONGER_MEMONGER_MEMORY_ORDER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"

namespace memonger {

inline constexpr int kMaxExactSegmentOps = 128;     // one bit per op of a segment
inline constexpr int64_t kMaxExactStates = 1000000;  // sets kept per segment
inline constexpr int kMaxExactGraphOps = 8192;      // reachability bits for the cut ops

struct MemoryOrderOptions {
  int64_t alignment = 256;   // as the plan's: the peak counts aligned class bytes
  LivenessOptions liveness;  // plan_static, views: as the plan's
  double time_limit_seconds = 1;
  int local_search_moves = 20000;  // accepted and rejected moves together
  bool exact = true;               // run the exact search where it applies
  // Orders found for the same net at other sizes (--fit's earlier values), tried as portfolio
  // members ("seed") after the orders above; one that is not a valid order of this graph (a
  // net whose ops differ) is passed over.
  std::vector<std::vector<graph::OpId>> seeds;
  // The caller's request to stop (PlanOptions::stop): read where the clock is; the search
  // returns the best order found so far. nullptr: none.
  const std::atomic<bool>* stop = nullptr;
};

struct MemoryOrder {
  std::vector<graph::OpId> ops;  // ops[step], a valid order
  int64_t peak_bytes = 0;        // the lower bound of that order
  int64_t given_peak_bytes = 0;  // the lower bound of the given order
  std::string method;            // the portfolio member that found it ("exact", "lpmf", ...)
  bool proven_optimal = false;
  // The exact search ran out of time or states on a segment: a property of the net's shape
  // more than of its sizes, so a caller planning the same net at other sizes may skip it.
  bool exact_cut_short = false;
  // Every member's peak, in the order they ran ("exact" is the peak of the spliced order).
  std::vector<std::pair<std::string, int64_t>> tried;
  double seconds = 0;
};

// FailedPrecondition for a value without a type; InvalidArgument for options out of range or
// a graph whose sizes overflow. An empty graph gives an empty order.
absl::StatusOr<MemoryOrder> FindMemoryAwareOrder(const graph::Graph& graph,
                                                 const MemoryOrderOptions& options);

// The peak (lower bound) of `ops` under the same model; for tests and tools comparing orders.
// InvalidArgument when `ops` is not a valid order of the graph.
absl::StatusOr<int64_t> OrderPeakBytes(const graph::Graph& graph, const std::vector<graph::OpId>& ops,
                                       const MemoryOrderOptions& options);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_MEMORY_ORDER_H_

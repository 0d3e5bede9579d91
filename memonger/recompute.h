// Recomputation for training (`--recompute sqrt|cheap|auto`): forward ops whose outputs the backward
// pass reads are run a second time just before the backward pass needs them, so that their
// outputs need not stay live from the forward pass to the backward pass. Memory for compute:
// the lower bound drops, the FLOPs of the recomputed ops (op_flops.h) are added.
//
//   RecomputeOptions options;
//   options.kind = RecomputeKind::kAuto;
//   options.budget_bytes = int64_t{24} << 30;   // the lower bound to reach
//   MG_ASSIGN_OR_RETURN(RecomputeChoice choice, ChooseRecomputation(training, options));
//   MG_ASSIGN_OR_RETURN(Graph rewritten, ApplyRecomputation(training, choice.ops));
//   // plan `rewritten` like any net: its given order runs the recomputations in place
//
// The rewrite. For each chosen op p, a clone (same type, attributes and kernel; names with
// `_recompute`) writes fresh copies of p's outputs. A clone reads the clones of chosen ops and the
// original values of the others; every backward op that read an output of p reads the copy instead;
// forward readers keep the original. Clones are listed right before the first op that reads their
// outputs (backward ops or other clones), or earlier, before an op that overwrites a param the
// clone reads in place (an update in the backward pass, graph/update_in_backward.h: after it, the
// name is the new value), in forward order, so the rewritten net's given order is the schedule: the
// original outputs die after their last forward reader, the copies live from the clone to their
// last backward reader, and the originals a clone reads live until that clone. Same kernels on the
// same bytes: the gradients are bit-identical (tests).
//
// Candidates: forward ops (not gradient ops, not random ops such as Dropout, whose rerun would
// draw another mask than its gradient reads) without control inputs, some of whose outputs the
// backward pass reads, whose outputs are activations written once (no graph outputs, parameter
// gradients, workspaces, in-place writes or values overwritten in place, no view aliasing),
// and whose inputs are params, constants, graph inputs or activations written once and never
// overwritten in place (a view of another value may be read: it holds the bytes it views as
// long as a clone reads it). Other ops are never recomputed: an in-place chain would need its
// whole chain recomputed to read the right version, a view's clone would alias its input.
//
// The choice:
//   sqrt  Chen et al. 2016: the candidates in forward order cut into segments of ceil(sqrt(n));
//         the last op of each segment is kept (its outputs are the checkpoint), the others are
//         recomputed; nothing where that would not lower the peak. Ignores the budget.
//   cheap selective recomputation (Korthikanti et al. 2022, Megatron): only the memory-bound
//         candidates, whose outputs cost bytes rather than arithmetic (IsCheapToRecompute), to
//         the lowest peak the greedy below reaches with them: its climb past any budget (moves
//         while one lowers the peak or the live bytes summed over the steps; three quarters of
//         the time), the rung with the lowest peak, then the chosen ops that peak does not need
//         dropped, most expensive first. Ignores the budget; nothing where no such op lowers
//         the peak.
//   auto  the least extra FLOPs that bring the lower bound within budget_bytes:
//         - exact, when there are at most max_exact_candidates candidates: a depth-first search
//           over the candidates (most expensive first), cut where the FLOPs so far reach the
//           best choice found, proven when it ends;
//         - otherwise a portfolio: Chen's segmenting at sqrt(n) first (whatever the time, so
//           auto never ends above sqrt), cheap's choice (a quarter of the time left), greedy
//           with half of the time left (add the op that lowers the peak most per FLOP, or, on
//           a plateau, the bytes above the budget summed over the steps; then drop the chosen
//           ops, most expensive first, that the budget does not need; the clock is read before
//           each move is weighed; a round re-weighs only the moves of the last full round that
//           stay ahead, as lazy greedy does), where cheap's choice does not fit also greedy
//           going on from it, and Chen's segmenting at every other length with the rest; the
//           cheapest that fits kept.
//         When nothing fits, the result says so with the lowest lower bound found (then the
//         fewest FLOPs): the smallest budget this search reached, proven the least only where
//         the exact search finished.
//
// Complexity: one evaluation of a choice is O((values + ops) log ops) on a model of the
// rewritten net's lifetimes (checked against liveness in the tests); greedy O(candidates^2)
// evaluations at worst (a full round per move; lazy rounds make it far fewer: --fit on
// densenet121 spent 1.9 s recomputing with full rounds, 1.1 s with lazy ones), the segmenting O(candidates) evaluations, the exact search at most
// 2^candidates, bounded by `time_limit_seconds`.
//
// What it does not guarantee: optimality beyond the exact search's size; recomputing an op
// more than once, or from a checkpoint the backward pass also needs, is not considered
// (Checkmate's full space).
#ifndef MEMONGER_MEMONGER_RECOMPUTE_H_
#define MEMONGER_MEMONGER_RECOMPUTE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"
#include "memonger/planner.h"

namespace memonger {

enum class RecomputeKind { kNone, kSqrt, kAuto, kCheap };
absl::string_view RecomputeName(RecomputeKind kind);  // "none", "sqrt", "auto", "cheap"
absl::StatusOr<RecomputeKind> ParseRecompute(absl::string_view name);

struct RecomputeOptions {
  RecomputeKind kind = RecomputeKind::kAuto;
  int64_t budget_bytes = -1;  // auto: the lower bound to reach; required
  int64_t alignment = 256;    // as the plan's
  LivenessOptions liveness;   // as the plan's
  double time_limit_seconds = 1;
  int max_exact_candidates = 24;
  // auto: the first choice of the portfolio that fits (sqrt segments, the other segment
  // lengths, cheap's choice, greedy: the cheap evaluations first) ends the search: whether
  // recomputation fits, not its fewest FLOPs (--fit asks that at every value it tries, and the
  // FLOPs only at its answer).
  bool first_fit = false;
};

struct RecomputeChoice {
  std::vector<graph::OpId> ops;         // forward ops recomputed, ascending
  int64_t lower_bound_bytes = 0;        // of the rewritten net
  int64_t original_lower_bound_bytes = 0;
  int64_t extra_flops = 0;              // the recomputed ops' FLOPs
  int64_t forward_flops = 0;            // every forward op's FLOPs
  int candidates = 0;
  std::string method;  // "none", "sqrt", "cheap", "exact", "greedy", "segments"
  bool fits = true;                     // auto: lower_bound_bytes <= budget_bytes
  bool proven_optimal = false;          // auto: no choice fits with fewer FLOPs
};

// For a search over sizes of one net (--fit): the choices one search at one size found, tried
// at the others. The bytes of a net's values grow together with a batch or sequence size, so
// the choices that lower one size's peak most per FLOP lower the next size's too; a size then
// costs evaluations of the ladder's rungs (microseconds each) rather than a portfolio search
// that runs to its time limit wherever nothing fits (0.5 s a size on densenet121).
//
//   MG_ASSIGN_OR_RETURN(RecomputeLadder ladder, ClimbRecomputation(net_at_78, options));
//   MG_ASSIGN_OR_RETURN(RecomputeChoice c, ChooseFromLadder(net_at_190, ladder, options));
//
// The rungs: the greedy's choice after each of its moves (as `auto`'s greedy, towards
// options.budget_bytes, but on past it while a move lowers the peak, until none does or the
// time limit), and Chen's segments of every length. ChooseFromLadder takes, at its net, the
// rung with the fewest FLOPs that fits options.budget_bytes, then drops its ops the budget does
// not need (most expensive first, as auto's greedy does); where none fits, the lowest peak.
// What it does not guarantee: what `auto` would find at that size (the greedy's moves there
// may differ); no choice fits where none of the rungs does.
struct RecomputeLadder {
  int num_ops = 0;
  std::vector<graph::OpId> candidates;  // the net's, ascending
  std::vector<std::vector<graph::OpId>> rungs;
};
absl::StatusOr<RecomputeLadder> ClimbRecomputation(const graph::Graph& graph,
                                                   const RecomputeOptions& options);
// kLowestPeak: the rung with the lowest peak instead, nothing dropped: whether some choice
// fits, with the most room left for the placement (a peak just under the budget can take the
// offset planner its whole time limit to place within it).
enum class LadderPick { kFewestFlops, kLowestPeak };
// FailedPrecondition where `graph` has other ops or candidates than the ladder's net.
absl::StatusOr<RecomputeChoice> ChooseFromLadder(const graph::Graph& graph,
                                                 const RecomputeLadder& ladder,
                                                 const RecomputeOptions& options,
                                                 LadderPick pick = LadderPick::kFewestFlops);

// cheap's ops: an elementwise, normalisation, pooling, reduction or data-movement type (a list:
// a type not on it, such as a product, a convolution, attention, a recurrent op or Einsum, is
// never cheap) doing at most kCheapFlopsPerElement FLOPs (op_flops.h) per element it writes,
// or of its largest input where that is more (a 3x3 pooling of stride 1 is not cheap, of
// stride 2 it is).
inline constexpr int64_t kCheapFlopsPerElement = 5;
bool IsCheapToRecompute(const graph::Graph& graph, const graph::Op& op);

// The forward ops that may be recomputed (see the header), ascending.
std::vector<graph::OpId> RecomputeCandidates(const graph::Graph& graph,
                                             const LivenessOptions& liveness);

// FailedPrecondition for an untyped graph or one without gradient ops; InvalidArgument for
// auto without a budget. A choice that does not fit is not an error: `fits` says so.
absl::StatusOr<RecomputeChoice> ChooseRecomputation(const graph::Graph& graph,
                                                    const RecomputeOptions& options);

// The lower bound of the net rewritten for `ops` (the model; tests hold it against liveness).
// InvalidArgument when an op is not a candidate.
absl::StatusOr<int64_t> RecomputedLowerBound(const graph::Graph& graph,
                                             const std::vector<graph::OpId>& ops,
                                             const RecomputeOptions& options);

// The rewritten net (see the header). InvalidArgument when an op is not a candidate.
absl::StatusOr<graph::Graph> ApplyRecomputation(const graph::Graph& graph,
                                                const std::vector<graph::OpId>& ops);

// The recomputation options of a plan's options: their alignment, the caller's liveness options
// without in-place reuse (the model counts every value apart from its inputs: a rewrite within
// the budget is within it with that reuse too, which only lowers a step's bytes; the
// fewest-FLOPs choice is the fewest without it), and kRecomputeChoice of the time limit.
RecomputeOptions RecomputeOptionsFor(const PlanOptions& options, RecomputeKind kind,
                                     int64_t budget_bytes);

// Choose, rewrite and plan in one call: the options' alignment, views and static placement
// are the recomputation's too, and the choice gets half of the time limit. auto aims the lower
// bound at `budget_bytes`. When auto cannot fit, ResourceExhausted names the lowest lower bound
// it reached (the smallest budget recomputation could meet).
struct RecomputedPlan {
  graph::Graph graph;  // the rewritten net (the input when nothing is recomputed)
  Plan plan;           // plan.recompute says what was done
  RecomputeChoice choice;
};
absl::StatusOr<RecomputedPlan> PlanWithRecomputation(const graph::Graph& graph,
                                                     const PlanOptions& options,
                                                     RecomputeKind kind, int64_t budget_bytes);

// The second half of PlanWithRecomputation, for a caller that chose already (with
// RecomputeOptionsFor(options, ...), whether or not the choice fits): the rewrite and its plan,
// with the time limit less the choice's share.
absl::StatusOr<RecomputedPlan> PlanChosenRecomputation(const graph::Graph& graph,
                                                       const PlanOptions& options,
                                                       RecomputeChoice choice);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_RECOMPUTE_H_

// PlanSymbolic: one offset plan for a whole box of bindings (`--dim N=256..65536`).
//
//   SymbolicPlanOptions sym;
//   sym.box = box;  sym.reference = box.High();
//   sym.graph_at = [&](const SymbolBindings& b) { return LoadTypedAt(b); };  // for the checks
//   MG_ASSIGN_OR_RETURN(SymbolicPlan plan, PlanSymbolic(graph, shapes, options, sym));
//
// The algorithm:
// 1. Schedule, liveness and alias classes come from the graph typed at `reference`: they do
//    not depend on sizes (a view that would depend on them is caught by step 5). Items are the
//    classes, their sizes expressions (graph/symbolic_shapes.h).
// 2. A piece (sub-box) is planned by running the chosen offset planner on the concrete sizes
//    at a planning binding, sorting the items by the offsets it chose (region, offset, end), and
//    giving each item the earlier items it conflicts with, minus those already below another
//    of them (a transitive reduction): the max-plus rule of symbolic_plan.h then keeps every
//    conflicting pair apart at every binding, whatever the sizes, because sizes never shrink
//    when a symbol grows and never go negative. `planning_bindings` bindings are tried per
//    piece (from its high corner to its low one, geometrically spaced); the one whose order
//    has the smallest worst ratio arena / lower bound over the piece's sample bindings is kept.
// 3. While the worst piece is above `target_ratio` and fewer than `max_pieces` exist, it is
//    cut in two at the geometric mean of its widest symbol (widest as hi / lo), and both
//    halves are planned again.
// 4. CheckSymbolicPlan (symbolic_check.h) proves the result free of overlaps.
// 5. With `graph_at`, the net is typed at every corner of the box and at `check_bindings` more
//    bindings: every value's size must equal its expression there (a fallback size must not
//    be exceeded), and the alias classes must be the same; a difference is an error naming
//    the value.
//
// Cost: per planning binding, one concrete offset planning plus O(n^2) conflict scans in the
// worst case for n items (n <= util::kMaxSymbolicItems); per sample binding O(values + edges).
// Not guaranteed: the ratio target (a piece that cannot be cut further, or the piece limit,
// leaves it above); optimality at any binding; the memory-aware order (refused: it depends on
// sizes), sharing planners (refused: they decide at one size), the parallel execution model.
#ifndef MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_PLANNER_H_
#define MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_PLANNER_H_

#include <functional>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/symbol_box.h"
#include "graph/symbolic_shapes.h"
#include "memonger/planner.h"
#include "memonger/symbolic/symbolic_plan.h"

namespace memonger {

struct SymbolicPlanOptions {
  graph::SymbolBox box;
  graph::SymbolBindings reference;  // the binding `graph` is typed at, inside the box
  double target_ratio = 1.02;       // worst arena / lower bound a piece should keep
  int max_pieces = 12;              // <= util::kMaxSymbolicPieces
  int samples_per_piece = 24;       // sample bindings that rate a piece (its corners included)
  int planning_bindings = 5;        // tried per piece, high corner to low, geometrically spaced
  // The net typed at a binding; nullptr-like (empty): no size checks (step 5 above).
  std::function<absl::StatusOr<graph::Graph>(const graph::SymbolBindings&)> graph_at;
  int check_bindings = 4;  // besides the box's corners
};

// What a plan for a range needs of the options, decided by them alone (the CLI checks it
// before any work, a usage error): an offset planner (auto, best-fit, greedy-by-size, exact:
// the sharing planners decide buffers from the sizes at one binding), the order given, not
// the memory-aware one (it depends on sizes), and a serial executor. Unimplemented otherwise.
absl::Status CheckRangePlanOptions(PlannerKind planner, OrderKind order,
                                   ExecutionModel execution);

absl::StatusOr<SymbolicPlan> PlanSymbolic(const graph::Graph& graph,
                                          const graph::SymbolicShapes& shapes,
                                          const PlanOptions& options,
                                          const SymbolicPlanOptions& sym);

// The whole path for a net that can be typed at any binding of `box`: the net typed at the
// box's high corner (the reference), its symbolic shapes (graph/symbolic_shapes.h; `fixed`
// binds the other symbols and inputs; with `upper_bound_fallback` a value without an
// expression takes its size at the high corner), then PlanSymbolic with `graph_at` for the
// checks and the other SymbolicPlanOptions at their defaults.
struct RangePlan {
  graph::Graph reference;
  graph::SymbolicShapes shapes;
  SymbolicPlan plan;
};
absl::StatusOr<RangePlan> PlanRange(
    const std::function<absl::StatusOr<graph::Graph>(const graph::SymbolBindings&)>& graph_at,
    const graph::ShapeBindings& fixed, const graph::SymbolBox& box, const PlanOptions& options,
    bool upper_bound_fallback);

// The sample bindings of a box: its corners, and a geometric grid of about `count` points
// (per symbol about count^(1/k) values, rounded, deduplicated), sorted.
std::vector<graph::SymbolBindings> SampleBindings(const graph::SymbolBox& box, int count);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_PLANNER_H_

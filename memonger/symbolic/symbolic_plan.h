// SymbolicPlan: one offset plan for every binding of a box of symbols (issue #13), and Bind,
// which turns it into the concrete Plan at one binding without planning again.
//
//   MG_ASSIGN_OR_RETURN(SymbolicPlan sym, PlanSymbolic(graph, shapes, options, sym_options));
//   MG_ASSIGN_OR_RETURN(Plan at_5000, sym.Bind({{"N", 5000}}));   // O(values), verified by tests
//
// The items are the alias classes of the offset planners (one per class, in root-id order,
// buffer i is item i); their sizes are expressions of the symbols (the class's largest member,
// rounded up to the item's alignment). The box is cut into pieces (sub-boxes); in each piece
// the items are placed in a fixed order, and each item sits on a list of earlier items, the
// ones it conflicts with (lifetimes that intersect, or another device) that are not already
// below another item of its list:
//
//   offset(b) = align_b(max(0, max over a in below(b) of offset(a) + size(a)))
//
// a max-plus expression of sizes. Sizes never decrease when a symbol grows and are never
// negative, so when every pair of conflicting items is ordered by a chain of `below` lists, the
// later one starts at or above the earlier one's end at every binding: no binding can overlap.
// CheckSymbolicPlan (symbolic_check.h) proves exactly that; PlanSymbolic builds the lists so.
//
// The arena at a binding is the largest end, its formula a max of polynomials (ArenaFormula).
// Inside a piece it never decreases as a symbol grows; from one piece to the next it may (the
// pieces' orders differ): MaxArena and LargestFitting take that into account.
#ifndef MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_PLAN_H_
#define MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_PLAN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/dim_expr.h"
#include "graph/graph.h"
#include "graph/symbol_box.h"
#include "memonger/device_bytes.h"
#include "memonger/plan.h"

namespace memonger {

struct SymbolicItem {
  graph::ValueId root = graph::kNone;  // the alias class's root
  graph::Device device;
  Lifetime lifetime;
  int64_t alignment = 1;     // the item's offset is a multiple of this
  graph::DimExpr class_bytes;  // the largest member's bytes (not rounded)
  graph::DimExpr bytes;        // class_bytes rounded up to `alignment`: the item's height
  int in_place_joins = 0;      // outputs in the class that took a dying input's bytes
};

// The arena as a formula: the max of `polynomials` (each a DimExpr without max atoms at the
// top), or `too_long` when more than util::kMaxFormulaPolynomials remain after dropping those
// another one dominates everywhere.
struct ArenaFormula {
  std::vector<graph::DimExpr> polynomials;
  bool too_long = false;
  std::string ToString(bool pretty = false) const;  // "max(a, b)" or "a"
};

struct SymbolicPiece {
  graph::SymbolBox box;                   // a sub-box of the plan's box
  graph::SymbolBindings planned_at;       // the binding whose concrete plan gave the order
  std::vector<int32_t> order;             // items, in placement order
  std::vector<std::vector<int32_t>> below;  // per item: the items it sits on
  // Quality over the piece's sample bindings: arena / lower bound at each.
  double worst_ratio = 0;
  double mean_ratio = 0;
  graph::SymbolBindings worst_at;
  int samples = 0;
  // The arena of this piece as a formula (SymbolicPlan::Formula), once computed.
  std::optional<ArenaFormula> formula;
};

struct SymbolicPlan {
  graph::SymbolBox box;
  Plan base;  // the plan at `reference`: schedule, lifetimes, classes, options; offsets unset
  graph::SymbolBindings reference;
  std::vector<SymbolicItem> items;     // in root-id order; buffer i of a bound plan is item i
  std::vector<int32_t> item_of_value;  // per value: its class's item, -1 when not planned
  graph::DimExpr static_bytes;         // params and constants outside the arena
  graph::DimExpr trainable_bytes;      // params a training step updates (Plan::trainable_bytes)
  std::vector<std::string> fallback;   // per value: why its size is a bound ("" when exact)
  std::vector<SymbolicPiece> pieces;   // they cover the box; the first containing a binding wins

  // The piece a binding falls in; InvalidArgument outside the box.
  absl::StatusOr<int> PieceFor(const graph::SymbolBindings& dims) const;
  // The concrete plan at `dims`: item sizes evaluated, offsets by the max-plus rule, buffers,
  // steps' live bytes, lower bound, naive and static bytes, peak step and values, arena.
  // InvalidArgument outside the box or on overflow. O(values + steps + below lists); allocates
  // only the result.
  absl::StatusOr<Plan> Bind(const graph::SymbolBindings& dims) const;
  // Arena and lower bound at `dims` without building a plan. `scratch` is reused.
  struct Extent {
    int64_t arena = 0;
    int64_t lower_bound = 0;
  };
  absl::StatusOr<Extent> Measure(const graph::SymbolBindings& dims,
                                 std::vector<int64_t>& scratch) const;
  // The same with `piece`'s order, which need not be one of `pieces` (the planner rates
  // candidates with it); `dims` must lie in the plan's box.
  // Device bytes at `dims` (device_bytes.h): the arena as Measure gives it, the static bytes and
  // the optimizer's state from their expressions.
  absl::StatusOr<DeviceBytes> DeviceBytesAt(const graph::SymbolBindings& dims, Optimizer optimizer,
                                            std::vector<int64_t>& scratch) const;
  absl::StatusOr<Extent> MeasureWith(const SymbolicPiece& piece, const graph::SymbolBindings& dims,
                                     std::vector<int64_t>& scratch) const;
  // The arena of piece `piece` as a max of polynomials (its stored formula when it has one).
  absl::StatusOr<ArenaFormula> Formula(int piece) const;

  // The largest arena over the whole box: inside a piece the arena never decreases as a symbol
  // grows, so each piece's is at its high corner; across pieces it may drop (each piece has its
  // own order), so the box's is the largest of those. What one arena for every binding needs.
  absl::StatusOr<int64_t> MaxArena() const;

  // The largest value v of `symbol` such that bytes(b) <= budget at every binding b from the
  // box's low end of `symbol` up to v, the other symbols as in `at`; nullopt when the low end
  // does not fit. `bytes` must not decrease as the symbol grows inside a piece (the arena, or
  // the arena plus the static bytes); it may across pieces, so each piece is searched on its
  // own, in order: a bisection inside the first piece that does not fit at its high end.
  absl::StatusOr<std::optional<int64_t>> LargestFitting(
      const std::string& symbol, graph::SymbolBindings at, int64_t budget,
      const std::function<absl::StatusOr<int64_t>(const graph::SymbolBindings&)>& bytes) const;
};

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_PLAN_H_

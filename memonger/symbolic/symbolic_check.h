// CheckSymbolicPlan: proves a symbolic plan free of overlaps at every binding of its box,
// independently of the planner that made it.
//
// For every piece: its order lists every item once, each `below` list names only earlier
// items, and every pair of items that conflict (lifetimes that intersect on one device, or two
// devices: regions are stacked) is ordered by a chain of `below` lists. Sizes are non-negative
// and non-decreasing in every symbol (DimExpr), so along a chain each item starts at or above
// the end of the one before it at every binding: the pair cannot overlap anywhere. A pair not
// so ordered is refused, naming both items and, where one is found among the piece's corners
// and sample bindings, a binding at which they do overlap; where none is found the plan is
// still refused (unproven). Also refused: a piece outside the plan's box, two pieces that
// overlap, pieces that do not cover the box (counted exactly: disjoint pieces inside the box
// cover it when they hold as many bindings; sampled where the count exceeds 128 bits), an item
// size that may be negative.
//
// Cost: O(n^2 / 64) words of memory and O(n * (n / 64 + edges)) time per piece for n items.
#ifndef MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_CHECK_H_
#define MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_CHECK_H_

#include "absl/status/status.h"
#include "graph/graph.h"
#include "memonger/symbolic/symbolic_plan.h"

namespace memonger {

// `graph` names the items in messages.
absl::Status CheckSymbolicPlan(const graph::Graph& graph, const SymbolicPlan& plan);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SYMBOLIC_SYMBOLIC_CHECK_H_

// The text a person reads about a symbolic plan: its pieces, how close each stays to the lower
// bound, the arena as a formula of the symbols, the arena at the box's corners beside what
// planning for the maximum reserves, and, with a budget, the largest value of each symbol that
// fits its device bytes, solved from the plan (inside a piece the arena never decreases when a
// symbol grows, nor do the bytes outside it, so a binary search over the plan's own bytes is
// exact).
#ifndef MEMONGER_REPORT_SYMBOLIC_SUMMARY_H_
#define MEMONGER_REPORT_SYMBOLIC_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/symbolic/symbolic_plan.h"

namespace memonger {

struct SymbolFit {
  std::string symbol;
  graph::SymbolBindings others;   // the other symbols, at their low end
  std::optional<int64_t> largest;  // nullopt: not even the low end fits
  DeviceBytes at_largest;  // at `largest`
};

// For each symbol of the box, the largest value whose device bytes (device_bytes.h) fit
// `budget`, and every smaller one's too, with the other symbols at their low end
// (SymbolicPlan::LargestFitting). O(pieces + log(range)) arena measures per symbol.
absl::StatusOr<std::vector<SymbolFit>> LargestFits(const SymbolicPlan& plan, int64_t budget,
                                                   Optimizer optimizer = Optimizer::kNone);

// `budget` < 0: none. `graph` is the net typed at plan.reference.
// An arena formula for people: without alignment rounding where that can be removed, else
// exact ("max(4*n^2 + 512*n, ...)").
std::string ReadableFormula(const ArenaFormula& formula);

absl::StatusOr<std::string> SymbolicPlanToText(const graph::Graph& graph, const SymbolicPlan& plan,
                                               int64_t budget,
                                               Optimizer optimizer = Optimizer::kNone);

}  // namespace memonger

#endif  // MEMONGER_REPORT_SYMBOLIC_SUMMARY_H_

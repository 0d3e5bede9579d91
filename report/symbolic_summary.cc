#include "report/symbolic_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/bytes.h"
#include "util/status_macros.h"

namespace memonger {

namespace {

std::string BindingText(const graph::SymbolBindings& b) {
  return absl::StrJoin(b, ", ", [](std::string* out, const auto& kv) {
    absl::StrAppend(out, kv.first, "=", kv.second);
  });
}

}  // namespace

std::string ReadableFormula(const ArenaFormula& formula) {
  if (formula.too_long) return formula.ToString(/*pretty=*/true);
  std::vector<graph::DimExpr> readable;
  for (const graph::DimExpr& p : formula.polynomials) {
    absl::StatusOr<graph::DimExpr> r = graph::WithoutRounding(p);
    if (!r.ok()) return formula.ToString(/*pretty=*/true);
    readable.push_back(*r);
  }
  ArenaFormula approx{readable, false};
  return approx.ToString(/*pretty=*/true);
}

absl::StatusOr<std::vector<SymbolFit>> LargestFits(const SymbolicPlan& plan, int64_t budget,
                                                   Optimizer optimizer) {
  std::vector<SymbolFit> fits;
  std::vector<int64_t> scratch;
  auto device = [&](const graph::SymbolBindings& at) -> absl::StatusOr<int64_t> {
    MG_ASSIGN_OR_RETURN(const DeviceBytes bytes, plan.DeviceBytesAt(at, optimizer, scratch));
    return bytes.total();
  };
  for (const graph::SymbolRange& r : plan.box.ranges) {
    SymbolFit fit;
    fit.symbol = r.symbol;
    graph::SymbolBindings at = plan.box.Low();
    for (const auto& [symbol, value] : at) {
      if (symbol != r.symbol) fit.others[symbol] = value;
    }
    MG_ASSIGN_OR_RETURN(fit.largest, plan.LargestFitting(r.symbol, at, budget, device));
    if (fit.largest.has_value()) {
      at[r.symbol] = *fit.largest;
      MG_ASSIGN_OR_RETURN(fit.at_largest, plan.DeviceBytesAt(at, optimizer, scratch));
    }
    fits.push_back(std::move(fit));
  }
  return fits;
}

absl::StatusOr<std::string> SymbolicPlanToText(const graph::Graph& graph, const SymbolicPlan& plan,
                                               int64_t budget, Optimizer optimizer) {
  std::string out;
  int fallback = 0;
  for (const std::string& f : plan.fallback) fallback += f.empty() ? 0 : 1;
  absl::StrAppendFormat(&out, "symbolic plan for %s: %s, %d alias classes, %d piece%s\n",
                        plan.box.ToString(), plan.base.planner, plan.items.size(),
                        plan.pieces.size(), plan.pieces.size() == 1 ? "" : "s");
  absl::StrAppendFormat(&out, "  %-28s %-18s %9s %9s  %s\n", "piece", "planned at", "worst/LB",
                        "mean/LB", "arena (bytes, before alignment rounding)");
  for (int p = 0; p < static_cast<int>(plan.pieces.size()); ++p) {
    const SymbolicPiece& piece = plan.pieces[p];
    MG_ASSIGN_OR_RETURN(ArenaFormula formula, plan.Formula(p));
    absl::StrAppendFormat(&out, "  %-28s %-18s %9.4f %9.4f  %s\n", piece.box.ToString(),
                          BindingText(piece.planned_at), piece.worst_ratio, piece.mean_ratio,
                          ReadableFormula(formula));
  }
  std::vector<int64_t> scratch;
  MG_ASSIGN_OR_RETURN(SymbolicPlan::Extent low, plan.Measure(plan.box.Low(), scratch));
  MG_ASSIGN_OR_RETURN(SymbolicPlan::Extent high, plan.Measure(plan.box.High(), scratch));
  absl::StrAppendFormat(&out, "arena: %s at %s (lower bound %s), %s at %s (lower bound %s)\n",
                        util::FormatBytes(low.arena), BindingText(plan.box.Low()),
                        util::FormatBytes(low.lower_bound), util::FormatBytes(high.arena),
                        BindingText(plan.box.High()), util::FormatBytes(high.lower_bound));
  MG_ASSIGN_OR_RETURN(const int64_t most, plan.MaxArena());
  if (most > high.arena) {
    absl::StrAppendFormat(&out, "one arena for every binding: %s (a piece needs more inside the "
                          "range than the high corner does)\n", util::FormatBytes(most));
  }
  if (low.lower_bound > 0) {
    absl::StrAppendFormat(&out,
                          "planning for the maximum (one arena of %s) wastes %.1fx the lower "
                          "bound at %s\n",
                          util::FormatBytes(high.arena),
                          static_cast<double>(high.arena) / low.lower_bound,
                          BindingText(plan.box.Low()));
  } else {
    // No ratio to a lower bound of 0 bytes (a size of 0 empties every value).
    absl::StrAppendFormat(&out,
                          "planning for the maximum (one arena of %s) wastes all of it at %s, "
                          "where nothing needs memory\n",
                          util::FormatBytes(high.arena), BindingText(plan.box.Low()));
  }
  if (fallback > 0) {
    absl::StrAppendFormat(&out,
                          "%d value%s sized at the range's upper bound (no expression): ",
                          fallback, fallback == 1 ? "" : "s");
    for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
      if (plan.fallback[v].empty()) continue;
      absl::StrAppend(&out, "'", graph.value(v).DisplayName(), "' (", plan.fallback[v], ")\n");
      break;
    }
  }
  if (budget >= 0) {
    MG_ASSIGN_OR_RETURN(std::vector<SymbolFit> fits, LargestFits(plan, budget, optimizer));
    for (const SymbolFit& fit : fits) {
      const std::string others =
          fit.others.empty() ? "" : absl::StrCat(" (", BindingText(fit.others), ")");
      if (fit.largest.has_value()) {
        absl::StrAppendFormat(&out,
                              "budget %s: the largest %s that fits (with every smaller one) is "
                              "%d%s, device %s (%s)\n",
                              util::FormatBytes(budget), fit.symbol, *fit.largest, others,
                              util::FormatBytes(fit.at_largest.total()),
                              DeviceBytesToText(fit.at_largest));
      } else {
        absl::StrAppendFormat(&out, "budget %s: no %s in the range fits%s\n",
                              util::FormatBytes(budget), fit.symbol, others);
      }
    }
  }
  return out;
}

}  // namespace memonger

#include "report/what_if_range.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "util/bytes.h"
#include "util/status_macros.h"
#include "workloads/workloads.h"

namespace memonger {

absl::StatusOr<std::vector<WhatIfRangeRow>> PlanVariantsOverRange(
    const std::vector<WhatIfVariant>& variants, const PlanOptions& options,
    const graph::SymbolBox& box, int64_t budget, Optimizer optimizer) {
  std::vector<WhatIfRangeRow> rows;
  for (const WhatIfVariant& variant : variants) {
    auto fail = [&](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(variant.label.empty() ? "the workload" : variant.label,
                                                 ": ", s.message()));
    };
    graph::SymbolBindings values;
    absl::StatusOr<graph::Graph> built = graph::BuildSymbolicWorkload(variant.spec, &values);
    if (!built.ok()) return fail(built.status());
    graph::ShapeBindings fixed;
    for (const auto& [symbol, value] : values) {
      if (box.Find(symbol) == nullptr) fixed.dims[symbol] = value;
    }
    for (const graph::SymbolRange& r : box.ranges) {
      if (values.count(r.symbol) == 0) {
        return fail(absl::InvalidArgumentError(
            absl::StrCat("the workload has no symbol ", r.symbol, " (attention: n, batch)")));
      }
    }
    auto graph_at = [&](const graph::SymbolBindings& at) {
      graph::WorkloadSpec spec = variant.spec;
      for (const auto& [symbol, value] : at) spec = graph::WithParam(spec, symbol, absl::StrCat(value));
      return graph::BuildSymbolicWorkload(spec, nullptr);
    };
    PlanOptions variant_options = options;
    variant_options.model_name = graph::WorkloadSpecToString(variant.spec);
    absl::StatusOr<RangePlan> range =
        PlanRange(graph_at, fixed, box, variant_options, /*upper_bound_fallback=*/true);
    if (!range.ok()) return fail(range.status());
    const SymbolicPlan& plan = range->plan;
    WhatIfRangeRow row;
    row.label = variant.label;
    row.pieces = static_cast<int>(plan.pieces.size());
    for (const SymbolicPiece& p : plan.pieces) row.worst_ratio = std::max(row.worst_ratio, p.worst_ratio);
    std::vector<int64_t> scratch;
    auto device = [&](const graph::SymbolBindings& at) -> absl::StatusOr<int64_t> {
      MG_ASSIGN_OR_RETURN(const DeviceBytes bytes, plan.DeviceBytesAt(at, optimizer, scratch));
      return bytes.total();
    };
    MG_ASSIGN_OR_RETURN(row.device_low, device(box.Low()));
    MG_ASSIGN_OR_RETURN(const DeviceBytes high, plan.DeviceBytesAt(box.High(), optimizer, scratch));
    // The arena may drop from one piece to the next: the most the range needs is the largest
    // piece's high end (the bytes outside the arena never decrease).
    MG_ASSIGN_OR_RETURN(const int64_t max_arena, plan.MaxArena());
    row.device_high = std::max(high.total(), max_arena + high.outside_arena());
    MG_ASSIGN_OR_RETURN(ArenaFormula formula, plan.Formula(static_cast<int>(plan.pieces.size()) - 1));
    std::vector<graph::DimExpr> readable;
    for (const graph::DimExpr& p : formula.polynomials) {
      absl::StatusOr<graph::DimExpr> r = graph::WithoutRounding(p);
      readable.push_back(r.ok() ? *r : p);
    }
    row.formula = formula.too_long ? formula.ToString(true) : ArenaFormula{readable, false}.ToString(true);
    if (budget >= 0) {
      for (const graph::SymbolRange& r : box.ranges) {
        WhatIfRangeFit fit;
        fit.symbol = r.symbol;
        graph::SymbolBindings at = box.Low();
        MG_ASSIGN_OR_RETURN(fit.largest, plan.LargestFitting(r.symbol, at, budget, device));
        if (fit.largest.has_value()) {
          at[r.symbol] = *fit.largest;
          MG_ASSIGN_OR_RETURN(fit.device_bytes, device(at));
        }
        row.fits.push_back(std::move(fit));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string WhatIfRangeToText(const graph::WorkloadSpec& base, const graph::SymbolBox& box,
                              const std::vector<WhatIfRangeRow>& rows, int64_t budget) {
  std::string out = absl::StrCat("what-if for ", graph::WorkloadSpecToString(base), " over ",
                                 box.ToString(), " (one symbolic plan per variant)\n");
  absl::StrAppend(&out, "device = arena + weights (static values), at the range's ends\n\n");
  size_t width = 7;
  for (const WhatIfRangeRow& r : rows) width = std::max(width, r.label.size());
  absl::StrAppendFormat(&out, "%-*s  %6s  %8s  %11s  %11s", width, "variant", "pieces",
                        "worst/LB", "device low", "device high");
  if (budget >= 0) absl::StrAppendFormat(&out, "  largest that fits %s", util::FormatBytes(budget));
  absl::StrAppend(&out, "\n");
  for (const WhatIfRangeRow& r : rows) {
    absl::StrAppendFormat(&out, "%-*s  %6d  %8.4f  %11s  %11s", width, r.label, r.pieces,
                          r.worst_ratio, util::FormatBytes(r.device_low),
                          util::FormatBytes(r.device_high));
    if (budget >= 0) {
      std::vector<std::string> parts;
      for (const WhatIfRangeFit& f : r.fits) {
        parts.push_back(f.largest.has_value() ? absl::StrCat(f.symbol, "=", *f.largest)
                                              : absl::StrCat("no ", f.symbol));
      }
      absl::StrAppend(&out, "  ", absl::StrJoin(parts, ", "));
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "\narena at the longest sizes (bytes, before alignment rounding):\n");
  for (const WhatIfRangeRow& r : rows) absl::StrAppend(&out, "  ", r.label, ": ", r.formula, "\n");
  return out;
}

}  // namespace memonger

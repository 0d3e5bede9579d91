// The what-if report over a range: each variant of a workload planned once for a whole range of
// its sizes (`--compare kernel=math,efficient --dim n=256..65536`), side by side. Per variant:
// the pieces and their worst ratio to the lower bound, the device bytes (device_bytes.h) at
// the range's low end and the most over it, the arena as a formula of the symbols, and with a budget the largest value
// of each ranged symbol whose device bytes fit (the others at their low end).
//
//   MG_ASSIGN_OR_RETURN(auto rows, PlanVariantsOverRange(variants, options, box, budget));
//   std::cout << WhatIfRangeToText(base, box, rows, budget);
#ifndef MEMONGER_REPORT_WHAT_IF_RANGE_H_
#define MEMONGER_REPORT_WHAT_IF_RANGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/symbol_box.h"
#include "memonger/planner.h"
#include "report/what_if.h"
#include "workloads/workload_spec.h"

namespace memonger {

struct WhatIfRangeFit {
  std::string symbol;
  std::optional<int64_t> largest;  // nullopt: not even the low end fits
  int64_t device_bytes = 0;        // at `largest`
};

struct WhatIfRangeRow {
  std::string label;
  int pieces = 0;
  double worst_ratio = 0;   // arena / lower bound, worst over the pieces' samples
  int64_t device_low = 0;   // device bytes at the box's low corner
  int64_t device_high = 0;  // the most over the range (the arena may peak inside it)
  std::string formula;      // the arena of the last piece (the largest sizes), for people
  std::vector<WhatIfRangeFit> fits;  // with a budget
};

// Each variant is built with graph::BuildSymbolicWorkload at the bindings the planner asks for
// (memonger/symbolic/symbolic_planner.h, PlanRange, with the upper-bound fallback) and planned
// once for `box`; every symbol of the box must be a key of the workload (attention: n, batch).
// The first failure is returned with the variant's label. `budget` < 0: no fits.
absl::StatusOr<std::vector<WhatIfRangeRow>> PlanVariantsOverRange(
    const std::vector<WhatIfVariant>& variants, const PlanOptions& options,
    const graph::SymbolBox& box, int64_t budget, Optimizer optimizer = Optimizer::kNone);

std::string WhatIfRangeToText(const graph::WorkloadSpec& base, const graph::SymbolBox& box,
                              const std::vector<WhatIfRangeRow>& rows, int64_t budget);

}  // namespace memonger

#endif  // MEMONGER_REPORT_WHAT_IF_RANGE_H_

// The what-if report: one workload planned in several variants, side by side, so that a team
// that runs out of memory sees what each fix buys before spending GPU hours on it.
//
//   optimize-net --workload attention:n=18000 --compare kernel=math,efficient
//                --compare bias_dtype=fp32,fp16 --budget 80GB
//
//   MG_ASSIGN_OR_RETURN(std::vector<WhatIfVariant> variants,
//                       ExpandVariants(base, {}, {"kernel=math,efficient", "bias_dtype=fp32,fp16"}));
//   MG_ASSIGN_OR_RETURN(std::vector<WhatIfRow> rows, PlanVariants(variants, options));
//   std::cout << WhatIfToText(base, rows, budget);
//
// Variants come from two flags. `--variant k=v,k=v` (repeatable) names one variant: the base
// spec with those keys set. `--compare KEY=V1,V2` (repeatable) crosses every variant so far with
// each value (the cartesian product, the first key varying slowest). Each variant is built with graph::BuildWorkload, planned with PlanMemory and
// checked with VerifyPlan. "Device bytes" are the arena plus the static values kept outside it
// (the weights) plus, when asked, the optimizer's state (device_bytes.h): what the variant needs
// on the device, the figure to hold against a budget.
#ifndef MEMONGER_REPORT_WHAT_IF_H_
#define MEMONGER_REPORT_WHAT_IF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/device_bytes.h"
#include "memonger/planner.h"
#include "workloads/workload_spec.h"

namespace memonger {

struct WhatIfVariant {
  std::string label;  // "kernel=math bias_dtype=fp16" (the compared keys only)
  graph::WorkloadSpec spec;
};

// InvalidArgument for a --variant or --compare argument that is not key=value pairs, a
// --compare without values, or a key compared twice. Neither flag: the base alone.
absl::StatusOr<std::vector<WhatIfVariant>> ExpandVariants(const graph::WorkloadSpec& base,
                                                          const std::vector<std::string>& variants,
                                                          const std::vector<std::string>& compares);

struct WhatIfValue {
  std::string name;
  std::string type;  // "float16[1,12,18001,18001]"
  int64_t bytes = 0;
};

struct WhatIfRow {
  std::string label;
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;
  int64_t static_bytes = 0;
  int64_t optimizer_state_bytes = 0;  // with an optimizer (device_bytes.h)
  int64_t device_bytes = 0;  // arena + static + optimizer state
  bool proven_optimal = false;
  std::string peak_op;             // "Softmax 'b0/softmax'"
  std::vector<WhatIfValue> peak_values;  // the largest live at the peak, at most 3
};

// Builds, plans (`options`; model_name is set per variant) and verifies every variant. The
// first failure is returned with the variant's label.
absl::StatusOr<std::vector<WhatIfRow>> PlanVariants(const std::vector<WhatIfVariant>& variants,
                                                    const PlanOptions& options,
                                                    Optimizer optimizer = Optimizer::kNone);

// The table, decimal units (GB = 10^9 bytes, as the field quotes them). `budget` < 0: no budget
// column. For attention workloads, a header with the sizes the field argues about: one
// [B, H, L, L] tensor per dtype and the bias as stored.
std::string WhatIfToText(const graph::WorkloadSpec& base, const std::vector<WhatIfRow>& rows,
                         int64_t budget);

// The same rows for `--format json`, exact bytes:
// {"schema": "memonger.whatif/v1", "workload": "attention:n=...", "budget": B or null,
//  "variants": [{"variant", "device_bytes", "arena_bytes", "static_bytes",
//                "optimizer_state_bytes", "lower_bound_bytes", "proven_optimal", "fits" (null without a budget),
//                "peak_op", "peak_values": [{"name", "type", "bytes"}]}]}
std::string WhatIfToJson(const graph::WorkloadSpec& base, const std::vector<WhatIfRow>& rows,
                         int64_t budget);

}  // namespace memonger

#endif  // MEMONGER_REPORT_WHAT_IF_H_

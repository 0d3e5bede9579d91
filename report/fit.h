// The largest size that fits (`--fit SYMBOL --budget BYTES`): for one size parameter (a
// symbolic dim of a model, or a workload key such as `n` or `batch`), the largest value whose
// plan fits the budget, for each cure: the order as given, the memory-aware order
// (memory_order.h), and, for training nets, recomputation (recompute.h).
//
//   FitSearch search;
//   search.symbol = "n";
//   search.budget = int64_t{24} << 30;
//   search.cures = {{"given", options}, {"memory-aware", memory_aware_options}};
//   MG_ASSIGN_OR_RETURN(FitResult fit, FindLargestFit(search, [&](int64_t n, const PlanOptions& o)
//                                          { return PlanAt(n, o); }));
//   std::cout << FitToText(fit);
//
// What "fits" means: device bytes, the arena plus the static values kept outside it (the
// weights), at most the budget; the figure the what-if report holds against a budget too.
//
// The search assumes that the device bytes never shrink as the value grows (true of the lower
// bound for most nets, and of a planner that reaches it). A net's bytes grow about linearly
// with a batch or sequence size: from `min_value` and 2 x min_value, the value where their line
// meets the budget is planned with its neighbour, which settles a linear curve in 4 plans;
// otherwise it gallops (doubling steps) until a value does not fit and bisects between the last
// value that fit and the first that did not: O(log answer) plans, never a scan. A later cure's gallop starts at the
// answer of the one before where that fits (min_value is then not planned), so it plans near
// it, at values the planner callback has typed already (FindFit keeps those nets). The assumption is checked where it
// matters: the answer is planned and fits, answer + 1 is planned (by a planner callback that
// may judge it by a lower bound: FindFit's recompute cure) and does not, and so are the
// kFitProbes values after it (by the first cure, and by later ones only where those probes
// found the bytes not monotone: they test the net's sizes, the same for every cure). One of those that fits means the bytes are not monotone (the
// efficient attention kernel copies a bias whose rows are not a multiple of 8 elements, so
// every 8th length needs about half): the row names it, and where several fit, the values a
// whole number of their spacing apart are searched the same way (FitRow::period_largest). A
// value the model or workload refuses (out of a key's range, a size that overflows) counts as
// not fitting, and the row says the range ended the search rather than the budget.
//
// What it does not guarantee: that no larger value fits when the bytes are not monotone in a
// way the probes do not see (a spacing beyond kFitProbes, or a jump down far above).
#ifndef MEMONGER_REPORT_FIT_H_
#define MEMONGER_REPORT_FIT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memonger/device_bytes.h"
#include "memonger/planner.h"

namespace memonger {

struct FitCure {
  std::string name;     // "given", "memory-aware", "recompute"
  PlanOptions options;  // how each value is planned under this cure
  bool recompute = false;  // recomputation (recompute.h) may rewrite the net to fit
};

// One value planned during the search, as it happens: for a progress line.
struct FitProgress {
  std::string cure;
  int64_t value = 0;
  int64_t device_bytes = 0;
  bool fits = false;
  bool refused = false;
  int plans = 0;  // values planned so far, over every cure
};

struct FitSearch {
  std::string symbol;
  int64_t budget = 0;  // device bytes (memonger/device_bytes.h)
  Optimizer optimizer = Optimizer::kNone;  // whose state the planner counts: the text names it
  int64_t min_value = 1;
  int64_t max_value = int64_t{1} << 40;
  std::vector<FitCure> cures;
  // Called after each value is planned (empty: nothing is called).
  std::function<void(const FitProgress&)> progress;
};

// One planned value.
struct FitPoint {
  int64_t value = 0;
  int64_t device_bytes = 0;  // arena + static + optimizer state
  int64_t arena_bytes = 0;
  int64_t lower_bound_bytes = 0;
  std::string refused;       // non-empty: the model or workload refused the value (why)
  // The recompute cure, where the net was rewritten: what rerunning costs (RecomputeSummary).
  int recomputed_ops = 0;
  int64_t extra_flops = 0;
  int64_t forward_flops = 0;
};

struct FitRow {
  std::string cure;
  std::optional<int64_t> largest;  // absent: not even min_value fits
  std::optional<FitPoint> at_largest;
  std::optional<FitPoint> above;   // largest + 1 (or min_value when none fits)
  bool range_ended = false;        // the value above was refused, not over the budget
  // Not monotone: the first of the kFitProbes values after `above` that fits; where two or
  // more do, `period` is their spacing (the gcd of their distances) and `period_largest` the
  // largest of also_fits + period * k that fits (gallop and bisect on k).
  std::optional<FitPoint> also_fits;
  int64_t period = 0;
  std::optional<FitPoint> period_largest;
  int plans = 0;                   // values planned for this cure
  double seconds = 0;              // the search's wall time for this cure (--timings)
};

// Values planned past the first that does not fit, to catch bytes that do not grow with the
// value (alignment: a kernel that copies what is not a multiple of 8 needs less at every 8th).
inline constexpr int kFitProbes = 16;

struct FitResult {
  std::string symbol;
  int64_t budget = 0;
  Optimizer optimizer = Optimizer::kNone;
  std::vector<FitRow> rows;  // one per cure, in the order given
  // How the nets planned were typed (tools/fit_nets.h), for --timings: imported, or retyped
  // from an import.
  int nets_imported = 0;
  int nets_retyped = 0;
};

// Plans `value` under `options`: device, arena and lower-bound bytes. InvalidArgument and
// OutOfRange errors mean "this value is refused" (recorded, the search goes on); any other error
// ends the search.
using FitPlanner = std::function<absl::StatusOr<FitPoint>(int64_t value, const FitCure& cure)>;

// InvalidArgument for a budget < 0, an empty range or no cures.
absl::StatusOr<FitResult> FindLargestFit(const FitSearch& search, const FitPlanner& plan);

std::string FitToText(const FitResult& fit);
// {"schema": "memonger.fit/v1", "fit": {"symbol", "budget", "largest": {cure: value or null},
// "cures": [{"cure", "largest", "device_bytes", "arena_bytes", "lower_bound_bytes", "above",
// "above_device_bytes", "range_ended", "also_fits", "also_fits_device_bytes", "period",
// "largest_in_period", "largest_in_period_device_bytes", "plans"}]}} (the not-monotone
// fields null where the probes found nothing).
std::string FitToJson(const FitResult& fit);

}  // namespace memonger

#endif  // MEMONGER_REPORT_FIT_H_

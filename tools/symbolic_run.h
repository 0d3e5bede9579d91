// optimize-net with a range (--dim N=LO..HI): one plan for every binding in the box
// (memonger/symbolic/), written as memonger.plan/v2 by --plan-json (or to stdout with --format
// json), summarised as text otherwise: the pieces, their ratios to the lower bound, the arena
// as a formula, and with --budget the largest value of each symbol that fits.
#ifndef MEMONGER_TOOLS_SYMBOLIC_RUN_H_
#define MEMONGER_TOOLS_SYMBOLIC_RUN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/planner.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "tools/cli_flags.h"
#include "util/file_io.h"

namespace memonger::tools {

using GraphAt = std::function<absl::StatusOr<graph::Graph>(const graph::SymbolBindings&)>;

struct SymbolicReport {
  std::string text;                // for stdout
  std::vector<std::string> notes;  // one line each, for stderr
  bool over_budget = false;        // not even the box's low corner fits --budget
};

// The plan of the range, checked: every value whose size a symbol of the box changes is named by
// a range that moves, and the plan bound at each corner of the box passes VerifyPlan against the
// net typed there. `notes` says which values have no size expression (sized at the high corner).
struct CheckedRangePlan {
  RangePlan range;
  std::vector<std::string> notes;
};
absl::StatusOr<CheckedRangePlan> PlanCheckedRange(
    const Flags& flags, const graph::ShapeBindings& fixed, const GraphAt& graph_at,
    const std::function<absl::StatusOr<PlanOptions>(const graph::Graph&)>& make_options);

// The --html page of a range: the plan bound at about `samples` bindings of its box
// (SampleBindings: the corners and a geometric grid), each checked by VerifyPlan against the net
// typed there, a slider between them; `budget` (< 0: none, else device bytes) drawn across the
// curve as the arena's share of it.
inline constexpr int kDefaultHtmlSamples = 9;
absl::StatusOr<std::string> RangePlanHtml(const CheckedRangePlan& checked, const GraphAt& graph_at,
                                          const std::string& title, int64_t budget,
                                          int samples = kDefaultHtmlSamples,
                                          Optimizer optimizer = Optimizer::kNone);

// `graph_at` types the net at a binding of flags.ranges; `fixed` binds the model's other
// symbols and inputs (--dim N=V, --input-shape; a workload's own values);
// `options` come from the net at the box's high corner. Sets flags.plan_json in `outputs`.
// Every bound plan at the box's corners is checked by VerifyPlan against the net typed there.
absl::StatusOr<SymbolicReport> RunSymbolic(
    const Flags& flags, const graph::ShapeBindings& fixed, const GraphAt& graph_at,
    const std::function<absl::StatusOr<PlanOptions>(const graph::Graph&)>& make_options,
    util::OutputFiles& outputs);

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_SYMBOLIC_RUN_H_

#include "tools/symbolic_run.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/symbolic_shapes.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "memonger/verify_plan.h"
#include "report/plan_html.h"
#include "report/symbolic_plan_json.h"
#include "report/symbolic_summary.h"
#include "util/bytes.h"
#include "util/status_macros.h"

namespace memonger::tools {

absl::StatusOr<CheckedRangePlan> PlanCheckedRange(
    const Flags& flags, const graph::ShapeBindings& fixed, const GraphAt& graph_at,
    const std::function<absl::StatusOr<PlanOptions>(const graph::Graph&)>& make_options) {
  const graph::SymbolBox& box = flags.ranges;
  const graph::SymbolBindings high = box.High();
  // The options come from the net at the box's high corner, the reference every expression is
  // checked against and the sizes a value without an expression is given.
  PlanOptions options;
  {
    MG_ASSIGN_OR_RETURN(graph::Graph at_high, graph_at(high));
    MG_ASSIGN_OR_RETURN(options, make_options(at_high));
  }
  CheckedRangePlan checked;
  MG_ASSIGN_OR_RETURN(checked.range,
                      PlanRange(graph_at, fixed, box, options, /*upper_bound_fallback=*/true));
  const RangePlan& range = checked.range;
  const graph::Graph& reference = range.reference;
  const graph::SymbolicShapes& shapes = range.shapes;
  const SymbolicPlan& plan = range.plan;
  const std::set<std::string> used(shapes.symbols.begin(), shapes.symbols.end());
  for (const graph::SymbolRange& r : box.ranges) {
    if (used.count(r.symbol) == 0 && r.lo != r.hi) {
      return absl::InvalidArgumentError(absl::StrCat("--dim ", r.symbol, "=", r.lo, "..", r.hi,
                                                     ": no value's size depends on ", r.symbol,
                                                     " (is it a symbol of this model?)"));
    }
  }
  int fallback = 0;
  std::string first_fallback;
  for (graph::ValueId v = 0; v < reference.num_values(); ++v) {
    if (shapes.fallback[v].empty()) continue;
    if (fallback++ == 0) {
      first_fallback =
          absl::StrCat("'", reference.value(v).DisplayName(), "': ", shapes.fallback[v]);
    }
  }
  if (fallback > 0) {
    checked.notes.push_back(absl::StrCat(
        fallback, " value(s) have no size expression and are sized at the range's upper bound (",
        first_fallback, ")"));
  }
  // Every plan is checked by the independent verifier before anyone sees it: here the plan
  // bound at each corner of the box, against the net typed there.
  for (const graph::SymbolBindings& corner : {box.Low(), high}) {
    MG_ASSIGN_OR_RETURN(graph::Graph typed, graph_at(corner));
    MG_ASSIGN_OR_RETURN(Plan bound, plan.Bind(corner));
    if (absl::Status s = VerifyPlan(typed, bound); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("the symbolic plan bound at a corner of its box is invalid: ", s.message()));
    }
  }
  return checked;
}

absl::StatusOr<std::string> RangePlanHtml(const CheckedRangePlan& checked, const GraphAt& graph_at,
                                          const std::string& title, int64_t budget,
                                          int samples, Optimizer optimizer) {
  const SymbolicPlan& plan = checked.range.plan;
  std::vector<graph::Graph> graphs;
  std::vector<Plan> plans;
  std::vector<std::string> labels;
  for (const graph::SymbolBindings& at : SampleBindings(plan.box, samples)) {
    MG_ASSIGN_OR_RETURN(graph::Graph typed, graph_at(at));
    MG_ASSIGN_OR_RETURN(Plan bound, plan.Bind(at));
    if (absl::Status s = VerifyPlan(typed, bound); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("the symbolic plan bound for the page is invalid: ", s.message()));
    }
    graphs.push_back(std::move(typed));
    plans.push_back(std::move(bound));
    labels.push_back(absl::StrJoin(at, ", ", absl::PairFormatter("=")));
  }
  std::vector<HtmlFrame> frames;
  for (size_t i = 0; i < plans.size(); ++i) frames.push_back({labels[i], &graphs[i], &plans[i]});
  HtmlOptions options;
  // The page draws arenas: the budget's line is what the rest leaves of it at the low corner.
  std::vector<int64_t> scratch;
  MG_ASSIGN_OR_RETURN(const DeviceBytes low, plan.DeviceBytesAt(plan.box.Low(), optimizer, scratch));
  options.budget_bytes = ArenaShare(budget, low.outside_arena());
  if (budget >= 0 && low.outside_arena() > 0) {
    options.budget_label = absl::StrCat(util::FormatBytes(budget), " less ",
                                        util::FormatBytes(low.outside_arena()),
                                        " outside the arena");
  }
  return PlansToHtml(frames, title, options);
}

absl::StatusOr<SymbolicReport> RunSymbolic(
    const Flags& flags, const graph::ShapeBindings& fixed, const GraphAt& graph_at,
    const std::function<absl::StatusOr<PlanOptions>(const graph::Graph&)>& make_options,
    util::OutputFiles& outputs) {
  MG_ASSIGN_OR_RETURN(const CheckedRangePlan checked,
                      PlanCheckedRange(flags, fixed, graph_at, make_options));
  const graph::SymbolBox& box = flags.ranges;
  const graph::Graph& reference = checked.range.reference;
  const SymbolicPlan& plan = checked.range.plan;
  SymbolicReport report;
  report.notes = checked.notes;
  const std::string json = SymbolicPlanToJson(reference, plan);
  if (!flags.plan_json.empty()) outputs.Set(flags.plan_json, json);
  if (!flags.html.empty()) {
    MG_ASSIGN_OR_RETURN(std::string page,
                        RangePlanHtml(checked, graph_at,
                                      flags.model.empty() ? flags.workload : flags.model,
                                      flags.budget, kDefaultHtmlSamples, flags.optimizer));
    outputs.Set(flags.html, std::move(page));
  }
  if (flags.format == "json") {
    report.text = json;
  } else {
    MG_ASSIGN_OR_RETURN(report.text,
                        SymbolicPlanToText(reference, plan, flags.budget, flags.optimizer));
  }
  if (flags.budget >= 0) {
    std::vector<int64_t> scratch;
    MG_ASSIGN_OR_RETURN(const DeviceBytes low,
                        plan.DeviceBytesAt(box.Low(), flags.optimizer, scratch));
    report.over_budget = low.total() > flags.budget;
  }
  return report;
}

}  // namespace memonger::tools

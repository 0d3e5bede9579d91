// Symbolic plans as JSON: schema memonger.plan/v2, written by `--plan-json` when a --dim is a
// range, read back by `--plan-in` and bound to the concrete binding the run gives. The
// document, its grammar and its guarantees: docs/symbolic-plans.md.
//
//   outputs.Set(path, SymbolicPlanToJson(graph, plan));
//   MG_ASSIGN_OR_RETURN(Plan bound, BindSymbolicPlanJson(graph_at_5000, text, path, {{"N", 5000}}));
//
// Reading trusts nothing the graph can tell: the schedule is matched to the graph's ops, the
// liveness and alias classes are recomputed, every item's size expression must give the class's
// bytes at the binding (a bound, for a fallback item: at least them), the static bytes must
// agree, and the pieces must pass CheckSymbolicPlan before the plan is bound. The caller still
// runs VerifyPlan on the result.
#ifndef MEMONGER_REPORT_SYMBOLIC_PLAN_JSON_H_
#define MEMONGER_REPORT_SYMBOLIC_PLAN_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/dim_expr.h"
#include "graph/graph.h"
#include "memonger/plan.h"
#include "memonger/symbolic/symbolic_plan.h"

namespace memonger {

inline constexpr char kSymbolicPlanSchema[] = "memonger.plan/v2";

// `graph` is the net typed at plan.reference.
std::string SymbolicPlanToJson(const graph::Graph& graph, const SymbolicPlan& plan);

// True when `text` looks like a v2 document (its "schema" says so); the full check is
// SymbolicPlanFromJson's.
bool IsSymbolicPlanJson(absl::string_view text);

// The symbolic plan in `text`, matched to `graph` typed at `dims` (which must lie in the plan's
// box: InvalidArgument "N=70000 lies outside the plan's range ..." otherwise).
absl::StatusOr<SymbolicPlan> SymbolicPlanFromJson(const graph::Graph& graph,
                                                  const std::string& text,
                                                  const std::string& source_name,
                                                  const graph::SymbolBindings& dims);

// SymbolicPlanFromJson, then Bind at `dims`.
absl::StatusOr<Plan> BindSymbolicPlanJson(const graph::Graph& graph, const std::string& text,
                                          const std::string& source_name,
                                          const graph::SymbolBindings& dims);

}  // namespace memonger

#endif  // MEMONGER_REPORT_SYMBOLIC_PLAN_JSON_H_

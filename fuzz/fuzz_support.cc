#include "fuzz/fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/shape_inference.h"
#include "memonger/verify_plan.h"

namespace memonger::fuzz {

void Fail(absl::string_view what, const absl::Status& status) {
  std::string message = absl::StrCat("fuzz finding: ", what);
  if (!status.ok()) absl::StrAppend(&message, ": ", status.ToString());
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void CheckPlanOrDie(const graph::Graph& graph, const Plan& plan, absl::string_view what) {
  const absl::Status verified = VerifyPlan(graph, plan);
  if (!verified.ok()) Fail(absl::StrCat(what, ": VerifyPlan refused the plan"), verified);
  if (plan.arena_bytes < plan.lower_bound_bytes) {
    Fail(absl::StrCat(what, ": arena ", plan.arena_bytes, " bytes is below the lower bound ",
                      plan.lower_bound_bytes));
  }
  // The naive bytes align each class to the plan's alignment only; a value asking for more
  // (Value::alignment) may need padding no naive sum counts, so the bound holds without them.
  bool extra_alignment = false;
  for (const graph::Value& v : graph.values()) extra_alignment |= v.alignment > plan.alignment;
  if (!extra_alignment && plan.arena_bytes > plan.naive_bytes) {
    Fail(absl::StrCat(what, ": arena ", plan.arena_bytes, " bytes is above the naive bytes ",
                      plan.naive_bytes));
  }
}

void FailOnInternal(const absl::Status& status, absl::string_view what) {
  if (status.code() == absl::StatusCode::kInternal) {
    Fail(absl::StrCat(what, ": internal error"), status);
  }
}

absl::StatusOr<Plan> PlanCheaply(const graph::Graph& graph, PlannerKind planner) {
  PlanOptions options;
  options.planner = planner;
  options.time_limit_seconds = 0.02;
  absl::StatusOr<Plan> plan = PlanMemory(graph, options);
  if (!plan.ok()) {
    FailOnInternal(plan.status(), absl::StrCat("PlanMemory ", PlannerName(planner)));
  }
  return plan;
}

void InferPlanAndCheck(graph::Graph& graph, absl::string_view what) {
  // Every symbolic dim the net declares bound to a small size, so that nets like the bundled
  // transformer block (L) get past shape inference; none declared: empty bindings.
  graph::ShapeBindings bindings;
  for (const graph::Value& v : graph.values()) {
    if (!v.declared.dims) continue;
    for (const graph::DeclaredDim& d : *v.declared.dims) {
      if (!d.symbol.empty()) bindings.dims[d.symbol] = 5;
    }
  }
  const absl::Status inferred = graph::InferShapes(graph, bindings);
  if (!inferred.ok()) {
    FailOnInternal(inferred, absl::StrCat(what, ": InferShapes"));
    return;
  }
  absl::StatusOr<Plan> plan = PlanCheaply(graph, PlannerKind::kGreedyBySize);
  if (plan.ok()) CheckPlanOrDie(graph, *plan, absl::StrCat(what, ": greedy-by-size"));
}

void LoadNetDefAndCheck(const std::string& bytes, graph::NetFileFormat format) {
  absl::StatusOr<proto::NetDef> net = graph::ParseNetDef(bytes, format, "fuzz");
  if (!net.ok()) {
    FailOnInternal(net.status(), "ParseNetDef");
    return;
  }
  absl::StatusOr<graph::Graph> graph = graph::GraphFromNetDef(*net);
  if (!graph.ok()) {
    FailOnInternal(graph.status(), "GraphFromNetDef");
    return;
  }
  absl::StatusOr<graph::Graph> again = graph::GraphFromNetDef(graph::GraphToNetDef(*graph));
  if (!again.ok()) {
    Fail("GraphFromNetDef(GraphToNetDef(g)) refused a net whose graph g loaded", again.status());
  }
  if (again->num_ops() != graph->num_ops() || again->num_values() != graph->num_values()) {
    Fail(absl::StrCat("GraphFromNetDef(GraphToNetDef(g)) has ", again->num_ops(), " ops and ",
                      again->num_values(), " values, g ", graph->num_ops(), " and ",
                      graph->num_values()));
  }
  InferPlanAndCheck(*graph, "NetDef");
}

}  // namespace memonger::fuzz

// libFuzzer harness: a saved plan (memonger.plan/v1 JSON, `--plan-in`) -> PlanFromJson against a
// small fixed graph (memonger's FC test net in training mode: params, gradients, in-place ops)
// -> VerifyPlan.
//
// PlanFromJson only checks that the document is well formed and belongs to the graph
// (report/plan_import.h): a plan whose buffers overlap while their values live is read, and
// refused by the verifier, as `--plan-in` does. So the oracle here is: reading never crashes,
// VerifyPlan answers every plan PlanFromJson accepts without crashing, and a plan that verifies
// has an arena of at least its lower bound, writes back (PlanToJson) to a document that reads to
// the same offsets and arena and verifies again, and writes as MiniMalloc CSV.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_support.h"
#include "memonger/verify_plan.h"
#include "report/plan_import.h"
#include "report/plan_report.h"
#include "workloads/workloads.h"

namespace {

// The graph of the seed corpus (fuzz/corpus/plan_json/ holds plans of it from several planners).
constexpr char kGraphSpec[] = "mlp:layers=2,batch=2,dim=4,classes=3,mode=training";

const memonger::graph::Graph& FixedGraph() {
  static const memonger::graph::Graph* graph = [] {
    absl::StatusOr<memonger::graph::WorkloadSpec> spec =
        memonger::graph::ParseWorkloadSpec(kGraphSpec);
    if (!spec.ok()) memonger::fuzz::Fail("the fixed graph's spec", spec.status());
    absl::StatusOr<memonger::graph::Graph> built = memonger::graph::BuildWorkload(*spec);
    if (!built.ok()) memonger::fuzz::Fail("the fixed graph", built.status());
    return new memonger::graph::Graph(*std::move(built));
  }();
  return *graph;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memonger;
  const graph::Graph& graph = FixedGraph();
  absl::StatusOr<Plan> plan = PlanFromJson(graph, fuzz::Bytes(data, size), "fuzz");
  if (!plan.ok()) {
    fuzz::FailOnInternal(plan.status(), "PlanFromJson");
    return 0;
  }
  const absl::Status verified = VerifyPlan(graph, *plan);
  if (!verified.ok()) {
    fuzz::FailOnInternal(verified, "VerifyPlan of a plan PlanFromJson read");
    return 0;  // an overlapping or misaligned plan: refused, as --plan-in does
  }
  if (plan->arena_bytes < plan->lower_bound_bytes) {
    fuzz::Fail(absl::StrCat("a verified plan has arena ", plan->arena_bytes,
                            " bytes below its lower bound ", plan->lower_bound_bytes));
  }
  absl::StatusOr<Plan> again = PlanFromJson(graph, PlanToJson(graph, *plan), "PlanToJson");
  if (!again.ok()) fuzz::Fail("PlanFromJson refused PlanToJson of a verified plan", again.status());
  if (again->offset_of_value != plan->offset_of_value || again->arena_bytes != plan->arena_bytes) {
    fuzz::Fail("PlanFromJson(PlanToJson(plan)) moved values or changed the arena");
  }
  const absl::Status verified_again = VerifyPlan(graph, *again);
  if (!verified_again.ok()) {
    fuzz::Fail("VerifyPlan refused PlanFromJson(PlanToJson(plan)) of a verified plan",
               verified_again);
  }
  PlanToMiniMallocCsv(graph, *plan);
  return 0;
}

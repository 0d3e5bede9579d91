// libFuzzer harness: usage records (memonger.records/v1 JSON) -> ParseRecordsJson ->
// GraphFromRecords -> a cheap plan (greedy-by-size), checked by the verifier.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/fuzz_support.h"
#include "graph/records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memonger;
  absl::StatusOr<std::vector<graph::UsageRecord>> records =
      graph::ParseRecordsJson(fuzz::Bytes(data, size), "fuzz");
  if (!records.ok()) {
    fuzz::FailOnInternal(records.status(), "ParseRecordsJson");
    return 0;
  }
  absl::StatusOr<graph::Graph> graph = graph::GraphFromRecords(*records, "fuzz");
  if (!graph.ok()) {
    fuzz::FailOnInternal(graph.status(), "GraphFromRecords");
    return 0;
  }
  absl::StatusOr<Plan> plan = fuzz::PlanCheaply(*graph, PlannerKind::kGreedyBySize);
  if (plan.ok()) fuzz::CheckPlanOrDie(*graph, *plan, "records: greedy-by-size");
  return 0;
}

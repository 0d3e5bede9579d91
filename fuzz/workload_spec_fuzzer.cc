// libFuzzer harness: a workload spec ("kind:key=value,...", `--workload`) -> ParseWorkloadSpec
// -> BuildWorkload -> a cheap plan (greedy-by-size), checked by the verifier.
//
// A legal spec may ask for a big net (random:ops=4194304, randwire:nodes=4096,k=4094): correct,
// but building and planning it takes seconds to minutes, which libFuzzer reports as a timeout.
// So the harness builds only specs whose structural counts (ops, layers, depth, nodes, k,
// branches), as written or by default, stay small; every spec is still parsed, and tensor sizes
// (n, batch, dim, width, image, ...) are not capped: they cost no time, and their products are
// where overflow hides.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "fuzz/fuzz_support.h"
#include "workloads/workload_spec.h"
#include "workloads/workloads.h"

namespace {

struct Cap {
  int64_t fallback;  // the workload's default (workloads/*.cc)
  int64_t max;       // the largest value the harness builds
};

// kind -> key -> cap. Keys of a kind not listed here do not change the net's size.
const absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, Cap>>& Caps() {
  static const auto* caps =
      new absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, Cap>>{
          {"attention", {{"depth", {6, 8}}}},
          {"mlp", {{"layers", {3, 32}}}},
          {"random", {{"ops", {1000, 300}}, {"branches", {4, 32}}}},
          {"randwire", {{"nodes", {32, 64}}, {"k", {4, 16}}, {"stages", {3, 8}}}},
      };
  return *caps;
}

// True when the spec asks for a net small enough to build in a fuzzer's time. A value that is
// not an integer is left to the workload to refuse.
bool SmallEnough(const memonger::graph::WorkloadSpec& spec) {
  auto kind = Caps().find(spec.kind);
  if (kind == Caps().end()) return true;
  for (const auto& [key, cap] : kind->second) {
    int64_t value = cap.fallback;
    for (const auto& [k, v] : spec.params) {
      if (k == key && !absl::SimpleAtoi(v, &value)) return true;
    }
    if (value > cap.max) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memonger;
  absl::StatusOr<graph::WorkloadSpec> spec = graph::ParseWorkloadSpec(fuzz::Bytes(data, size));
  if (!spec.ok()) {
    fuzz::FailOnInternal(spec.status(), "ParseWorkloadSpec");
    return 0;
  }
  absl::StatusOr<graph::WorkloadSpec> reparsed =
      graph::ParseWorkloadSpec(graph::WorkloadSpecToString(*spec));
  if (!reparsed.ok() || reparsed->kind != spec->kind || reparsed->params != spec->params) {
    fuzz::Fail("ParseWorkloadSpec(WorkloadSpecToString(spec)) is not spec", reparsed.status());
  }
  if (!SmallEnough(*spec)) return 0;
  absl::StatusOr<graph::Graph> graph = graph::BuildWorkload(*spec);
  if (!graph.ok()) {
    fuzz::FailOnInternal(graph.status(), "BuildWorkload");
    return 0;
  }
  fuzz::InferPlanAndCheck(*graph, "workload");
  return 0;
}

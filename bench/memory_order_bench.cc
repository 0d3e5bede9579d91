// The memory-aware order against the given order and each list scheduler: the peak (the lower
// bound every planner reports) of each order, on randomly wired nets, random DAGs of real ops,
// the attention and ResNet-50 training workloads, and the ONNX models of libonnx-testdata
// (pytorch-converted, pytorch-operator, simple; those with at least 3 ops, together).
// Counters: ops; given = the given order's peak in bytes; then each order's peak relative to
// the memory-aware one (given/best = how many times lower the memory-aware peak is); proven = 1
// when the result is proven lowest; improved = nets where memory-aware beats the given order
// (the ONNX row counts nets). Time: FindMemoryAwareOrder alone, 2 s limit (the CLI's default
// --time-limit gives the order search half of its 2 s).
//
//   build-dir/bench/memory_order_bench --benchmark_counters_tabular=true
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "memonger/memory_order.h"
#include "util/check.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

graph::Graph Workload(const std::string& spec) {
  absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
  MG_CHECK(parsed.ok());
  absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*parsed);
  MG_CHECK(g.ok());
  return *std::move(g);
}

MemoryOrderOptions Options() {
  MemoryOrderOptions options;
  options.time_limit_seconds = 2;
  return options;
}

void Report(benchmark::State& state, const MemoryOrder& best, int ops) {
  state.counters["ops"] = ops;
  state.counters["given"] = static_cast<double>(best.given_peak_bytes);
  const double peak = static_cast<double>(std::max<int64_t>(best.peak_bytes, 1));
  for (const auto& [name, bytes] : best.tried) {
    if (name == "given" || name == "longest-path" || name == "lpmf" || name == "bfs" ||
        name == "dfs") {
      state.counters[name + "/best"] = static_cast<double>(bytes) / peak;
    }
  }
  state.counters["proven"] = best.proven_optimal ? 1 : 0;
  state.counters["improved"] = best.peak_bytes < best.given_peak_bytes ? 1 : 0;
}

void BM_Workload(benchmark::State& state, const std::string& spec) {
  const graph::Graph g = Workload(spec);
  MemoryOrder best;
  for (auto _ : state) {
    absl::StatusOr<MemoryOrder> r = FindMemoryAwareOrder(g, Options());
    MG_CHECK(r.ok());
    best = *std::move(r);
  }
  Report(state, best, g.num_ops());
}

// Every ONNX model of the corpus with at least 3 ops: the geometric mean of given/best, the
// largest ratio, how many improve and how many are proven.
void BM_OnnxBackendModels(benchmark::State& state) {
  std::vector<graph::Graph> nets;
  for (const char* dir : {"pytorch-converted", "pytorch-operator", "simple"}) {
    const std::filesystem::path root =
        std::filesystem::path("/usr/share/libonnx-testdata/data") / dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(root)) {
      const std::string model = (entry.path() / "model.onnx").string();
      absl::StatusOr<graph::Graph> g = graph::LoadModel(model, {});
      if (!g.ok() || g->num_ops() < 3 || !graph::InferShapes(*g, {}).ok()) continue;
      nets.push_back(*std::move(g));
    }
  }
  if (nets.empty()) {
    state.SkipWithError("libonnx-testdata is not installed");
    return;
  }
  double log_sum = 0, largest = 1;
  int improved = 0, proven = 0;
  for (auto _ : state) {
    log_sum = 0;
    largest = 1;
    improved = proven = 0;
    for (const graph::Graph& g : nets) {
      absl::StatusOr<MemoryOrder> r = FindMemoryAwareOrder(g, Options());
      if (!r.ok()) continue;
      const double ratio = static_cast<double>(std::max<int64_t>(r->given_peak_bytes, 1)) /
                           static_cast<double>(std::max<int64_t>(r->peak_bytes, 1));
      log_sum += std::log(ratio);
      largest = std::max(largest, ratio);
      improved += r->peak_bytes < r->given_peak_bytes;
      proven += r->proven_optimal;
    }
  }
  state.counters["nets"] = static_cast<double>(nets.size());
  state.counters["given/best"] = std::exp(log_sum / static_cast<double>(nets.size()));
  state.counters["max given/best"] = largest;
  state.counters["improved"] = improved;
  state.counters["proven"] = proven;
}

const char* const kSpecs[] = {
    "randwire:nodes=32,k=4,p=75,stages=3,seed=1", "randwire:nodes=32,k=4,p=75,stages=3,seed=2",
    "randwire:nodes=32,k=4,p=75,stages=3,seed=3", "randwire:nodes=32,k=4,p=75,stages=3,seed=4",
    "randwire:nodes=32,k=4,p=75,stages=3,seed=5", "randwire:nodes=16,k=4,p=75,stages=3,seed=1",
    "randwire:nodes=64,k=6,p=75,stages=3,seed=1", "randwire:nodes=32,k=4,p=75,stages=1,seed=1",
    "random:ops=1000,seed=1",  "random:ops=1000,seed=2", "random:ops=10000,seed=3",
    "attention:n=8192,depth=4,mode=training", "attention:n=8192,depth=4,kernel=efficient,mode=training",
    "resnet50:batch=32,mode=training", "mlp:layers=64,batch=64,dim=1024,mode=training",
};

int Register() {
  for (const char* spec : kSpecs) {
    benchmark::RegisterBenchmark(absl::StrCat("MemoryOrder/", spec).c_str(), BM_Workload,
                                 std::string(spec))
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  benchmark::RegisterBenchmark("MemoryOrder/onnx_backend_models", BM_OnnxBackendModels)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(1);
  return 0;
}
const int registered = Register();

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

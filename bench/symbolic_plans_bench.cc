// Symbolic plans (issue #13): one plan for a range of bindings, rated at many bindings.
//
// BM_AttentionRange: the attention workload (TITAN-like default: dim 768, 12 heads, depth 6),
// inference and training, math and efficient kernels, n in [256, 65536], planned once with
// `auto` under a 10 s limit. Counters over 128 bindings (the box's corners, a geometric grid
// and random values): worst and mean of arena / lower bound of the bound symbolic plan, and
// the same for planning for the maximum (TensorRT's way: the arena at n = 65536 reserved at
// every n); pieces; items.
// BM_OnnxBatchRange: ONNX models of libonnx-testdata with their batch dim made symbolic, as an
// exporter with dynamic axes writes it (dim_param "batch" on the first input and output),
// batch in [1, 64], rated at every batch (64 bindings: all there are).
// BM_Bind: SymbolicPlan::Bind on the attention training plan, per value.
//
//   build-dir/bench/symbolic_plans_bench --benchmark_counters_tabular=true
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/model_loader.h"
#include "graph/symbolic_shapes.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "onnx/onnx_pb.h"
#include "util/check.h"
#include "util/status_macros.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using graph::SymbolBindings;
using graph::SymbolBox;

using GraphAt = std::function<absl::StatusOr<graph::Graph>(const SymbolBindings&)>;

struct Rated {
  SymbolicPlan plan;
  double worst = 0, mean = 0, max_worst = 0, max_mean = 0;
  int bindings = 0;
};

// Plans `box` once and rates the plan at `count` bindings (corners, grid, random).
absl::StatusOr<Rated> PlanAndRate(const GraphAt& at, const SymbolBox& box, double time_limit,
                                  int count, const graph::ShapeBindings& fixed = {}) {
  PlanOptions options;
  options.time_limit_seconds = time_limit;
  Rated r;
  MG_ASSIGN_OR_RETURN(RangePlan range, PlanRange(at, fixed, box, options, /*upper_bound_fallback=*/true));
  r.plan = std::move(range.plan);
  // A one-symbol range of at most `count` values is rated at every value.
  std::vector<SymbolBindings> bindings;
  const bool every_value = box.ranges.size() == 1 && box.ranges[0].hi - box.ranges[0].lo < count;
  if (every_value) {
    for (int64_t v = box.ranges[0].lo; v <= box.ranges[0].hi; ++v) {
      bindings.push_back({{box.ranges[0].symbol, v}});
    }
  } else {
    bindings = SampleBindings(box, count / 2);
  }
  std::mt19937_64 rng(5);
  while (!every_value && static_cast<int>(bindings.size()) < count) {
    SymbolBindings b;
    for (const graph::SymbolRange& s : box.ranges) {
      b[s.symbol] = std::uniform_int_distribution<int64_t>(s.lo, s.hi)(rng);
    }
    bindings.push_back(b);
  }
  std::sort(bindings.begin(), bindings.end());
  bindings.erase(std::unique(bindings.begin(), bindings.end()), bindings.end());
  std::vector<int64_t> scratch;
  MG_ASSIGN_OR_RETURN(SymbolicPlan::Extent at_max, r.plan.Measure(box.High(), scratch));
  for (const SymbolBindings& b : bindings) {
    MG_ASSIGN_OR_RETURN(SymbolicPlan::Extent e, r.plan.Measure(b, scratch));
    const double lb = static_cast<double>(std::max<int64_t>(e.lower_bound, 1));
    r.worst = std::max(r.worst, e.arena / lb);
    r.mean += e.arena / lb;
    r.max_worst = std::max(r.max_worst, at_max.arena / lb);
    r.max_mean += at_max.arena / lb;
  }
  r.bindings = static_cast<int>(bindings.size());
  r.mean /= r.bindings;
  r.max_mean /= r.bindings;
  return r;
}

void Report(benchmark::State& state, const Rated& r) {
  state.counters["pieces"] = static_cast<double>(r.plan.pieces.size());
  state.counters["items"] = static_cast<double>(r.plan.items.size());
  state.counters["bindings"] = r.bindings;
  state.counters["worst"] = r.worst;
  state.counters["mean"] = r.mean;
  state.counters["max_worst"] = r.max_worst;
  state.counters["max_mean"] = r.max_mean;
}

// The attention workload's other symbol, at its default.
graph::ShapeBindings BatchOne() {
  graph::ShapeBindings fixed;
  fixed.dims["batch"] = 1;
  return fixed;
}

GraphAt AttentionAt(const std::string& kernel, const std::string& mode) {
  return [=](const SymbolBindings& b) -> absl::StatusOr<graph::Graph> {
    MG_ASSIGN_OR_RETURN(graph::WorkloadSpec spec,
                        graph::ParseWorkloadSpec(absl::StrCat("attention:kernel=", kernel, ",mode=",
                                                              mode, ",n=", b.at("n"))));
    return graph::BuildSymbolicWorkload(spec, nullptr);
  };
}

void BM_AttentionRange(benchmark::State& state, const std::string& kernel, const std::string& mode) {
  SymbolBox box;
  MG_CHECK(graph::ParseDimRange("n=256..65536", box).ok());
  for (auto _ : state) {
    absl::StatusOr<Rated> r = PlanAndRate(AttentionAt(kernel, mode), box, 10, 128, BatchOne());
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    Report(state, *r);
  }
}
BENCHMARK_CAPTURE(BM_AttentionRange, math_inference, "math", "inference")->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_AttentionRange, math_training, "math", "training")->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_AttentionRange, efficient_inference, "efficient", "inference")->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_AttentionRange, efficient_training, "efficient", "training")->Iterations(1)->Unit(benchmark::kSecond);

// The model with dim 0 of its first input and output renamed "batch"; "" when not installed.
std::string WithSymbolicBatch(const std::string& name) {
  std::ifstream in(absl::StrCat("/usr/share/libonnx-testdata/data/", name, "/model.onnx"),
                   std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in)) return "";
  model.mutable_graph()->clear_value_info();
  for (auto* list : {model.mutable_graph()->mutable_input(), model.mutable_graph()->mutable_output()}) {
    auto* shape = list->Mutable(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() > 0) shape->mutable_dim(0)->set_dim_param("batch");
  }
  const std::string path = absl::StrCat("/tmp/symbolic_bench_", std::to_string(std::hash<std::string>()(name)), ".onnx");
  std::ofstream out(path, std::ios::binary);
  return model.SerializeToOstream(&out) ? path : "";
}

void BM_OnnxBatchRange(benchmark::State& state, const std::string& name) {
  const std::string path = WithSymbolicBatch(name);
  if (path.empty()) {
    state.SkipWithError("libonnx-testdata is not installed");
    return;
  }
  SymbolBox box;
  MG_CHECK(graph::ParseDimRange("batch=1..64", box).ok());
  GraphAt at = [&](const SymbolBindings& b) -> absl::StatusOr<graph::Graph> {
    graph::LoadOptions load;
    load.bindings.dims = b;
    MG_ASSIGN_OR_RETURN(graph::Graph g, graph::LoadModel(path, load));
    MG_RETURN_IF_ERROR(graph::InferShapes(g, load.bindings));
    return g;
  };
  for (auto _ : state) {
    absl::StatusOr<Rated> r = PlanAndRate(at, box, 2, 64);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    Report(state, *r);
    int fallback = 0;
    for (const std::string& f : r->plan.fallback) fallback += f.empty() ? 0 : 1;
    state.counters["fallback"] = fallback;
  }
}
BENCHMARK_CAPTURE(BM_OnnxBatchRange, Conv2d, "pytorch-converted/test_Conv2d")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, BatchNorm2d, "pytorch-converted/test_BatchNorm2d_eval")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, AvgPool2d, "pytorch-converted/test_AvgPool2d")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, GLU, "pytorch-converted/test_GLU")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, Conv1d, "pytorch-converted/test_Conv1d")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, Conv3d, "pytorch-converted/test_Conv3d")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, MaxPool2d, "pytorch-converted/test_MaxPool2d")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, Softsign, "pytorch-converted/test_Softsign")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, Linear, "pytorch-converted/test_Linear")->Iterations(1);
BENCHMARK_CAPTURE(BM_OnnxBatchRange, operator_basic, "pytorch-operator/test_operator_basic")->Iterations(1);

void BM_Bind(benchmark::State& state) {
  SymbolBox box;
  MG_CHECK(graph::ParseDimRange("n=256..65536", box).ok());
  absl::StatusOr<Rated> r = PlanAndRate(AttentionAt("math", "training"), box, 2, 4, BatchOne());
  MG_CHECK(r.ok());
  const SymbolicPlan& plan = r->plan;
  std::mt19937_64 rng(3);
  int64_t values = 0;
  for (auto _ : state) {
    const SymbolBindings b = {{"n", 256 + static_cast<int64_t>(rng() % 65281)}};
    absl::StatusOr<Plan> bound = plan.Bind(b);
    benchmark::DoNotOptimize(bound);
    values += static_cast<int64_t>(plan.base.buffer_of_value.size());
  }
  state.counters["values"] = static_cast<double>(plan.base.buffer_of_value.size());
  state.counters["ns_per_value"] = benchmark::Counter(
      static_cast<double>(values), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Bind);

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

// memonger-dag planning time on random DAGs (fixed seeds) of 1k and 10k ops, inference (all
// ops traversed) in the serial and parallel execution models. (The time grows about
// quadratically, with outputs x free buffers: 100k ops took 38 s.) The schedule and liveness
// are computed once outside the timed loop: the time is PlanMemongerDag's alone.
// Counters: ops; groups / classes (buffers per alias class); shared = sum of buffer sizes /
// naive (every class alone); arena / lower bound of the resulting sharing plan.
//
//   build-dir/bench/memonger_dag_bench --benchmark_counters_tabular=true
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"
#include "memonger/schedule.h"
#include "memonger/sharing/memonger_dag.h"
#include "memonger/sharing/sharing.h"
#include "util/check.h"

namespace memonger {
namespace {

// A random DAG: each op reads 1-3 values (mostly recent ones, sometimes any: long lifetimes
// and joins of distant branches), writes 1-2 new values, and one op in ten overwrites its
// first input in place. Byte sizes log-uniform in [1, 64 KiB]. Two graph inputs; the last
// value is the graph output.
graph::Graph RandomDag(int num_ops, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  graph::GraphBuilder b(absl::StrCat("random_dag_", num_ops));
  std::vector<std::string> pool = {"in0", "in1"};
  b.AddExternalInput("in0");
  b.AddExternalInput("in1");
  auto pick = [&]() -> const std::string& {
    const int n = static_cast<int>(pool.size());
    return uniform(10) < 6 ? pool[n - 1 - uniform(std::min(n, 4))] : pool[uniform(n)];
  };
  int next = 0;
  for (int i = 0; i < num_ops; ++i) {
    graph::OpSpec op;
    op.type = "Rand";
    const int num_inputs = 1 + uniform(3);
    for (int k = 0; k < num_inputs; ++k) op.inputs.push_back(pick());
    const bool in_place = uniform(10) == 0 && op.inputs[0] != "in0" && op.inputs[0] != "in1";
    op.outputs.push_back(in_place ? op.inputs[0] : absl::StrCat("v", next++));
    if (uniform(5) == 0) op.outputs.push_back(absl::StrCat("v", next++));
    for (const std::string& out : op.outputs) {
      if (out != op.inputs[0] || !in_place) pool.push_back(out);
    }
    b.AddOp(std::move(op));
  }
  b.AddExternalOutput(pool.back());
  absl::StatusOr<graph::Graph> built = std::move(b).Build();
  MG_CHECK(built.ok());
  graph::Graph g = *std::move(built);
  for (graph::ValueId id = 0; id < g.num_values(); ++id) {
    graph::Value& v = g.mutable_value(id);
    if (v.inplace_of != graph::kNone) {
      v.type = g.value(v.inplace_of).type;
      continue;
    }
    const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    const auto bytes = static_cast<int64_t>(std::exp(unit * std::log(65536.0)));
    v.type = graph::TensorType{graph::DataType::kUInt8, {std::max<int64_t>(bytes, 1)}};
  }
  return g;
}

void BM_MemongerDag(benchmark::State& state) {
  const int num_ops = static_cast<int>(state.range(0));
  const bool parallel = state.range(1) != 0;
  const graph::Graph g = RandomDag(num_ops, /*seed=*/1);
  absl::StatusOr<Schedule> schedule = MakeSchedule(g, OrderKind::kGiven);
  MG_CHECK(schedule.ok());
  absl::StatusOr<Liveness> liveness = ComputeLiveness(g, *schedule);
  MG_CHECK(liveness.ok());
  const MemongerOptions options;  // inference: every planned value may share
  const ExecutionModel execution = parallel ? ExecutionModel::kParallel : ExecutionModel::kSerial;

  SharingGroups groups;
  for (auto _ : state) {
    absl::StatusOr<SharingGroups> r =
        PlanMemongerDag(g, *liveness, options, execution);
    MG_CHECK(r.ok());
    groups = *std::move(r);
    benchmark::DoNotOptimize(groups);
  }

  Plan plan;
  plan.execution = execution;
  InitPlan(g, *liveness, /*alignment=*/256, plan);
  BuildSharingPlan(g, *liveness, groups, plan);
  FinishPlan(plan);
  int classes = 0;
  for (graph::ValueId v = 0; v < g.num_values(); ++v) {
    classes += liveness->planned[v] && liveness->alias_root[v] == v;
  }
  state.counters["ops"] = num_ops;
  state.counters["groups/classes"] =
      static_cast<double>(groups.size()) / static_cast<double>(std::max(classes, 1));
  state.counters["shared/naive"] = static_cast<double>(SumOfBufferSizes(plan)) /
                                   static_cast<double>(std::max<int64_t>(plan.naive_bytes, 1));
  state.counters["arena/lower_bound"] =
      static_cast<double>(plan.arena_bytes) /
      static_cast<double>(std::max<int64_t>(plan.lower_bound_bytes, 1));
}

BENCHMARK(BM_MemongerDag)
    ->ArgNames({"ops", "parallel"})
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

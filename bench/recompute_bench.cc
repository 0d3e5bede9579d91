// Recomputation: the lower bound reached against the extra FLOPs, at budgets from 30% to 90%
// of the lower bound without recomputation, beside Chen's sqrt(n) segmenting; and the
// heuristic's FLOPs (greedy + segmenting, the exact search switched off) over the exact
// search's on nets small enough for it (the goal: at most 1.3x at every budget).
// Counters: budget% of the lower bound without recomputation; reached% (the rewritten net's
// lower bound, same base); flops% (extra FLOPs over the forward pass); fits; and for the
// heuristic rows heuristic/exact (extra FLOPs, 1 = optimal).
//
//   build-dir/bench/recompute_bench --benchmark_counters_tabular=true
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "memonger/recompute.h"
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

void Report(benchmark::State& state, const RecomputeChoice& c, int64_t budget_percent) {
  const double base = static_cast<double>(c.original_lower_bound_bytes);
  state.counters["budget%"] = static_cast<double>(budget_percent);
  state.counters["reached%"] = 100.0 * static_cast<double>(c.lower_bound_bytes) / base;
  state.counters["flops%"] =
      100.0 * static_cast<double>(c.extra_flops) / static_cast<double>(c.forward_flops);
  state.counters["fits"] = c.fits ? 1 : 0;
  state.counters["ops"] = static_cast<double>(c.ops.size());
}

// args: budget percent (0: sqrt).
void BM_Curve(benchmark::State& state, const std::string& spec) {
  const graph::Graph g = Workload(spec);
  RecomputeOptions options;
  options.time_limit_seconds = 5;
  RecomputeChoice base;
  {
    RecomputeOptions none = options;
    none.kind = RecomputeKind::kNone;
    base = *ChooseRecomputation(g, none);
  }
  const int64_t percent = state.range(0);
  if (percent == 0) {
    options.kind = RecomputeKind::kSqrt;
  } else {
    options.budget_bytes = base.original_lower_bound_bytes * percent / 100;
  }
  RecomputeChoice choice;
  for (auto _ : state) {
    absl::StatusOr<RecomputeChoice> c = ChooseRecomputation(g, options);
    MG_CHECK(c.ok());
    choice = *std::move(c);
  }
  Report(state, choice, percent);
  state.SetLabel(percent == 0 ? "sqrt" : choice.method);
}

// The heuristic against the exact search on a small net.
void BM_HeuristicOverExact(benchmark::State& state, const std::string& spec) {
  const graph::Graph g = Workload(spec);
  RecomputeOptions options;
  options.time_limit_seconds = 30;
  RecomputeOptions none = options;
  none.kind = RecomputeKind::kNone;
  const int64_t base = ChooseRecomputation(g, none)->original_lower_bound_bytes;
  options.budget_bytes = base * state.range(0) / 100;
  RecomputeChoice exact, heuristic;
  for (auto _ : state) {
    exact = *ChooseRecomputation(g, options);
    RecomputeOptions no_exact = options;
    no_exact.max_exact_candidates = 0;
    heuristic = *ChooseRecomputation(g, no_exact);
  }
  Report(state, heuristic, state.range(0));
  state.counters["proven"] = exact.proven_optimal ? 1 : 0;
  state.counters["heuristic/exact"] =
      exact.fits && exact.extra_flops > 0
          ? static_cast<double>(heuristic.extra_flops) / static_cast<double>(exact.extra_flops)
          : (heuristic.fits == exact.fits ? 1.0 : 0.0);
}

int Register() {
  for (const char* spec : {"mlp:layers=64,batch=4096,dim=64,mode=training",
                           "attention:n=8192,depth=4,mode=training",
                           "attention:n=8192,depth=4,kernel=efficient,mode=training"}) {
    auto* b = benchmark::RegisterBenchmark(absl::StrCat("Recompute/", spec).c_str(), BM_Curve,
                                           std::string(spec));
    b->Arg(0);
    for (int percent = 30; percent <= 90; percent += 10) b->Arg(percent);
    b->Unit(benchmark::kMillisecond)->Iterations(1);
  }
  for (const char* spec : {"mlp:layers=10,batch=4096,dim=64,mode=training",
                           "mlp:layers=8,batch=1024,dim=128,mode=training"}) {
    auto* b = benchmark::RegisterBenchmark(absl::StrCat("RecomputeVsExact/", spec).c_str(),
                                           BM_HeuristicOverExact, std::string(spec));
    for (int percent = 30; percent <= 90; percent += 10) b->Arg(percent);
    b->Unit(benchmark::kMillisecond)->Iterations(1);
  }
  return 0;
}
const int registered = Register();

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

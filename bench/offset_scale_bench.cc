// Offset planning at scale and against a known optimum:
//   - greedy/NAME:      one greedy pass (the portfolio's first order, `peak`, best fit) on a
//                       large problem: the cost of IntervalIndex, the heart of every greedy
//                       planner;
//   - split/NAME/threads:T: the same pass cut in time (split_pass.h), as the portfolio's first
//                       run makes it on a large problem, its pieces on T threads;
//   - auto/NAME:        the CLI's default planner (2 s) on the same problem: window repair
//                       included, arena / lower bound;
//   - guillotine/N/S/PLANNER/threads:T: auto (2 s, one thread) and exact (10 s, one and two
//                       threads) on guillotine instances of N pieces, seed S
//                       (workloads/workload_guillotine.h), whose optimum is the lower bound.
// Large problems: `random` is the offset problem of --workload random:ops=610000,seed=3
// (651,663 items: the million-value graph of BENCHMARKS.md, through the CLI's path: schedule,
// liveness, OffsetProblemsFor, alignment 256); `trace` is a 10^6-record trace with random
// lifetimes (start uniform in [0, 2^20), 1 to 128 steps, 256 B to 64 KiB).
// Counters: items, lower_bound, arena, ratio, proven, seconds (wall, one run). Every plan is
// checked by CheckOffsetSolution; a failed check aborts the run.
//
//   build/bench/offset_scale_bench --benchmark_counters_tabular=true
//   build/bench/offset_scale_bench --benchmark_filter=guillotine --benchmark_counters_tabular=true
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "graph/records.h"
#include "memonger/liveness.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/offsets/split_pass.h"
#include "memonger/schedule.h"
#include "util/check.h"
#include "util/splitmix64.h"
#include "workloads/workload_guillotine.h"
#include "workloads/workload_random.h"

namespace memonger {
namespace {

OffsetProblem RandomGraphProblem() {
  graph::RandomWorkload w;
  w.ops = 610000;
  w.seed = 3;
  absl::StatusOr<graph::Graph> g = graph::BuildRandomGraph(w);
  MG_CHECK(g.ok());
  absl::StatusOr<Schedule> schedule = MakeSchedule(*g, OrderKind::kGiven);
  MG_CHECK(schedule.ok());
  absl::StatusOr<Liveness> liveness = ComputeLiveness(*g, *schedule, LivenessOptions{});
  MG_CHECK(liveness.ok());
  absl::StatusOr<std::vector<DeviceOffsetProblem>> problems =
      OffsetProblemsFor(*g, *liveness, /*alignment=*/256);
  MG_CHECK(problems.ok() && problems->size() == 1);
  return std::move(problems->front().problem);
}

OffsetProblem RandomTraceProblem() {
  util::SplitMix64 rng(1);
  std::vector<graph::UsageRecord> records(1000000);
  for (size_t i = 0; i < records.size(); ++i) {
    graph::UsageRecord& r = records[i];
    r.name = absl::StrCat(i);
    r.first_step = static_cast<int64_t>(rng.Below(int64_t{1} << 20));
    r.last_step = r.first_step + static_cast<int64_t>(rng.Below(128));
    r.bytes = int64_t{256} << rng.Below(9);
  }
  absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(records, /*alignment=*/256);
  MG_CHECK(problem.ok());
  return *std::move(problem);
}

void Report(benchmark::State& state, const OffsetProblem& problem, const OffsetSolution& s,
            double seconds) {
  MG_CHECK(CheckOffsetSolution(problem, s.offsets).ok());
  const int64_t lower_bound = OffsetLowerBound(problem);
  MG_CHECK(s.height >= lower_bound);
  state.counters["items"] = static_cast<double>(problem.items.size());
  state.counters["lower_bound"] = static_cast<double>(lower_bound);
  state.counters["arena"] = static_cast<double>(s.height);
  state.counters["ratio"] = lower_bound == 0 ? 1.0 : static_cast<double>(s.height) / lower_bound;
  state.counters["proven"] = s.proven_optimal ? 1 : 0;
  state.counters["seconds"] = seconds;
}

// One pass in the portfolio's first order: the whole pass (threads 0), or the pass cut in time
// (split_pass.h) as the portfolio's first run makes it on a large problem, its pieces on
// `threads` threads.
template <typename MakeProblem>
void BM_Pass(benchmark::State& state, MakeProblem make, int threads) {
  const OffsetProblem problem = make();
  OffsetSolution solution;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int> order = PortfolioItemOrder(problem, PortfolioOrder::kPeak);
    if (threads == 0) {
      GreedyPlacer placer(problem);
      solution = placer.Place(order, FitRule::kBestFit);
    } else {
      std::optional<TimeSplit> split = SplitInTime(problem, order);
      MG_CHECK(split.has_value());
      SplitPassOptions options;
      options.threads = threads;
      solution = PlaceSplit(problem, *split, FitRule::kBestFit, options).solution;
      state.counters["pieces"] = static_cast<double>(split->pieces.size());
      state.counters["crossing"] = static_cast<double>(split->crossing.size());
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  Report(state, problem, solution, seconds);
}

void Solve(benchmark::State& state, const OffsetProblem& problem, OffsetStrategy strategy,
           double time_limit_seconds, int threads = 1) {
  OffsetSolveOptions options;
  options.time_limit_seconds = time_limit_seconds;
  options.threads = threads;
  OffsetSolution solution;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<OffsetSolution> s = SolveOffsetProblem(problem, strategy, options);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MG_CHECK(s.ok());
    solution = *std::move(s);
  }
  Report(state, problem, solution, seconds);
}

template <typename MakeProblem>
void BM_Auto(benchmark::State& state, MakeProblem make) {
  Solve(state, make(), OffsetStrategy::kAuto, 2);
}

void BM_Guillotine(benchmark::State& state, int64_t records, uint64_t seed,
                   OffsetStrategy strategy, double time_limit_seconds, int threads) {
  graph::GuillotineWorkload w;
  w.records = records;
  w.seed = seed;
  const graph::GuillotineInstance instance = graph::MakeGuillotineInstance(w);
  absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(instance.records, 1);
  MG_CHECK(problem.ok());
  MG_CHECK(OffsetLowerBound(*problem) == instance.optimum);
  Solve(state, *problem, strategy, time_limit_seconds, threads);
}

int RegisterAll() {
  for (const auto& [name, make] : {std::pair{"random", &RandomGraphProblem},
                                   std::pair{"trace", &RandomTraceProblem}}) {
    for (int threads : {0, 1, 2}) {
      const std::string label = threads == 0 ? absl::StrCat("greedy/", name)
                                             : absl::StrCat("split/", name, "/threads:", threads);
      benchmark::RegisterBenchmark(label.c_str(), BM_Pass<OffsetProblem (*)()>, make, threads)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(absl::StrCat("auto/", name).c_str(),
                                 BM_Auto<OffsetProblem (*)()>, make)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  for (int64_t records : {60, 120, 240, 500, 700, 1000, 2000}) {
    for (uint64_t seed : {1, 2, 3}) {
      for (const auto& [planner, strategy, limit, threads] :
           {std::tuple{"auto", OffsetStrategy::kAuto, 2.0, 1},
            std::tuple{"exact", OffsetStrategy::kExact, 10.0, 1},
            std::tuple{"exact", OffsetStrategy::kExact, 10.0, 2}}) {
        benchmark::RegisterBenchmark(absl::StrCat("guillotine/", records, "/", seed, "/", planner,
                                                  "/threads:", threads)
                                         .c_str(),
                                     BM_Guillotine, records, seed, strategy, limit, threads)
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}

const int kRegistered = RegisterAll();

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

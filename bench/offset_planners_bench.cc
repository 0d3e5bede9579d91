// Every trace of the corpus (../shared/corpus/traces/*.csv) x every offset planner: arena /
// lower bound and planning time. The numbers of BENCHMARKS.md come from here
// (bench/benchmarks_table.py turns this program's JSON output into that table).
//
//   build/bench/offset_planners_bench --benchmark_format=json > offsets.json
//   build/bench/offset_planners_bench --benchmark_filter='mm_D/exact' --benchmark_counters_tabular
//
// A trace is loaded as optimize-net loads it (ParseMiniMallocCsv, OffsetProblemFromRecords:
// steps compressed to distinct boundaries, the trace's times kept as step_times), alignment 1
// (the traces' sizes are already what their systems allocate). The planners run through
// SolveOffsetProblem, the same call PlanMemory makes:
//   greedy-by-size, best-fit (the portfolio), best-fit+local-search (1000 iterations or 10 s),
//   exact (best-fit, then the branch and bound, 10 s), auto (local search, then the branch and
//   bound, 2 s: the CLI's default --time-limit).
// Counters: items, lower_bound, arena, ratio (arena / lower bound), proven (0/1), seconds (wall,
// one run). Every plan is checked by CheckOffsetSolution; a failed check aborts the run.
// Loading is not timed here (the CLI's own timing shows it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/records.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/offsets/offset_problem.h"
#include "util/check.h"

namespace memonger {
namespace {

namespace fs = std::filesystem;

struct PlannerCase {
  const char* name;
  OffsetStrategy strategy;
  double time_limit_seconds;
};

constexpr PlannerCase kPlanners[] = {
    {"greedy-by-size", OffsetStrategy::kGreedyBySize, 0},
    {"best-fit", OffsetStrategy::kBestFit, 10},  // the whole portfolio on every trace
    {"best-fit+local-search", OffsetStrategy::kBestFitWithLocalSearch, 10},
    {"exact", OffsetStrategy::kExact, 10},
    {"auto", OffsetStrategy::kAuto, 2},
};

// $MEMONGER_TRACES, else ../shared/corpus/traces beside the source tree this file is in.
fs::path TraceDir() {
  if (const char* env = std::getenv("MEMONGER_TRACES")) return env;
  return fs::path(__FILE__).parent_path().parent_path().parent_path() / "shared" / "corpus" /
         "traces";
}

OffsetProblem LoadTrace(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<graph::UsageRecord>> records =
      graph::ParseMiniMallocCsv(text.str(), path.string());
  MG_CHECK(records.ok());
  absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(*records, /*alignment=*/1);
  MG_CHECK(problem.ok());
  return *std::move(problem);
}

void BM_Plan(benchmark::State& state, const fs::path& path, PlannerCase planner) {
  const OffsetProblem problem = LoadTrace(path);
  const int64_t lower_bound = OffsetLowerBound(problem);
  OffsetSolveOptions options;
  options.time_limit_seconds = planner.time_limit_seconds;
  OffsetSolution solution;
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<OffsetSolution> s = SolveOffsetProblem(problem, planner.strategy, options);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MG_CHECK(s.ok());
    solution = *std::move(s);
  }
  MG_CHECK(CheckOffsetSolution(problem, solution.offsets).ok());
  MG_CHECK(solution.height >= lower_bound);
  state.counters["items"] = static_cast<double>(problem.items.size());
  state.counters["lower_bound"] = static_cast<double>(lower_bound);
  state.counters["arena"] = static_cast<double>(solution.height);
  state.counters["ratio"] =
      lower_bound == 0 ? 1.0 : static_cast<double>(solution.height) / lower_bound;
  state.counters["proven"] = solution.proven_optimal ? 1 : 0;
  state.counters["seconds"] = seconds;
}

int RegisterAll() {
  const fs::path dir = TraceDir();
  std::vector<fs::path> traces;
  if (fs::is_directory(dir)) {
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".csv") traces.push_back(e.path());
    }
  }
  std::sort(traces.begin(), traces.end());
  if (traces.empty()) std::fprintf(stderr, "no traces in %s\n", dir.c_str());
  for (const fs::path& trace : traces) {
    for (const PlannerCase& planner : kPlanners) {
      const std::string name = trace.stem().string() + "/" + planner.name;
      benchmark::RegisterBenchmark(name.c_str(), BM_Plan, trace, planner)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  }
  return 0;
}

const int kRegistered = RegisterAll();

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

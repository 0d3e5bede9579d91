// exact on MiniMalloc's eleven "challenging" traces (corpus/traces/mm_A.csv ... mm_K.csv) and
// the paper's toy trace, 10 s per trace, starting from the best-fit portfolio's plan.
// Counters: lower_bound, height, ratio (height / lower bound), proven (0/1), seconds,
// start_ratio (the best-fit incumbent / lower bound).
//
//   MEMONGER_SOURCE_DIR=/path/to/memonger build-dir/bench/exact_offsets_bench \
//       --benchmark_counters_tabular=true
// Without MEMONGER_SOURCE_DIR the traces are found next to this source file (../corpus is
// tried too, then paths relative to the working directory).
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/records.h"
#include "memonger/best_fit.h"
#include "memonger/exact_offsets.h"
#include "memonger/offset_problem.h"
#include "util/check.h"

namespace memonger {
namespace {

constexpr double kTimeLimitSeconds = 10;

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

// The trace's path: $MEMONGER_SOURCE_DIR/../shared/corpus/traces or corpus/traces under the
// source dir (derived from this file's path when the variable is unset).
std::string TracePath(const std::string& file) {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("MEMONGER_SOURCE_DIR")) roots.push_back(env);
  std::string here = __FILE__;  // <source>/bench/exact_offsets_bench.cc
  for (int up = 0; up < 2 && here.find('/') != std::string::npos; ++up) {
    here = here.substr(0, here.rfind('/'));
  }
  roots.push_back(here);
  roots.push_back("..");
  roots.push_back("../..");
  for (const std::string& root : roots) {
    for (const char* dir : {"/corpus/traces/", "/../shared/corpus/traces/"}) {
      const std::string path = root + dir + file;
      if (Exists(path)) return path;
    }
  }
  return "";
}

// MiniMalloc CSV -> OffsetProblem, steps compressed to the sorted distinct lifetime ends
// (keeps every overlap, so every plan and the lower bound).
OffsetProblem LoadTrace(const std::string& file) {
  const std::string path = TracePath(file);
  MG_CHECK(!path.empty());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<graph::UsageRecord>> records =
      graph::ParseMiniMallocCsv(text.str(), path);
  MG_CHECK(records.ok());
  std::vector<int64_t> steps;
  for (const graph::UsageRecord& r : *records) {
    steps.push_back(r.first_step);
    steps.push_back(r.last_step);
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  auto index = [&](int64_t t) {
    return static_cast<int>(std::lower_bound(steps.begin(), steps.end(), t) - steps.begin());
  };
  OffsetProblem problem;
  problem.num_steps = static_cast<int>(steps.size());
  for (const graph::UsageRecord& r : *records) {
    OffsetItem item;
    item.first_step = index(r.first_step);
    item.last_step = index(r.last_step);
    item.alignment = r.alignment > 0 ? r.alignment : 1;
    item.bytes = (r.bytes + item.alignment - 1) / item.alignment * item.alignment;
    problem.items.push_back(item);
  }
  return problem;
}

void BM_Exact(benchmark::State& state, const std::string& file) {
  const OffsetProblem problem = LoadTrace(file);
  const int64_t lower_bound = OffsetLowerBound(problem);
  absl::StatusOr<OffsetSolution> start = PlanBestFit(problem);
  MG_CHECK(start.ok());
  OffsetSolution result;
  double seconds = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    ExactOffsetsOptions options;
    options.time_limit_seconds = kTimeLimitSeconds;
    absl::StatusOr<OffsetSolution> r = PlaceExact(problem, *start, options);
    MG_CHECK(r.ok());
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result = *std::move(r);
    MG_CHECK(CheckOffsetSolution(problem, result.offsets).ok());
  }
  state.counters["items"] = static_cast<double>(problem.items.size());
  state.counters["lower_bound"] = static_cast<double>(lower_bound);
  state.counters["height"] = static_cast<double>(result.height);
  state.counters["ratio"] = static_cast<double>(result.height) / static_cast<double>(lower_bound);
  state.counters["start_ratio"] =
      static_cast<double>(start->height) / static_cast<double>(lower_bound);
  state.counters["proven"] = result.proven_optimal ? 1 : 0;
  state.counters["seconds"] = seconds;
}

const char* const kTraces[] = {"paper_toy.csv", "mm_A.csv", "mm_B.csv", "mm_C.csv",
                               "mm_D.csv",      "mm_E.csv", "mm_F.csv", "mm_G.csv",
                               "mm_H.csv",      "mm_I.csv", "mm_J.csv", "mm_K.csv"};

int RegisterAll() {
  for (const char* trace : kTraces) {
    const std::string name = std::string(trace).substr(0, std::string(trace).size() - 4);
    benchmark::RegisterBenchmark(("BM_Exact/" + name).c_str(), BM_Exact, std::string(trace))
        ->Iterations(1)
        ->Unit(benchmark::kSecond);
  }
  return 0;
}
const int kRegistered = RegisterAll();

}  // namespace
}  // namespace memonger

BENCHMARK_MAIN();

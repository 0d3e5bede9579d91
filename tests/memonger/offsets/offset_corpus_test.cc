// Every trace of the shared corpus (MiniMalloc CSV: real DNN traces, MiniMalloc's hard ones,
// IOPDDL's large ones) plans with best-fit, verifies, and prints a table of arena / lower bound
// and planning time. Skipped when the corpus folder is missing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "graph/records.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/greedy_by_size.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/verify_plan.h"
#include "tests/offset_support.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::vector<fs::path> Traces() {
  const fs::path dir = testing::SourcePath("../shared/corpus/traces");
  std::vector<fs::path> traces;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return traces;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    if (entry.path().extension() == ".csv") traces.push_back(entry.path());
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

std::vector<graph::UsageRecord> ReadTrace(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<graph::UsageRecord>> records =
      graph::ParseMiniMallocCsv(text.str(), path.string());
  EXPECT_TRUE(records.ok()) << records.status();
  return records.ok() ? *std::move(records) : std::vector<graph::UsageRecord>{};
}

TEST(OffsetCorpusTest, EveryTracePlansWithBestFit) {
  const std::vector<fs::path> traces = Traces();
  if (traces.empty()) GTEST_SKIP() << "no corpus at ../shared/corpus/traces";
  std::printf("%-18s %7s %14s %14s %7s %9s  %s\n", "trace", "items", "lower bound", "height",
              "ratio", "ms", "winner");
  for (const fs::path& path : traces) {
    const std::string name = path.stem().string();
    SCOPED_TRACE(name);
    const std::vector<graph::UsageRecord> records = ReadTrace(path);
    absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(records, 1);
    ASSERT_TRUE(problem.ok()) << problem.status();
    const auto start = Clock::now();
    absl::StatusOr<BestFitResult> result = RunBestFitPortfolio(*problem);
    const double ms = Millis(Clock::now() - start);
    ASSERT_TRUE(result.ok()) << result.status();
    const OffsetSolution& s = result->solution;
    EXPECT_TRUE(CheckOffsetSolution(*problem, s.offsets).ok())
        << CheckOffsetSolution(*problem, s.offsets);
    const double ratio = result->lower_bound > 0
                             ? static_cast<double>(s.height) / result->lower_bound
                             : 1.0;
    std::printf("%-18s %7zu %14lld %14lld %7.4f %9.1f  %s/%s\n", name.c_str(),
                problem->items.size(), static_cast<long long>(result->lower_bound),
                static_cast<long long>(s.height), ratio, ms,
                PortfolioOrderName(result->order_kind), FitRuleName(result->rule));
    EXPECT_GE(s.height, result->lower_bound);
    // Published best-fit results on this corpus stay within 1.41 x the lower bound.
    EXPECT_LE(ratio, 1.45);
    if (name.rfind("mm_", 0) != 0) {
      EXPECT_LE(ratio, 1.02) << "a DNN trace";  // measured 1.000 - 1.016 by others
    }
    // Offsets recorded in the trace (IREE's own plans): verify and compare.
    const bool recorded = !records.empty() &&
                          std::all_of(records.begin(), records.end(),
                                      [](const graph::UsageRecord& r) { return r.offset >= 0; });
    if (recorded) {
      std::vector<int64_t> offsets;
      int64_t height = 0;
      for (size_t i = 0; i < records.size(); ++i) {
        offsets.push_back(records[i].offset);
        height = std::max(height, records[i].offset + problem->items[i].bytes);
      }
      EXPECT_TRUE(CheckOffsetSolution(*problem, offsets).ok());
      std::printf("%-18s %7s %14s %14lld %7.4f %9s  (offsets recorded in the trace)\n", "", "",
                  "", static_cast<long long>(height),
                  static_cast<double>(height) / result->lower_bound, "");
    }
  }
}

// The largest trace again, with a 256-byte alignment: 62,185 buffers with 1.8 * 10^8 pairs
// meeting in time (a pair-by-pair greedy placement needs seconds). Speed is measured by the
// benchmarks, not asserted here (shared, noisy machines); this prints it.
TEST(OffsetCorpusTest, LargestTracePlansAndVerifies) {
  const fs::path path = testing::SourcePath("../shared/corpus/traces/Y_1.csv");
  if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
  absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(ReadTrace(path), 256);
  ASSERT_TRUE(problem.ok()) << problem.status();
  auto start = Clock::now();
  absl::StatusOr<OffsetSolution> greedy = PlanGreedyBySize(*problem);
  const double greedy_ms = Millis(Clock::now() - start);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  start = Clock::now();
  EXPECT_TRUE(CheckOffsetSolution(*problem, greedy->offsets).ok());
  const double check_ms = Millis(Clock::now() - start);
  for (size_t i = 0; i < problem->items.size(); ++i) {
    ASSERT_EQ(greedy->offsets[i] % 256, 0) << "item " << i;
  }
  std::printf("Y_1 (alignment 256): greedy-by-size %.1f ms, check %.1f ms; height / lower bound "
              "%.4f\n",
              greedy_ms, check_ms,
              static_cast<double>(greedy->height) / OffsetLowerBound(*problem));
}

// Real traces whose greedy plans, local search and the branch and bound on the whole all end a
// few hundred bytes above the bound: the window around the peak (peak_window.h) reaches it, at
// either alignment. The limit is generous (the search ends once it is at the bound); how fast
// is BENCHMARKS.md's question.
TEST(OffsetCorpusTest, BertTracesAreProvenAtTheBound) {
  for (const char* name : {"bert_large", "bert_nezha"}) {
    const fs::path path =
        testing::SourcePath(std::string("../shared/corpus/traces/") + name + ".csv");
    if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
    for (int64_t alignment : {1, 256}) {
      SCOPED_TRACE(std::string(name) + ", alignment " + std::to_string(alignment));
      absl::StatusOr<OffsetProblem> problem = OffsetProblemFromRecords(ReadTrace(path), alignment);
      ASSERT_TRUE(problem.ok()) << problem.status();
      absl::StatusOr<BestFitResult> best = RunBestFitPortfolio(*problem);
      ASSERT_TRUE(best.ok()) << best.status();
      EXPECT_GT(best->solution.height, best->lower_bound);  // what the windows are for
      OffsetSolveOptions options;
      options.time_limit_seconds = 60;
      absl::StatusOr<OffsetSolution> exact =
          SolveOffsetProblem(*problem, OffsetStrategy::kExact, options);
      ASSERT_TRUE(exact.ok()) << exact.status();
      EXPECT_TRUE(CheckOffsetSolution(*problem, exact->offsets).ok());
      EXPECT_EQ(exact->height, best->lower_bound);
      EXPECT_TRUE(exact->proven_optimal);
    }
  }
}

// The same through the whole planning path, checked by the independent verifier: the traces as
// records graphs, planned by exact at the CLI's alignment. S_1's window has three ranges of
// steps, 15,000 steps apart.
TEST(OffsetCorpusTest, WindowedPlansOfRealTracesVerify) {
  for (const char* name : {"bert_large", "S_1"}) {
    SCOPED_TRACE(name);
    const fs::path path =
        testing::SourcePath(std::string("../shared/corpus/traces/") + name + ".csv");
    if (!fs::exists(path)) GTEST_SKIP() << "no " << path;
    absl::StatusOr<graph::Graph> g = graph::GraphFromRecords(ReadTrace(path), name);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(graph::InferShapes(*g, {}).ok());
    PlanOptions options;
    options.alignment = 256;
    options.time_limit_seconds = 60;
    absl::StatusOr<Plan> plan =
        testing::PlanWithOffsetStrategy(*g, options, OffsetStrategy::kExact);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(*g, *plan).ok()) << VerifyPlan(*g, *plan);
    EXPECT_EQ(plan->arena_bytes, plan->lower_bound_bytes);
    EXPECT_TRUE(plan->proven_optimal);
  }
}

}  // namespace
}  // namespace memonger

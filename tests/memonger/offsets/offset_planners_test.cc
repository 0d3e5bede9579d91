// Every offset planner (greedy-by-size, best-fit, best-fit with local search, exact, auto) meets
// the same properties, checked once here as a typed suite rather than copied into each
// planner's own test: on fixed-seed random problems the solution verifies, every offset is
// aligned, and the height lies between the lower bound and the stacked sum of the sizes; on
// random graphs the plan passes the independent verifier with lower bound <= arena <= naive,
// and a parallel executor is refused; the same input gives the same offsets; a searching
// planner stops at its time limit with a valid plan; plus hand cases with known answers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/records.h"
#include "gtest/gtest.h"
#include "memonger/offsets/best_fit.h"
#include "memonger/offsets/greedy_by_size.h"
#include "memonger/offsets/interval_index.h"
#include "memonger/offsets/local_search.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/offsets/offset_problem.h"
#include "memonger/verify_plan.h"
#include "tests/offset_support.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"
#include "util/splitmix64.h"

namespace memonger {
namespace {

// Each planner, with the height it reaches on memonger's DP counterexample (see below), and
// whether it searches until it proves its result optimal (above the lower bound too).
struct GreedyBySize {
  static const char* Name() { return "GreedyBySize"; }
  static constexpr OffsetStrategy kStrategy = OffsetStrategy::kGreedyBySize;
  static constexpr int64_t kDpCounterexampleHeight = 17;
  static constexpr bool kProves = false;
  static absl::StatusOr<OffsetSolution> Plan(const OffsetProblem& p) {
    return PlanGreedyBySize(p);
  }
};
struct BestFit {
  static const char* Name() { return "BestFit"; }
  static constexpr OffsetStrategy kStrategy = OffsetStrategy::kBestFit;
  static constexpr int64_t kDpCounterexampleHeight = 17;
  static constexpr bool kProves = false;
  static absl::StatusOr<OffsetSolution> Plan(const OffsetProblem& p) { return PlanBestFit(p); }
};
struct BestFitWithLocalSearch {
  static const char* Name() { return "BestFitWithLocalSearch"; }
  static constexpr OffsetStrategy kStrategy = OffsetStrategy::kBestFitWithLocalSearch;
  static constexpr int64_t kDpCounterexampleHeight = 16;
  static constexpr bool kProves = false;
  static absl::StatusOr<OffsetSolution> Plan(const OffsetProblem& p) {
    LocalSearchOptions options;
    options.max_iterations = 150;
    options.time_limit_seconds = 600;  // the iteration cap decides: results reproduce
    return PlanBestFitWithLocalSearch(p, options);
  }
};
// The strategies behind `--planner exact` and `--planner auto`. The limit is far above what
// these small problems need: the search finishes, so results reproduce.
struct Exact {
  static const char* Name() { return "Exact"; }
  static constexpr OffsetStrategy kStrategy = OffsetStrategy::kExact;
  static constexpr int64_t kDpCounterexampleHeight = 16;
  static constexpr bool kProves = true;
  static absl::StatusOr<OffsetSolution> Plan(const OffsetProblem& p) {
    OffsetSolveOptions options;
    options.time_limit_seconds = 600;
    return SolveOffsetProblem(p, OffsetStrategy::kExact, options);
  }
};
struct Auto {
  static const char* Name() { return "Auto"; }
  static constexpr OffsetStrategy kStrategy = OffsetStrategy::kAuto;
  static constexpr int64_t kDpCounterexampleHeight = 16;
  static constexpr bool kProves = true;
  static absl::StatusOr<OffsetSolution> Plan(const OffsetProblem& p) {
    OffsetSolveOptions options;
    options.time_limit_seconds = 600;
    return SolveOffsetProblem(p, OffsetStrategy::kAuto, options);
  }
};

using ::memonger::testing::Item;

// A random problem. Seeds divisible by 3 mix alignments (1 to 64) within one problem; the others
// use one alignment for every item. Sizes are multiples of their alignment, some are zero,
// lifetimes are mostly short with a few long ones.
OffsetProblem RandomProblem(uint64_t seed) {
  std::mt19937_64 rng(seed);
  OffsetProblem p;
  p.num_steps = 1 + static_cast<int>(rng() % 40);
  const int n = 1 + static_cast<int>(rng() % 48);
  const bool mixed = seed % 3 == 0;
  const int64_t common_alignment = int64_t{1} << (rng() % 7);
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng() % p.num_steps);
    const int room = p.num_steps - first;
    const int length = rng() % 5 == 0 ? static_cast<int>(rng() % room)
                                      : static_cast<int>(rng() % std::min(room, 4));
    const int64_t alignment = mixed ? int64_t{1} << (rng() % 7) : common_alignment;
    const int64_t units = rng() % 10 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % 32);
    p.items.push_back(Item(first, first + length, units * alignment, alignment));
  }
  return p;
}

// The height no greedy placement can exceed: every item on top of all others, each padded to
// its alignment.
int64_t StackedBound(const OffsetProblem& p) {
  int64_t sum = 0;
  bool uniform = true;
  for (const OffsetItem& item : p.items) {
    uniform = uniform && item.alignment == p.items.front().alignment;
  }
  for (const OffsetItem& item : p.items) sum += item.bytes + (uniform ? 0 : item.alignment - 1);
  return sum;
}

// paper_toy and the other traces: MiniMalloc CSV -> raw problem (steps compressed).
absl::StatusOr<OffsetProblem> TraceProblem(const std::string& name, int64_t alignment) {
  const std::string path = testing::SourcePath("../shared/corpus/traces/" + name);
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(path);
  std::stringstream text;
  text << in.rdbuf();
  auto records = graph::ParseMiniMallocCsv(text.str(), path);
  if (!records.ok()) return records.status();
  return OffsetProblemFromRecords(*records, alignment);
}

template <typename Planner>
class OffsetPlannersTest : public ::testing::Test {};
using Planners = ::testing::Types<GreedyBySize, BestFit, BestFitWithLocalSearch, Exact, Auto>;
TYPED_TEST_SUITE(OffsetPlannersTest, Planners, testing::NamedTypes);

TYPED_TEST(OffsetPlannersTest, RandomProblemsVerify) {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    absl::StatusOr<OffsetSolution> s = TypeParam::Plan(p);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->offsets.size(), p.items.size());
    EXPECT_TRUE(CheckOffsetSolution(p, s->offsets).ok()) << CheckOffsetSolution(p, s->offsets);
    int64_t height = 0;
    for (size_t i = 0; i < p.items.size(); ++i) {
      EXPECT_EQ(s->offsets[i] % p.items[i].alignment, 0) << "item " << i;
      height = std::max(height, s->offsets[i] + p.items[i].bytes);
    }
    EXPECT_EQ(s->height, height);
    const int64_t lower_bound = OffsetLowerBound(p);
    EXPECT_LE(lower_bound, s->height);
    EXPECT_LE(s->height, StackedBound(p));
    if (s->height == lower_bound) {
      EXPECT_TRUE(s->proven_optimal);
    }
    if (TypeParam::kProves) {
      EXPECT_TRUE(s->proven_optimal);
      // Proven optimal: no heuristic does better.
      absl::StatusOr<OffsetSolution> heuristic = BestFitWithLocalSearch::Plan(p);
      ASSERT_TRUE(heuristic.ok());
      EXPECT_LE(s->height, heuristic->height);
    } else {
      EXPECT_EQ(s->proven_optimal, s->height == lower_bound);
    }
  }
}

TYPED_TEST(OffsetPlannersTest, Reproducible) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    absl::StatusOr<OffsetSolution> a = TypeParam::Plan(p);
    absl::StatusOr<OffsetSolution> b = TypeParam::Plan(p);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->offsets, b->offsets);
  }
}

TYPED_TEST(OffsetPlannersTest, EmptyAndZeroByteProblems) {
  absl::StatusOr<OffsetSolution> empty = TypeParam::Plan(OffsetProblem{});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->height, 0);
  EXPECT_TRUE(empty->proven_optimal);
  OffsetProblem zeros;
  zeros.num_steps = 2;
  zeros.items = {Item(0, 1, 0, 64), Item(0, 1, 0)};
  absl::StatusOr<OffsetSolution> s = TypeParam::Plan(zeros);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->offsets, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(s->height, 0);
}

TYPED_TEST(OffsetPlannersTest, MalformedProblemsAreInvalidArgument) {
  OffsetProblem p;
  p.num_steps = 2;
  p.items = {Item(0, 2, 8)};  // last_step outside [0, num_steps)
  EXPECT_EQ(TypeParam::Plan(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.items = {Item(0, 1, 24, 24)};  // not a power of two
  EXPECT_EQ(TypeParam::Plan(p).status().code(), absl::StatusCode::kInvalidArgument);
  p.items = {Item(0, 1, -8)};
  EXPECT_EQ(TypeParam::Plan(p).status().code(), absl::StatusCode::kInvalidArgument);
}

// Pisarchyk & Lee's 8-tensor example: lower bound 124; the size-ordered greedy reaches it.
TYPED_TEST(OffsetPlannersTest, PaperToyReachesItsLowerBound) {
  absl::StatusOr<OffsetProblem> p = TraceProblem("paper_toy.csv", 1);
  if (absl::IsNotFound(p.status())) GTEST_SKIP() << p.status();
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(OffsetLowerBound(*p), 124);
  absl::StatusOr<OffsetSolution> s = TypeParam::Plan(*p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(CheckOffsetSolution(*p, s->offsets).ok());
  EXPECT_EQ(s->height, 124);
  EXPECT_TRUE(s->proven_optimal);
}

// The counterexample to memonger's DP (sharing formulation):
//   b0 (0,1,7)  b1 (1,3,5)  b2 (2,3,5)  b3 (3,5,6)  b4 (4,5,5)    (first, last, bytes)
// Offsets reach the lower bound 16: b1 [0,5), b2 [5,10), b3 [10,16), then b0 [5,12) reuses
// b2's bytes and b4 [0,5) b1's. Every greedy order of the portfolio ends at 17 or 18 (the size
// orders put b0 at 0, so b1 goes to 7 and b2 to 12); local search finds 16.
TYPED_TEST(OffsetPlannersTest, DpCounterexample) {
  OffsetProblem p;
  p.num_steps = 6;
  p.items = {Item(0, 1, 7), Item(1, 3, 5), Item(2, 3, 5), Item(3, 5, 6), Item(4, 5, 5)};
  EXPECT_EQ(OffsetLowerBound(p), 16);
  absl::StatusOr<OffsetSolution> s = TypeParam::Plan(p);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(CheckOffsetSolution(p, s->offsets).ok());
  EXPECT_EQ(s->height, TypeParam::kDpCounterexampleHeight);
}

// Whole graphs through PlaceOffsets (several devices, views, static values in the arena).
TYPED_TEST(OffsetPlannersTest, GraphPlansVerifyAndLieBetweenTheBounds) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions graph_options;
    graph_options.num_ops = 10 + static_cast<int>(seed % 30);
    graph_options.num_devices = 1 + static_cast<int>(seed % 3);
    graph_options.view_probability = seed % 2 == 0 ? 0.2 : 0.0;
    const graph::Graph g = testing::RandomGraph(seed, graph_options);
    PlanOptions options;
    options.alignment = int64_t{1} << (seed % 9);
    options.liveness.views = seed % 2 == 0;
    options.liveness.plan_static = seed % 5 == 0;
    // The searching strategies return their best plan when the limit ends: still valid.
    options.time_limit_seconds = 0.5;
    absl::StatusOr<Plan> plan = testing::PlanWithOffsetStrategy(g, options, TypeParam::kStrategy);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
    EXPECT_GE(plan->arena_bytes, plan->lower_bound_bytes);
    EXPECT_LE(plan->arena_bytes, plan->naive_bytes);
    for (const PlanBuffer& b : plan->buffers) EXPECT_EQ(b.offset % options.alignment, 0);
    if (graph_options.num_devices == 1 && plan->arena_bytes == plan->lower_bound_bytes) {
      EXPECT_TRUE(plan->proven_optimal);
    }
  }
}

// Offsets over serial lifetimes are unsafe under a parallel executor: refused, never returned.
TYPED_TEST(OffsetPlannersTest, ParallelExecutionIsRefused) {
  const graph::Graph g = testing::RandomGraph(3);
  PlanOptions options;
  options.execution = ExecutionModel::kParallel;
  absl::StatusOr<Plan> plan = testing::PlanWithOffsetStrategy(g, options, TypeParam::kStrategy);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), ::testing::HasSubstr("serial"));
}

// A problem far beyond what the searches finish: each planner answers soon after its limit
// with offsets that verify (the heuristics have no limit and are simply fast).
TYPED_TEST(OffsetPlannersTest, TimeLimitIsHonoured) {
  std::mt19937_64 rng(17);
  OffsetProblem p;
  p.num_steps = 400;
  for (int i = 0; i < 3000; ++i) {
    const int first = static_cast<int>(rng() % 390);
    p.items.push_back(Item(first, first + static_cast<int>(rng() % 10),
                           64 * (1 + static_cast<int64_t>(rng() % 200)), 64));
  }
  OffsetSolveOptions options;
  options.time_limit_seconds = 0.2;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<OffsetSolution> s = SolveOffsetProblem(p, TypeParam::kStrategy, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(CheckOffsetSolution(p, s->offsets).ok()) << CheckOffsetSolution(p, s->offsets);
  EXPECT_LE(OffsetLowerBound(p), s->height);
  // Generous: a test machine may be loaded. The point is "about the limit", not "never stops".
  EXPECT_LT(seconds, options.time_limit_seconds + 3);
}

// Not typed: how the planners relate. The portfolio contains greedy-by-size's run, and local
// search starts from the portfolio's winner and never accepts a higher arena.
TEST(OffsetPlannersOrderingTest, LocalSearchNoWorseThanBestFitNoWorseThanGreedyBySize) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    const absl::StatusOr<OffsetSolution> greedy = GreedyBySize::Plan(p);
    const absl::StatusOr<OffsetSolution> best = BestFit::Plan(p);
    const absl::StatusOr<OffsetSolution> searched = BestFitWithLocalSearch::Plan(p);
    ASSERT_TRUE(greedy.ok() && best.ok() && searched.ok());
    EXPECT_LE(best->height, greedy->height);
    EXPECT_LE(searched->height, best->height);
  }
}

TEST(OffsetPlannersOrderingTest, PortfolioReportsItsWinner) {
  OffsetProblem p = RandomProblem(11);
  absl::StatusOr<BestFitResult> result = RunBestFitPortfolio(p);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->lower_bound, OffsetLowerBound(p));
  GreedyPlacer placer(p);
  EXPECT_EQ(placer.Place(result->order, result->rule).offsets, result->solution.offsets);
  EXPECT_EQ(result->order, PortfolioItemOrder(p, result->order_kind));
  EXPECT_GE(result->runs, 1);
  EXPECT_LE(result->runs, 2 * static_cast<int>(std::size(kPortfolioOrders)));
}

// Threads change who runs what, never the winner: the same plan, order and rule for any count.
TEST(OffsetPlannersOrderingTest, PortfolioIsTheSameForEveryThreadCount) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    absl::StatusOr<BestFitResult> serial = RunBestFitPortfolio(p);
    ASSERT_TRUE(serial.ok()) << serial.status();
    for (int threads : {2, 3, 5, 12, 16}) {
      SCOPED_TRACE(threads);
      absl::StatusOr<BestFitResult> parallel = RunBestFitPortfolio(p, std::nullopt, threads);
      ASSERT_TRUE(parallel.ok()) << parallel.status();
      EXPECT_EQ(parallel->solution.offsets, serial->solution.offsets);
      EXPECT_EQ(parallel->solution.height, serial->solution.height);
      EXPECT_EQ(parallel->solution.proven_optimal, serial->solution.proven_optimal);
      EXPECT_EQ(parallel->order_kind, serial->order_kind);
      EXPECT_EQ(parallel->rule, serial->rule);
    }
    // A passed deadline: only the first run, whatever the thread count.
    absl::StatusOr<BestFitResult> cut =
        RunBestFitPortfolio(p, std::chrono::steady_clock::now(), 4);
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(cut->runs, 1);
    EXPECT_EQ(cut->order_kind, kPortfolioOrders[0]);
  }
  EXPECT_EQ(RunBestFitPortfolio(RandomProblem(1), std::nullopt, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A time-limited caller's deadline stops the portfolio after its first run, with a valid plan.
TEST(OffsetPlannersOrderingTest, PortfolioStopsAtItsDeadlineAfterOneRun) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    absl::StatusOr<BestFitResult> full = RunBestFitPortfolio(p);
    ASSERT_TRUE(full.ok()) << full.status();
    absl::StatusOr<BestFitResult> cut = RunBestFitPortfolio(p, std::chrono::steady_clock::now());
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(cut->runs, 1);
    EXPECT_GE(cut->solution.height, full->solution.height);
    EXPECT_TRUE(CheckOffsetSolution(p, cut->solution.offsets).ok());
    GreedyPlacer placer(p);
    EXPECT_EQ(placer.Place(cut->order, cut->rule).offsets, cut->solution.offsets);
  }
}

// Each run of the portfolio on its own: its height, or -1 where its order equals that of an
// earlier run from `first_run` on (a portfolio does not place a duplicate order again; a
// resumed one compares only the orders of the runs it makes).
std::vector<int64_t> EveryRunsHeight(const OffsetProblem& p, int first_run = 0) {
  GreedyPlacer placer(p);
  std::vector<int64_t> heights;
  for (int t = 0; t < kPortfolioRuns; ++t) {
    const std::vector<int> order = PortfolioItemOrder(p, kPortfolioOrders[t / 2]);
    bool duplicate = false;
    for (int j = first_run / 2; j < t / 2; ++j) {
      duplicate |= PortfolioItemOrder(p, kPortfolioOrders[j]) == order;
    }
    heights.push_back(duplicate ? -1
                                : placer.Place(order, t % 2 == 0 ? FitRule::kBestFit
                                                                 : FitRule::kLowestOffset)
                                      .height);
  }
  return heights;
}

// The runs a portfolio cut by its deadline did not make are what it reports as not settled,
// and resuming makes exactly those: the lowest of runs first_run.. that beats the caller's
// height, as each run alone would place it, or none.
TEST(OffsetPlannersOrderingTest, ResumedPortfolioMakesTheRunsNotMadeAndBeatsTheCallersPlan) {
  const auto later = std::chrono::steady_clock::now() + std::chrono::hours(1);
  int resumed_wins = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    const int64_t lower_bound = OffsetLowerBound(p);
    absl::StatusOr<BestFitResult> full = RunBestFitPortfolio(p);
    ASSERT_TRUE(full.ok()) << full.status();
    if (!full->solution.proven_optimal) {
      EXPECT_EQ(full->settled_runs, kPortfolioRuns);
    }
    absl::StatusOr<BestFitResult> cut = RunBestFitPortfolio(p, std::chrono::steady_clock::now());
    ASSERT_TRUE(cut.ok()) << cut.status();
    EXPECT_EQ(cut->settled_runs, 1);  // the first run always ends; none starts after it
    for (int first = 1; first < kPortfolioRuns; ++first) {
      SCOPED_TRACE(first);
      const std::vector<int64_t> heights = EveryRunsHeight(p, first);
      for (int64_t beat : {heights[0], full->solution.height + 1, lower_bound + 1}) {
        absl::StatusOr<ResumedPortfolio> resumed =
            ResumeBestFitPortfolio(p, {first, 0.0}, beat, later, 3);
        ASSERT_TRUE(resumed.ok()) << resumed.status();
        int64_t expected = -1;
        for (int t = first; t < kPortfolioRuns; ++t) {
          if (heights[t] >= 0 && heights[t] < beat && (expected < 0 || heights[t] < expected)) {
            expected = heights[t];
          }
          if (expected == lower_bound) break;
        }
        if (expected < 0) {
          EXPECT_FALSE(resumed->solution.has_value());
          if (beat > lower_bound) {
            EXPECT_EQ(resumed->progress.settled_runs, kPortfolioRuns);
          }
          continue;
        }
        ASSERT_TRUE(resumed->solution.has_value());
        ++resumed_wins;
        EXPECT_EQ(resumed->solution->height, expected);
        EXPECT_EQ(resumed->solution->proven_optimal, expected == lower_bound);
        EXPECT_TRUE(CheckOffsetSolution(p, resumed->solution->offsets).ok());
        if (expected > lower_bound) {
          EXPECT_EQ(resumed->progress.settled_runs, kPortfolioRuns);
        }
      }
    }
    // A passed deadline makes no run.
    absl::StatusOr<ResumedPortfolio> none = ResumeBestFitPortfolio(
        p, {1, 0.0}, full->solution.height + 1, std::chrono::steady_clock::now());
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_FALSE(none->solution.has_value());
    EXPECT_EQ(none->progress.settled_runs, 1);
    // Nor where less than a pass is left, or nothing below the lower bound can be beaten.
    for (const auto& [progress, beat] :
         {std::pair<PortfolioProgress, int64_t>{{1, 3600.0}, full->solution.height + 1},
          {{1, 0.0}, lower_bound}}) {
      absl::StatusOr<ResumedPortfolio> skipped = ResumeBestFitPortfolio(p, progress, beat, later);
      ASSERT_TRUE(skipped.ok()) << skipped.status();
      EXPECT_FALSE(skipped->solution.has_value());
      EXPECT_EQ(skipped->progress.settled_runs, 1);
    }
  }
  EXPECT_GT(resumed_wins, 100);  // the problems exercise it
  const OffsetProblem p = RandomProblem(1);
  for (const PortfolioProgress& bad :
       {PortfolioProgress{0, 0.0}, PortfolioProgress{kPortfolioRuns + 1, 0.0},
        PortfolioProgress{1, -1.0}}) {
    EXPECT_EQ(ResumeBestFitPortfolio(p, bad, 100, later).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

// Runs cut mid-pass are made again: resuming over and over with deadlines that cut runs
// (doubling from 1 ms, so that each run ends at last) reaches what unlimited runs reach. A
// cut run counted as settled would be skipped for good, and its plan lost.
TEST(OffsetPlannersOrderingTest, ResumingAgainMakesTheRunsADeadlineCut) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(seed);
    // 4,000 items living up to 400 of 4,000 steps: greedy passes of a few milliseconds.
    std::mt19937_64 rng(seed);
    OffsetProblem p;
    p.num_steps = 4000;
    for (int i = 0; i < 4000; ++i) {
      const int first = static_cast<int>(rng() % 4000);
      const int last = std::min(3999, first + static_cast<int>(rng() % 400));
      p.items.push_back(Item(first, last, 64 * (1 + static_cast<int64_t>(rng() % 1000)), 64));
    }
    const int64_t lower_bound = OffsetLowerBound(p);
    const std::vector<int64_t> heights = EveryRunsHeight(p, 1);
    int64_t expected = heights[0];  // what the runs from 1 on must beat: run 0's plan
    for (int t = 1; t < kPortfolioRuns && expected > lower_bound; ++t) {
      if (heights[t] >= 0) expected = std::min(expected, heights[t]);
    }
    PortfolioProgress progress{1, 0.0};
    int64_t best = heights[0];
    int calls = 0;
    for (double seconds = 0.001; progress.settled_runs < kPortfolioRuns && best > lower_bound;
         seconds *= 2) {
      ++calls;
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(seconds));
      absl::StatusOr<ResumedPortfolio> resumed = ResumeBestFitPortfolio(p, progress, best, deadline);
      ASSERT_TRUE(resumed.ok()) << resumed.status();
      EXPECT_GE(resumed->progress.settled_runs, progress.settled_runs);
      progress = resumed->progress;
      if (resumed->solution.has_value()) {
        ASSERT_LT(resumed->solution->height, best);
        ASSERT_TRUE(CheckOffsetSolution(p, resumed->solution->offsets).ok());
        best = resumed->solution->height;
      }
    }
    EXPECT_EQ(best, expected) << "after " << calls << " calls";
  }
}

TEST(OffsetPlannersOrderingTest, ConflictCountsMatchPairwiseCounts) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    const std::vector<int64_t> counts = ConflictCounts(p);
    for (size_t i = 0; i < p.items.size(); ++i) {
      int64_t want = 0;
      for (size_t j = 0; j < p.items.size(); ++j) {
        want += j != i && p.items[i].first_step <= p.items[j].last_step &&
                p.items[j].first_step <= p.items[i].last_step;
      }
      EXPECT_EQ(counts[i], want) << "item " << i;
    }
  }
}

TEST(OffsetPlannersOrderingTest, PeakLoadsMatchAStepByStepScan) {
  for (uint64_t seed = 1; seed <= 80; ++seed) {
    SCOPED_TRACE(seed);
    const OffsetProblem p = RandomProblem(seed);
    std::vector<int64_t> load(p.num_steps, 0);
    for (const OffsetItem& item : p.items) {
      for (int s = item.first_step; s <= item.last_step; ++s) load[s] += item.bytes;
    }
    const std::vector<int64_t> peaks = PeakLoads(p);
    ASSERT_EQ(peaks.size(), p.items.size());
    for (size_t i = 0; i < p.items.size(); ++i) {
      const int64_t want = *std::max_element(load.begin() + p.items[i].first_step,
                                             load.begin() + p.items[i].last_step + 1);
      EXPECT_EQ(peaks[i], want) << "item " << i;
    }
  }
}

TEST(OffsetPlannersOrderingTest, PeakLoadsAcrossManyBlocksMatchAScan) {
  // Thousands of steps and lifetimes from one step to most of them: queries inside one block of
  // steps, across two, and across many.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    util::SplitMix64 rng(seed);
    OffsetProblem p;
    p.num_steps = 1 + static_cast<int>(rng.Below(5000));
    for (int i = 0; i < 300; ++i) {
      const int first = static_cast<int>(rng.Below(static_cast<uint64_t>(p.num_steps)));
      const uint64_t room = static_cast<uint64_t>(p.num_steps - first);
      const int length = 1 + static_cast<int>(rng.Below(i % 3 == 0 ? room : std::min<uint64_t>(room, 70)));
      p.items.push_back(Item(first, first + length - 1, 1 + static_cast<int64_t>(rng.Below(1000))));
    }
    std::vector<int64_t> load(p.num_steps, 0);
    for (const OffsetItem& item : p.items) {
      for (int s = item.first_step; s <= item.last_step; ++s) load[s] += item.bytes;
    }
    const std::vector<int64_t> peaks = PeakLoads(p);
    for (size_t i = 0; i < p.items.size(); ++i) {
      EXPECT_EQ(peaks[i], *std::max_element(load.begin() + p.items[i].first_step,
                                            load.begin() + p.items[i].last_step + 1))
          << "item " << i;
    }
  }
}

TEST(OffsetPlannersOrderingTest, GreedyBySizeOrderTieBreaks) {
  OffsetProblem p;
  p.num_steps = 10;
  // Equal sizes: the longer lifetime first, then the earlier start, then the index.
  p.items = {Item(5, 6, 8), Item(0, 1, 8), Item(2, 9, 8), Item(0, 1, 8), Item(0, 0, 16)};
  EXPECT_EQ(SizeDescendingOrder(p), (std::vector<int>{4, 2, 1, 3, 0}));
}

TEST(OffsetLocalSearchTest, RejectsBadInput) {
  OffsetProblem p = RandomProblem(5);
  std::vector<int> order(p.items.size(), 0);
  EXPECT_EQ(ImproveByLocalSearch(p, order, FitRule::kBestFit, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  LocalSearchOptions negative;
  negative.max_iterations = -1;
  EXPECT_EQ(PlanBestFitWithLocalSearch(p, negative).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (double seconds : {-0.5, std::nan("")}) {
    LocalSearchOptions bad_limit;
    bad_limit.portfolio_time_limit_seconds = seconds;
    EXPECT_EQ(PlanBestFitWithLocalSearch(p, bad_limit).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(OffsetLocalSearchTest, ImprovesAHardTraceWithinItsIterationCap) {
  absl::StatusOr<OffsetProblem> p = TraceProblem("mm_A.csv", 1);
  if (absl::IsNotFound(p.status())) GTEST_SKIP() << p.status();
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<BestFitResult> start = RunBestFitPortfolio(*p);
  ASSERT_TRUE(start.ok());
  LocalSearchOptions options;
  options.max_iterations = 300;
  options.time_limit_seconds = 600;
  absl::StatusOr<LocalSearchResult> a =
      ImproveByLocalSearch(*p, start->order, start->rule, options);
  absl::StatusOr<LocalSearchResult> b =
      ImproveByLocalSearch(*p, start->order, start->rule, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->iterations, 300);
  EXPECT_EQ(a->solution.offsets, b->solution.offsets);  // same seed, same cap: same result
  EXPECT_TRUE(CheckOffsetSolution(*p, a->solution.offsets).ok());
  EXPECT_LT(a->solution.height, start->solution.height);
  EXPECT_GT(a->improvements, 0);
  GreedyPlacer placer(*p);
  EXPECT_EQ(placer.Place(a->order, start->rule).height, a->solution.height);
}

}  // namespace
}  // namespace memonger

#include "memonger/sharing/interference.h"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/schedule.h"
#include "tests/random_graphs.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// Every range in exactly one chain; each member starts after the previous one's last use.
void ExpectValidChains(const std::vector<LiveRange>& ranges, const Chains& chains) {
  std::vector<int> seen(ranges.size(), 0);
  for (const Chain& chain : chains) {
    ASSERT_FALSE(chain.empty());
    for (size_t m = 0; m < chain.size(); ++m) {
      ASSERT_GE(chain[m], 0);
      ASSERT_LT(chain[m], static_cast<int>(ranges.size()));
      ++seen[chain[m]];
      if (m > 0) {
        EXPECT_GT(ranges[chain[m]].defined, ranges[chain[m - 1]].used)
            << "chain member " << chain[m] << " overlaps " << chain[m - 1];
      }
    }
  }
  for (size_t i = 0; i < ranges.size(); ++i) EXPECT_EQ(seen[i], 1) << "range " << i;
}

struct ScenarioCase {
  std::string name;
  std::vector<LiveRange> ranges;  // (defined, used, size)
  int64_t greedy_cost;
  Chains greedy_chains;
  int64_t dp_cost;
};

class InterferenceScenarioTest : public ::testing::TestWithParam<ScenarioCase> {};

TEST_P(InterferenceScenarioTest, GreedyMatchesMemonger) {
  const ScenarioCase& c = GetParam();
  const Chains chains = AssignChainsGreedy(c.ranges);
  ExpectValidChains(c.ranges, chains);
  EXPECT_EQ(ChainsCost(c.ranges, chains), c.greedy_cost);
  EXPECT_EQ(chains, c.greedy_chains);
}

TEST_P(InterferenceScenarioTest, DpMatchesMemonger) {
  const ScenarioCase& c = GetParam();
  absl::StatusOr<Chains> chains = AssignChainsDp(c.ranges);
  ASSERT_TRUE(chains.ok()) << chains.status();
  ExpectValidChains(c.ranges, *chains);
  EXPECT_EQ(ChainsCost(c.ranges, *chains), c.dp_cost);
}

// memonger_test.py (reference scenarios 17-19) and the smallest counterexample to the
// optimality of memonger-dp (its optimum, 17, is [b0,b3] [b1,b4] [b2]).
INSTANTIATE_TEST_SUITE_P(
    Memonger, InterferenceScenarioTest,
    ::testing::Values(
        ScenarioCase{"assignments_greedy_and_dp",
                     /*ranges=*/{{1, 3, 10}, {3, 4, 1}, {5, 6, 1}, {5, 7, 10}},
                     /*greedy_cost=*/11, /*greedy_chains=*/{{0, 3}, {1, 2}},
                     /*dp_cost=*/11},
        ScenarioCase{"assignments_dp1",
                     /*ranges=*/{{1, 2, 10}, {4, 6, 1}, {5, 6, 10}},
                     /*greedy_cost=*/20, /*greedy_chains=*/{{0, 1}, {2}},
                     /*dp_cost=*/11},
        ScenarioCase{"dp_counterexample",
                     /*ranges=*/{{0, 1, 7}, {1, 3, 5}, {2, 3, 5}, {3, 5, 6}, {4, 5, 5}},
                     /*greedy_cost=*/18, /*greedy_chains=*/{{0, 2}, {1, 4}, {3}},
                     /*dp_cost=*/18}),
    [](const ::testing::TestParamInfo<ScenarioCase>& info) { return info.param.name; });

TEST(InterferenceDpTest, ReturnsMemongersChainOrder) {
  // memonger_test.py test_compute_assignments_dp: [[b2, b3], [b1, b4]].
  const std::vector<LiveRange> ranges = {{1, 3, 10}, {3, 4, 1}, {5, 6, 1}, {5, 7, 10}};
  absl::StatusOr<Chains> chains = AssignChainsDp(ranges);
  ASSERT_TRUE(chains.ok()) << chains.status();
  EXPECT_EQ(*chains, (Chains{{1, 2}, {0, 3}}));
}

TEST(InterferenceDpTest, Dp1Chains) {
  const std::vector<LiveRange> ranges = {{1, 2, 10}, {4, 6, 1}, {5, 6, 10}};
  absl::StatusOr<Chains> chains = AssignChainsDp(ranges);
  ASSERT_TRUE(chains.ok()) << chains.status();
  EXPECT_THAT(*chains, UnorderedElementsAre(ElementsAre(0, 2), ElementsAre(1)));
}

TEST(InterferenceGreedyTest, FirstChainWinsTies) {
  // c (5..5, size 4) fits both chains at distance 2: memonger keeps the first.
  const std::vector<LiveRange> ranges = {{0, 1, 2}, {0, 2, 6}, {5, 5, 4}};
  EXPECT_EQ(AssignChainsGreedy(ranges), (Chains{{0, 2}, {1}}));
}

TEST(InterferenceGreedyTest, AllSizesOneIsFirstFitInUsedOrder) {
  // Sorted by used: a(0..0), b(2..2), c(1..3), d(4..4): a b d in the first chain, c alone.
  const std::vector<LiveRange> ranges = {{0, 0, 1}, {2, 2, 1}, {1, 3, 1}, {4, 4, 1}};
  const Chains chains = AssignChainsGreedy(ranges);
  ExpectValidChains(ranges, chains);
  EXPECT_EQ(chains, (Chains{{0, 1, 3}, {2}}));
}

TEST(InterferenceGreedyTest, StrictlyAfterLastUse) {
  // Defined at the step of the last use: memonger adds no new in-place pair.
  const std::vector<LiveRange> ranges = {{0, 2, 1}, {2, 3, 1}};
  EXPECT_EQ(AssignChainsGreedy(ranges), (Chains{{0}, {1}}));
}

// memonger's compute_assignments_greedy as written: every chain scanned per range. The index
// AssignChainsGreedy uses must pick the same chain every time.
Chains GreedyByScan(const std::vector<LiveRange>& ranges) {
  std::vector<int> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return ranges[a].used < ranges[b].used; });
  Chains chains;
  std::vector<int64_t> chain_max;
  for (int i : order) {
    int best = -1;
    int64_t best_distance = 0;
    for (size_t c = 0; c < chains.size(); ++c) {
      if (ranges[i].defined <= ranges[chains[c].back()].used) continue;
      const int64_t distance = std::abs(chain_max[c] - ranges[i].size);
      if (best < 0 || distance < best_distance) {
        best = static_cast<int>(c);
        best_distance = distance;
      }
    }
    if (best < 0) {
      chains.push_back({i});
      chain_max.push_back(ranges[i].size);
    } else {
      chains[best].push_back(i);
      chain_max[best] = std::max(chain_max[best], ranges[i].size);
    }
  }
  return chains;
}

TEST(InterferenceGreedyTest, SameChainsAsMemongersScan) {
  for (int seed = 0; seed < 400; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const int n = 1 + static_cast<int>(rng() % 400);
    // Few distinct sizes on some seeds (ties in distance, many chains per size), many on others.
    const int64_t sizes = seed % 3 == 0 ? 4 : seed % 3 == 1 ? 40 : 100000;
    const int steps = 1 + static_cast<int>(rng() % 300);
    std::vector<LiveRange> ranges;
    for (int i = 0; i < n; ++i) {
      const int defined = static_cast<int>(rng() % steps);
      const int length = static_cast<int>(rng() % (rng() % 4 == 0 ? steps : 8));
      ranges.push_back({defined, defined + length, static_cast<int64_t>(rng() % sizes)});
    }
    const Chains chains = AssignChainsGreedy(ranges);
    ExpectValidChains(ranges, chains);
    ASSERT_EQ(chains, GreedyByScan(ranges));
  }
}

TEST(InterferenceAssignTest, EmptyInput) {
  EXPECT_TRUE(AssignChainsGreedy({}).empty());
  absl::StatusOr<Chains> dp = AssignChainsDp({});
  ASSERT_TRUE(dp.ok());
  EXPECT_TRUE(dp->empty());
}

TEST(InterferenceDpTest, BudgetGivesDeadlineExceeded) {
  std::mt19937 rng(7);
  std::vector<LiveRange> ranges;
  for (int i = 0; i < 60; ++i) {
    ranges.push_back({i, i + static_cast<int>(rng() % 6), 1 + static_cast<int64_t>(rng() % 100)});
  }
  DpLimits limits;
  limits.max_calls = 50;
  absl::StatusOr<Chains> dp = AssignChainsDp(ranges, limits);
  ASSERT_FALSE(dp.ok());
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(dp.status().message()), HasSubstr("memonger-dp"));
  EXPECT_THAT(std::string(dp.status().message()), HasSubstr("exact-sharing"));
}

// The time budget is counted from `since` where given (one budget over a plan's devices), and
// the message names the limit, not what was left of it: "-0.002 s" was printed before.
TEST(InterferenceDpTest, TimeBudgetCountsFromSinceAndIsNamedAsGiven) {
  std::mt19937 rng(7);
  std::vector<LiveRange> ranges;
  for (int i = 0; i < 60; ++i) {
    ranges.push_back({i, i + static_cast<int>(rng() % 6), 1 + static_cast<int64_t>(rng() % 100)});
  }
  DpLimits limits;
  limits.time_limit_seconds = 5;
  limits.since = std::chrono::steady_clock::now() - std::chrono::seconds(10);  // spent
  absl::StatusOr<Chains> dp = AssignChainsDp(ranges, limits);
  ASSERT_FALSE(dp.ok());
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(dp.status().message()), HasSubstr(" 5 s, what --time-limit left it"));
  limits.since.reset();  // counted from the call: 5 s is plenty
  EXPECT_TRUE(AssignChainsDp(ranges, limits).ok());
}

TEST(InterferenceAssignTest, RandomChainsAreValid) {
  for (int seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const int n = 1 + static_cast<int>(rng() % 10);
    std::vector<LiveRange> ranges;
    for (int i = 0; i < n; ++i) {
      const int defined = static_cast<int>(rng() % 12);
      ranges.push_back({defined, defined + static_cast<int>(rng() % 6),
                        static_cast<int64_t>(rng() % 20)});
    }
    ExpectValidChains(ranges, AssignChainsGreedy(ranges));
    absl::StatusOr<Chains> dp = AssignChainsDp(ranges);
    ASSERT_TRUE(dp.ok()) << dp.status();
    ExpectValidChains(ranges, *dp);
  }
}

SharingItem Item(graph::ValueId root, int first, int last, int64_t bytes,
                 graph::Device device = {}) {
  SharingItem item;
  item.root = root;
  item.lifetime = {first, last};
  item.bytes = bytes;
  item.device = device;
  return item;
}

class InterferenceDevicesTest : public ::testing::TestWithParam<bool> {};

TEST_P(InterferenceDevicesTest, DifferentDevicesNeverShare) {
  const graph::Device cpu{0, 0};
  const graph::Device gpu{1, 0};
  // On one device memonger chains a->c and b->d; here a and d are on the CPU, b and c on the GPU.
  const std::vector<SharingItem> items = {Item(10, 0, 1, 8, cpu), Item(11, 0, 1, 8, gpu),
                                          Item(12, 2, 3, 8, gpu), Item(13, 2, 3, 8, cpu)};
  absl::StatusOr<SharingGroups> groups = AssignMemongerChains(items, GetParam());
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, UnorderedElementsAre(ElementsAre(10, 13), ElementsAre(11, 12)));
}

TEST_P(InterferenceDevicesTest, SameDeviceShares) {
  const std::vector<SharingItem> items = {Item(1, 0, 1, 8), Item(2, 2, 3, 8)};
  absl::StatusOr<SharingGroups> groups = AssignMemongerChains(items, GetParam());
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(ElementsAre(1, 2)));
}

TEST_P(InterferenceDevicesTest, InvalidItemIsInvalidArgument) {
  absl::StatusOr<SharingGroups> groups = AssignMemongerChains({Item(3, 4, 2, 8)}, GetParam());
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(groups.status().message()), HasSubstr("value 3"));
}

INSTANTIATE_TEST_SUITE_P(GreedyAndDp, InterferenceDevicesTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Dp") : std::string("Greedy");
                         });

TEST(PlanMemongerInterferenceTest, ChainNetFromLiveness) {
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(R"pb(
    external_input: "x"
    external_input: "w"
    op { type: "FC" input: "x" input: "w" output: "a" }
    op { type: "Relu" input: "a" output: "b" }
    op { type: "Relu" input: "b" output: "c" }
    op { type: "Relu" input: "c" output: "d" }
    external_output: "d"
    value_info { name: "w" role: ROLE_PARAM }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  testing::AssignByteTypes(*g, {}, 1000);
  absl::StatusOr<Schedule> schedule = MakeSchedule(*g, OrderKind::kGiven);
  ASSERT_TRUE(schedule.ok()) << schedule.status();
  absl::StatusOr<Liveness> liveness = ComputeLiveness(*g, *schedule);
  ASSERT_TRUE(liveness.ok()) << liveness.status();
  // Lifetimes: x [0,3] (a graph input, static for memonger), a [0,1], b [1,2], c [2,3], d [3,3]
  // (a graph output, static); w is a param (not planned). Static blobs are chains of their own,
  // appended after the others, as memonger's compute_assignments does.
  const graph::ValueId x = *g->FindValue("x"), a = *g->FindValue("a"), b = *g->FindValue("b"),
                       c = *g->FindValue("c"), d = *g->FindValue("d");
  const MemongerOptions options;
  SharingRun run;
  run.alignment = 1;
  for (bool dp : {false, true}) {
    SCOPED_TRACE(dp ? "memonger-dp" : "memonger-greedy");
    absl::StatusOr<SharingGroups> groups =
        PlanMemongerInterference(*g, *liveness, options, run, dp);
    ASSERT_TRUE(groups.ok()) << groups.status();
    // The DP lists its chains in another order than the greedy pass (as memonger's does).
    EXPECT_THAT(*groups, UnorderedElementsAre(ElementsAre(a, c), ElementsAre(b), ElementsAre(x),
                                              ElementsAre(d)));
    EXPECT_THAT(std::vector<std::vector<graph::ValueId>>(groups->end() - 2, groups->end()),
                ElementsAre(ElementsAre(x), ElementsAre(d)));  // statics last
    // Named as memonger names them: a chain's blobs take its last member's name.
    std::vector<std::string> names;
    absl::StatusOr<SharingGroups> again =
        PlanMemongerInterference(*g, *liveness, options, run, dp, &names);
    ASSERT_TRUE(again.ok());
    ASSERT_EQ(names.size(), again->size());
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(names[i], (*again)[i].size() >= 2 ? "c" : "");
    }
  }
  // --recycle-inputs: x is an ordinary blob, free after step 0 (d stays static).
  LivenessOptions recycle;
  recycle.recycle_inputs = true;
  absl::StatusOr<Liveness> recycled = ComputeLiveness(*g, *schedule, recycle);
  ASSERT_TRUE(recycled.ok()) << recycled.status();
  for (bool dp : {false, true}) {
    absl::StatusOr<SharingGroups> groups =
        PlanMemongerInterference(*g, *recycled, options, run, dp);
    ASSERT_TRUE(groups.ok()) << groups.status();
    EXPECT_THAT(*groups,
                UnorderedElementsAre(ElementsAre(x, b), ElementsAre(a, c), ElementsAre(d)));
  }
}

TEST(PlanMemongerInterferenceTest, ParallelExecutionIsRejected) {
  absl::StatusOr<graph::Graph> g = testing::GraphFromText(R"pb(
    external_input: "x"
    op { type: "Relu" input: "x" output: "y" }
    external_output: "y"
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  SharingRun run;
  run.execution = ExecutionModel::kParallel;
  absl::StatusOr<SharingGroups> groups = PlanMemongerInterference(
      *g, Liveness{}, MemongerOptions{}, run, /*dynamic_programming=*/false);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(groups.status().message()), HasSubstr("parallel"));
}

}  // namespace
}  // namespace memonger

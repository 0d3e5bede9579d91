#include "memonger/sharing/exact_sharing.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/sharing/interference.h"
#include "memonger/liveness.h"
#include "tests/random_graphs.h"
#include "memonger/schedule.h"
#include "memonger/verify_plan.h"
#include "memonger/planner.h"

namespace memonger {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

SharingItem Item(graph::ValueId root, int first, int last, int64_t bytes,
                 graph::Device device = {}) {
  SharingItem item;
  item.root = root;
  item.lifetime = {first, last};
  item.bytes = bytes;
  item.device = device;
  return item;
}

bool Disjoint(const SharingItem& a, const SharingItem& b) {
  return a.lifetime.last_step < b.lifetime.first_step ||
         b.lifetime.last_step < a.lifetime.first_step;
}

// Items have distinct roots in these tests.
std::map<graph::ValueId, const SharingItem*> ByRoot(const std::vector<SharingItem>& items) {
  std::map<graph::ValueId, const SharingItem*> by_root;
  for (const SharingItem& item : items) by_root[item.root] = &item;
  return by_root;
}

// Every item exactly once; within a group, one device and pairwise disjoint lifetimes.
void ExpectValidGrouping(const std::vector<SharingItem>& items, const SharingGroups& groups) {
  const auto by_root = ByRoot(items);
  std::map<graph::ValueId, int> seen;
  for (const std::vector<graph::ValueId>& group : groups) {
    ASSERT_FALSE(group.empty());
    for (size_t a = 0; a < group.size(); ++a) {
      ASSERT_TRUE(by_root.count(group[a])) << "unknown root " << group[a];
      ++seen[group[a]];
      for (size_t b = a + 1; b < group.size(); ++b) {
        const SharingItem& x = *by_root.at(group[a]);
        const SharingItem& y = *by_root.at(group[b]);
        EXPECT_TRUE(Disjoint(x, y)) << group[a] << " overlaps " << group[b];
        EXPECT_EQ(x.device, y.device) << group[a] << " and " << group[b];
      }
    }
  }
  for (const SharingItem& item : items) EXPECT_EQ(seen[item.root], 1) << "root " << item.root;
}

int64_t GroupsCost(const std::vector<SharingItem>& items, const SharingGroups& groups) {
  const auto by_root = ByRoot(items);
  int64_t cost = 0;
  for (const std::vector<graph::ValueId>& group : groups) {
    int64_t largest = 0;
    for (graph::ValueId root : group) largest = std::max(largest, by_root.at(root)->bytes);
    cost += largest;
  }
  return cost;
}

// Enumerates every partition into valid groups (restricted growth strings, pruned as soon as
// an item does not fit its group).
int64_t BruteForceCost(const std::vector<SharingItem>& items,
                       const std::set<std::pair<int, int>>& conflicts = {}) {
  const int n = static_cast<int>(items.size());
  std::vector<std::vector<int>> groups;
  int64_t best = std::numeric_limits<int64_t>::max();
  std::function<void(int)> place = [&](int i) {
    if (i == n) {
      int64_t cost = 0;
      for (const std::vector<int>& g : groups) {
        int64_t largest = 0;
        for (int m : g) largest = std::max(largest, items[m].bytes);
        cost += largest;
      }
      best = std::min(best, cost);
      return;
    }
    // By index: the recursion appends groups, which may move the vector.
    for (size_t g = 0; g < groups.size(); ++g) {
      const bool fits = std::all_of(groups[g].begin(), groups[g].end(), [&](int m) {
        return items[m].device == items[i].device && Disjoint(items[m], items[i]) &&
               conflicts.count({std::min(m, i), std::max(m, i)}) == 0;
      });
      if (!fits) continue;
      groups[g].push_back(i);
      place(i + 1);
      groups[g].pop_back();
    }
    groups.push_back({i});
    place(i + 1);
    groups.pop_back();
  };
  place(0);
  return n == 0 ? 0 : best;
}

std::vector<SharingItem> RandomItems(std::mt19937& rng, int n, int max_start, int max_length,
                                     int64_t max_bytes, bool two_devices) {
  std::vector<SharingItem> items;
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng() % (max_start + 1));
    const int last = first + static_cast<int>(rng() % max_length);
    const int64_t bytes = static_cast<int64_t>(rng() % (max_bytes + 1));
    graph::Device device;
    if (two_devices) device.type = static_cast<int>(rng() % 2);
    items.push_back(Item(100 + i, first, last, bytes, device));
  }
  return items;
}

// b0(0,1,7) b1(1,3,5) b2(2,3,5) b3(3,5,6) b4(4,5,5): memonger-dp and greedy give 18.
std::vector<SharingItem> Counterexample() {
  return {Item(0, 0, 1, 7), Item(1, 1, 3, 5), Item(2, 2, 3, 5), Item(3, 3, 5, 6),
          Item(4, 4, 5, 5)};
}

TEST(ExactSharingTest, BeatsMemongerDpOnTheCounterexample) {
  const std::vector<SharingItem> items = Counterexample();
  absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValidGrouping(items, r->groups);
  EXPECT_EQ(r->cost, 17);
  EXPECT_EQ(GroupsCost(items, r->groups), 17);
  EXPECT_TRUE(r->proven_optimal);
  EXPECT_EQ(r->lower_bound, 17);
  EXPECT_THAT(r->groups,
              UnorderedElementsAre(ElementsAre(0, 3), ElementsAre(1, 4), ElementsAre(2)));

  absl::StatusOr<SharingGroups> dp = AssignMemongerChains(items, /*dynamic_programming=*/true);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(GroupsCost(items, *dp), 18);
  // The classic bound (max live bytes, 16) is below the layered clique bound, 17 here.
  EXPECT_EQ(SharingLowerBound(items), 17);
}

TEST(ExactSharingTest, MatchesBruteForceOnSmallRandomProblems) {
  int dp_worse = 0, greedy_worse = 0;
  for (int seed = 0; seed < 2400; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const int n = static_cast<int>(rng() % 9);  // 0..8 items
    const std::vector<SharingItem> items =
        RandomItems(rng, n, /*max_start=*/10, /*max_length=*/6, /*max_bytes=*/20,
                    /*two_devices=*/seed % 4 == 3);
    const int64_t optimum = BruteForceCost(items);

    absl::StatusOr<ExactSharingResult> exact = PlanExactSharing(items, 10);
    ASSERT_TRUE(exact.ok()) << exact.status();
    ExpectValidGrouping(items, exact->groups);
    EXPECT_TRUE(exact->proven_optimal);
    EXPECT_EQ(exact->cost, optimum);
    EXPECT_EQ(GroupsCost(items, exact->groups), optimum);
    EXPECT_LE(SharingLowerBound(items), optimum);

    for (bool dp : {false, true}) {
      absl::StatusOr<SharingGroups> chains = AssignMemongerChains(items, dp);
      ASSERT_TRUE(chains.ok()) << chains.status();
      ExpectValidGrouping(items, *chains);
      const int64_t cost = GroupsCost(items, *chains);
      EXPECT_GE(cost, optimum) << (dp ? "memonger-dp" : "memonger-greedy");
      if (cost > optimum) ++(dp ? dp_worse : greedy_worse);
    }
  }
  // memonger's assigners are not optimal; the oracle sees it.
  EXPECT_GT(dp_worse, 0);
  EXPECT_GT(greedy_worse, 0);
}

TEST(ExactSharingTest, MatchesBruteForceOnMidSizeProblems) {
  // Deeper searches (9-11 items) exercise the dominance rules and the state table.
  for (int seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(100000 + seed);
    const int n = 9 + static_cast<int>(rng() % 3);
    const std::vector<SharingItem> items =
        RandomItems(rng, n, /*max_start=*/12, /*max_length=*/6,
                    /*max_bytes=*/seed % 2 == 0 ? 6 : 50, /*two_devices=*/false);
    absl::StatusOr<ExactSharingResult> exact = PlanExactSharing(items, 10);
    ASSERT_TRUE(exact.ok()) << exact.status();
    ExpectValidGrouping(items, exact->groups);
    EXPECT_TRUE(exact->proven_optimal);
    EXPECT_EQ(exact->cost, BruteForceCost(items));
  }
}

TEST(ExactSharingTest, DevicesNeverShare) {
  const graph::Device cpu{0, 0};
  const graph::Device gpu{1, 0};
  const std::vector<SharingItem> items = {Item(1, 0, 0, 8, cpu), Item(2, 1, 1, 8, gpu),
                                          Item(3, 2, 2, 8, cpu)};
  absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValidGrouping(items, r->groups);
  EXPECT_EQ(r->cost, 16);
  EXPECT_THAT(r->groups, UnorderedElementsAre(ElementsAre(1, 3), ElementsAre(2)));
}

TEST(ExactSharingTest, EmptyAndZeroBytes) {
  absl::StatusOr<ExactSharingResult> empty = PlanExactSharing({}, 1);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->groups.empty());
  EXPECT_TRUE(empty->proven_optimal);
  EXPECT_EQ(empty->cost, 0);

  const std::vector<SharingItem> items = {Item(1, 0, 3, 0), Item(2, 1, 2, 0)};
  absl::StatusOr<ExactSharingResult> zero = PlanExactSharing(items, 1);
  ASSERT_TRUE(zero.ok()) << zero.status();
  ExpectValidGrouping(items, zero->groups);
  EXPECT_EQ(zero->cost, 0);
  EXPECT_TRUE(zero->proven_optimal);
}

TEST(ExactSharingTest, InvalidInput) {
  absl::StatusOr<ExactSharingResult> r = PlanExactSharing({Item(7, 3, 1, 8)}, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("value 7"));

  r = PlanExactSharing({Item(7, 0, 1, -1)}, 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);

  r = PlanExactSharing({Item(7, 0, 1, 8)}, -1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("time limit"));
}

TEST(ExactSharingTest, TimeLimitReturnsAValidUnprovenGrouping) {
  std::mt19937 rng(42);
  const std::vector<SharingItem> items =
      RandomItems(rng, 1500, /*max_start=*/300, /*max_length=*/40, /*max_bytes=*/1000,
                  /*two_devices=*/false);
  absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, 1e-3);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValidGrouping(items, r->groups);
  EXPECT_FALSE(r->proven_optimal);
  EXPECT_EQ(r->cost, GroupsCost(items, r->groups));
  EXPECT_LE(r->lower_bound, r->cost);
}

TEST(ExactSharingTest, BeyondTheSearchSizeGivesTheIncumbent) {
  std::mt19937 rng(5);
  const std::vector<SharingItem> items =
      RandomItems(rng, kMaxSearchItems + 100, /*max_start=*/2000, /*max_length=*/30,
                  /*max_bytes=*/1000, /*two_devices=*/false);
  absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, 10);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectValidGrouping(items, r->groups);
  EXPECT_EQ(r->nodes, 0);
  EXPECT_LE(r->lower_bound, r->cost);
}

// First fit stops at the time limit too (it is O(n x groups)): with a limit of 0 on a problem
// of long, overlapping lifetimes (thousands of groups), most items are grouped by the quick
// rule, validly, and the result says how many; groups still come in descending cost. With
// time enough, first fit runs to the end.
TEST(ExactSharingTest, FirstFitCutAtTheTimeLimitIsCompletedValidly) {
  std::mt19937 rng(77);
  const std::vector<SharingItem> items =
      RandomItems(rng, 6000, /*max_start=*/3000, /*max_length=*/2000, /*max_bytes=*/1000,
                  /*two_devices=*/true);
  // Extra conflicts (a parallel executor's): pairs with disjoint lifetimes that may not share,
  // which the quick rule must keep apart too.
  std::vector<std::pair<int, int>> extra;
  while (extra.size() < 3000) {
    const int a = static_cast<int>(rng() % items.size());
    const int b = static_cast<int>(rng() % items.size());
    if (a != b && items[a].device == items[b].device && Disjoint(items[a], items[b])) {
      extra.emplace_back(a, b);
    }
  }
  absl::StatusOr<ExactSharingResult> cut = PlanExactSharing(items, 0, extra);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ExpectValidGrouping(items, cut->groups);
  std::map<graph::ValueId, size_t> group_of;
  for (size_t g = 0; g < cut->groups.size(); ++g) {
    for (graph::ValueId root : cut->groups[g]) group_of[root] = g;
  }
  for (const auto& [a, b] : extra) {
    EXPECT_NE(group_of.at(items[a].root), group_of.at(items[b].root))
        << "conflicting " << items[a].root << " and " << items[b].root << " share";
  }
  EXPECT_GT(cut->first_fit_cut, 0);
  EXPECT_LT(cut->first_fit_cut, static_cast<int64_t>(items.size()));
  EXPECT_FALSE(cut->proven_optimal);
  EXPECT_EQ(cut->cost, GroupsCost(items, cut->groups));
  EXPECT_LE(cut->lower_bound, cut->cost);
  const auto by_root = ByRoot(items);
  const auto cost_of = [&](const std::vector<graph::ValueId>& group) {
    int64_t largest = 0;
    for (graph::ValueId root : group) largest = std::max(largest, by_root.at(root)->bytes);
    return largest;
  };
  for (size_t g = 1; g < cut->groups.size(); ++g) {
    const SharingItem& a = *by_root.at(cut->groups[g - 1].front());
    const SharingItem& b = *by_root.at(cut->groups[g].front());
    if (a.device == b.device) {
      EXPECT_GE(cost_of(cut->groups[g - 1]), cost_of(cut->groups[g]));
    }
  }
  absl::StatusOr<ExactSharingResult> whole = PlanExactSharing(items, 3600);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->first_fit_cut, 0);
  ExpectValidGrouping(items, whole->groups);
}

// Beyond the search's size the result is first fit's grouping, which an index of free groups
// now finds (free_group_index.h): the same groups as first fit trying every group in turn,
// on problems with long and short lifetimes (thousands of groups) and on two devices.
TEST(ExactSharingTest, FirstFitThroughTheIndexEqualsTryingEveryGroup) {
  for (const int seed : {3, 4, 5}) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const std::vector<SharingItem> items =
        RandomItems(rng, 2 * kMaxSearchItems + 2000, /*max_start=*/4000,
                    /*max_length=*/seed == 3 ? 3000 : 200, /*max_bytes=*/seed == 5 ? 3 : 1000,
                    /*two_devices=*/seed == 4);
    absl::StatusOr<ExactSharingResult> r = PlanExactSharing(items, 3600);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->first_fit_cut, 0);
    // First fit by hand: per device, items by (bytes desc, first step, root), each into the
    // first group none of whose members overlaps it.
    std::vector<int> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const SharingItem& x = items[a];
      const SharingItem& y = items[b];
      if (x.bytes != y.bytes) return x.bytes > y.bytes;
      if (x.lifetime.first_step != y.lifetime.first_step) {
        return x.lifetime.first_step < y.lifetime.first_step;
      }
      return x.root < y.root;
    });
    std::vector<std::vector<int>> groups;
    for (int i : order) {
      bool placed = false;
      for (std::vector<int>& group : groups) {
        if (items[group.front()].device != items[i].device) continue;
        if (std::all_of(group.begin(), group.end(),
                        [&](int j) { return Disjoint(items[i], items[j]); })) {
          group.push_back(i);
          placed = true;
          break;
        }
      }
      if (!placed) groups.push_back({i});
    }
    std::vector<std::vector<graph::ValueId>> expected;
    for (const std::vector<int>& group : groups) {
      std::vector<graph::ValueId> roots;
      for (int i : group) roots.push_back(items[i].root);
      std::sort(roots.begin(), roots.end());
      expected.push_back(roots);
    }
    std::vector<std::vector<graph::ValueId>> got = r->groups;
    for (std::vector<graph::ValueId>& group : got) std::sort(group.begin(), group.end());
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected);
  }
}

// The search itself (PlanExactSharing, below PlanMemory): proven optimal, and the same groups
// twice. The typed suite (sharing_planners_test.cc) checks determinism through PlanMemory.
TEST(ExactSharingTest, SearchIsProvenAndDeterministic) {
  std::mt19937 rng(9);
  const std::vector<SharingItem> items =
      RandomItems(rng, 30, /*max_start=*/30, /*max_length=*/6, /*max_bytes=*/100, false);
  absl::StatusOr<ExactSharingResult> a = PlanExactSharing(items, 30);
  absl::StatusOr<ExactSharingResult> b = PlanExactSharing(items, 30);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->proven_optimal);
  EXPECT_EQ(a->groups, b->groups);
  EXPECT_EQ(a->cost, b->cost);
}

// Under a parallel executor two values may share only when happens-before orders them: on
// small random DAGs the search's optimum with those conflicts equals brute force, and the plan
// passes the parallel verifier.
TEST(ExactSharingTest, ParallelConflictsMatchBruteForce) {
  int with_conflicts = 0;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomGraphOptions options;
    options.num_ops = 6 + static_cast<int>(seed % 5);
    options.num_outputs = 1;
    const graph::Graph g = testing::RandomGraph(seed, options);
    absl::StatusOr<Schedule> schedule = MakeSchedule(g, OrderKind::kGiven);
    ASSERT_TRUE(schedule.ok());
    absl::StatusOr<Liveness> live = ComputeLiveness(g, *schedule);
    ASSERT_TRUE(live.ok()) << live.status();
    const std::vector<SharingItem> items = SharingItems(g, *live, 1);
    if (items.size() > 11) continue;  // brute force stays quick
    const std::vector<std::pair<int, int>> conflicts = ParallelConflicts(g, *live, items);
    with_conflicts += !conflicts.empty();
    std::set<std::pair<int, int>> pairs;
    for (const auto& [a, b] : conflicts) pairs.insert({std::min(a, b), std::max(a, b)});
    absl::StatusOr<ExactSharingResult> exact = PlanExactSharing(items, 10, conflicts);
    ASSERT_TRUE(exact.ok()) << exact.status();
    ASSERT_TRUE(exact->proven_optimal);
    EXPECT_EQ(exact->cost, BruteForceCost(items, pairs));
    EXPECT_GE(exact->cost, BruteForceCost(items));  // conflicts only add constraints

    PlanOptions plan_options;
    plan_options.planner = PlannerKind::kExactSharing;
    plan_options.execution = ExecutionModel::kParallel;
    plan_options.alignment = 1;
    absl::StatusOr<Plan> plan = PlanMemory(g, plan_options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
  }
  EXPECT_GT(with_conflicts, 20);  // the property is exercised
}

}  // namespace
}  // namespace memonger

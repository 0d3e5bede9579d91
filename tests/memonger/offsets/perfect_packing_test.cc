#include "memonger/offsets/perfect_packing.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/offsets/offset_problem.h"
#include "workloads/workload_guillotine.h"
#include "tests/offset_support.h"

namespace memonger {
namespace {

using ::memonger::testing::Item;

// Is there a placement within `height`? Every offset of every item tried, pairwise checks.
bool BruteForceFits(const OffsetProblem& p, int64_t height) {
  const int n = static_cast<int>(p.items.size());
  std::vector<int64_t> offsets(n, 0);
  std::function<bool(int)> place = [&](int i) {
    if (i == n) return true;
    const OffsetItem& it = p.items[i];
    for (int64_t o = 0; o + it.bytes <= height; o += it.alignment) {
      bool free = true;
      for (int j = 0; j < i && free; ++j) {
        const OffsetItem& other = p.items[j];
        const bool meet = it.first_step <= other.last_step && other.first_step <= it.last_step;
        free = !meet || o + it.bytes <= offsets[j] || offsets[j] + other.bytes <= o;
      }
      if (!free) continue;
      offsets[i] = o;
      if (place(i + 1)) return true;
    }
    return false;
  };
  return place(0);
}

// A random problem with no slack: a few random items, the lower bound of those as the height,
// and at each step one filler item of exactly the bytes left there. Whether the fillers find
// their bytes in one piece is left to chance: some of these problems have a plan at the bound,
// some do not.
OffsetProblem NoSlackProblem(uint64_t seed, int steps, int64_t alignment) {
  std::mt19937_64 rng(seed);
  OffsetProblem p;
  p.num_steps = steps;
  const int n = 2 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) {
    const int first = static_cast<int>(rng() % steps);
    const int last = first + static_cast<int>(rng() % (steps - first));
    p.items.push_back(Item(first, last, alignment * static_cast<int64_t>(1 + rng() % 3),
                           alignment));
  }
  const int64_t height = OffsetLowerBound(p) + alignment * static_cast<int64_t>(rng() % 2);
  for (int step = 0; step < steps; ++step) {
    int64_t load = 0;
    for (int i = 0; i < n; ++i) {
      if (p.items[i].first_step <= step && step <= p.items[i].last_step) load += p.items[i].bytes;
    }
    if (load < height) p.items.push_back(Item(step, step, height - load, alignment));
  }
  return p;
}

// A problem over `steps` steps with no slack at `height`: up to `tries` random items of 1 to
// `max_bytes` bytes, each kept where it fits under `height` at every step it lives, then at
// each step one filler of the bytes left there (which may lie in two holes, so not every such
// problem has a plan at the bound).
OffsetProblem RandomNoSlackPart(std::mt19937_64& rng, int steps, int tries, int64_t max_bytes,
                                int64_t height) {
  OffsetProblem part;
  part.num_steps = steps;
  std::vector<int64_t> load(steps, 0);
  for (int k = 0; k < tries; ++k) {
    const int first = static_cast<int>(rng() % steps);
    const int last = first + static_cast<int>(rng() % (steps - first));
    const int64_t bytes = 1 + static_cast<int64_t>(rng() % max_bytes);
    bool room = true;
    for (int t = first; t <= last; ++t) room = room && load[t] + bytes <= height;
    if (!room) continue;
    for (int t = first; t <= last; ++t) load[t] += bytes;
    part.items.push_back(Item(first, last, bytes));
  }
  for (int t = 0; t < steps; ++t) {
    if (load[t] < height) part.items.push_back(Item(t, t, height - load[t]));
  }
  return part;
}

// Appends `part`'s items to `whole`, moved `step` steps later; the step after them.
int AppendPart(const OffsetProblem& part, int step, OffsetProblem& whole) {
  for (OffsetItem item : part.items) {
    item.first_step += step;
    item.last_step += step;
    whole.items.push_back(item);
  }
  return step + part.num_steps;
}

// Problems with no slack, yet no plan at the bound (found by a brute-force search over random
// problems of NoSlackProblem's kind): the height and each item's first step, last step, bytes.
using Triple = std::tuple<int, int, int64_t>;
std::vector<std::pair<int64_t, std::vector<Triple>>> UnreachableCases() {
  return {
      {5, {{0, 3, 2}, {0, 0, 3}, {1, 1, 3}, {2, 4, 1}, {2, 2, 2}, {3, 3, 1}, {3, 5, 1},
           {4, 4, 3}, {5, 5, 4}}},
      {6, {{0, 0, 3}, {0, 2, 1}, {0, 1, 2}, {1, 3, 2}, {1, 2, 1}, {2, 2, 1}, {2, 3, 1},
           {3, 5, 3}, {4, 5, 3}}},
      {5, {{0, 2, 3}, {0, 0, 2}, {1, 1, 2}, {2, 3, 1}, {2, 4, 1}, {3, 4, 1}, {3, 3, 2},
           {4, 5, 3}, {5, 5, 2}}},
  };
}

TEST(PerfectPackingTest, AgreesWithBruteForceOnSmallNoSlackProblems) {
  int found = 0;
  int infeasible = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const int64_t alignment = seed % 4 == 0 ? 2 : 1;
    const OffsetProblem p = NoSlackProblem(seed, 2 + static_cast<int>(seed % 4), alignment);
    if (p.items.size() > 9) continue;  // keep the brute force quick
    absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(p);
    ASSERT_TRUE(r.ok()) << r.status();
    const int64_t lower_bound = OffsetLowerBound(p);
    const bool fits = BruteForceFits(p, lower_bound);
    ASSERT_NE(r->outcome, PerfectPacking::kNotApplicable);
    ASSERT_NE(r->outcome, PerfectPacking::kStopped);
    EXPECT_EQ(r->outcome == PerfectPacking::kFound, fits);
    if (r->outcome == PerfectPacking::kFound) {
      ++found;
      ASSERT_TRUE(CheckOffsetSolution(p, r->offsets).ok());
      int64_t height = 0;
      for (size_t i = 0; i < p.items.size(); ++i) {
        height = std::max(height, r->offsets[i] + p.items[i].bytes);
      }
      EXPECT_EQ(height, lower_bound);
    } else {
      ++infeasible;
    }
  }
  // Random problems like these almost always have a plan at the bound (the test below has
  // some that do not).
  EXPECT_GT(found, 20) << infeasible << " infeasible, found " << found;
}

// SolvePerfectPacking on p must agree with `fits` (a brute force's answer): a valid plan within
// `height` where there is one, a proof that there is none otherwise. Whether it found a plan.
bool ExpectAgrees(const OffsetProblem& p, int64_t height, bool fits) {
  absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(p);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return false;
  EXPECT_NE(r->outcome, PerfectPacking::kStopped);
  EXPECT_EQ(r->outcome == PerfectPacking::kFound, fits);
  if (r->outcome != PerfectPacking::kFound) return false;
  EXPECT_TRUE(CheckOffsetSolution(p, r->offsets).ok());
  for (size_t i = 0; i < p.items.size(); ++i) {
    EXPECT_LE(r->offsets[i] + p.items[i].bytes, height) << "item " << i;
  }
  return true;
}

// Parts that share no step, each a small random problem with no slack at one common height or,
// now and then, one of the unreachable cases: the search solves each part on its own (a part
// that fails fails the whole at once), so the answer must be found exactly when every part has
// a plan at the bound by brute force.
TEST(PerfectPackingTest, IndependentPartsAgreeWithBruteForceOnEachPart) {
  constexpr int64_t kHeight = 5;
  const std::vector<std::pair<int64_t, std::vector<Triple>>> unreachable = UnreachableCases();
  std::mt19937_64 rng(11);
  int found = 0;
  int infeasible = 0;
  for (int trial = 0; trial < 150; ++trial) {
    SCOPED_TRACE(trial);
    OffsetProblem whole;
    bool every_part_fits = true;
    int step = 0;
    const int parts = 2 + static_cast<int>(rng() % 3);
    for (int k = 0; k < parts; ++k) {
      if (rng() % 6 == 0) {  // an unreachable case of height 5
        const auto& [height, items] = unreachable[rng() % 2 == 0 ? 0 : 2];
        ASSERT_EQ(height, kHeight);
        for (const auto& [first, last, bytes] : items) {
          whole.items.push_back(Item(step + first, step + last, bytes));
        }
        every_part_fits = false;
        step += 6;
        continue;
      }
      const int steps = 2 + static_cast<int>(rng() % 3);
      const OffsetProblem part =
          RandomNoSlackPart(rng, steps, /*tries=*/5, /*max_bytes=*/4, kHeight);
      ASSERT_LE(part.items.size(), 12u);
      every_part_fits = every_part_fits && BruteForceFits(part, kHeight);
      step = AppendPart(part, step, whole);
    }
    whole.num_steps = step;
    ASSERT_EQ(OffsetLowerBound(whole), kHeight);
    ++(ExpectAgrees(whole, kHeight, every_part_fits) ? found : infeasible);
  }
  EXPECT_GT(found, 10);
  EXPECT_GT(infeasible, 10);
}

// Small random problems with no slack whose parts are joined by bridge items (each lives in the
// last step of one part and the first of the next), a third of them starting with an
// unreachable case whose last filler makes room for a bridge: the parts separate only once the
// bridges are placed, so a part that fails must fail that placement alone and the search go on
// with the bridge elsewhere. The answer must agree with a brute force over the whole problem.
// (Every one of these has a plan: the bridge's byte is enough to unblock the unreachable
// cases, and random parts rarely lack one. A split that failed a placement wrongly would show
// as a missed plan.)
TEST(PerfectPackingTest, PartsSplitByPlacementsAgreeWithBruteForce) {
  constexpr int64_t kHeight = 5;
  const std::vector<std::pair<int64_t, std::vector<Triple>>> unreachable = UnreachableCases();
  std::mt19937_64 rng(23);
  int found = 0;
  int infeasible = 0;
  int tried = 0;
  for (int trial = 0; trial < 400 && tried < 120; ++trial) {
    SCOPED_TRACE(trial);
    const int parts = 2 + static_cast<int>(rng() % 2);
    std::vector<int> part_steps(parts);
    int steps = 0;
    for (int& n : part_steps) steps += n = 2 + static_cast<int>(rng() % 2);
    OffsetProblem p;
    p.num_steps = steps;
    std::vector<int64_t> load(steps, 0);
    auto add = [&](int first, int last, int64_t bytes) {
      for (int t = first; t <= last; ++t) {
        if (load[t] + bytes > kHeight) return;
      }
      for (int t = first; t <= last; ++t) load[t] += bytes;
      p.items.push_back(Item(first, last, bytes));
    };
    int begin = 0;
    int first_part = 0;
    if (trial % 3 == 0) {
      // An unreachable case first, its last step's filler one byte short for the bridge: the
      // brute force tells whether the whole still has no plan.
      const auto& [height, items] = unreachable[trial % 2 == 0 ? 0 : 2];
      ASSERT_EQ(height, kHeight);
      p.num_steps = steps + 6;
      load.assign(p.num_steps, 0);
      for (const auto& [first, last, bytes] : items) {
        const bool filler = first == 5 && last == 5;
        add(first, last, filler ? bytes - 1 : bytes);
      }
      begin = 6;
      first_part = 1;
      steps += 6;
      part_steps.insert(part_steps.begin(), 6);
    }
    for (int k = first_part; k < static_cast<int>(part_steps.size()); ++k) {
      const int end = begin + part_steps[k];
      if (k > 0) add(begin - 1, begin, 1 + static_cast<int64_t>(rng() % 2));  // the bridge
      for (int tries = 0; tries < 6; ++tries) {
        const int first = begin + static_cast<int>(rng() % part_steps[k]);
        const int last = first + static_cast<int>(rng() % (end - first));
        add(first, last, 1 + static_cast<int64_t>(rng() % 3));
      }
      begin = end;
    }
    for (int t = 0; t < steps; ++t) {
      if (load[t] < kHeight) p.items.push_back(Item(t, t, kHeight - load[t]));
    }
    if (p.items.size() > 16) continue;  // keep the brute force quick
    ++tried;
    ASSERT_EQ(OffsetLowerBound(p), kHeight);
    ++(ExpectAgrees(p, kHeight, BruteForceFits(p, kHeight)) ? found : infeasible);
  }
  EXPECT_GE(tried, 100);
  EXPECT_GT(found, 100) << infeasible << " infeasible";
}

// Parts side by side in time, each a small random problem with no slack at height 5 (now and
// then an unreachable case), under one 1-byte band that lives at every step: height 6. The band
// keeps every boundary crossed until it is placed, so the search works on all parts at once and
// a part that fails below must not be blamed on choices made in another (it backjumps over
// them), and the same state of a part recurs under other choices elsewhere (it is remembered).
// A plan at 6 exists exactly when every part has one at 5 (every item lies wholly above or
// below the band; take the band out and close the gap), which a brute force tells per part.
TEST(PerfectPackingTest, BackjumpsAndRepeatsAgreeWithBruteForce) {
  constexpr int64_t kHeight = 5;
  const std::vector<std::pair<int64_t, std::vector<Triple>>> unreachable = UnreachableCases();
  std::mt19937_64 rng(31);
  int found = 0;
  int infeasible = 0;
  int64_t repeats = 0;
  int64_t jumps = 0;
  for (int trial = 0; trial < 600; ++trial) {
    SCOPED_TRACE(trial);
    OffsetProblem whole;
    bool every_part_fits = true;
    int step = 0;
    const int parts = 2 + static_cast<int>(rng() % 3);
    for (int k = 0; k < parts; ++k) {
      OffsetProblem part;
      if (rng() % 5 == 0) {
        const auto& [height, items] = unreachable[rng() % 2 == 0 ? 0 : 2];
        ASSERT_EQ(height, kHeight);
        part.num_steps = 6;
        for (const auto& [first, last, bytes] : items) {
          part.items.push_back(Item(first, last, bytes));
        }
      } else {
        const int steps = 4 + static_cast<int>(rng() % 3);
        part = RandomNoSlackPart(rng, steps, /*tries=*/9, /*max_bytes=*/3, kHeight);
      }
      if (part.items.size() > 13) {  // keep the brute force quick: draw this part again
        --k;
        continue;
      }
      every_part_fits = every_part_fits && BruteForceFits(part, kHeight);
      step = AppendPart(part, step, whole);
    }
    whole.num_steps = step;
    whole.items.push_back(Item(0, step - 1, 1));  // the band
    ASSERT_EQ(OffsetLowerBound(whole), kHeight + 1);
    absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(whole);
    ASSERT_TRUE(r.ok()) << r.status();
    repeats += r->repeats;
    jumps += r->jumps;
    ++(ExpectAgrees(whole, kHeight + 1, every_part_fits) ? found : infeasible);
  }
  EXPECT_GT(found, 20);
  EXPECT_GT(infeasible, 20);
  // The mechanisms this test is for must have been at work.
  EXPECT_GT(jumps, 0);
  EXPECT_GT(repeats, 0);
}

// No slack, yet no plan at the bound (found by a brute-force search over random problems of
// this kind): the search must say so, and the brute force agrees.
TEST(PerfectPackingTest, ProvesTheBoundUnreachable) {
  for (const auto& [height, items] : UnreachableCases()) {
    OffsetProblem p;
    p.num_steps = 6;
    for (const auto& [first, last, bytes] : items) p.items.push_back(Item(first, last, bytes));
    ASSERT_EQ(OffsetLowerBound(p), height);
    ASSERT_FALSE(BruteForceFits(p, height));
    absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->outcome, PerfectPacking::kInfeasible);
  }
}

TEST(PerfectPackingTest, NotApplicableWhereSomeStepHasSlack) {
  OffsetProblem p;
  p.num_steps = 2;
  p.items = {Item(0, 1, 4), Item(1, 1, 2)};  // 4 bytes at step 0, 6 at step 1
  absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, PerfectPacking::kNotApplicable);
  // Steps where nothing lives do not count as slack.
  OffsetProblem gap;
  gap.num_steps = 5;
  gap.items = {Item(0, 1, 4), Item(3, 4, 2), Item(3, 4, 2), Item(0, 0, 0)};
  r = SolvePerfectPacking(gap);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, PerfectPacking::kFound);
  EXPECT_TRUE(CheckOffsetSolution(gap, r->offsets).ok());
}

TEST(PerfectPackingTest, NodeLimitStops) {
  const OffsetProblem p = NoSlackProblem(7, 5, 1);
  absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(p, std::nullopt, /*node_limit=*/0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, PerfectPacking::kStopped);
}

// Guillotine instances (optimum = lower bound by construction) of up to 500 pieces: the skyline
// search finds a plan at the bound (BENCHMARKS.md: larger ones, where it does not yet). Every
// one has a plan, so a repeat or a backjump that dropped a state with one would show here.
TEST(PerfectPackingTest, SolvesGuillotineInstances) {
  int64_t repeats = 0;
  int64_t jumps = 0;
  for (int64_t records : {60, 120, 240, 300, 400, 500}) {
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(records);
      SCOPED_TRACE(seed);
      graph::GuillotineWorkload w;
      w.records = records;
      w.seed = seed;
      const graph::GuillotineInstance g = graph::MakeGuillotineInstance(w);
      absl::StatusOr<OffsetProblem> p = OffsetProblemFromRecords(g.records, /*alignment=*/1);
      ASSERT_TRUE(p.ok()) << p.status();
      absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(*p, std::nullopt, 10'000'000);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->outcome, PerfectPacking::kFound) << r->nodes << " nodes";
      EXPECT_TRUE(CheckOffsetSolution(*p, r->offsets).ok());
      repeats += r->repeats;
      jumps += r->jumps;
    }
  }
  EXPECT_GT(repeats, 0);
  EXPECT_GT(jumps, 0);
}

// Rounds side by side answer as one thread does: the same outcome, plan and node count, where
// the first round finds the plan, where a later one does, and where none does within the limit.
TEST(PerfectPackingTest, ThreadsAnswerAsOneThreadDoes) {
  struct Case {
    int64_t records;
    uint64_t seed;
    int64_t node_limit;
  };
  // 400/1 stops at 5,000 nodes and is found in a later round within 30,000 (after 6,990);
  // 500/2 is found in a later round too (after 11,372: counts of this search on these
  // instances).
  const Case cases[] = {{400, 1, 5'000}, {400, 1, 30'000}, {500, 2, 30'000}};
  bool later_round_decided = false;
  bool stopped_by_nodes = false;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.records, " records, seed ", c.seed, ", ", c.node_limit, " nodes"));
    graph::GuillotineWorkload w;
    w.records = c.records;
    w.seed = c.seed;
    absl::StatusOr<OffsetProblem> p =
        OffsetProblemFromRecords(graph::MakeGuillotineInstance(w).records, /*alignment=*/1);
    ASSERT_TRUE(p.ok()) << p.status();
    absl::StatusOr<PerfectPacking> serial = SolvePerfectPacking(*p, std::nullopt, c.node_limit);
    ASSERT_TRUE(serial.ok()) << serial.status();
    const int64_t first_round = std::max<int64_t>(1024, 4 * c.records);
    later_round_decided |=
        serial->outcome == PerfectPacking::kFound && serial->nodes > first_round;
    if (serial->outcome == PerfectPacking::kStopped) {
      stopped_by_nodes = true;
      // Every round up to the limit, the last one over by its one stopping node.
      EXPECT_EQ(serial->nodes, c.node_limit + 1);
    }
    for (int threads : {2, 3, 8}) {
      absl::StatusOr<PerfectPacking> r =
          SolvePerfectPacking(*p, std::nullopt, c.node_limit, threads);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->outcome, serial->outcome) << threads << " threads";
      EXPECT_EQ(r->offsets, serial->offsets) << threads << " threads";
      EXPECT_EQ(r->nodes, serial->nodes) << threads << " threads";
    }
  }
  // The cases above must exercise the race: a plan from a later round, and no plan at all.
  EXPECT_TRUE(later_round_decided);
  EXPECT_TRUE(stopped_by_nodes);
}

// Above the item limit the search does not start (its stack grows with the items); at the limit
// it does.
TEST(PerfectPackingTest, TooLargeIsNotSearched) {
  for (int64_t items : {kMaxPerfectPackingItems, kMaxPerfectPackingItems + 1}) {
    OffsetProblem p;
    p.num_steps = static_cast<int>(items);
    for (int step = 0; step < p.num_steps; ++step) p.items.push_back(Item(step, step, 4));
    absl::StatusOr<PerfectPacking> r = SolvePerfectPacking(p);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->outcome, items > kMaxPerfectPackingItems ? PerfectPacking::kTooLarge
                                                          : PerfectPacking::kFound)
        << items << " items";
  }
}

// A path as deep as the problem has items: one section, 3,001 items stacked in it, on one
// thread and on two (rounds on threads of their own). Each node scans every item of the
// section, so a path deep enough to need more than a default 8 MiB stack would make a slow
// test; tests/util/deep_stack_test.cc checks that the threads get the stack they ask for.
TEST(PerfectPackingTest, DeepPathRuns) {
  OffsetProblem p;
  p.num_steps = 1;
  for (int k = 0; k < 3000; ++k) p.items.push_back(Item(0, 0, 1 + k % 2));
  p.items.push_back(Item(0, 0, 7));
  for (int threads : {1, 2}) {
    absl::StatusOr<PerfectPacking> r =
        SolvePerfectPacking(p, std::nullopt, std::numeric_limits<int64_t>::max(), threads);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outcome, PerfectPacking::kFound);
    EXPECT_TRUE(CheckOffsetSolution(p, r->offsets).ok());
  }
}

TEST(PerfectPackingTest, RefusesZeroThreads) {
  EXPECT_FALSE(SolvePerfectPacking(NoSlackProblem(7, 5, 1), std::nullopt,
                                   std::numeric_limits<int64_t>::max(), 0)
                   .ok());
}

}  // namespace
}  // namespace memonger

#include "memonger/offsets/offset_problem.h"

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/offset_support.h"
#include "util/splitmix64.h"

namespace memonger {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using ::memonger::testing::Item;

// The 8-tensor example of Pisarchyk & Lee (2020), (first, last, size) inclusive.
OffsetProblem PaperExample() {
  OffsetProblem p;
  p.num_steps = 9;
  p.items = {Item(0, 1, 32), Item(1, 4, 28), Item(2, 5, 36), Item(3, 5, 16),
             Item(4, 5, 8),  Item(5, 7, 64), Item(6, 8, 10), Item(7, 8, 40)};
  return p;
}

TEST(OffsetLowerBoundTest, EmptyProblemIsZero) {
  EXPECT_EQ(OffsetLowerBound(OffsetProblem{}), 0);
  OffsetProblem steps_only;
  steps_only.num_steps = 5;
  EXPECT_EQ(OffsetLowerBound(steps_only), 0);
}

TEST(OffsetLowerBoundTest, PaperExampleIs124) {
  EXPECT_EQ(OffsetLowerBound(PaperExample()), 124);  // step 5: 36 + 16 + 8 + 64
}

TEST(OffsetLowerBoundTest, InclusiveEndsMeetAtTheSharedStep) {
  OffsetProblem p;
  p.num_steps = 3;
  p.items = {Item(0, 1, 10), Item(1, 2, 20)};
  EXPECT_EQ(OffsetLowerBound(p), 30);
  p.items[1].first_step = 2;
  EXPECT_EQ(OffsetLowerBound(p), 20);
}

TEST(OffsetLowerBoundTest, SparseStepsGiveTheSameBoundAsDenseOnes) {
  OffsetProblem dense = PaperExample();
  OffsetProblem sparse = dense;
  sparse.num_steps = 1 << 30;  // far more steps than items: the sorted-event path
  for (OffsetItem& item : sparse.items) {
    item.first_step *= 1000;
    item.last_step = item.last_step * 1000 + 999;
  }
  EXPECT_EQ(OffsetLowerBound(sparse), OffsetLowerBound(dense));
}

struct CheckCase {
  std::string name;
  OffsetProblem problem;
  std::vector<int64_t> offsets;
  bool ok;
  std::vector<std::string> message_parts;  // each must appear in the error
};

void PrintTo(const CheckCase& c, std::ostream* os) { *os << c.name; }

class CheckOffsetSolutionTest : public ::testing::TestWithParam<CheckCase> {};

TEST_P(CheckOffsetSolutionTest, Verdict) {
  const CheckCase& c = GetParam();
  const absl::Status status = CheckOffsetSolution(c.problem, c.offsets);
  EXPECT_EQ(status.ok(), c.ok) << status;
  if (!c.ok) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.message_parts) {
      EXPECT_THAT(std::string(status.message()), HasSubstr(part));
    }
  }
}

OffsetProblem Problem(int num_steps, std::vector<OffsetItem> items) {
  OffsetProblem p;
  p.num_steps = num_steps;
  p.items = std::move(items);
  return p;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckOffsetSolutionTest,
    ::testing::Values(
        CheckCase{"PaperStacked", PaperExample(),
                  /*offsets=*/{0, 32, 60, 96, 112, 120, 184, 194}, /*ok=*/true, {}},
        CheckCase{"TouchingBytesDoNotOverlap",
                  Problem(2, {Item(0, 1, 8), Item(0, 1, 8)}), /*offsets=*/{8, 0}, true, {}},
        CheckCase{"DisjointLifetimesShareBytes",
                  Problem(4, {Item(0, 1, 8), Item(2, 3, 8)}), /*offsets=*/{0, 0}, true, {}},
        CheckCase{"ZeroBytesOccupyNothing",
                  Problem(2, {Item(0, 1, 8), Item(0, 1, 0)}), /*offsets=*/{0, 4}, true, {}},
        CheckCase{"OverlapNamesBothItems",
                  Problem(4, {Item(0, 3, 8), Item(0, 0, 4), Item(2, 3, 8)}),
                  /*offsets=*/{0, 8, 4}, false,
                  {"item 0 (bytes [0, 8), steps [0, 3])", "item 2 (bytes [4, 12), steps [2, 3])",
                   "step 2"}},
        CheckCase{"OverlapAtTheSharedInclusiveStep",
                  Problem(3, {Item(0, 1, 8), Item(1, 2, 8)}), /*offsets=*/{0, 0}, false,
                  {"item 0", "item 1", "step 1"}},
        CheckCase{"ContainedRangeOverlaps",
                  Problem(1, {Item(0, 0, 100), Item(0, 0, 4)}), /*offsets=*/{0, 50}, false,
                  {"item 0", "item 1"}},
        CheckCase{"OverlapBehindADisjointNeighbour",
                  Problem(3, {Item(0, 2, 30), Item(0, 2, 10), Item(1, 1, 15)}),
                  /*offsets=*/{0, 40, 20}, false, {"item 0", "item 2"}},
        CheckCase{"Misaligned", Problem(2, {Item(0, 1, 8, 8)}), /*offsets=*/{4}, false,
                  {"item 0", "offset 4", "alignment 8"}},
        CheckCase{"Negative", Problem(2, {Item(0, 1, 8)}), /*offsets=*/{-8}, false,
                  {"item 0", "negative offset"}},
        CheckCase{"WrongCount", Problem(2, {Item(0, 1, 8)}), /*offsets=*/{0, 0}, false,
                  {"2 offsets for 1 items"}},
        CheckCase{"Overflow", Problem(1, {Item(0, 0, INT64_MAX / 2)}),
                  /*offsets=*/{INT64_MAX / 2 + 2}, false, {"overflows"}}),
    [](const ::testing::TestParamInfo<CheckCase>& info) { return info.param.name; });

TEST(CheckOffsetSolutionScaleTest, ManyOverlappingItemsCheckQuickly) {
  // 20,000 items live at once, stacked: 2 * 10^8 overlapping pairs would be slow pair by pair.
  OffsetProblem p;
  p.num_steps = 1;
  std::vector<int64_t> offsets;
  for (int i = 0; i < 20000; ++i) {
    p.items.push_back(Item(0, 0, 16, 16));
    offsets.push_back(16 * static_cast<int64_t>(i));
  }
  EXPECT_TRUE(CheckOffsetSolution(p, offsets).ok());
  offsets[12345] = offsets[777];
  const absl::Status status = CheckOffsetSolution(p, offsets);
  EXPECT_THAT(std::string(status.message()), AllOf(HasSubstr("item 777"), HasSubstr("item 12345")));
}

// Against every pair, on random placements that are often invalid: the verdict agrees, and a
// reported pair does overlap. Steps spanning far more than the item count (and below zero)
// take the sort of packed keys instead of the counting sort.
TEST(CheckOffsetSolutionPropertyTest, AgreesWithEveryPair) {
  for (uint64_t seed = 0; seed < 400; ++seed) {
    SCOPED_TRACE(seed);
    util::SplitMix64 rng(seed);
    const int n = 1 + static_cast<int>(rng.Below(40));
    const int64_t span = seed % 4 == 0 ? int64_t{1} << 30 : 1 + static_cast<int64_t>(rng.Below(20));
    const int64_t shift = seed % 8 == 0 ? -(int64_t{1} << 29) : 0;
    OffsetProblem p;
    std::vector<int64_t> offsets;
    for (int i = 0; i < n; ++i) {
      const int64_t a = shift + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(span)));
      const int64_t b = shift + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(span)));
      p.items.push_back(Item(static_cast<int>(std::min(a, b)), static_cast<int>(std::max(a, b)),
                             static_cast<int64_t>(rng.Below(4)) * 8));  // zero bytes at times
      offsets.push_back(static_cast<int64_t>(rng.Below(12)) * 8);
    }
    p.num_steps = static_cast<int>(shift + span);
    bool overlap = false;
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        const OffsetItem& a = p.items[i];
        const OffsetItem& b = p.items[j];
        overlap = overlap || (a.bytes > 0 && b.bytes > 0 &&  // zero bytes occupy nothing
                              a.first_step <= b.last_step && b.first_step <= a.last_step &&
                              offsets[i] < offsets[j] + b.bytes &&
                              offsets[j] < offsets[i] + a.bytes);
      }
    }
    const absl::Status status = CheckOffsetSolution(p, offsets);
    EXPECT_EQ(status.ok(), !overlap) << status;
    if (!status.ok()) {
      EXPECT_THAT(std::string(status.message()), HasSubstr("overlap in bytes"));
    }
  }
}

}  // namespace
}  // namespace memonger

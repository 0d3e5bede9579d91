// The largest size that fits (report/fit.h): the search on made-up byte curves (exact answers,
// O(log) plans, refused values, errors), and on the attention workload, where the answer is
// cross-checked by planning it and the value above it independently.
#include "report/fit.h"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memonger/verify_plan.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

// A planner whose device bytes are `bytes(value)`; values above `refuse_above` are refused.
FitPlanner Curve(std::function<int64_t(int64_t)> bytes, int64_t refuse_above = INT64_MAX,
                 int* calls = nullptr) {
  return [=](int64_t value, const FitCure&) -> absl::StatusOr<FitPoint> {
    if (calls != nullptr) ++*calls;
    if (value > refuse_above) {
      return absl::InvalidArgumentError(absl::StrCat("value ", value, " is out of range"));
    }
    FitPoint p;
    p.device_bytes = bytes(value);
    p.arena_bytes = p.device_bytes;
    p.lower_bound_bytes = p.device_bytes;
    return p;
  };
}

FitSearch Search(int64_t budget) {
  FitSearch s;
  s.symbol = "n";
  s.budget = budget;
  s.cures = {{"given", PlanOptions{}}};
  return s;
}

TEST(FitTest, FindsTheLargestValueOfAMonotoneCurveInLogarithmicPlans) {
  for (int64_t budget : {0, 1, 99, 100, 12345, 1000000007}) {
    for (int64_t slope : {1, 3, 100}) {
      SCOPED_TRACE(absl::StrCat(budget, " ", slope));
      int calls = 0;
      absl::StatusOr<FitResult> fit =
          FindLargestFit(Search(budget), Curve([=](int64_t v) { return slope * v * v; },
                                               INT64_MAX, &calls));
      ASSERT_TRUE(fit.ok()) << fit.status();
      const FitRow& row = fit->rows[0];
      // The exact answer: the largest v >= 1 with slope v^2 <= budget.
      int64_t expected = 0;
      while (slope * (expected + 1) * (expected + 1) <= budget) ++expected;
      if (expected == 0) {
        EXPECT_FALSE(row.largest.has_value());
        continue;
      }
      ASSERT_TRUE(row.largest.has_value());
      EXPECT_EQ(*row.largest, expected);
      EXPECT_LE(row.at_largest->device_bytes, budget);
      ASSERT_TRUE(row.above.has_value());
      EXPECT_EQ(row.above->value, expected + 1);
      EXPECT_GT(row.above->device_bytes, budget);
      EXPECT_FALSE(row.range_ended);
      // Galloping then bisection: about 2 log2(answer) plans, never a scan, and up to 5 for
      // the aims (the line's two, the aim and its neighbour, the aim again and its neighbour);
      // then the probes past the answer, of which none fits a monotone curve.
      EXPECT_LE(calls, 2 * static_cast<int>(std::log2(static_cast<double>(expected) + 1)) + 6 +
                           kFitProbes);
      EXPECT_EQ(row.plans, calls);
      EXPECT_FALSE(row.also_fits.has_value());
      EXPECT_FALSE(row.period_largest.has_value());
    }
  }
}

// Bytes that grow linearly, as a net's with its batch: the line through the first two values
// gives the answer, settled by its neighbour: 4 plans and the probes, whatever the answer.
TEST(FitTest, ALinearCurveIsSettledInFourPlans) {
  for (int64_t budget : {5000, 123457, 987654321}) {
    for (int64_t slope : {1, 37, 4096}) {
      SCOPED_TRACE(absl::StrCat(budget, " ", slope));
      int calls = 0;
      absl::StatusOr<FitResult> fit = FindLargestFit(
          Search(budget), Curve([=](int64_t v) { return 1000 + slope * v; }, INT64_MAX, &calls));
      ASSERT_TRUE(fit.ok()) << fit.status();
      const FitRow& row = fit->rows[0];
      if ((budget - 1000) / slope == 0) {  // not even 1 fits
        EXPECT_FALSE(row.largest.has_value());
        continue;
      }
      ASSERT_TRUE(row.largest.has_value());
      EXPECT_EQ(*row.largest, (budget - 1000) / slope);
      EXPECT_EQ(row.above->value, *row.largest + 1);
      EXPECT_LE(calls, 4 + kFitProbes);
    }
  }
}

// Bytes that do not grow with the value: every 8th value (v % 8 == 7) needs half, as the
// efficient attention kernel does where the bias rows need no padded copy. The contiguous answer
// is still found, the probes past it see the 8th values fit, and the search along them finds
// the largest of those: the exact answers, against a scan.
TEST(FitTest, BytesThatDoNotGrowAreFoundAndSearchedAlongTheirSpacing) {
  auto bytes = [](int64_t v) { return v % 8 == 7 ? 50 * v : 100 * v; };
  int followed = 0;
  for (int64_t budget : {1000, 12345, 99999, 1000000}) {
    SCOPED_TRACE(budget);
    absl::StatusOr<FitResult> fit = FindLargestFit(Search(budget), Curve(bytes));
    ASSERT_TRUE(fit.ok()) << fit.status();
    const FitRow& row = fit->rows[0];
    int64_t contiguous = 0;
    while (bytes(contiguous + 1) <= budget) ++contiguous;
    int64_t largest_seventh = 7;
    while (bytes(largest_seventh + 8) <= budget) largest_seventh += 8;
    ASSERT_TRUE(row.largest.has_value());
    EXPECT_EQ(*row.largest, contiguous);
    if (largest_seventh <= contiguous + 1) {
      EXPECT_FALSE(row.also_fits.has_value());  // nothing beyond the answer fits
      continue;
    }
    ASSERT_TRUE(row.also_fits.has_value());
    EXPECT_EQ(row.also_fits->value % 8, 7);
    EXPECT_GT(row.also_fits->value, contiguous + 1);
    EXPECT_THAT(FitToText(*fit), HasSubstr("not monotone: n="));
    if (largest_seventh - row.also_fits->value < 8) {
      // The only one: no spacing to follow.
      EXPECT_EQ(row.also_fits->value, largest_seventh);
      EXPECT_FALSE(row.period_largest.has_value());
      continue;
    }
    EXPECT_EQ(row.period, 8);
    ASSERT_TRUE(row.period_largest.has_value());
    EXPECT_EQ(row.period_largest->value, largest_seventh);
    const nlohmann::json doc = nlohmann::json::parse(FitToJson(*fit));
    EXPECT_EQ(doc["fit"]["cures"][0]["largest_in_period"], largest_seventh);
    ++followed;
  }
  EXPECT_GE(followed, 2);
  // One value alone fits past the answer: named, with no spacing to search along.
  absl::StatusOr<FitResult> once = FindLargestFit(
      Search(1000), Curve([](int64_t v) { return v == 14 ? 10 : 100 * v; }));
  ASSERT_TRUE(once.ok()) << once.status();
  ASSERT_TRUE(once->rows[0].also_fits.has_value());
  EXPECT_EQ(once->rows[0].also_fits->value, 14);
  EXPECT_FALSE(once->rows[0].period_largest.has_value());
  EXPECT_THAT(FitToText(*once), HasSubstr("larger values may fit"));
}

// A later cure (a lower curve) starts from the earlier cure's answer: it plans neither
// min_value nor the gallop below, and, where the first cure's probes found the bytes monotone,
// no probes; where they found them not monotone, it probes too.
TEST(FitTest, LaterCuresStartFromTheLastAnswerAndProbeOnlyWhereNeeded) {
  FitSearch search = Search(100000);
  search.cures = {{"given", PlanOptions{}}, {"lower", PlanOptions{}}};
  std::map<std::string, std::vector<int64_t>> planned;
  auto curve = [&](std::function<int64_t(int64_t)> bytes) -> FitPlanner {
    return [&, bytes](int64_t value, const FitCure& cure) -> absl::StatusOr<FitPoint> {
      planned[cure.name].push_back(value);
      FitPoint p;
      p.device_bytes = cure.name == "given" ? bytes(value) : bytes(value) * 3 / 4;
      p.arena_bytes = p.lower_bound_bytes = p.device_bytes;
      return p;
    };
  };
  absl::StatusOr<FitResult> monotone = FindLargestFit(search, curve([](int64_t v) {
                                                        return 100 * v;
                                                      }));
  ASSERT_TRUE(monotone.ok()) << monotone.status();
  EXPECT_EQ(*monotone->rows[0].largest, 1000);
  EXPECT_EQ(*monotone->rows[1].largest, 1333);
  const std::vector<int64_t>& lower = planned["lower"];
  EXPECT_EQ(lower.front(), 1000);
  EXPECT_GE(*std::min_element(lower.begin(), lower.end()), 1000);
  // No probes: of the kFitProbes values past 1334, only those the bisection met.
  EXPECT_LT(std::count_if(lower.begin(), lower.end(),
                          [](int64_t v) { return v > 1334 && v <= 1334 + kFitProbes; }),
            kFitProbes / 2);
  EXPECT_LE(static_cast<int>(lower.size()), 2 * 10 + 2);

  planned.clear();
  absl::StatusOr<FitResult> seventh = FindLargestFit(search, curve([](int64_t v) {
                                                       return v % 8 == 7 ? 50 * v : 100 * v;
                                                     }));
  ASSERT_TRUE(seventh.ok()) << seventh.status();
  ASSERT_TRUE(seventh->rows[0].also_fits.has_value());
  // The lower cure probes the kFitProbes values past the one above its answer.
  ASSERT_TRUE(seventh->rows[1].above.has_value());
  const int64_t above = seventh->rows[1].above->value;
  EXPECT_EQ(std::count_if(planned["lower"].begin(), planned["lower"].end(),
                          [&](int64_t v) { return v > above && v <= above + kFitProbes; }),
            kFitProbes);
}

// The progress callback sees every value planned, once, in order, with its cure and whether it
// fit; `plans` counts over every cure (what a progress line shows).
TEST(FitTest, ProgressSeesEveryPlannedValue) {
  FitSearch search = Search(1000);
  search.cures.push_back({"second", PlanOptions{}});
  std::vector<FitProgress> seen;
  search.progress = [&](const FitProgress& p) { seen.push_back(p); };
  int calls = 0;
  absl::StatusOr<FitResult> fit =
      FindLargestFit(search, Curve([](int64_t v) { return 10 * v; }, 150, &calls));
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(static_cast<int>(seen.size()), calls);
  EXPECT_EQ(fit->rows[0].plans + fit->rows[1].plans, calls);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].plans, static_cast<int>(i) + 1);
    EXPECT_EQ(seen[i].cure, static_cast<int>(i) < fit->rows[0].plans ? "given" : "second");
    EXPECT_EQ(seen[i].refused, seen[i].value > 150) << seen[i].value;
    EXPECT_EQ(seen[i].fits, !seen[i].refused && 10 * seen[i].value <= 1000) << seen[i].value;
    if (!seen[i].refused) EXPECT_EQ(seen[i].device_bytes, 10 * seen[i].value);
  }
}

TEST(FitTest, TheRangeEndsTheSearchAndSaysSo) {
  absl::StatusOr<FitResult> fit =
      FindLargestFit(Search(1 << 30), Curve([](int64_t v) { return v; }, /*refuse_above=*/700));
  ASSERT_TRUE(fit.ok()) << fit.status();
  const FitRow& row = fit->rows[0];
  EXPECT_EQ(*row.largest, 700);
  EXPECT_TRUE(row.range_ended);
  EXPECT_THAT(row.above->refused, HasSubstr("out of range"));
  EXPECT_THAT(FitToText(*fit), HasSubstr("n=701 is refused"));
}

TEST(FitTest, NothingFitsAndTheMaximumFits) {
  absl::StatusOr<FitResult> none =
      FindLargestFit(Search(10), Curve([](int64_t v) { return 100 + v; }));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->rows[0].largest.has_value());
  EXPECT_EQ(none->rows[0].above->value, 1);
  EXPECT_THAT(FitToJson(*none), HasSubstr("\"given\": null"));

  FitSearch bounded = Search(1000);
  bounded.max_value = 37;
  absl::StatusOr<FitResult> all = FindLargestFit(bounded, Curve([](int64_t v) { return v; }));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all->rows[0].largest, 37);
  EXPECT_FALSE(all->rows[0].above.has_value());
}

TEST(FitTest, OtherErrorsEndTheSearchAndBadSearchesAreRefused) {
  FitPlanner broken = [](int64_t, const FitCure&) -> absl::StatusOr<FitPoint> {
    return absl::InternalError("the planner broke");
  };
  absl::StatusOr<FitResult> fit = FindLargestFit(Search(100), broken);
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(fit.status().message()), HasSubstr("--fit n (given)"));
  EXPECT_EQ(FindLargestFit(Search(-1), broken).status().code(),
            absl::StatusCode::kInvalidArgument);
  FitSearch empty = Search(100);
  empty.cures.clear();
  EXPECT_EQ(FindLargestFit(empty, broken).status().code(), absl::StatusCode::kInvalidArgument);
}

// The attention workload: the answer fits and the value above it does not, each planned again
// from scratch here, for the given and the memory-aware order.
TEST(FitTest, AttentionAnswerFitsAndTheNextValueDoesNot) {
  const int64_t budget = int64_t{3} << 30;
  auto plan_at = [](int64_t n, const FitCure& cure) -> absl::StatusOr<FitPoint> {
    const PlanOptions& options = cure.options;
    absl::StatusOr<graph::WorkloadSpec> spec =
        graph::ParseWorkloadSpec(absl::StrCat("attention:depth=2,n=", n));
    if (!spec.ok()) return spec.status();
    absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*spec);
    if (!g.ok()) return g.status();
    absl::StatusOr<Plan> plan = PlanMemory(*g, options);
    if (!plan.ok()) return plan.status();
    if (absl::Status s = VerifyPlan(*g, *plan); !s.ok()) return s;
    FitPoint p;
    p.arena_bytes = plan->arena_bytes;
    p.device_bytes = plan->arena_bytes + plan->static_bytes;
    p.lower_bound_bytes = plan->lower_bound_bytes;
    return p;
  };
  FitSearch search = Search(budget);
  search.cures[0].options.time_limit_seconds = 0.2;
  PlanOptions memory_aware = search.cures[0].options;
  memory_aware.order = OrderKind::kMemoryAware;
  search.cures.push_back({"memory-aware", memory_aware});
  absl::StatusOr<FitResult> fit = FindLargestFit(search, plan_at);
  ASSERT_TRUE(fit.ok()) << fit.status();
  for (const FitRow& row : fit->rows) {
    SCOPED_TRACE(row.cure);
    ASSERT_TRUE(row.largest.has_value());
    const FitCure& cure = row.cure == "given" ? search.cures[0] : search.cures[1];
    absl::StatusOr<FitPoint> at = plan_at(*row.largest, cure);
    absl::StatusOr<FitPoint> above = plan_at(*row.largest + 1, cure);
    ASSERT_TRUE(at.ok() && above.ok());
    EXPECT_LE(at->device_bytes, budget);
    EXPECT_GT(above->device_bytes, budget);
    EXPECT_GT(*row.largest, 1000);  // 3 GiB holds a few thousand tokens of fp16 attention
  }
  EXPECT_GE(*fit->rows[1].largest, *fit->rows[0].largest);
}

}  // namespace
}  // namespace memonger

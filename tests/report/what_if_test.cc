#include "report/what_if.h"

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memonger {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

graph::WorkloadSpec Spec(const std::string& text) { return *graph::ParseWorkloadSpec(text); }

std::vector<std::string> Labels(const std::vector<WhatIfVariant>& variants) {
  std::vector<std::string> labels;
  for (const WhatIfVariant& v : variants) labels.push_back(v.label);
  return labels;
}

TEST(WhatIfTest, ComparesFormACartesianProductFirstKeySlowest) {
  absl::StatusOr<std::vector<WhatIfVariant>> v = ExpandVariants(
      Spec("attention:n=5"), {}, {"kernel=math,efficient", "bias_dtype=fp32,fp16"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(Labels(*v), ElementsAre("kernel=math bias_dtype=fp32", "kernel=math bias_dtype=fp16",
                                      "kernel=efficient bias_dtype=fp32",
                                      "kernel=efficient bias_dtype=fp16"));
  EXPECT_EQ(graph::WorkloadSpecToString((*v)[3].spec),
            "attention:n=5,kernel=efficient,bias_dtype=fp16");
}

TEST(WhatIfTest, VariantsAreCrossedWithCompares) {
  absl::StatusOr<std::vector<WhatIfVariant>> v =
      ExpandVariants(Spec("attention:n=5,kernel=math"),
                     {"kernel=efficient,bias_pad=8", "bias_dtype=fp16"}, {"n=10,20"});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_THAT(Labels(*v), ElementsAre("kernel=efficient bias_pad=8 n=10",
                                      "kernel=efficient bias_pad=8 n=20", "bias_dtype=fp16 n=10",
                                      "bias_dtype=fp16 n=20"));
  EXPECT_EQ(graph::WorkloadSpecToString((*v)[0].spec),
            "attention:n=10,kernel=efficient,bias_pad=8");
  absl::StatusOr<std::vector<WhatIfVariant>> none = ExpandVariants(Spec("mlp"), {}, {});
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(Labels(*none), ElementsAre("as given"));
}

TEST(WhatIfTest, BadCompareArgumentsAreErrors) {
  for (const char* bad : {"kernel", "kernel=", "=math"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<std::vector<WhatIfVariant>> v = ExpandVariants(Spec("attention"), {}, {bad});
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("write KEY=V1,V2"));
  }
  absl::StatusOr<std::vector<WhatIfVariant>> twice =
      ExpandVariants(Spec("attention"), {}, {"n=1,2", "n=3"});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("'n' is compared twice"));
  absl::StatusOr<std::vector<WhatIfVariant>> variant =
      ExpandVariants(Spec("attention"), {"efficient"}, {});
  ASSERT_FALSE(variant.ok());
  EXPECT_THAT(std::string(variant.status().message()), HasSubstr("--variant 'efficient'"));
}

// --format json gives the table's rows with exact bytes (it printed the text table before).
TEST(WhatIfTest, JsonHoldsEveryRowExactly) {
  absl::StatusOr<std::vector<WhatIfVariant>> v =
      ExpandVariants(Spec("attention:n=17,heads=2,dim=16,mlp=32"), {}, {"n=9,17"});
  ASSERT_TRUE(v.ok()) << v.status();
  absl::StatusOr<std::vector<WhatIfRow>> rows = PlanVariants(*v, PlanOptions{});
  ASSERT_TRUE(rows.ok()) << rows.status();
  const int64_t budget = (*rows)[0].device_bytes;  // the first fits, the second does not
  const nlohmann::json doc = nlohmann::json::parse(
      WhatIfToJson(Spec("attention:n=17,heads=2,dim=16,mlp=32"), *rows, budget));
  EXPECT_EQ(doc["schema"], "memonger.whatif/v1");
  EXPECT_EQ(doc["budget"], budget);
  ASSERT_EQ(doc["variants"].size(), rows->size());
  for (size_t i = 0; i < rows->size(); ++i) {
    const nlohmann::json& r = doc["variants"][i];
    EXPECT_EQ(r["variant"], (*rows)[i].label);
    EXPECT_EQ(r["device_bytes"], (*rows)[i].device_bytes);
    EXPECT_EQ(r["arena_bytes"], (*rows)[i].arena_bytes);
    EXPECT_EQ(r["static_bytes"], (*rows)[i].static_bytes);
    EXPECT_EQ(r["lower_bound_bytes"], (*rows)[i].lower_bound_bytes);
    EXPECT_EQ(r["peak_op"], (*rows)[i].peak_op);
    EXPECT_EQ(r["peak_values"].size(), (*rows)[i].peak_values.size());
  }
  EXPECT_EQ(doc["variants"][0]["fits"], true);
  EXPECT_EQ(doc["variants"][1]["fits"], false);
  EXPECT_TRUE(nlohmann::json::parse(WhatIfToJson(Spec("mlp"), *rows, -1))["budget"].is_null());
}

TEST(WhatIfTest, AFailingVariantIsNamed) {
  absl::StatusOr<std::vector<WhatIfVariant>> v =
      ExpandVariants(Spec("attention:n=5"), {}, {"heads=12,7"});
  ASSERT_TRUE(v.ok());
  absl::StatusOr<std::vector<WhatIfRow>> rows = PlanVariants(*v, PlanOptions{});
  ASSERT_FALSE(rows.ok());
  EXPECT_THAT(std::string(rows.status().message()),
              HasSubstr("variant heads=7: attention workload: heads=7 does not divide dim=768"));
}

// The inference variants of ../shared/ANCHORS.md ("fp16 attention": TITAN config, weights fp16,
// exact lifetimes), device bytes in GB. The issue asks for 2 % on the math variants and 5 % on
// the efficient ones; docs/attention.md explains the remaining differences.
struct AnchorRow {
  const char* variant;
  double gb[3];  // N = 5000, 18000, 33000
  double tolerance;
};

TEST(WhatIfTest, InferenceVariantsMatchTheAnchors) {
  const AnchorRow kRows[] = {
      {"kernel=math,bias_dtype=fp32", {2.53, 31.36, 104.94}, 0.02},
      {"kernel=math,bias_dtype=fp16", {1.92, 23.53, 78.70}, 0.02},
      {"kernel=efficient,bias_dtype=fp16,bias_pad=8", {0.76, 8.11, 26.68}, 0.05},
      {"kernel=efficient,bias_dtype=fp16,bias_pad=0", {1.32, 15.78, 52.62}, 0.05},
  };
  const int kN[] = {5000, 18000, 33000};
  std::vector<std::string> variants;
  for (const AnchorRow& r : kRows) variants.push_back(r.variant);
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(kN[k]);
    absl::StatusOr<std::vector<WhatIfVariant>> v =
        ExpandVariants(Spec(absl::StrCat("attention:n=", kN[k])), variants, {});
    ASSERT_TRUE(v.ok()) << v.status();
    // The anchors' "exact" lifetimes count every value apart from its inputs: no output takes
    // a dying input's bytes (InPlaceReuseBringsTheMathPeakDown shows what that reuse changes).
    PlanOptions apart;
    apart.liveness.in_place = false;
    apart.liveness.views = false;  // the head split copies, as in the anchors' op list
    absl::StatusOr<std::vector<WhatIfRow>> rows = PlanVariants(*v, apart);
    ASSERT_TRUE(rows.ok()) << rows.status();
    for (size_t i = 0; i < rows->size(); ++i) {
      const WhatIfRow& row = (*rows)[i];
      SCOPED_TRACE(row.label);
      const double gb = row.device_bytes / 1e9;
      EXPECT_NEAR(gb, kRows[i].gb[k], kRows[i].gb[k] * kRows[i].tolerance);
      EXPECT_EQ(row.device_bytes, row.arena_bytes + row.static_bytes);
      EXPECT_EQ(row.arena_bytes, row.lower_bound_bytes);  // one resident block packs perfectly
      EXPECT_TRUE(row.proven_optimal);
    }
    // Where each peak is, as the anchors say (the first block at which it is reached: the
    // input tokens, kept for the whole run, add to every block's live bytes from b1 on).
    EXPECT_THAT((*rows)[0].peak_op, HasSubstr("MatMul op 'b1/qk'"));
    EXPECT_THAT((*rows)[1].peak_op, HasSubstr("Softmax"));
    EXPECT_THAT((*rows)[2].peak_op, HasSubstr("Gelu"));
    EXPECT_THAT((*rows)[3].peak_op, HasSubstr("EfficientAttention"));
  }
}

// With in-place reuse (the default), the math variant's softmax writes over the scores it
// reads: of the anchors' 6E bytes at the softmax (bias, scores, probabilities), 4E remain,
// and the peak moves to the QK^T matmul (bias, scores). E = 12 L^2 elements, fp16.
TEST(WhatIfTest, InPlaceReuseBringsTheMathPeakDown) {
  absl::StatusOr<std::vector<WhatIfVariant>> v =
      ExpandVariants(Spec("attention:n=5000"), {"kernel=math,bias_dtype=fp16"}, {});
  ASSERT_TRUE(v.ok()) << v.status();
  absl::StatusOr<std::vector<WhatIfRow>> rows = PlanVariants(*v, PlanOptions{});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 1u);
  const int64_t e = int64_t{12} * 5001 * 5001;
  const WhatIfRow& row = (*rows)[0];
  EXPECT_GE(row.lower_bound_bytes, 4 * e);
  EXPECT_LT(row.lower_bound_bytes, 4 * e + e / 5);  // the rest: [L, D] tensors, the input
  EXPECT_EQ(row.arena_bytes, row.lower_bound_bytes);
  EXPECT_THAT(row.peak_op, HasSubstr("MatMul op 'b1/qk'"));
}

TEST(WhatIfTest, TextShowsTheBudgetAndTheFieldsSizes) {
  const graph::WorkloadSpec base = Spec("attention:n=18000");
  absl::StatusOr<std::vector<WhatIfVariant>> v =
      ExpandVariants(base, {}, {"kernel=math,efficient"});
  ASSERT_TRUE(v.ok());
  absl::StatusOr<std::vector<WhatIfRow>> rows = PlanVariants(*v, PlanOptions{});
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::string text = WhatIfToText(base, *rows, /*budget=*/int64_t{24} * 1000000000);
  // The bias the field argues about: 15.55 GB in fp32 at 18k (not 52 GB), 7.78 GB in fp16.
  EXPECT_THAT(text, HasSubstr("one [1,12,18001,18001] map = 15.55 GB fp32, 7.78 GB fp16/bf16"));
  EXPECT_THAT(text, HasSubstr("bias as stored: [1,12,18001,18001] float32 = 15.55 GB"));
  EXPECT_THAT(text, HasSubstr("over by 7.33 GB"));
  EXPECT_THAT(text, HasSubstr("kernel=efficient"));
  EXPECT_THAT(text, HasSubstr("b1/bias_cast float16[1,12,18001,18001] 7.78 GB"));
}

}  // namespace
}  // namespace memonger

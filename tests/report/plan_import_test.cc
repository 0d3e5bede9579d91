#include "report/plan_import.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "graph/model_loader.h"
#include "graph/records.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "report/plan_report.h"
#include "tests/test_support.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using ::testing::HasSubstr;

graph::Graph Example() {
  graph::LoadOptions options;
  EXPECT_TRUE(graph::ParseDimBinding("L=257", options.bindings).ok());
  auto g = graph::LoadModel(memonger::testing::SourcePath("examples/transformer_block_fp16.pbtxt"),
                            options);
  EXPECT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(graph::InferShapes(*g, options.bindings).ok());
  return *std::move(g);
}

Plan MakePlan(const graph::Graph& g, PlannerKind planner, OrderKind order = OrderKind::kGiven) {
  PlanOptions options;
  options.planner = planner;
  options.order = order;
  auto plan = PlanMemory(g, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

TEST(PlanImportTest, JsonRoundTripKeepsThePlan) {
  const graph::Graph g = Example();
  for (PlannerKind planner : {PlannerKind::kNone, PlannerKind::kMemongerDag,
                              PlannerKind::kExactSharing}) {
    SCOPED_TRACE(std::string(PlannerName(planner)));
    const Plan plan = MakePlan(g, planner, OrderKind::kLongestPath);
    auto back = PlanFromJson(g, PlanToJson(g, plan), "plan.json");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(VerifyPlan(g, *back).ok());
    EXPECT_EQ(back->offset_of_value, plan.offset_of_value);
    EXPECT_EQ(back->arena_bytes, plan.arena_bytes);
    EXPECT_EQ(back->lower_bound_bytes, plan.lower_bound_bytes);
    EXPECT_EQ(back->naive_bytes, plan.naive_bytes);
    EXPECT_EQ(back->order, plan.order);
    ASSERT_EQ(back->steps.size(), plan.steps.size());
    for (size_t s = 0; s < plan.steps.size(); ++s) EXPECT_EQ(back->steps[s].op, plan.steps[s].op);
  }
}

TEST(PlanImportTest, AnEditedOverlapLoadsButDoesNotVerify) {
  const graph::Graph g = Example();
  const Plan plan = MakePlan(g, PlannerKind::kNone);
  nlohmann::json doc = nlohmann::json::parse(PlanToJson(g, plan));
  // Put "probs" (live together with "scores" at the softmax) at the offset of "scores".
  int64_t scores_offset = -1;
  int64_t scores_buffer = -1;
  for (const auto& v : doc["values"]) {
    if (v["name"] == "scores") {
      scores_offset = v["offset"];
      scores_buffer = v["buffer"];
    }
  }
  for (auto& v : doc["values"]) {
    if (v["name"] == "probs") {
      v["offset"] = scores_offset;
      v["buffer"] = scores_buffer;
    }
  }
  auto edited = PlanFromJson(g, doc.dump(), "edited.json");
  ASSERT_TRUE(edited.ok()) << edited.status();
  const absl::Status verdict = VerifyPlan(g, *edited);
  ASSERT_FALSE(verdict.ok());
  EXPECT_THAT(std::string(verdict.message()), HasSubstr("probs"));
  EXPECT_THAT(std::string(verdict.message()), HasSubstr("scores"));
}

struct BadPlanCase {
  std::string label;
  std::function<void(nlohmann::json&)> edit;
  std::string expected;
};
void PrintTo(const BadPlanCase& c, std::ostream* os) { *os << c.label; }

class BadPlanTest : public ::testing::TestWithParam<BadPlanCase> {};

TEST_P(BadPlanTest, IsRejectedWithAMessage) {
  const graph::Graph g = Example();
  nlohmann::json doc = nlohmann::json::parse(PlanToJson(g, MakePlan(g, PlannerKind::kNone)));
  GetParam().edit(doc);
  auto plan = PlanFromJson(g, doc.dump(), "bad.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr(GetParam().expected));
}

nlohmann::json& Value(nlohmann::json& doc, const std::string& name) {
  for (auto& v : doc["values"]) {
    if (v["name"] == name) return v;
  }
  return doc["values"][0];
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadPlanTest,
    ::testing::Values(
        BadPlanCase{"wrong_schema", [](nlohmann::json& d) { d["schema"] = "other/v9"; },
                    "not a plan"},
        BadPlanCase{"no_alignment", [](nlohmann::json& d) { d.erase("alignment"); },
                    "missing \"alignment\""},
        BadPlanCase{"bad_alignment", [](nlohmann::json& d) { d["alignment"] = 24; },
                    "not a power of two"},
        BadPlanCase{"string_offset", [](nlohmann::json& d) { Value(d, "ln1")["offset"] = "0"; },
                    "must be an integer"},
        BadPlanCase{"negative_offset", [](nlohmann::json& d) { Value(d, "ln1")["offset"] = -256; },
                    "negative"},
        BadPlanCase{"unknown_value", [](nlohmann::json& d) { Value(d, "ln1")["name"] = "ghost"; },
                    "no value 'ghost'"},
        BadPlanCase{"missing_value",
                    [](nlohmann::json& d) {
                      auto& values = d["values"];
                      for (auto it = values.begin(); it != values.end(); ++it) {
                        if ((*it)["name"] == "ln1") {
                          values.erase(it);
                          break;
                        }
                      }
                    },
                    "does not place"},
        BadPlanCase{"static_with_offset",
                    [](nlohmann::json& d) {
                      Value(d, "w_qkv")["offset"] = 0;
                    },
                    "static"},
        BadPlanCase{"unknown_op", [](nlohmann::json& d) { d["steps"][0]["op"] = "nope"; },
                    "not an op of this model"},
        BadPlanCase{"steps_out_of_order",
                    [](nlohmann::json& d) { std::swap(d["steps"][0], d["steps"][1]); },
                    ""},
        BadPlanCase{"unknown_order", [](nlohmann::json& d) { d["order"] = "sideways"; },
                    "sideways"},
        // Another type or shape of the same bytes: the file describes another model.
        BadPlanCase{"dtype_edited", [](nlohmann::json& d) { Value(d, "ln1")["dtype"] = "bfloat16"; },
                    "'ln1' is bfloat16[1,257,768] in the plan but float16[1,257,768] in the model"},
        BadPlanCase{"shape_edited",
                    [](nlohmann::json& d) { Value(d, "ln1")["shape"] = {257, 768}; },
                    "'ln1' is float16[257,768] in the plan but float16[1,257,768] in the model"},
        BadPlanCase{"shape_not_integers",
                    [](nlohmann::json& d) { Value(d, "ln1")["shape"] = {1, "257", 768}; },
                    "\"shape\" must hold integers"},
        BadPlanCase{"dtype_not_a_string", [](nlohmann::json& d) { Value(d, "ln1")["dtype"] = 10; },
                    "\"dtype\" must be a string"}),
    [](const ::testing::TestParamInfo<BadPlanCase>& info) { return info.param.label; });

// Every two values of a JSON plan that share bytes while both live name the same alias root
// ("alias_of", or the value itself): in place, and under --views a view and its input. Before,
// only in-place aliases were named, and a consumer saw a view and its input overlap while live.
TEST(PlanJsonTest, ValuesSharingLiveMemoryNameTheSameAliasRoot) {
  int view_aliases = 0;
  for (const std::string spec :
       {"random:ops=120,seed=1", "random:ops=120,seed=2,inplace=40",
        "random:ops=120,seed=3,mode=training", "attention:n=17,heads=2,dim=16,mlp=32,depth=2"}) {
    absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*parsed);
    ASSERT_TRUE(g.ok()) << g.status();
    for (bool views : {false, true}) {
      SCOPED_TRACE(absl::StrCat(spec, views ? " --views" : ""));
      PlanOptions options;
      options.liveness.views = views;
      options.memonger.mode = absl::StrContains(spec, "mode=training") ? Mode::kTraining : Mode::kInference;
      absl::StatusOr<Plan> plan = PlanMemory(*g, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      const nlohmann::json doc = nlohmann::json::parse(PlanToJson(*g, *plan));
      std::vector<const nlohmann::json*> placed;
      for (const nlohmann::json& v : doc["values"]) {
        if (!v["offset"].is_null() && v["bytes"].get<int64_t>() > 0) placed.push_back(&v);
      }
      auto root = [](const nlohmann::json& v) {
        return v["alias_of"].is_null() ? v["name"].get<std::string>()
                                       : v["alias_of"].get<std::string>();
      };
      for (size_t i = 0; i < placed.size(); ++i) {
        const nlohmann::json& a = *placed[i];
        for (size_t j = i + 1; j < placed.size(); ++j) {
          const nlohmann::json& b = *placed[j];
          const bool in_time = a["first_step"] <= b["last_step"] && b["first_step"] <= a["last_step"];
          const int64_t a0 = a["offset"], b0 = b["offset"];
          const bool in_bytes = a0 < b0 + b["bytes"].get<int64_t>() &&
                                b0 < a0 + a["bytes"].get<int64_t>();
          if (!in_time || !in_bytes) continue;
          EXPECT_EQ(root(a), root(b)) << a["name"] << " and " << b["name"];
          if (views && root(a) == root(b) && a["alias_of"] != b["alias_of"]) ++view_aliases;
        }
      }
    }
  }
  EXPECT_GT(view_aliases, 0);  // the nets have views the liveness merges
}

TEST(PlanImportTest, NotJson) {
  const graph::Graph g = Example();
  auto plan = PlanFromJson(g, "{\"schema\": ", "trunc.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("not valid JSON"));
}

// The CSV holds each row's own bytes and the alignment its offset keeps, so that it reads back
// as the same problem: the values' bytes sum as the net's, and at the plan's alignment the
// lower bound is the plan's. (Rows held bytes rounded up to the alignment, and none.) A row is an
// alias class: an output that took a dying input's bytes shares its row, so the rows' naive sum
// is the plan's only without in-place reuse (the plan's naive bytes count every value apart).
TEST(PlanImportTest, CsvReadsBackAsTheSameProblem) {
  const graph::Graph g = Example();
  for (const bool in_place : {false, true}) {
    for (int64_t alignment : {int64_t{1}, int64_t{256}}) {
      SCOPED_TRACE(absl::StrCat("alignment ", alignment, in_place ? ", in place" : ""));
      PlanOptions options;
      options.alignment = alignment;
      options.liveness.in_place = in_place;
      absl::StatusOr<Plan> plan = PlanMemory(g, options);
      ASSERT_TRUE(plan.ok()) << plan.status();
      auto records = graph::ParseMiniMallocCsv(PlanToMiniMallocCsv(g, *plan), "plan.csv");
      ASSERT_TRUE(records.ok()) << records.status();
      for (const graph::UsageRecord& r : *records) EXPECT_EQ(r.alignment, alignment) << r.name;
      absl::StatusOr<graph::Graph> trace = graph::GraphFromRecords(*records, "plan.csv");
      ASSERT_TRUE(trace.ok()) << trace.status();
      absl::StatusOr<Plan> again = PlanMemory(*trace, options);
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_EQ(again->lower_bound_bytes, plan->lower_bound_bytes);
      if (in_place) {
        EXPECT_LT(again->naive_bytes, plan->naive_bytes);  // the example writes over dying inputs
      } else {
        EXPECT_EQ(again->naive_bytes, plan->naive_bytes);
      }
    }
  }
}

TEST(PlanImportTest, CsvIsAValidMiniMallocSolution) {
  const graph::Graph g = Example();
  const Plan plan = MakePlan(g, PlannerKind::kExactSharing);
  const std::string csv = PlanToMiniMallocCsv(g, plan);
  auto records = graph::ParseMiniMallocCsv(csv, "plan.csv");
  ASSERT_TRUE(records.ok()) << records.status();
  // Rows live at the same time never overlap in bytes, and every row has its offset.
  for (size_t a = 0; a < records->size(); ++a) {
    const auto& x = (*records)[a];
    EXPECT_GE(x.offset, 0);
    EXPECT_EQ(x.offset % plan.alignment, 0);
    EXPECT_LE(x.offset + x.bytes, plan.arena_bytes);
    for (size_t b = a + 1; b < records->size(); ++b) {
      const auto& y = (*records)[b];
      const bool time = x.first_step <= y.last_step && y.first_step <= x.last_step;
      const bool space = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      EXPECT_FALSE(time && space) << x.name << " and " << y.name;
    }
  }
}

}  // namespace
}  // namespace memonger

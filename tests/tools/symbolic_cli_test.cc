// optimize-net with a range (--dim N=LO..HI): one plan for the whole range, written as
// memonger.plan/v2 and bound back at single values by --plan-in, each bound plan verified by
// the run; values outside the range, tampered documents and flags that need one binding are
// refused.
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "onnx/onnx_pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::memonger::testing::ReadFile;
using ::memonger::testing::RunOptimizeNet;
using ::memonger::testing::SourcePath;
using ::memonger::testing::TempDir;
using ::memonger::testing::Conv2dWithSymbolicBatch;
using ::memonger::testing::WriteTempFile;
using ::testing::HasSubstr;

std::string Example() { return SourcePath("examples/transformer_block_fp16.pbtxt"); }

TEST(SymbolicCliTest, SummaryGivesTheFormulaAndTheLargestLengthThatFits) {
  auto r = RunOptimizeNet(Example() + " --dim L=128..32768 --budget 20GiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("symbolic plan for L=128..32768"));
  // The scores (the softmax writes its probabilities over them: in-place reuse), and more.
  EXPECT_THAT(r.out, HasSubstr("24·L² + 6144·L"));
  const std::string said = "the largest L that fits (with every smaller one) is ";
  ASSERT_THAT(r.out, HasSubstr(said));
  // The answer is a length whose own plan fits and the next one's does not, in device bytes
  // (arena and weights), the figure a plain --budget run holds against the budget too.
  const int64_t largest = std::stoll(r.out.substr(r.out.find(said) + said.size()));
  auto device = [&](int64_t l) {
    auto run = RunOptimizeNet(absl::StrCat(Example(), " --dim L=", l, " --format json"));
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const auto plan = nlohmann::json::parse(run.out);
    EXPECT_GT(plan["static_bytes"].get<int64_t>(), 0);
    return plan["device_bytes"].get<int64_t>();
  };
  EXPECT_LT(largest, 32768);
  EXPECT_LE(device(largest), int64_t{20} << 30);
  EXPECT_GT(device(largest + 1), int64_t{20} << 30);
  // Not even the low end fits: exit 3.
  EXPECT_EQ(RunOptimizeNet(Example() + " --dim L=128..32768 --budget 1KiB").exit_code, 3);
}

TEST(SymbolicCliTest, PlanJsonBindsAtEveryValueOfTheRange) {
  const std::string plan = TempDir() + "/symbolic.json";
  auto r = RunOptimizeNet(Example() + " --dim L=64..8192 --plan-json '" + plan + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(ReadFile(plan));
  EXPECT_EQ(doc["schema"], "memonger.plan/v2");
  EXPECT_EQ(doc["symbols"][0]["name"], "L");
  ASSERT_FALSE(doc["pieces"].empty());
  std::mt19937_64 rng(3);
  for (int k = 0; k < 12; ++k) {
    const int64_t l = k == 0 ? 64 : k == 1 ? 8192 : 64 + static_cast<int64_t>(rng() % 8129);
    SCOPED_TRACE(l);
    // The run verifies the bound plan against the model typed at L before printing it.
    auto bound = RunOptimizeNet(absl::StrCat(Example(), " --dim L=", l, " --plan-in '", plan,
                                             "' --format json"));
    ASSERT_EQ(bound.exit_code, 0) << bound.err;
    const auto v1 = nlohmann::json::parse(bound.out);
    EXPECT_EQ(v1["schema"], "memonger.plan/v1");
    auto fresh = RunOptimizeNet(absl::StrCat(Example(), " --dim L=", l, " --format json"));
    ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
    EXPECT_EQ(v1["lower_bound_bytes"], nlohmann::json::parse(fresh.out)["lower_bound_bytes"]);
    EXPECT_LE(v1["arena_bytes"].get<double>(), 1.02 * v1["lower_bound_bytes"].get<double>());
  }
  auto outside = RunOptimizeNet(Example() + " --dim L=9000 --plan-in '" + plan + "'");
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_THAT(outside.err, HasSubstr("L=9000 lies outside the plan's range L=64..8192"));
}

// A document whose pieces leave two live values unordered is refused, whatever the binding.
TEST(SymbolicCliTest, TamperedPlansAreRefused) {
  const std::string plan = TempDir() + "/symbolic.json";
  ASSERT_EQ(RunOptimizeNet(Example() + " --dim L=64..8192 --plan-json '" + plan + "'").exit_code, 0);
  auto doc = nlohmann::json::parse(ReadFile(plan));
  bool cut = false;
  for (auto& piece : doc["pieces"]) {
    for (auto& below : piece["below"]) {
      if (!cut && !below.empty()) {
        below.clear();
        cut = true;
      }
    }
  }
  ASSERT_TRUE(cut);
  const std::string tampered = WriteTempFile("tampered.json", doc.dump());
  auto r = RunOptimizeNet(Example() + " --dim L=100 --plan-in '" + tampered + "'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no chain of 'below' lists orders them"));
  // A size expression that disagrees with the model.
  doc = nlohmann::json::parse(ReadFile(plan));
  doc["items"][0]["class_bytes"] = "7*L";
  auto wrong = RunOptimizeNet(Example() + " --dim L=100 --plan-in '" +
                              WriteTempFile("wrong.json", doc.dump()) + "'");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("the plan is for another model"));
}

TEST(SymbolicCliTest, AttentionWorkloadOverALengthRange) {
  const std::string spec = "--workload attention:dim=64,heads=2,mlp=128,depth=2,mode=training";
  const std::string plan = TempDir() + "/attention.json";
  auto r = RunOptimizeNet(spec + " --dim n=16..2048 --plan-json '" + plan + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("symbolic plan for n=16..2048"));
  for (int n : {16, 333, 2048}) {
    auto bound = RunOptimizeNet(absl::StrCat(
        "--workload attention:dim=64,heads=2,mlp=128,depth=2,mode=training,n=", n,
        " --plan-in '", plan, "'"));
    EXPECT_EQ(bound.exit_code, 0) << n << ": " << bound.err;
  }
  auto other = RunOptimizeNet(
      "--workload attention:dim=64,heads=2,mlp=128,depth=3,mode=training,n=100 --plan-in '" + plan +
      "'");
  EXPECT_EQ(other.exit_code, 1) << other.err;
}

// --html over a range: the plan bound across it (the corners first and last), one page.
TEST(SymbolicCliTest, HtmlOverARangeHoldsThePlanBoundAcrossIt) {
  const std::string page = TempDir() + "/range.html";
  auto r = RunOptimizeNet(
      "--workload attention:dim=64,heads=2,mlp=128,depth=2 --dim n=16..2048 --budget 50MB "
      "--html '" + page + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = ReadFile(page);
  const size_t start = html.find("<script id=\"plan-data\" type=\"application/json\">");
  ASSERT_NE(start, std::string::npos);
  const size_t begin = html.find('>', start) + 1;
  const nlohmann::json data =
      nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
  ASSERT_GE(data["frames"].size(), 3u);
  EXPECT_EQ(data["frames"].front()["label"], "n=16");
  EXPECT_EQ(data["frames"].back()["label"], "n=2048");
  // The page draws arenas: the budget's line is what the weights leave of it, and says so.
  auto low = RunOptimizeNet(
      "--workload attention:n=16,dim=64,heads=2,mlp=128,depth=2 --format json");
  ASSERT_EQ(low.exit_code, 0) << low.err;
  const int64_t weights = nlohmann::json::parse(low.out)["static_bytes"];
  ASSERT_GT(weights, 0);
  EXPECT_EQ(data["budget_bytes"], 50000000 - weights);
  EXPECT_THAT(data["budget_text"].get<std::string>(), HasSubstr("outside the arena"));
  // Each frame is the plan a binding of the range gives (--plan-in binds the same plan).
  auto bound = RunOptimizeNet(
      "--workload attention:dim=64,heads=2,mlp=128,depth=2,n=2048 --format json");
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_EQ(data["frames"].back()["lower_bound_bytes"],
            nlohmann::json::parse(bound.out)["lower_bound_bytes"]);
  // A what-if table has several nets: no one page (refused, not silently left unwritten).
  auto what_if = RunOptimizeNet(
      "--workload attention:dim=64,heads=2,mlp=128,depth=2 --dim n=16..256 --variant heads=4 "
      "--html '" + TempDir() + "/what_if.html'");
  EXPECT_EQ(what_if.exit_code, 2) << what_if.err;
  EXPECT_THAT(what_if.err, HasSubstr("--html draws one net's plans"));
}

// The what-if table over a range: one symbolic plan per variant, and the largest length whose
// device bytes fit, which a plain run at that length and the next confirms.
TEST(SymbolicCliTest, WhatIfOverALengthRange) {
  const std::string base = "attention:dim=64,heads=2,mlp=128,depth=2";
  auto r = RunOptimizeNet("--workload " + base +
                          " --compare kernel=math,efficient --dim n=16..4096 --budget 200MB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("over n=16..4096"));
  for (const char* kernel : {"math", "efficient"}) {
    SCOPED_TRACE(kernel);
    const size_t row = r.out.find(absl::StrCat("kernel=", kernel, " "));
    ASSERT_NE(row, std::string::npos) << r.out;
    const size_t at = r.out.find("n=", row);
    const int64_t largest = std::stoll(r.out.substr(at + 2));
    auto device = [&](int64_t n) {
      auto run = RunOptimizeNet(absl::StrCat("--workload ", base, ",kernel=", kernel, ",n=", n,
                                             " --format json"));
      EXPECT_EQ(run.exit_code, 0) << run.err;
      const auto j = nlohmann::json::parse(run.out);
      return j["arena_bytes"].get<int64_t>() + j["static_bytes"].get<int64_t>();
    };
    EXPECT_LE(device(largest), 200000000);
    EXPECT_GT(device(largest + 1), 200000000);
  }
  EXPECT_EQ(RunOptimizeNet("--workload " + base + " --compare kernel=math --dim n=16..4096 "
                           "--budget 10KB").exit_code, 3);
  auto other = RunOptimizeNet("--workload random:ops=10 --compare seed=1,2 --dim n=1..5");
  EXPECT_EQ(other.exit_code, 1);
}

// An ONNX model as a PyTorch export writes `x.view(x.size(0), -1)` and a mask of x's shape:
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape (folded by the importer at each binding)
// and ConstantOfShape(Shape(x)). Every value gets an expression (no fallback note), and the v2
// plan binds at other lengths.
TEST(SymbolicCliTest, OnnxShapeChainsAreExpressed) {
  const std::string chain = SourcePath("fuzz/corpus/onnx/reshape_fold.onnx");
  const std::string plan = TempDir() + "/chain.json";
  auto r = RunOptimizeNet("'" + chain + "' --dim N=1..64 --plan-json '" + plan + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("no size expression"))) << r.err;
  for (int n : {1, 37, 64}) {
    auto bound = RunOptimizeNet(absl::StrCat("'", chain, "' --dim N=", n, " --plan-in '", plan, "'"));
    EXPECT_EQ(bound.exit_code, 0) << n << ": " << bound.err;
  }
  onnx::ModelProto model;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    ir_version: 8
    opset_import { domain: "" version: 17 }
    graph {
      name: "mask_of_shape"
      node { input: "x" output: "s" op_type: "Shape" name: "shape" }
      node { input: "s" output: "ones" op_type: "ConstantOfShape" name: "fill"
             attribute { name: "value" type: TENSOR t { data_type: 1 dims: 1 float_data: 1.0 } } }
      node { input: "x" input: "ones" output: "y" op_type: "Mul" name: "mul" }
      node { input: "y" output: "out" op_type: "Relu" name: "relu" }
      input { name: "x" type { tensor_type { elem_type: 1 shape {
        dim { dim_param: "N" } dim { dim_value: 3 } dim { dim_value: 4 } } } } }
      output { name: "out" type { tensor_type { elem_type: 1 } } }
    })pb", &model));
  const std::string mask = WriteTempFile("mask.onnx", model.SerializeAsString());
  const std::string mask_plan = TempDir() + "/mask.json";
  auto m = RunOptimizeNet("'" + mask + "' --dim N=1..64 --plan-json '" + mask_plan + "'");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_THAT(m.err, ::testing::Not(HasSubstr("no size expression"))) << m.err;
  auto bound = RunOptimizeNet("'" + mask + "' --dim N=23 --plan-in '" + mask_plan + "'");
  EXPECT_EQ(bound.exit_code, 0) << bound.err;
}

// libonnx-testdata's Conv2d with a symbolic batch, as an exporter with dynamic axes writes it:
// one plan for batch 1..64, bound at every batch and verified by the run.
TEST(SymbolicCliTest, OnnxModelWithASymbolicBatch) {
  absl::StatusOr<std::string> model = Conv2dWithSymbolicBatch();
  if (absl::IsNotFound(model.status())) GTEST_SKIP() << model.status();
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path = WriteTempFile("conv2d_batch.onnx", *model);
  const std::string plan = TempDir() + "/conv2d_batch.json";
  auto r = RunOptimizeNet("'" + path + "' --dim batch=1..64 --plan-json '" + plan + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("symbolic plan for batch=1..64"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("no size expression"))) << r.err;
  for (int batch = 1; batch <= 64; batch += 9) {
    auto bound = RunOptimizeNet(absl::StrCat("'", path, "' --dim batch=", batch, " --plan-in '",
                                             plan, "' --format json"));
    ASSERT_EQ(bound.exit_code, 0) << batch << ": " << bound.err;
    const auto j = nlohmann::json::parse(bound.out);
    EXPECT_EQ(j["arena_bytes"], j["lower_bound_bytes"]) << batch;
  }
  // From batch 0, where nothing needs memory: no ratio to a lower bound of 0 ("wastes 1.0x"
  // was printed).
  auto empty_low = RunOptimizeNet("'" + path + "' --dim batch=0..4");
  ASSERT_EQ(empty_low.exit_code, 0) << empty_low.err;
  EXPECT_THAT(empty_low.out, HasSubstr("wastes all of it at batch=0, where nothing needs memory"));
}

// The same model in training: the gradient builder keeps the input's symbolic batch, so the
// training net is planned over the range too, and bound at each batch the plan verifies.
// (Before, the input's size was a constant, its size at the top of the range: "value 'input'
// has ... bytes at batch=1, but its size expression ... says ...".)
TEST(SymbolicCliTest, OnnxModelWithASymbolicBatchInTraining) {
  absl::StatusOr<std::string> model = Conv2dWithSymbolicBatch();
  if (absl::IsNotFound(model.status())) GTEST_SKIP() << model.status();
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path = WriteTempFile("conv2d_batch_training.onnx", *model);
  const std::string plan = TempDir() + "/conv2d_batch_training.json";
  // (The model's output "3" is the loss to differentiate.)
  const std::string training = "'" + path + "' --mode training --loss 3";
  auto r = RunOptimizeNet(training + " --dim batch=1..16 --plan-json '" + plan + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("symbolic plan for batch=1..16"));
  for (int batch : {1, 2, 7, 16}) {
    auto bound = RunOptimizeNet(
        absl::StrCat(training, " --dim batch=", batch, " --plan-in '", plan, "' --format json"));
    ASSERT_EQ(bound.exit_code, 0) << batch << ": " << bound.err;
  }
}

TEST(SymbolicCliTest, RangesNeedASymbolAndOneBindingForConcreteOutputs) {
  auto unknown = RunOptimizeNet(Example() + " --dim L=5 --dim Q=1..5");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("Q"));
  for (const char* flag : {"--execute host", "--fit L --budget 1GiB", "--net-out /tmp/x.pbtxt",
                           "--recompute sqrt"}) {
    auto r = RunOptimizeNet(Example() + " --dim L=1..64 " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_THAT(r.err, HasSubstr("a plan for a range of bindings")) << flag;
  }
  auto both = RunOptimizeNet(Example() + " --dim L=5 --dim L=1..64");
  EXPECT_EQ(both.exit_code, 2);
  // What the flags alone rule out is a usage error, before any work (exit 1 before, unlike
  // --fit or --execute with a range).
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {"--planner memonger-greedy", "needs an offset planner"},
           {"--planner none", "needs an offset planner"},
           {"--order memory-aware", "keeps one given order"},
           {"--execution parallel", "for a serial executor"}}) {
    auto r = RunOptimizeNet(Example() + " --dim L=1..64 " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_THAT(r.err, HasSubstr(message)) << flag;
  }
}

}  // namespace
}  // namespace memonger

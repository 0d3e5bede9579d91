// RunOnHost: real kernels in one planned arena. The central property: the planned arena does
// not corrupt values. The same net run with every value in memory of its own (--planner none)
// and with shared memory (the default planner, with and without in-place reuse of dying
// inputs, best-fit, exact; with views and with params in the arena) gives byte-identical outputs: the fp16 transformer block (L = 33) and an fp32 MLP
// written the Caffe2 way (in-place Add and Relu). Also: where inputs come from (caller data,
// seeded values), data of the wrong type, .npy outputs, and an op without a kernel.
#include "allocator/host_run.h"

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "graph/model_loader.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::Graph;

absl::StatusOr<Graph> LoadTyped(const std::string& path, const std::string& binding) {
  graph::LoadOptions load;
  if (!binding.empty()) {
    const absl::Status s = graph::ParseDimBinding(binding, load.bindings);
    if (!s.ok()) return s;
  }
  absl::StatusOr<Graph> g = graph::LoadModel(path, load);
  if (!g.ok()) return g.status();
  const absl::Status s = graph::InferShapes(*g, load.bindings);
  if (!s.ok()) return s;
  return g;
}

// A Caffe2-style MLP in fp32: FC, in-place Relu, FC, in-place Add of a residual, Softmax.
constexpr char kMlp[] = R"pb(
  name: "mlp"
  external_input: "x"
  external_input: "w1"
  external_input: "b1"
  external_input: "w2"
  external_input: "b2"
  external_output: "y"
  op { name: "fc1" type: "FC" input: "x" input: "w1" input: "b1" output: "h" }
  op { name: "relu" type: "Relu" input: "h" output: "h" }
  op { name: "fc2" type: "FC" input: "h" input: "w2" input: "b2" output: "z" }
  op { name: "residual" type: "Add" input: "z" input: "x" output: "z" }
  op { name: "flat" type: "Reshape" input: "z" output: "z2" view: true
       arg { name: "shape" ints: 0 ints: -1 } }
  op { name: "softmax" type: "Softmax" input: "z2" output: "y" arg { name: "axis" i: -1 } }
  value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 37 } dim { size: 48 } role: ROLE_INPUT }
  value_info { name: "w1" dtype: FLOAT has_shape: true dim { size: 96 } dim { size: 48 } role: ROLE_PARAM }
  value_info { name: "b1" dtype: FLOAT has_shape: true dim { size: 96 } role: ROLE_PARAM }
  value_info { name: "w2" dtype: FLOAT has_shape: true dim { size: 48 } dim { size: 96 } role: ROLE_PARAM }
  value_info { name: "b2" dtype: FLOAT has_shape: true dim { size: 48 } role: ROLE_PARAM }
)pb";

struct NetCase {
  const char* name;
  std::string path;  // empty: kMlp
  std::string binding;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const NetCase& c, std::ostream* os) { *os << c.name; }

class SharedVsUnsharedTest : public ::testing::TestWithParam<NetCase> {};

TEST_P(SharedVsUnsharedTest, OutputsAreByteIdenticalUnderEveryPlan) {
  const NetCase& c = GetParam();
  const std::string path =
      c.path.empty() ? testing::WriteTempFile("mlp.pbtxt", kMlp) : testing::SourcePath(c.path);
  absl::StatusOr<Graph> g = LoadTyped(path, c.binding);
  ASSERT_TRUE(g.ok()) << g.status();

  struct Variant {
    const char* name;
    PlannerKind planner;
    bool views, plan_static;
    bool in_place = true;
  };
  const Variant variants[] = {{"none", PlannerKind::kNone, false, false},
                              {"auto", PlannerKind::kAuto, false, false},
                              {"auto without in-place reuse", PlannerKind::kAuto, false, false,
                               false},
                              {"best-fit", PlannerKind::kBestFit, false, false},
                              {"exact", PlannerKind::kExact, false, false},
                              {"auto+views+plan_static", PlannerKind::kAuto, true, true},
                              {"greedy-by-size+views", PlannerKind::kGreedyBySize, true, false}};
  std::vector<HostRunOutput> reference;
  int64_t unshared_bytes = 0;
  for (const Variant& variant : variants) {
    SCOPED_TRACE(variant.name);
    PlanOptions options;
    options.planner = variant.planner;
    options.liveness.views = variant.views;
    options.liveness.plan_static = variant.plan_static;
    options.liveness.in_place = variant.in_place;
    options.time_limit_seconds = 1;
    absl::StatusOr<Plan> plan = PlanMemory(*g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(VerifyPlan(*g, *plan).ok());
    absl::StatusOr<HostRunReport> report = RunOnHost(*g, *plan, HostRunOptions{});
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_FALSE(report->outputs.empty());
    if (reference.empty()) {
      reference = report->outputs;
      unshared_bytes = plan->arena_bytes;
      continue;
    }
    // Sharing really happened (otherwise the comparison proves nothing); with plan_static the
    // params join the arena, so only the plans without it are smaller than the unshared one.
    if (!variant.plan_static) {
      EXPECT_LT(plan->arena_bytes, unshared_bytes);
    }
    ASSERT_EQ(report->outputs.size(), reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      EXPECT_EQ(report->outputs[i].name, reference[i].name);
      EXPECT_TRUE(report->outputs[i].bytes == reference[i].bytes)
          << "output '" << reference[i].name << "' differs from the unshared run";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Nets, SharedVsUnsharedTest,
    ::testing::Values(NetCase{"transformer_block_fp16", "examples/transformer_block_fp16.pbtxt", "L=33"},
                      NetCase{"caffe2_mlp_fp32", "", ""}),
    [](const ::testing::TestParamInfo<NetCase>& info) { return info.param.name; });

TEST(HostRunTest, CallerDataWinsAndOutputsAreComputedAndWritten) {
  absl::StatusOr<Graph> g = LoadTyped(testing::WriteTempFile("mlp.pbtxt", kMlp), "");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok());
  HostRunOptions options;
  options.outputs_dir = testing::TempDir() + "/out";
  // x = 0 and b2 = 0 with w1, b1, w2 seeded: z = 0 after the residual, so y is uniform 1/48.
  TensorData zeros_x{graph::TensorType{DataType::kFloat32, {37, 48}},
                     std::string(37 * 48 * 4, '\0')};
  TensorData zeros_b2{graph::TensorType{DataType::kFloat32, {48}}, std::string(48 * 4, '\0')};
  TensorData zeros_w2{graph::TensorType{DataType::kFloat32, {48, 96}}, std::string(48 * 96 * 4, '\0')};
  options.data = {{"x", zeros_x}, {"b2", zeros_b2}, {"w2", zeros_w2}};
  absl::StatusOr<HostRunReport> report = RunOnHost(*g, *plan, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->from_caller, 3);
  EXPECT_EQ(report->seeded, 2);
  EXPECT_EQ(report->seeded_statics.size(), 2u);
  ASSERT_EQ(report->outputs.size(), 1u);
  const float* y = reinterpret_cast<const float*>(report->outputs[0].bytes.data());
  for (int i = 0; i < 37 * 48; ++i) ASSERT_FLOAT_EQ(y[i], 1.0f / 48) << i;
  EXPECT_TRUE(std::filesystem::exists(options.outputs_dir + "/y.npy"));
  EXPECT_EQ(std::filesystem::file_size(options.outputs_dir + "/y.npy"), 128u + 37 * 48 * 4);

  options.data["x"].type.dtype = DataType::kFloat16;
  EXPECT_EQ(RunOnHost(*g, *plan, options).status().code(), absl::StatusCode::kInvalidArgument);
}

// Output names that map to one file name: an output whose name is its file name keeps it, and
// the others take free suffixes ('a/b' took a_b_1.npy, output 'a_b_1' then a_b_1_1.npy).
TEST(HostRunTest, OutputFilesNeverTakeAnotherOutputsOwnName) {
  absl::StatusOr<Graph> g = LoadTyped(testing::WriteTempFile("names.pbtxt", R"pb(
    name: "names"
    external_input: "x"
    external_output: "a/b" external_output: "a_b" external_output: "a_b_1"
    op { type: "Relu" input: "x" output: "a/b" }
    op { type: "Neg" input: "x" output: "a_b" }
    op { type: "Abs" input: "x" output: "a_b_1" }
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 4 } }
  )pb"), "");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok());
  HostRunOptions options;
  options.outputs_dir = testing::TempDir() + "/names_out";
  absl::StatusOr<HostRunReport> report = RunOnHost(*g, *plan, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::map<std::string, std::string> file_of;
  for (const HostRunOutput& out : report->outputs) {
    file_of[out.name] = std::filesystem::path(out.file).filename().string();
  }
  EXPECT_EQ(file_of["a_b"], "a_b.npy");
  EXPECT_EQ(file_of["a_b_1"], "a_b_1.npy");
  EXPECT_EQ(file_of["a/b"], "a_b_2.npy");
}

TEST(HostRunTest, AnOpWithoutKernelIsUnimplementedNamingIt) {
  // An op type with neither a kernel nor a schema: its output is typed by its declaration.
  constexpr char kMystery[] = R"pb(
    name: "mystery"
    external_input: "x"
    external_output: "y"
    op { name: "d" type: "Mystery" input: "x" output: "y" }
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 1 } dim { size: 4 } dim { size: 4 } }
    value_info { name: "y" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 1 } dim { size: 4 } dim { size: 4 } }
  )pb";
  absl::StatusOr<Graph> g = LoadTyped(testing::WriteTempFile("mystery.pbtxt", kMystery), "");
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
  ASSERT_TRUE(plan.ok());
  const absl::Status s = RunOnHost(*g, *plan, HostRunOptions{}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "Mystery")) << s;
}

}  // namespace
}  // namespace memonger::alloc

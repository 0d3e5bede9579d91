// optimize-net as a user meets it: exit codes, messages on stderr, never a signal.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "gmock/gmock.h"
#include "kernels/npy.h"
#include "kernels/onnx_tensor_data.h"
#include "onnx/onnx_pb.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::memonger::testing::ReadFile;
using ::memonger::testing::RunOptimizeNet;
using ::memonger::testing::SourcePath;
using ::memonger::testing::WriteTempFile;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Example() { return SourcePath("examples/transformer_block_fp16.pbtxt"); }

TEST(OptimizeNetTest, SummarisesTheBundledExample) {
  auto r = RunOptimizeNet(Example() + " --dim L=1025");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("transformer_block_fp16"));
  EXPECT_THAT(r.out, HasSubstr("naive bytes"));
  EXPECT_THAT(r.out, HasSubstr("lower bound"));
  EXPECT_THAT(r.out, HasSubstr("arena / lower"));
  EXPECT_THAT(r.out, HasSubstr("peak             step"));
  // The [1,12,L,L] fp16 tensors are the largest values.
  EXPECT_THAT(r.out, HasSubstr("float16[1,12,1025,1025]"));
}

// The portfolio's threads change nothing in the plan (best-fit has no time limit to cut it).
TEST(OptimizeNetTest, ThreadsGiveTheSamePlan) {
  std::string first;
  for (const char* threads : {"1", "2", "7"}) {
    auto r = RunOptimizeNet(std::string("--workload guillotine:records=300,seed=5 ") +
                            "--planner best-fit --format json --threads " + threads);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Everything but the clock.
    std::string plan;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      if (!absl::StrContains(line, "planning_seconds")) absl::StrAppend(&plan, line, "\n");
    }
    if (first.empty()) {
      first = plan;
    } else {
      EXPECT_TRUE(plan == first) << "--threads " << threads << " planned differently";
    }
  }
}

// The memory-aware order is the same in every process: its exact search visits sets in their
// own order, not a hash map's (whose seed changes from run to run), when it picks among orders
// of equal peak. On this net equal peaks abound, and separate runs differed before.
TEST(OptimizeNetTest, MemoryAwareOrderIsTheSameInEveryRun) {
  std::string first;
  for (int run = 0; run < 4; ++run) {
    auto r = RunOptimizeNet(
        "--workload randwire:nodes=16,k=4,p=75,stages=2 --planner best-fit "
        "--order memory-aware --time-limit 60 --threads 1 --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string plan;
    for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
      if (!absl::StrContains(line, "seconds")) absl::StrAppend(&plan, line, "\n");
    }
    if (first.empty()) {
      first = plan;
    } else {
      EXPECT_TRUE(plan == first) << "run " << run << " found another order";
    }
  }
}

TEST(OptimizeNetTest, TimingsNameEveryPhaseOnStderr) {
  auto r = RunOptimizeNet(Example() + " --dim L=65 --timings");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* phase : {"load ", "plan ", "verify ", "outputs ", "report ", "total "}) {
    EXPECT_THAT(r.err, HasSubstr(phase));
  }
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("timings")));  // the report is unchanged
  auto quiet = RunOptimizeNet(Example() + " --dim L=65");
  EXPECT_THAT(quiet.err, ::testing::Not(HasSubstr("timings")));
}

// A time limit too short for one greedy pass still gives a complete, verified plan at about
// the limit, and says how much longer a whole pass would have needed.
TEST(OptimizeNetTest, ATimeLimitThatCutsTheGreedyPassSaysSo) {
  auto r = RunOptimizeNet("--workload random:ops=2000,seed=1 --time-limit 0.000001 --top 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("note: the time limit cut the first greedy placement short"));
  EXPECT_THAT(r.err, HasSubstr("raise --time-limit"));
  EXPECT_THAT(r.out, HasSubstr("not proven optimal"));
  auto whole = RunOptimizeNet("--workload random:ops=2000,seed=1 --top 0");
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_THAT(whole.err, ::testing::Not(HasSubstr("cut the first greedy placement")));
}

TEST(OptimizeNetTest, JsonFormatIsThePlanDocument) {
  auto r = RunOptimizeNet(Example() + " --dim L=1025 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["schema"], "memonger.plan/v1");
  EXPECT_EQ(j["steps"].size(), 27u);
  EXPECT_GE(j["arena_bytes"].get<int64_t>(), j["lower_bound_bytes"].get<int64_t>());
  EXPECT_LE(j["arena_bytes"].get<int64_t>(), j["naive_bytes"].get<int64_t>());
  // The bias is a param: static, no offset. Scores: 12 * 1025^2 fp16 values, placed.
  bool saw_bias = false, saw_scores = false;
  for (const auto& v : j["values"]) {
    if (v["name"] == "alibi_bias") {
      saw_bias = true;
      EXPECT_TRUE(v["offset"].is_null());
      EXPECT_EQ(v["role"], "param");
    }
    if (v["name"] == "scores") {
      saw_scores = true;
      EXPECT_EQ(v["bytes"], int64_t{12} * 1025 * 1025 * 2);
      EXPECT_EQ(v["offset"].get<int64_t>() % 256, 0);
      EXPECT_EQ(v["dtype"], "float16");
    }
  }
  EXPECT_TRUE(saw_bias);
  EXPECT_TRUE(saw_scores);
}

TEST(OptimizeNetTest, BudgetExitsThreeWhenTheArenaDoesNotFit) {
  auto over = RunOptimizeNet(Example() + " --dim L=18001 --budget 4GiB");
  EXPECT_EQ(over.exit_code, 3) << over.err;
  EXPECT_THAT(over.err, HasSubstr("more than the budget"));
  auto fits = RunOptimizeNet(Example() + " --dim L=18001 --budget 80GiB");
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(RunOptimizeNet(Example() + " --dim L=18001 --budget lots").exit_code, 2);
}

TEST(OptimizeNetTest, NetOutWritesARewrittenNetThatLoads) {
  const std::string out = memonger::testing::TempDir() + "/rewritten.pbtxt";
  auto r = RunOptimizeNet(Example() + " --dim L=129 --planner memonger-dag --net-out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto again = RunOptimizeNet("'" + out + "' --dim L=129 --planner none");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("ops              27"));
}

TEST(OptimizeNetTest, PlansUsageRecords) {
  const std::string records = WriteTempFile("records.json", R"({"schema": "memonger.records/v1",
      "records": [{"name": "b0", "bytes": 7, "first_step": 0, "last_step": 1},
                  {"name": "b1", "bytes": 5, "first_step": 1, "last_step": 3},
                  {"name": "b2", "bytes": 5, "first_step": 2, "last_step": 3},
                  {"name": "b3", "bytes": 6, "first_step": 3, "last_step": 5},
                  {"name": "b4", "bytes": 5, "first_step": 4, "last_step": 5}]})");
  // memonger's DP counterexample: with 1-byte alignment exact sharing finds 17, memonger-dp 18.
  auto exact = RunOptimizeNet("'" + records + "' --alignment 1 --planner exact-sharing --format json");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_EQ(nlohmann::json::parse(exact.out)["arena_bytes"], 17);
  auto dp = RunOptimizeNet("'" + records + "' --alignment 1 --planner memonger-dp --format json");
  ASSERT_EQ(dp.exit_code, 0) << dp.err;
  EXPECT_EQ(nlohmann::json::parse(dp.out)["arena_bytes"], 18);
  EXPECT_EQ(nlohmann::json::parse(dp.out)["lower_bound_bytes"], 16);
  EXPECT_EQ(RunOptimizeNet("'" + records + "' --order longest-path").exit_code, 1);
  // Offsets go below every sharing plan: exact reaches the lower bound and says it is optimal;
  // best-fit's greedy orders stop at 17 and say they are not proven.
  auto offsets = RunOptimizeNet("'" + records + "' --alignment 1 --planner exact");
  ASSERT_EQ(offsets.exit_code, 0) << offsets.err;
  EXPECT_THAT(offsets.out, HasSubstr("arena bytes      16 B (16)"));
  EXPECT_THAT(offsets.out, HasSubstr("planner          exact (order given, serial execution, "
                                     "alignment 1), proven optimal"));
  auto greedy = RunOptimizeNet("'" + records + "' --alignment 1 --planner best-fit");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_THAT(greedy.out, HasSubstr("arena bytes      17 B (17)"));
  EXPECT_THAT(greedy.out, HasSubstr("not proven optimal"));
}

// A trace's net (--net-out) states its values' types, which its Step ops cannot infer: it loads
// back and plans to the same numbers.
TEST(OptimizeNetTest, UsageRecordsRoundTripThroughNetOut) {
  const std::string trace =
      WriteTempFile("trace.csv", "id,lower,upper,size\na,0,2,32\nb,1,5,28\nc,3,9,64\nd,6,7,8\n");
  const std::string out = WriteTempFile("trace_net.pbtxt", "");
  auto r = RunOptimizeNet("'" + trace + "' --planner none --format json --net-out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto again = RunOptimizeNet("'" + out + "' --planner none --format json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto plan = nlohmann::json::parse(r.out);
  const auto reloaded = nlohmann::json::parse(again.out);
  EXPECT_EQ(reloaded["naive_bytes"], plan["naive_bytes"]);
  EXPECT_EQ(reloaded["lower_bound_bytes"], plan["lower_bound_bytes"]);
}

// A saved plan read back (--plan-in) and verified keeps "proven optimal" where it is at the lower
// bound the run recomputes, and only there (it was always "not proven" on the way back).
TEST(OptimizeNetTest, SavedPlanAtTheBoundStaysProvenOptimal) {
  const std::string trace =
      WriteTempFile("proven.csv", "id,lower,upper,size\na,0,2,32\nb,1,5,28\nc,3,9,64\nd,6,7,8\n");
  for (const std::string planner : {"exact", "none"}) {
    SCOPED_TRACE(planner);
    const std::string saved = WriteTempFile("proven_" + planner + ".json", "");
    auto r = RunOptimizeNet("'" + trace + "' --alignment 1 --planner " + planner +
                            " --plan-json '" + saved + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto again = RunOptimizeNet("'" + trace + "' --plan-in '" + saved + "' --format json");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    const auto plan = nlohmann::json::parse(again.out);
    const bool at_bound = plan["arena_bytes"] == plan["lower_bound_bytes"];
    EXPECT_EQ(at_bound, planner == "exact");
    EXPECT_EQ(plan["proven_optimal"], at_bound);
    EXPECT_THAT(again.err, ::testing::Not(HasSubstr("are not used")));
    // Flags the saved plan decides instead are named, not ignored without a word.
    auto flags = RunOptimizeNet("'" + trace + "' --plan-in '" + saved +
                                "' --planner best-fit --alignment 64");
    ASSERT_EQ(flags.exit_code, 0) << flags.err;
    EXPECT_THAT(flags.err, HasSubstr("--planner, --alignment given with --plan-in are not used: "
                                     "the saved plan's own planner (" + planner + ")"));
  }
}

// A search the time limit cuts returns its best plan, valid, and says it is not proven.
TEST(OptimizeNetTest, ExactUnderATimeLimitSaysNotProven) {
  const std::string trace = SourcePath("../shared/corpus/traces/mm_D.csv");
  if (!std::ifstream(trace).good()) GTEST_SKIP() << "no " << trace;
  auto r = RunOptimizeNet("'" + trace + "' --alignment 1 --planner exact --time-limit 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("planner          exact"));
  EXPECT_THAT(r.out, HasSubstr("not proven optimal"));
}

TEST(OptimizeNetTest, PlannerAndOrderNamesAreUsageErrors) {
  auto planner = RunOptimizeNet(Example() + " --dim L=129 --planner magic");
  EXPECT_EQ(planner.exit_code, 2);
  EXPECT_THAT(planner.err, HasSubstr("magic"));
  EXPECT_EQ(RunOptimizeNet(Example() + " --dim L=129 --order sideways").exit_code, 2);
  EXPECT_EQ(RunOptimizeNet(Example() + " --dim L=129 --alignment 48").exit_code, 2);
}

TEST(OptimizeNetTest, UnknownLossIsAnError) {
  auto r = RunOptimizeNet(Example() +
                          " --dim L=129 --mode training --planner memonger-dag --loss nowhere");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("'nowhere'"));
}

TEST(OptimizeNetTest, HelpAndUsageErrors) {
  auto help = RunOptimizeNet("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--input-shape"));
  EXPECT_EQ(RunOptimizeNet("").exit_code, 2);                               // no model
  EXPECT_EQ(RunOptimizeNet(Example() + " --no-such-flag").exit_code, 2);  // unknown flag
  EXPECT_EQ(RunOptimizeNet(Example() + " --format yaml").exit_code, 2);   // bad choice
  // An empty output path (an unset shell variable) is refused, not taken as "no file".
  for (const char* flag : {"--plan-csv", "--plan-json", "--html", "--net-out"}) {
    SCOPED_TRACE(flag);
    auto r = RunOptimizeNet(Example() + " " + flag + " ''");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, HasSubstr("an empty path"));
  }
}

// --execute host runs the CPU kernels; --outputs-out writes the outputs as .npy. The bytes
// are the same with and without sharing (host_run_test proves it for more planners).
TEST(OptimizeNetTest, ExecuteHostWritesTheSameOutputsWithAndWithoutSharing) {
  const std::string dir = memonger::testing::TempDir();
  auto unshared = RunOptimizeNet(Example() + " --dim L=33 --execute host --planner none --outputs-out '" +
                                 dir + "/none'");
  ASSERT_EQ(unshared.exit_code, 0) << unshared.err;
  EXPECT_THAT(unshared.out, HasSubstr("executed        host kernels: 27 ops"));
  EXPECT_THAT(unshared.out, HasSubstr("outputs         1 written to"));
  auto shared = RunOptimizeNet(Example() + " --dim L=33 --execute host --outputs-out '" + dir +
                               "/auto'");
  ASSERT_EQ(shared.exit_code, 0) << shared.err;
  const std::string a = ReadFile(dir + "/none/y.npy");
  const std::string b = ReadFile(dir + "/auto/y.npy");
  ASSERT_EQ(a.size(), 128u + 33 * 768 * 2);  // header + float16[1,33,768]
  EXPECT_EQ(a.substr(0, 6), "\x93NUMPY");
  EXPECT_THAT(a, HasSubstr("'descr': '<f2'"));
  EXPECT_THAT(a, HasSubstr("'shape': (1, 33, 768)"));
  EXPECT_TRUE(a == b) << "the shared arena changed the output bytes";
  // Another seed gives other values.
  auto reseeded = RunOptimizeNet(Example() + " --dim L=33 --execute host --seed 7 --outputs-out '" +
                                 dir + "/seed7'");
  ASSERT_EQ(reseeded.exit_code, 0) << reseeded.err;
  EXPECT_FALSE(ReadFile(dir + "/seed7/y.npy") == a);
}

// --inputs and --expect: a user's own data in, a reference out. The ONNX test suite's Conv2d
// with its own input and output (as .npy files, the form numpy writes).
TEST(OptimizeNetTest, InputsAndExpectRunTheUsersDataAgainstAReference) {
  const std::string dir = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/";
  if (!std::ifstream(dir + "model.onnx")) GTEST_SKIP() << "libonnx-testdata is not installed";
  auto input = alloc::ReadTensorProtoFile(dir + "test_data_set_0/input_0.pb");
  auto output = alloc::ReadTensorProtoFile(dir + "test_data_set_0/output_0.pb");
  ASSERT_TRUE(input.ok() && output.ok());
  const std::string tmp = memonger::testing::TempDir() + "/inputs_expect";
  for (const char* sub : {"in", "out", "wrong", "extra", "shape"}) {
    std::filesystem::create_directories(tmp + "/" + sub);
  }
  auto write = [&](const std::string& path, const alloc::TensorData& t) {
    auto bytes = alloc::NpyBytes(t.type, reinterpret_cast<const std::byte*>(t.bytes.data()));
    ASSERT_TRUE(bytes.ok());
    std::ofstream(path, std::ios::binary) << *bytes;
  };
  write(tmp + "/in/0.npy", *input);
  write(tmp + "/out/3.npy", *output);
  alloc::TensorData wrong = *output;
  wrong.bytes[5] ^= 0x40;  // one float changed in its exponent
  write(tmp + "/wrong/3.npy", wrong);
  write(tmp + "/extra/0.npy", *input);
  write(tmp + "/extra/x.npy", *input);
  alloc::TensorData reshaped = *input;
  reshaped.type.dims = {static_cast<int64_t>(reshaped.bytes.size() / 4)};
  write(tmp + "/shape/0.npy", reshaped);

  const std::string model = "'" + dir + "model.onnx' --execute host";
  auto ok = RunOptimizeNet(model + " --inputs '" + tmp + "/in' --expect '" + tmp + "/out'");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("1 from --inputs, 2 from the model, 0 seeded"));
  EXPECT_THAT(ok.out, HasSubstr("expect          '3': max abs error"));
  // Without --inputs the input is seeded and the output is another one.
  auto seeded = RunOptimizeNet(model + " --expect '" + tmp + "/out'");
  EXPECT_EQ(seeded.exit_code, 1);
  EXPECT_THAT(seeded.err, HasSubstr("output '3' differs from --expect"));
  auto differs = RunOptimizeNet(model + " --inputs '" + tmp + "/in' --expect '" + tmp + "/wrong'");
  EXPECT_EQ(differs.exit_code, 1);
  EXPECT_THAT(differs.err, HasSubstr("relative error"));
  // A tolerance wide enough accepts it.
  auto tolerated = RunOptimizeNet(model + " --inputs '" + tmp + "/in' --expect '" + tmp +
                                  "/wrong' --tolerance 1e9");
  EXPECT_EQ(tolerated.exit_code, 0) << tolerated.err;
  auto missing = RunOptimizeNet(model + " --inputs '" + tmp + "/out'");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("'3', which is not an input of the model (its inputs: 0)"));
  auto extra = RunOptimizeNet(model + " --inputs '" + tmp + "/extra'");
  EXPECT_EQ(extra.exit_code, 1);
  EXPECT_THAT(extra.err, HasSubstr("'x', which is not an input"));
  auto shape = RunOptimizeNet(model + " --inputs '" + tmp + "/shape'");
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_THAT(shape.err, HasSubstr("but the model's input is float32[2,3,7,5]"));
  auto no_run = RunOptimizeNet("'" + dir + "model.onnx' --inputs '" + tmp + "/in'");
  EXPECT_EQ(no_run.exit_code, 2);
  EXPECT_THAT(no_run.err, HasSubstr("--inputs needs --execute"));
}

// A model with a dynamic batch (an exporter's dim_param) runs on the user's data without a
// --dim: the data's shape sizes the batch. A --dim or --input-shape still decides, and the
// run's check then names the disagreement.
TEST(OptimizeNetTest, InputsSizeTheDimsTheFlagsLeaveFree) {
  absl::StatusOr<std::string> model = memonger::testing::Conv2dWithSymbolicBatch();
  if (absl::IsNotFound(model.status())) GTEST_SKIP() << model.status();
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path = memonger::testing::WriteTempFile("conv2d_batch_inputs.onnx", *model);
  auto input = alloc::ReadTensorProtoFile(
      "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/test_data_set_0/input_0.pb");
  ASSERT_TRUE(input.ok()) << input.status();
  ASSERT_EQ(input->type.dims[0], 2);
  alloc::TensorData four = *input;  // the test's two images, twice: a batch of 4
  four.type.dims[0] = 4;
  four.bytes += input->bytes;
  const std::string tmp = memonger::testing::TempDir() + "/inputs_size_dims";
  std::filesystem::create_directories(tmp + "/in");
  auto bytes = alloc::NpyBytes(four.type, reinterpret_cast<const std::byte*>(four.bytes.data()));
  ASSERT_TRUE(bytes.ok());
  std::ofstream(tmp + "/in/0.npy", std::ios::binary) << *bytes;

  const std::string run = "'" + path + "' --execute host --inputs '" + tmp + "/in'";
  auto ok = RunOptimizeNet(run + " --outputs-out '" + tmp + "/out'");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("input      float32[4,3,7,5]"));
  EXPECT_THAT(ok.out, HasSubstr("1 from --inputs"));
  // The output's batch is the data's: its .npy header says (4, ...).
  EXPECT_THAT(ReadFile(tmp + "/out/3.npy"), HasSubstr("'shape': (4, "));
  auto told = RunOptimizeNet(run + " --dim batch=2");
  EXPECT_EQ(told.exit_code, 1);
  EXPECT_THAT(told.err, HasSubstr("but the model's input is float32[2,3,7,5]"));
  // Planning alone does not read --inputs (it needs --execute), so nothing sizes the batch.
  auto plan_only = RunOptimizeNet("'" + path + "'");
  EXPECT_EQ(plan_only.exit_code, 1);
  EXPECT_THAT(plan_only.err, HasSubstr("--dim batch=VALUE"));
}

// A weight whose data the model does not hold is not replaced by seeded values without asking.
TEST(OptimizeNetTest, WeightsWithoutDataRunOnlyWithSeedMissing) {
  const std::string dir = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/";
  if (!std::ifstream(dir + "model.onnx")) GTEST_SKIP() << "libonnx-testdata is not installed";
  onnx::ModelProto m;
  {
    std::ifstream in(dir + "model.onnx", std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&in));
  }
  m.mutable_graph()->mutable_initializer(0)->clear_raw_data();  // weights stripped
  m.mutable_graph()->mutable_initializer(0)->clear_float_data();
  const std::string path = WriteTempFile("stripped.onnx", m.SerializeAsString());
  auto refused = RunOptimizeNet("'" + path + "' --execute host");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, AllOf(HasSubstr("holds no data for 1 of its weights"),
                                 HasSubstr("--seed-missing")));
  auto seeded = RunOptimizeNet("'" + path + "' --execute host --seed-missing");
  EXPECT_EQ(seeded.exit_code, 0) << seeded.err;
  EXPECT_THAT(seeded.out, HasSubstr("seeded statics  1 params/constants without data in the "
                                    "model (--seed-missing)"));
  auto planned = RunOptimizeNet("'" + path + "'");  // planning needs no data
  EXPECT_EQ(planned.exit_code, 0) << planned.err;
}

TEST(OptimizeNetTest, ExecuteCudaRunsTheKernelsOrSaysWhyNot) {
  auto cuda = RunOptimizeNet(Example() + " --dim L=33 --execute cuda");
  if (cuda.exit_code == 0) {
    EXPECT_THAT(cuda.out, HasSubstr("executed        CUDA kernels"));
  } else {
    // No GPU here (or no CUDA in the build): one line saying which, exit code 1.
    EXPECT_EQ(cuda.exit_code, 1);
    EXPECT_THAT(cuda.err, AnyOf(HasSubstr("no usable CUDA device"), HasSubstr("built without CUDA")));
  }
}

TEST(OptimizeNetTest, OutputsWithoutExecutionAreRefused) {
  auto no_run = RunOptimizeNet(Example() + " --dim L=33 --outputs-out /tmp/nowhere");
  EXPECT_EQ(no_run.exit_code, 2);
  EXPECT_THAT(no_run.err, HasSubstr("--outputs-out needs --execute host or cuda"));
  auto verify = RunOptimizeNet(Example() + " --dim L=33 --execute host --verify --outputs-out /tmp/x");
  EXPECT_EQ(verify.exit_code, 2);
}

struct BadInputCase {
  std::string label;
  std::string file_name;  // empty: use the bundled example
  std::string contents;
  std::string flags;
  std::string expected;  // part of the stderr message
  int exit_code = 1;     // 2 for a malformed flag (a usage error, found before the model is read)
};
void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.label; }

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInputTest, ExitsOneWithAMessage) {
  const BadInputCase& c = GetParam();
  std::string model = c.file_name.empty() ? Example() : WriteTempFile(c.file_name, c.contents);
  if (c.label == "missing_file") model = memonger::testing::TempDir() + "/does_not_exist.pbtxt";
  auto r = RunOptimizeNet("'" + model + "' " + c.flags);
  EXPECT_EQ(r.signal, 0) << "killed by signal " << r.signal << "; stderr: " << r.err;
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  EXPECT_THAT(r.err, HasSubstr(c.expected));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

std::string Garbage(int n) {
  std::string s;
  unsigned x = 12345;
  for (int i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s.push_back(static_cast<char>(x >> 24));
  }
  return s;
}

constexpr char kRelu[] = R"pb(
  external_input: "x"
  op { name: "relu" type: "Relu" input: "x" output: "y" }
  external_output: "y"
)pb";

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInputTest,
    ::testing::Values(
        BadInputCase{"empty_file", "empty.pbtxt", "", "", "empty"},
        BadInputCase{"empty_onnx", "empty.onnx", "", "", "empty.onnx"},
        BadInputCase{"truncated_protobuf", "truncated.pb", std::string("\x0a\x10net", 5), "",
                     "truncated.pb"},
        BadInputCase{"random_bytes_pb", "random.pb", Garbage(2048), "", "random.pb"},
        BadInputCase{"random_bytes_onnx", "random.onnx", Garbage(2048), "", "random.onnx"},
        BadInputCase{"text_with_onnx_extension", "text.onnx", kRelu, "", "text.onnx"},
        BadInputCase{"missing_file", "", "", "", "no such file"},
        BadInputCase{"cyclic_net", "cycle.pbtxt", R"pb(
            external_input: "x"
            op { name: "a" type: "Add" input: "x" input: "b_out" output: "a_out" }
            op { name: "b" type: "Relu" input: "a_out" output: "b_out" }
          )pb", "--input-shape x=4", "cycle"},
        BadInputCase{"undefined_input", "undefined.pbtxt", R"pb(
            external_input: "x"
            op { name: "add" type: "Add" input: "x" input: "ghost" output: "y" }
          )pb", "--input-shape x=4", "'ghost'"},
        BadInputCase{"negative_dim", "relu.pbtxt", kRelu, "--input-shape x=2,-3",
                     "negative dimension", 2},
        BadInputCase{"overflowing_shape", "overflow.pbtxt", R"pb(
            external_input: "x"
            op { name: "relu" type: "Relu" input: "x" output: "y" }
            value_info { name: "x" dtype: FLOAT has_shape: true
                         dim { size: 4294967296 } dim { size: 4294967296 } }
          )pb", "", "64 bits"},
        BadInputCase{"overflowing_bytes", "overflow_bytes.pbtxt", R"pb(
            external_input: "x"
            op { name: "relu" type: "Relu" input: "x" output: "y" }
            value_info { name: "x" dtype: DOUBLE has_shape: true
                         dim { size: 2147483648 } dim { size: 2147483648 } }
          )pb", "", "'x'"},
        BadInputCase{"unknown_op_without_shapes", "unknown.pbtxt", R"pb(
            external_input: "x"
            op { name: "mystery" type: "FrobnicateTensor" input: "x" output: "y" }
          )pb", "--input-shape x=4", "FrobnicateTensor"},
        BadInputCase{"unbound_symbol", "", "", "", "'L'"},
        BadInputCase{"malformed_input_shape", "relu.pbtxt", kRelu, "--input-shape x=2,abc",
                     "'abc' is not an integer", 2},
        BadInputCase{"input_shape_without_name", "relu.pbtxt", kRelu, "--input-shape =2,3",
                     "malformed", 2},
        BadInputCase{"input_shape_for_a_non_input", "relu.pbtxt", kRelu,
                     "--input-shape x=2 --input-shape y=2", "'y'"},
        BadInputCase{"malformed_dim", "", "", "--dim L", "malformed", 2},
        BadInputCase{"records_end_before_start", "bad_records.json",
                     R"({"schema": "memonger.records/v1", "records": [
                         {"name": "a", "bytes": 4, "first_step": 3, "last_step": 1}]})",
                     "", "ends (step 1) before it starts (step 3)"},
        BadInputCase{"records_negative_bytes", "neg_records.json",
                     R"({"schema": "memonger.records/v1", "records": [
                         {"name": "a", "bytes": -4, "first_step": 0, "last_step": 1}]})",
                     "", "negative size"},
        BadInputCase{"trace_upper_not_above_lower", "bad.csv", "id,lower,upper,size\n0,5,5,8\n",
                     "", "upper 5 <= lower 5"}),
    [](const ::testing::TestParamInfo<BadInputCase>& info) { return info.param.label; });

// --workload builds a net; --net-out writes it as an ordinary net that loads back and plans the
// same.
TEST(OptimizeNetTest, WorkloadPlansAndRoundTripsThroughNetOut) {
  const std::string out = WriteTempFile("attention_workload.pbtxt", "");
  auto r = RunOptimizeNet(
      "--workload attention:n=63,heads=2,dim=16,mlp=32,depth=2,kernel=efficient,bias_dtype=fp16 "
      "--planner none --format json --net-out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  auto again = RunOptimizeNet("'" + out + "' --planner none --format json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto reloaded = nlohmann::json::parse(again.out);
  EXPECT_EQ(reloaded["naive_bytes"], plan["naive_bytes"]);
  EXPECT_EQ(reloaded["lower_bound_bytes"], plan["lower_bound_bytes"]);
  EXPECT_EQ(reloaded["values"].size(), plan["values"].size());
}

// The random workload through the CLI: the plan's --net-out (values renamed where they share,
// memonger's output form) loads back and plans to the same numbers; training too.
TEST(OptimizeNetTest, RandomWorkloadRoundTripsThroughNetOut) {
  for (const char* mode : {"inference", "training"}) {
    SCOPED_TRACE(mode);
    const std::string out = WriteTempFile(absl::StrCat("random_", mode, ".pb"), "");
    auto r = RunOptimizeNet(absl::StrCat("--workload random:ops=300,batch=2,width=8,seed=2,mode=",
                                         mode, " --time-limit 0.2 --format json --net-out '",
                                         out, "'"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto plan = nlohmann::json::parse(r.out);
    if (std::string(mode) == "inference") {
      EXPECT_EQ(plan["ops"], 300);
    }
    auto again = RunOptimizeNet("'" + out + "' --planner none --format json");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    const auto reloaded = nlohmann::json::parse(again.out);
    EXPECT_EQ(reloaded["ops"], plan["ops"]);
    EXPECT_EQ(reloaded["lower_bound_bytes"], plan["lower_bound_bytes"]);
    EXPECT_EQ(reloaded["static_bytes"], plan["static_bytes"]);
    // Shared values were renamed to one blob: fewer names, the same bytes at the peak.
    EXPECT_LE(reloaded["values"].size(), plan["values"].size());
  }
  auto bad = RunOptimizeNet("--workload random:ops=0");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("random workload: ops=0 is out of range"));
  auto width = RunOptimizeNet("--workload random:width=10");
  EXPECT_EQ(width.exit_code, 1);
  EXPECT_THAT(width.err, HasSubstr("width=10 is not a multiple of 4"));
}

// The sharing planners name a buffer after a value it holds (a graph output, a memonger
// member, a recycled graph input), and values of other types take that name: the net they were
// written into declared the name's type for all of them and did not load back. Now a declared
// type is dropped where it does not hold, and a recycled input's name is kept for its own type.
TEST(OptimizeNetTest, NetsRenamedBySharingPlannersLoadBack) {
  const std::string base = "--workload random:ops=60,batch=4,width=16,seed=";
  for (const std::string flags :
       {"--mode training --planner exact-sharing", "--recycle-inputs --planner memonger-greedy",
        "--recycle-inputs --planner exact-sharing",
        "--mode training --planner memonger-dag --share-all-activations"}) {
    for (int seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(absl::StrCat(flags, " seed ", seed));
      const std::string out = WriteTempFile("renamed.pbtxt", "");
      auto r = RunOptimizeNet(absl::StrCat(base, seed, " ", flags, " --net-out '", out, "'"));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      auto again = RunOptimizeNet(absl::StrCat(
          "'", out, "' --planner none", absl::StrContains(flags, "training") ? " --mode training" : ""));
      EXPECT_EQ(again.exit_code, 0) << again.err;
    }
  }
}

// A renamed net computes what the original does: executed in its own plan, every output is
// byte-identical to the original's (same seeded inputs and params: external names never
// change). Views named apart and types kept per name included.
TEST(OptimizeNetTest, RenamedNetsExecuteToTheSameOutputs) {
  for (const std::string flags :
       {"--views --planner auto", "--views --planner memonger-dag",
        "--recycle-inputs --planner exact-sharing", "--mode training --planner exact-sharing"}) {
    SCOPED_TRACE(flags);
    const std::string dir = memonger::testing::TempDir() + "/renamed_run";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir + "/a");
    std::filesystem::create_directories(dir + "/b");
    const std::string net = dir + "/net.pbtxt";
    auto a = RunOptimizeNet("--workload random:ops=60,batch=4,width=16,seed=3 " + flags +
                            " --execute host --outputs-out '" + dir + "/a' --net-out '" + net + "'");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const std::string mode = absl::StrContains(flags, "training") ? " --mode training" : "";
    auto b = RunOptimizeNet("'" + net + "' --planner none --execute host --outputs-out '" + dir +
                            "/b'" + mode);
    ASSERT_EQ(b.exit_code, 0) << b.err;
    int compared = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/a")) {
      const std::string name = entry.path().filename().string();
      EXPECT_EQ(ReadFile(entry.path().string()), ReadFile(dir + "/b/" + name)) << name;
      ++compared;
    }
    EXPECT_GT(compared, 0);
  }
}

// An ONNX model's --net-out loads back on its own: initializers (typed by their data) and the
// outputs of ops typed only by libonnx's inference (a shape read from tensor values, an op
// with no shape function here) are declared in the net. Before, every Conv's weights were
// written without a shape, and the net did not load.
TEST(OptimizeNetTest, OnnxModelsRoundTripThroughNetOut) {
  const std::string data = "/usr/share/libonnx-testdata/data/";
  if (!std::ifstream(data + "pytorch-converted/test_Conv2d/model.onnx")) {
    GTEST_SKIP() << "libonnx-testdata is not installed";
  }
  for (const char* model :
       {"pytorch-converted/test_Conv2d", "pytorch-converted/test_BatchNorm2d_eval",
        "node/test_logsoftmax_axis_0_expanded", "node/test_bernoulli_expanded"}) {
    SCOPED_TRACE(model);
    const std::string path = data + model + "/model.onnx";
    if (!std::ifstream(path)) continue;
    const std::string out = WriteTempFile("onnx_round_trip.pbtxt", "");
    auto r = RunOptimizeNet("'" + path + "' --format json --net-out '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto again = RunOptimizeNet("'" + out + "' --format json");
    ASSERT_EQ(again.exit_code, 0) << again.err;
    const auto a = nlohmann::json::parse(r.out), b = nlohmann::json::parse(again.out);
    EXPECT_EQ(a["lower_bound_bytes"], b["lower_bound_bytes"]);
    EXPECT_EQ(a["arena_bytes"], b["arena_bytes"]);
    EXPECT_EQ(a["static_bytes"], b["static_bytes"]);
  }
}

// An ONNX model whose only node is a Constant has no op left (the constant is folded): it
// plans with every option. --plan-static failed in the offset planners ("item 0 has lifetime
// [0, 0], not inside [0, 0)"), and --order was refused as if the model were a trace.
TEST(OptimizeNetTest, AModelWithNoOpsPlansWithEveryOption) {
  const std::string model = "/usr/share/libonnx-testdata/data/node/test_constant/model.onnx";
  if (!std::ifstream(model)) GTEST_SKIP() << "libonnx-testdata is not installed";
  for (const char* flags : {"", "--plan-static", "--plan-static --planner exact",
                            "--plan-static --planner greedy-by-size", "--order topological",
                            "--order memory-aware"}) {
    auto r = RunOptimizeNet("'" + model + "' " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << ": " << r.err;
  }
}

// --order memory-aware: the summary reports the search, --net-out lists the ops in the new
// order (loaded back, the given order is that order: the same lower bound), and the host run
// gives the same output bytes as under the given order.
TEST(OptimizeNetTest, MemoryAwareOrderReportsWritesAndRunsTheSameOutputs) {
  const std::string spec = "--workload randwire:nodes=16,stages=2,batch=2,width=8,seed=2";
  const std::string dir = memonger::testing::TempDir();
  const std::string out = dir + "/reordered.pb";
  auto text = RunOptimizeNet(spec + " --order memory-aware");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("order search     lower bound"));
  auto r = RunOptimizeNet(spec + " --order memory-aware --format json --net-out '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["order"], "memory-aware");
  ASSERT_TRUE(plan.contains("order_search"));
  EXPECT_LT(plan["lower_bound_bytes"].get<int64_t>(),
            plan["order_search"]["given_lower_bound_bytes"].get<int64_t>());
  auto again = RunOptimizeNet("'" + out + "' --order given --format json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["lower_bound_bytes"], plan["lower_bound_bytes"]);
  for (const char* order : {"given", "memory-aware"}) {
    auto run = RunOptimizeNet(spec + " --order " + order + " --execute host --outputs-out '" +
                              dir + "/" + order + "'");
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  const std::string given = ReadFile(dir + "/given/loss.npy");
  EXPECT_FALSE(given.empty());
  EXPECT_TRUE(given == ReadFile(dir + "/memory-aware/loss.npy"));
}

// --fit over an ONNX model with a symbolic batch, as an exporter with dynamic axes writes it
// (a dim_param on the input and the output): the answer plans within the budget and the next
// batch does not, each checked by a plain run.
TEST(OptimizeNetTest, FitFindsTheLargestBatchOfAnOnnxModel) {
  absl::StatusOr<std::string> model = memonger::testing::Conv2dWithSymbolicBatch();
  if (absl::IsNotFound(model.status())) GTEST_SKIP() << model.status();
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path =
      memonger::testing::WriteTempFile("conv2d_dynamic_batch.onnx", *model);
  const int64_t budget = 64 << 10;
  auto r = RunOptimizeNet("'" + path + "' --fit batch --budget 64KiB --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto fit = nlohmann::json::parse(r.out)["fit"];
  EXPECT_EQ(fit["symbol"], "batch");
  EXPECT_EQ(fit["budget"], budget);
  for (const char* cure : {"given", "memory-aware"}) {
    SCOPED_TRACE(cure);
    ASSERT_TRUE(fit["largest"][cure].is_number()) << r.out;
    const int64_t batch = fit["largest"][cure];
    auto device_bytes = [&](int64_t b) -> int64_t {
      auto run = RunOptimizeNet(absl::StrCat("'", path, "' --dim batch=", b, " --order ", cure,
                                             " --format json"));
      EXPECT_EQ(run.exit_code, 0) << run.err;
      const auto plan = nlohmann::json::parse(run.out);
      return plan["arena_bytes"].get<int64_t>() + plan["static_bytes"].get<int64_t>();
    };
    EXPECT_LE(device_bytes(batch), budget);
    EXPECT_GT(device_bytes(batch + 1), budget);
  }
  EXPECT_FALSE(fit["largest"].contains("recompute"));  // an inference net
  auto none = RunOptimizeNet("'" + path + "' --fit batch --budget 100");
  EXPECT_EQ(none.exit_code, 3) << none.err;
  EXPECT_THAT(none.out, HasSubstr("none: batch=1 needs"));
  auto usage = RunOptimizeNet("'" + path + "' --fit batch");
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--fit needs --budget"));
  // --timings covers the search.
  auto timed = RunOptimizeNet("'" + path + "' --fit batch --budget 64KiB --timings");
  EXPECT_EQ(timed.exit_code, 0) << timed.err;
  EXPECT_THAT(timed.err, HasSubstr("timings: load "));
  EXPECT_THAT(timed.err, HasSubstr(", fit "));
  // Each cure's time, and the nets typed: two imports, the rest retyped (tools/fit_nets.h).
  EXPECT_THAT(timed.err, HasSubstr("fit: given "));
  EXPECT_THAT(timed.err, HasSubstr(" imported, "));
  EXPECT_THAT(timed.err, Not(HasSubstr(" 0 retyped")));
}

// x[B, B] -> Reshape(x, [B * B]) -> Relu -> y, the target computed from Shape(x): a size that
// grows as B^2 where the retyping from B = 1 and 2 draws a line (3 B - 2). The retyped nets
// near the answer are wrong; the answer is confirmed by imports, found wrong, and searched again
// on imports alone: it fits, the next B does not, as plain runs say.
TEST(OptimizeNetTest, FitConfirmsRetypedNetsByImports) {
  onnx::ModelProto model;
  model.set_ir_version(7);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("square");
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int k = 0; k < 2; ++k) {
    x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("B");
  }
  auto int_init = [&](const std::string& name, int64_t v, bool scalar) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t->add_dims(1);
    t->add_int64_data(v);
  };
  int_init("i0", 0, true);
  int_init("i1", 1, true);
  int_init("axes", 0, false);
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const std::string& i : in) n->add_input(i);
    n->add_output(out);
  };
  node("Shape", {"x"}, "shape");
  node("Gather", {"shape", "i0"}, "rows");
  node("Gather", {"shape", "i1"}, "cols");
  node("Mul", {"rows", "cols"}, "count");
  node("Unsqueeze", {"count", "axes"}, "target");
  node("Reshape", {"x", "target"}, "flat");
  node("Relu", {"flat"}, "y");
  g->add_output()->set_name("y");
  const std::string path = WriteTempFile("square_reshape.onnx", model.SerializeAsString());
  const int64_t budget = 64 << 10;
  auto r = RunOptimizeNet("'" + path + "' --fit B --budget 64KiB --format json --timings");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t largest = nlohmann::json::parse(r.out)["fit"]["largest"]["given"];
  auto device_bytes = [&](int64_t b) -> int64_t {
    auto run = RunOptimizeNet(absl::StrCat("'", path, "' --dim B=", b, " --format json"));
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const auto plan = nlohmann::json::parse(run.out);
    return plan["arena_bytes"].get<int64_t>() + plan["static_bytes"].get<int64_t>();
  };
  EXPECT_GT(largest, 2);
  EXPECT_LE(device_bytes(largest), budget);
  EXPECT_GT(device_bytes(largest + 1), budget);
}

// Over the budget, the run says what each cure would give before exiting 3.
TEST(OptimizeNetTest, OverBudgetSaysWhichCuresFit) {
  const std::string spec = "--workload randwire:nodes=32,stages=3,seed=1";
  auto json = RunOptimizeNet(spec + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const int64_t device = nlohmann::json::parse(json.out)["device_bytes"];
  auto over = RunOptimizeNet(absl::StrCat(spec, " --budget ", device - 1));
  EXPECT_EQ(over.exit_code, 3);
  EXPECT_THAT(over.err, HasSubstr("more than the budget"));
  EXPECT_THAT(over.err, HasSubstr("cure: no placement of this order fits: its lower bound is"));
  EXPECT_THAT(over.err, HasSubstr("cure: --order memory-aware: arena"));
  EXPECT_THAT(over.err, HasSubstr("fits,"));
}

// --budget holds device bytes (arena + params and constants + --optimizer's state) against the
// budget, and says the parts: a budget the arena alone fits is still over.
TEST(OptimizeNetTest, BudgetHoldsDeviceBytes) {
  const std::string spec = "--workload mlp:layers=3,batch=64,dim=32,mode=training";
  auto json = RunOptimizeNet(spec + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto plan = nlohmann::json::parse(json.out);
  const int64_t arena = plan["arena_bytes"], weights = plan["static_bytes"];
  const int64_t trainable = plan["trainable_bytes"];
  EXPECT_EQ(plan["device_bytes"].get<int64_t>(), arena + weights);
  EXPECT_EQ(plan["optimizer"], "none");
  EXPECT_EQ(plan["optimizer_state_bytes"].get<int64_t>(), 0);
  // Every param of the mlp is trained, and its gradient has the param's size.
  EXPECT_EQ(trainable, weights);
  EXPECT_EQ(plan["param_gradient_bytes"].get<int64_t>(), trainable);
  ASSERT_GT(weights, 0);

  auto over = RunOptimizeNet(absl::StrCat(spec, " --budget ", arena));
  EXPECT_EQ(over.exit_code, 3) << over.err;
  EXPECT_THAT(over.err, HasSubstr(absl::StrCat("(", arena + weights, " bytes) on the device")));
  EXPECT_THAT(over.err, HasSubstr("+ params and constants"));
  EXPECT_EQ(RunOptimizeNet(absl::StrCat(spec, " --budget ", arena + weights)).exit_code, 0);

  // Adam keeps two moments per trained param: the same budget is now over by them.
  auto adam = RunOptimizeNet(spec + " --optimizer adam --format json");
  ASSERT_EQ(adam.exit_code, 0) << adam.err;
  const auto adam_plan = nlohmann::json::parse(adam.out);
  EXPECT_EQ(adam_plan["optimizer_state_bytes"].get<int64_t>(), 2 * trainable);
  EXPECT_EQ(adam_plan["device_bytes"].get<int64_t>(), arena + weights + 2 * trainable);
  auto adam_over = RunOptimizeNet(absl::StrCat(spec, " --optimizer adam --budget ", arena + weights));
  EXPECT_EQ(adam_over.exit_code, 3);
  EXPECT_THAT(adam_over.err, HasSubstr("+ optimizer state"));
  auto text = RunOptimizeNet(spec + " --optimizer momentum");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("momentum: 1 tensor per trainable param"));
  EXPECT_THAT(text.out, HasSubstr(absl::StrCat("device bytes     ")));
  EXPECT_EQ(RunOptimizeNet(spec + " --optimizer adagrad").exit_code, 2);
  // Recomputation aims the arena at what the rest leaves: it fits the device budget.
  auto recomputed = RunOptimizeNet(absl::StrCat(spec, " --optimizer adam --recompute auto --budget ",
                                                arena + weights + 2 * trainable - 1,
                                                " --format json"));
  if (recomputed.exit_code == 0) {
    EXPECT_LE(nlohmann::json::parse(recomputed.out)["device_bytes"].get<int64_t>(),
              arena + weights + 2 * trainable - 1);
  } else {
    EXPECT_EQ(recomputed.exit_code, 3) << recomputed.err;
    EXPECT_THAT(recomputed.err, HasSubstr("less"));
  }
}

// One question, one answer: --fit and the range summary of the same model and budget name the
// same largest batch, both counting the optimizer's state.
TEST(OptimizeNetTest, FitAndRangeSummaryAgreeOnDeviceBytes) {
  absl::StatusOr<std::string> model = memonger::testing::Conv2dWithSymbolicBatch();
  if (absl::IsNotFound(model.status())) GTEST_SKIP() << model.status();
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path = memonger::testing::WriteTempFile("conv2d_training_batch.onnx", *model);
  const std::string spec =
      "'" + path + "' --mode training --loss 3 --budget 1MiB --optimizer adam --time-limit 0.2";
  auto fit = RunOptimizeNet(spec + " --fit batch --format json");
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  const auto largest = nlohmann::json::parse(fit.out)["fit"]["largest"];
  ASSERT_TRUE(largest["given"].is_number()) << fit.out;
  auto range = RunOptimizeNet(spec + " --dim batch=1..4096");
  ASSERT_EQ(range.exit_code, 0) << range.err;
  EXPECT_THAT(range.out, HasSubstr(absl::StrCat("the largest batch that fits (with every smaller "
                                                "one) is ", largest["given"].get<int64_t>(),
                                                ", device ")));
  EXPECT_THAT(range.out, HasSubstr("+ optimizer state"));
}

// --recompute on a training net: the report, the lower bound it reached, an infeasible budget
// (exit 3 naming the lowest lower bound reached), the over-budget cure line, --fit's
// recompute column, and the rewritten net runs to the same loss bytes.
TEST(OptimizeNetTest, RecomputeReportsFitsAndRunsTheSameOutputs) {
  const std::string spec = "--workload mlp:layers=8,batch=1024,dim=32,mode=training";
  auto plain = RunOptimizeNet(spec + " --format json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const int64_t lower_bound = nlohmann::json::parse(plain.out)["lower_bound_bytes"];
  auto sqrt = RunOptimizeNet(spec + " --recompute sqrt --format json");
  ASSERT_EQ(sqrt.exit_code, 0) << sqrt.err;
  const auto sqrt_plan = nlohmann::json::parse(sqrt.out);
  EXPECT_LT(sqrt_plan["lower_bound_bytes"].get<int64_t>(), lower_bound);
  EXPECT_EQ(sqrt_plan["recompute"]["method"], "sqrt");
  EXPECT_GT(sqrt_plan["recompute"]["extra_flops"].get<int64_t>(), 0);
  const int64_t budget = lower_bound * 8 / 10;
  auto fits = RunOptimizeNet(absl::StrCat(spec, " --recompute auto --budget ", budget));
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_THAT(fits.out, HasSubstr("forward ops rerun"));
  auto infeasible = RunOptimizeNet(spec + " --recompute auto --budget 1KiB");
  EXPECT_EQ(infeasible.exit_code, 3);
  EXPECT_THAT(infeasible.err, HasSubstr("the budget is infeasible"));
  EXPECT_THAT(infeasible.err, HasSubstr("the lowest it reached is"));
  auto over = RunOptimizeNet(absl::StrCat(spec, " --budget ", budget));
  EXPECT_EQ(over.exit_code, 3);
  EXPECT_THAT(over.err, HasSubstr("cure: --recompute auto: arena"));
  auto usage = RunOptimizeNet(spec + " --recompute auto");
  EXPECT_EQ(usage.exit_code, 2);
  auto forward = RunOptimizeNet("--workload mlp:layers=3 --recompute sqrt");
  EXPECT_EQ(forward.exit_code, 1);
  EXPECT_THAT(forward.err, HasSubstr("training"));
  // The same loss with and without recomputation.
  const std::string dir = memonger::testing::TempDir();
  for (const char* mode : {"none", "sqrt"}) {
    auto run = RunOptimizeNet(spec + " --recompute " + mode + " --execute host --outputs-out '" +
                              dir + "/" + mode + "'");
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  const std::string loss = ReadFile(dir + "/none/loss.npy");
  EXPECT_FALSE(loss.empty());
  EXPECT_TRUE(loss == ReadFile(dir + "/sqrt/loss.npy"));
  // --fit on a training net has a recompute column that reaches at least the given order's.
  auto fit = RunOptimizeNet("--workload mlp:layers=8,dim=32,mode=training --fit batch --budget "
                            "2MiB --time-limit 0.2 --format json");
  ASSERT_EQ(fit.exit_code, 0) << fit.err;
  const auto largest = nlohmann::json::parse(fit.out)["fit"]["largest"];
  ASSERT_TRUE(largest["recompute"].is_number()) << fit.out;
  EXPECT_GE(largest["recompute"].get<int64_t>(), largest["given"].get<int64_t>());
}

TEST(OptimizeNetTest, WhatIfTableAndBudget) {
  const std::string base = "--workload attention:n=1023,heads=4,dim=64,mlp=128,depth=2 ";
  auto r = RunOptimizeNet(base + "--compare kernel=math,efficient --variant bias_dtype=fp16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("what-if for attention:n=1023"));
  EXPECT_THAT(r.out, HasSubstr("bias_dtype=fp16 kernel=math"));
  EXPECT_THAT(r.out, HasSubstr("bias_dtype=fp16 kernel=efficient"));
  // The math variant needs 2 maps of 4 x 1024^2 fp16 elements (16.8 MB: the softmax writes
  // over the scores): over a 15 MB budget; the efficient one keeps only the bias (8.4 MB).
  auto over = RunOptimizeNet(base + "--variant bias_dtype=fp16 --compare kernel=math,efficient "
                             "--budget 15MB");
  EXPECT_EQ(over.exit_code, 3) << over.err;
  EXPECT_THAT(over.out, HasSubstr("over by"));
  EXPECT_THAT(over.out, HasSubstr("fits,"));
}

TEST(OptimizeNetTest, WorkloadUsageAndSpecErrors) {
  // A model and a workload, or neither: usage errors.
  EXPECT_EQ(RunOptimizeNet(Example() + " --workload mlp").exit_code, 2);
  EXPECT_EQ(RunOptimizeNet("--planner best-fit").exit_code, 2);
  // --compare needs a workload.
  EXPECT_EQ(RunOptimizeNet(Example() + " --compare kernel=math,efficient").exit_code, 2);
  // Bad specs: exit 1 with the reason.
  auto heads = RunOptimizeNet("--workload attention:dim=768,heads=10");
  EXPECT_EQ(heads.exit_code, 1);
  EXPECT_THAT(heads.err, HasSubstr("heads=10 does not divide dim=768"));
  auto key = RunOptimizeNet("--workload attention:n=5,sequence=9");
  EXPECT_EQ(key.exit_code, 1);
  EXPECT_THAT(key.err, HasSubstr("unknown key 'sequence'"));
  auto zero = RunOptimizeNet("--workload attention:n=0");
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_THAT(zero.err, HasSubstr("n=0 is out of range"));
  auto compare = RunOptimizeNet("--workload attention:n=5 --compare kernel");
  EXPECT_EQ(compare.exit_code, 1);
  EXPECT_THAT(compare.err, HasSubstr("write KEY=V1,V2"));
}

}  // namespace
}  // namespace memonger

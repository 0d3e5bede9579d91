// Caffe2 nets as Caffe2 writes them, through optimize-net: binary NetDefs without dtypes,
// value_info, is_gradient_op, declared losses or parameter gradients, planned by every memonger
// baseline (memonger_test.py's nets; the gradient ops as Caffe2's AddGradientOperators emits
// them). Without the inputs' shapes the baselines plan size-blind, as Caffe2 does without blob
// shapes; with them (--input-shape) the plan has bytes and the label's int32 is inferred.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "graph/net_def.h"
#include "gtest/gtest.h"
#include "proto/memonger.pb.h"
#include "tests/test_support.h"

namespace memonger {
namespace {

using ::memonger::testing::ReadFile;
using ::memonger::testing::RunOptimizeNet;
using ::memonger::testing::SourcePath;
using ::memonger::testing::TempDir;
using ::memonger::testing::WriteTempFile;
using ::testing::HasSubstr;
using ::testing::Not;

// memonger_test.py's base net (two FCs here), trained: the forward ops, ConstantFill seeding
// loss_autogen_grad, and the gradient ops in reverse.
constexpr char kN1Training[] = R"pb(
  name: "n1"
  op { input: "data" input: "fc1_w" input: "fc1_b" output: "fc1" type: "FC" }
  op { input: "fc1" input: "fc2_w" input: "fc2_b" output: "fc2" type: "FC" }
  op { input: "fc2" output: "fc2" type: "Relu" }
  op { input: "fc2" output: "pred" type: "Softmax" }
  op { input: "pred" input: "label" output: "xent" type: "LabelCrossEntropy" }
  op { input: "xent" output: "loss" type: "AveragedLoss" }
  op { input: "loss" output: "loss_autogen_grad" type: "ConstantFill"
       arg { name: "value" f: 1.0 } }
  op { input: "xent" input: "loss_autogen_grad" output: "xent_grad"
       type: "AveragedLossGradient" }
  op { input: "pred" input: "label" input: "xent_grad" output: "pred_grad"
       type: "LabelCrossEntropyGradient" }
  op { input: "pred" input: "pred_grad" output: "fc2_grad" type: "SoftmaxGradient" }
  op { input: "fc2" input: "fc2_grad" output: "fc2_grad" type: "ReluGradient" }
  op { input: "fc1" input: "fc2_w" input: "fc2_grad" output: "fc2_w_grad"
       output: "fc2_b_grad" output: "fc1_grad" type: "FCGradient" }
  op { input: "data" input: "fc1_w" input: "fc1_grad" output: "fc1_w_grad"
       output: "fc1_b_grad" output: "data_grad" type: "FCGradient" }
  external_input: "data"
  external_input: "fc1_w"
  external_input: "fc1_b"
  external_input: "fc2_w"
  external_input: "fc2_b"
  external_input: "label"
)pb";

constexpr char kN1Shapes[] =
    " --input-shape data=4,3 --input-shape fc1_w=5,3 --input-shape fc1_b=5"
    " --input-shape fc2_w=6,5 --input-shape fc2_b=6 --input-shape label=4";

// fast_memonger_unique_outputs: two FCs write `fc`, four Sums read it twice, a Concat, a Relu.
constexpr char kUniqueOutputs[] = R"pb(
  name: "unique_outputs"
  op { input: "data0" input: "fc_w" input: "fc_b" output: "fc" type: "FC" }
  op { input: "data1" input: "fc_w" input: "fc_b" output: "fc" type: "FC" }
  op { input: "fc" input: "fc" output: "x0" type: "Sum" }
  op { input: "fc" input: "fc" output: "x1" type: "Sum" }
  op { input: "fc" input: "fc" output: "x2" type: "Sum" }
  op { input: "fc" input: "fc" output: "x3" type: "Sum" }
  op { input: "x0" input: "x1" input: "x2" input: "x3" output: "concated" output: "dims"
       type: "Concat" arg { name: "axis" i: 1 } }
  op { input: "concated" output: "merged" type: "Relu" }
  external_input: "data0"
  external_input: "data1"
  external_input: "fc_w"
  external_input: "fc_b"
  external_output: "merged"
)pb";

// The net as a binary NetDef file, as Caffe2 saves one.
std::string Binary(const std::string& name, const std::string& text) {
  absl::StatusOr<proto::NetDef> net =
      graph::ParseNetDef(text, graph::NetFileFormat::kText, "<test>");
  EXPECT_TRUE(net.ok()) << net.status();
  absl::StatusOr<std::string> bytes = graph::SerializeNetDef(*net, graph::NetFileFormat::kBinary);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return WriteTempFile(name, bytes.value_or(""));
}

// memonger's count_blobs over a written net, and whether some op lists an output twice.
struct NetStats {
  int blobs = 0;
  bool duplicate_output = false;
  std::vector<std::string> outputs;  // every op's outputs, in order
};
NetStats Stats(const std::string& path) {
  absl::StatusOr<proto::NetDef> net =
      graph::ParseNetDef(ReadFile(path), graph::NetFileFormat::kText, path);
  EXPECT_TRUE(net.ok()) << net.status();
  NetStats stats;
  if (!net.ok()) return stats;
  std::set<std::string> names;
  for (const proto::OperatorDef& op : net->op()) {
    names.insert(op.input().begin(), op.input().end());
    std::set<std::string> outs(op.output().begin(), op.output().end());
    stats.duplicate_output |= static_cast<int>(outs.size()) != op.output_size();
    names.insert(op.output().begin(), op.output().end());
    stats.outputs.insert(stats.outputs.end(), op.output().begin(), op.output().end());
  }
  stats.blobs = static_cast<int>(names.size());
  return stats;
}

struct PlannerRun {
  std::string planner;
  std::string flags;
};

TEST(Caffe2NetsTest, EveryMemongerBaselinePlansATrainingNetWithoutShapes) {
  const std::string net = Binary("n1.pb", kN1Training);
  const int before = Stats(WriteTempFile("n1.pbtxt", kN1Training)).blobs;
  for (const PlannerRun& run : {PlannerRun{"memonger-dag", "--mode training"},
                         PlannerRun{"memonger-dag", "--mode training --share-activations"},
                         PlannerRun{"memonger-greedy", ""}, PlannerRun{"memonger-dp", ""},
                         PlannerRun{"memonger-fast", ""}}) {
    SCOPED_TRACE(run.planner + " " + run.flags);
    const std::string out = TempDir() + "/n1_out.pbtxt";
    auto r = RunOptimizeNet(absl::StrCat(net, " --planner ", run.planner, " ", run.flags,
                                         " --net-out ", out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("planning size-blind"));
    EXPECT_THAT(r.out, HasSubstr("size-blind"));
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat(before, " names in the net")));
    const NetStats after = Stats(out);
    EXPECT_LT(after.blobs, before) << ReadFile(out);  // memonger's assertion: count drops
    // External inputs are static: never renamed, never written.
    for (const std::string& name : after.outputs) {
      for (const char* input : {"data", "fc1_w", "fc1_b", "fc2_w", "fc2_b", "label"}) {
        EXPECT_NE(name, input);
      }
    }
  }
}

// share_grad_blobs on N1, derived by hand from memonger.cc (and what memonger_ref.py gives):
// the gradient chain alternates between two buffers; parameter gradients never share.
TEST(Caffe2NetsTest, MemongerDagGivesCaffe2sGradientSharing) {
  const std::string net = Binary("n1.pb", kN1Training);
  auto r = RunOptimizeNet(net + " --planner memonger-dag --mode training");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("shared buffers  2, holding 6 names"));
  EXPECT_THAT(r.out, HasSubstr("__m0_shared: loss_autogen_grad, pred_grad, fc1_grad"));
  EXPECT_THAT(r.out, HasSubstr("__m1_shared: xent_grad, fc2_grad, data_grad"));
  EXPECT_THAT(r.out, Not(HasSubstr("w_grad,")));
  // The namescope prefixes the shared names; gradients outside it are not shared.
  auto scoped = RunOptimizeNet(net + " --planner memonger-dag --mode training --namescope ns");
  ASSERT_EQ(scoped.exit_code, 0) << scoped.err;
  EXPECT_THAT(scoped.out, HasSubstr("shared buffers  0"));
  // --param-grad replaces the guessed parameter gradients.
  auto params = RunOptimizeNet(net +
                               " --planner memonger-dag --mode training --param-grad data_grad");
  ASSERT_EQ(params.exit_code, 0) << params.err;
  EXPECT_THAT(params.out, HasSubstr("fc1_w_grad"));
  EXPECT_THAT(params.out, Not(HasSubstr("data_grad")));
}

TEST(Caffe2NetsTest, WithShapesThePlanHasBytesAndTheLabelIsInt32) {
  const std::string net = Binary("n1.pb", kN1Training);
  for (const char* planner : {"memonger-dag --mode training", "memonger-greedy", "memonger-dp",
                              "memonger-fast", "auto"}) {
    SCOPED_TRACE(planner);
    auto r = RunOptimizeNet(absl::StrCat(net, kN1Shapes, " --planner ", planner));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("arena"));
    EXPECT_THAT(r.out, Not(HasSubstr("size-blind")));
  }
  auto json = RunOptimizeNet(absl::StrCat(net, kN1Shapes, " --format json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr(R"("name": "label")"));
  EXPECT_THAT(json.out, HasSubstr(R"("dtype": "int32")"));
  // --size-blind with the shapes known: Caffe2's decisions without blob shapes (the same
  // rewritten net as without the shapes), with the plan's real bytes.
  for (const char* planner : {"memonger-dag --mode training", "memonger-greedy"}) {
    SCOPED_TRACE(planner);
    const std::string blind_out = TempDir() + "/blind.pbtxt";
    const std::string sized_out = TempDir() + "/sized.pbtxt";
    auto blind = RunOptimizeNet(absl::StrCat(net, " --planner ", planner, " --net-out ",
                                             blind_out));
    ASSERT_EQ(blind.exit_code, 0) << blind.err;
    auto sized = RunOptimizeNet(absl::StrCat(net, kN1Shapes, " --planner ", planner,
                                             " --size-blind --net-out ", sized_out));
    ASSERT_EQ(sized.exit_code, 0) << sized.err;
    EXPECT_THAT(sized.out, HasSubstr("arena bytes"));
    EXPECT_EQ(Stats(blind_out).outputs, Stats(sized_out).outputs);
  }
  EXPECT_EQ(RunOptimizeNet(net + " --planner auto --size-blind").exit_code, 2);
}

TEST(Caffe2NetsTest, SizeBlindRefusesWhatNeedsBytes) {
  const std::string net = Binary("n1.pb", kN1Training);
  for (const std::string& flag :
       {std::string("--plan-json ") + TempDir() + "/p.json", std::string("--format json"),
        std::string("--budget 1GiB"), std::string("--execute host")}) {
    SCOPED_TRACE(flag);
    auto r = RunOptimizeNet(net + " --planner memonger-greedy " + flag);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_THAT(r.err, HasSubstr("needs byte sizes"));
    EXPECT_THAT(r.err, HasSubstr("--input-shape"));
  }
  // The offset planners need sizes: a clear error, not a guess.
  auto offsets = RunOptimizeNet(net + " --planner best-fit");
  EXPECT_EQ(offsets.exit_code, 1);
  EXPECT_THAT(offsets.err, HasSubstr("has no shape"));
  // Training of a forward net builds its backward pass, which needs shapes.
  auto forward = RunOptimizeNet(Binary("u.pb", kUniqueOutputs) +
                                " --planner memonger-dag --mode training");
  EXPECT_EQ(forward.exit_code, 1);
  EXPECT_THAT(forward.err, HasSubstr("--input-shape"));
}

TEST(Caffe2NetsTest, FastMemongerKeepsOutputsUnique) {
  const std::string net = Binary("u.pb", kUniqueOutputs);
  const int before = Stats(WriteTempFile("u.pbtxt", kUniqueOutputs)).blobs;
  for (const char* planner : {"memonger-fast", "memonger-greedy", "memonger-dag"}) {
    SCOPED_TRACE(planner);
    const std::string out = TempDir() + "/u_out.pbtxt";
    auto r = RunOptimizeNet(absl::StrCat(net, " --planner ", planner, " --net-out ", out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const NetStats after = Stats(out);
    EXPECT_FALSE(after.duplicate_output) << ReadFile(out);
    EXPECT_LT(after.blobs, before) << ReadFile(out);
    EXPECT_THAT(ReadFile(out), HasSubstr("output: \"merged\""));  // external output kept
  }
}

TEST(Caffe2NetsTest, StaticNamesAreNeverRenamed) {
  const std::string net = Binary("n1.pb", kN1Training);
  const std::string out = TempDir() + "/s_out.pbtxt";
  auto r = RunOptimizeNet(net + " --planner memonger-greedy --static pred_grad --net-out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(ReadFile(out), HasSubstr("output: \"pred_grad\""));
  auto unknown = RunOptimizeNet(net + " --planner memonger-greedy --static nope");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("--static nope: the net has no value of that name"));
}

// --insert-free: Free ops in the rewritten net, which still loads and plans.
TEST(Caffe2NetsTest, InsertFreeWritesFreeOps) {
  const std::string net = Binary("n1.pb", kN1Training);
  const std::string out = TempDir() + "/freed.pbtxt";
  auto r = RunOptimizeNet(net + " --planner memonger-dag --mode training --insert-free --net-out " +
                          out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string text = ReadFile(out);
  EXPECT_THAT(text, HasSubstr("type: \"Free\""));
  auto again = RunOptimizeNet(absl::StrCat(out, kN1Shapes, " --planner none"));
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(RunOptimizeNet(net + " --planner memonger-dag --insert-free").exit_code, 2);
}

// memonger_test.py's rnn and AsyncIf: the nets an op holds survive the rewrite, renamed blobs
// are renamed inside them too, and a RecurrentNetwork op gets a `<blob>.rename` argument per
// renamed blob (memonger.cc's apply_recurrent_blob_assignments).
TEST(Caffe2NetsTest, SubnetsAreKeptAndRenamed) {
  constexpr char kRnn[] = R"pb(
    name: "rnn"
    op { input: "x" output: "a" type: "Relu" }
    op { input: "a" output: "b" type: "Relu" }
    op { input: "b" input: "w" output: "h" type: "RecurrentNetwork"
         arg { name: "step_net"
               n { name: "step" op { input: "b" input: "w" output: "h_t" type: "FC" }
                   external_input: "b" external_input: "w" } }
         arg { name: "backward_step_net"
               s: "name: \"back\" op { input: \"b\" output: \"b_grad\" type: \"Copy\" }" } }
    op { input: "h" output: "c" type: "Relu" }
    op { input: "c" output: "y" type: "Relu" }
    op { input: "y" input: "c" output: "z" type: "AsyncIf"
         arg { name: "then_net"
               n { name: "then" op { input: "c" output: "z" type: "Copy" }
                   external_input: "c" external_output: "z" } } }
    external_input: "x"
    external_input: "w"
    external_output: "z"
  )pb";
  const std::string out = TempDir() + "/rnn_out.pbtxt";
  auto r = RunOptimizeNet(Binary("rnn.pb", kRnn) + " --planner memonger-fast --net-out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  absl::StatusOr<proto::NetDef> net =
      graph::ParseNetDef(ReadFile(out), graph::NetFileFormat::kText, out);
  ASSERT_TRUE(net.ok()) << net.status();
  // a dies at op 1 (__m0_shared), b at op 2 (__m1_shared), h at op 3, c at op 5.
  const proto::OperatorDef& rnn = net->op(2);
  ASSERT_EQ(rnn.type(), "RecurrentNetwork");
  std::map<std::string, std::string> args;
  const proto::NetDef* step = nullptr;
  for (const proto::Argument& arg : rnn.arg()) {
    if (arg.has_s()) args[arg.name()] = arg.s();
    if (arg.name() == "step_net" && arg.has_n()) step = &arg.n();
  }
  ASSERT_NE(step, nullptr) << ReadFile(out);
  EXPECT_EQ(step->op(0).input(0), rnn.input(0));  // b, renamed in the step net as outside
  EXPECT_NE(rnn.input(0), "b");
  EXPECT_EQ(args["b.rename"], rnn.input(0));
  EXPECT_THAT(args["backward_step_net"], HasSubstr(rnn.input(0)));
  EXPECT_EQ(step->op(0).input(1), "w");  // not renamed (a graph input)
  const proto::OperatorDef& branch = net->op(5);
  ASSERT_EQ(branch.type(), "AsyncIf");
  ASSERT_TRUE(branch.arg(0).has_n());
  EXPECT_EQ(branch.arg(0).n().op(0).input(0), branch.input(1));  // c, renamed
  EXPECT_EQ(branch.arg(0).n().external_input(0), branch.input(1));
}

// memonger_test.py's rnn: a two-layer LSTM (RecurrentNetwork with step nets, its gradient op,
// SoftmaxWithLoss), trained and planned by share_grad_blobs with and without activations. The
// groups are what tests/reference/memonger_ref.py's share_grad_blobs gives on the same outer
// net with the model's parameter gradients (the ones our heuristic finds: the inputs no op reads
// before writing them); the step nets and the RNN ops' `.rename` arguments follow the renaming.
TEST(Caffe2NetsTest, RnnTrainingSharesAsCaffe2Does) {
  const std::string net =
      Binary("rnn.pb", ReadFile(SourcePath("tests/data/caffe2/rnn_training.pbtxt")));
  for (const char* activations : {"", " --share-activations"}) {
    SCOPED_TRACE(activations);
    const std::string out = TempDir() + "/rnn_shared.pbtxt";
    auto r = RunOptimizeNet(absl::StrCat(net, " --planner memonger-dag --mode training",
                                         activations, " --net-out ", out));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("45 names in the net, 42 after renaming"));
    EXPECT_THAT(r.out, HasSubstr("__m0_shared: loss_autogen_grad, "
                                 "lstm1/layer_1/hidden_state_all_grad, input_grad"));
    EXPECT_THAT(r.out, HasSubstr("__m1_shared: model/Flatten_grad, lstm1/i2h_grad"));
    EXPECT_EQ(Stats(out).blobs, 42);
    absl::StatusOr<proto::NetDef> written =
        graph::ParseNetDef(ReadFile(out), graph::NetFileFormat::kText, out);
    ASSERT_TRUE(written.ok()) << written.status();
    int rnn_ops = 0;
    for (const proto::OperatorDef& op : written->op()) {
      if (op.type() != "RecurrentNetwork" && op.type() != "RecurrentNetworkGradient") continue;
      ++rnn_ops;
      std::map<std::string, std::string> renames;
      int step_nets = 0;
      for (const proto::Argument& arg : op.arg()) {
        if (absl::EndsWith(arg.name(), ".rename")) renames[arg.name()] = arg.s();
        if (arg.has_n()) ++step_nets;
      }
      EXPECT_EQ(step_nets, 2) << op.type();  // step_net and backward_step_net survive
      EXPECT_EQ(renames["lstm1/i2h_grad.rename"], "__m1_shared") << op.type();
      EXPECT_EQ(renames["lstm1/layer_1/hidden_state_all_grad.rename"], "__m0_shared");
    }
    EXPECT_EQ(rnn_ops, 2);
  }
}

// --caffe2-bugs: Caffe2's answer exactly, with the replay's warnings. A name written again
// after its last read: Caffe2's greedy chains let the rewrite land in a live blob; the default
// memonger-greedy keeps the name live until the rewrite and warns of nothing.
TEST(Caffe2NetsTest, Caffe2BugsReproducesAndReportsAnUnsafeAnswer) {
  const std::string net = Binary("rewrite.pb", R"pb(
    name: "rewrite"
    op { input: "x" output: "a" type: "Relu" }
    op { input: "a" output: "b" type: "Relu" }
    op { input: "b" output: "c" type: "Relu" }
    op { input: "x" output: "a" type: "Relu" }
    op { input: "c" output: "out" type: "Relu" }
    external_input: "x"
    external_output: "out"
  )pb");
  const std::string out = TempDir() + "/rewrite_caffe2.pbtxt";
  auto exact = RunOptimizeNet(net + " --planner memonger-greedy --caffe2-bugs --net-out " + out);
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_THAT(exact.out, HasSubstr("Caffe2's answer exactly"));
  EXPECT_THAT(exact.out, HasSubstr("c: a"));
  EXPECT_THAT(exact.out, HasSubstr("1 read(s) of an overwritten blob"));
  EXPECT_THAT(exact.err, HasSubstr("warning: Caffe2's answer overwrites a live blob: op 4 (Relu) "
                                   "reads 'c' from blob 'c', which holds 'a' (op 3, Relu)"));
  const NetStats written = Stats(out);
  EXPECT_EQ(written.outputs[0], "c");  // a renamed to c
  auto ours = RunOptimizeNet(net + " --planner memonger-greedy --net-out " + out);
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  EXPECT_THAT(ours.err, Not(HasSubstr("warning")));
}

// memonger_test.py's mix_cpu_gpu as memonger-greedy sees it: Caffe2 ignores devices, so one
// name holds a GPU blob and later a CPU one; --caffe2-bugs says so.
TEST(Caffe2NetsTest, Caffe2BugsNamesBlobsSharedAcrossDevices) {
  const std::string net = Binary("mix.pb", R"pb(
    name: "mix"
    op { input: "data" output: "fc1" type: "Relu" device_option { device_type: 1 } }
    op { input: "fc1" output: "fc2" type: "Relu" device_option { device_type: 1 } }
    op { input: "fc2" output: "fc2_cpu" type: "CopyGPUToCPU" device_option { device_type: 1 } }
    op { input: "fc2_cpu" output: "fc3" type: "Relu" }
    op { input: "fc3" output: "out" type: "Relu" }
    external_input: "data"
    external_output: "out"
  )pb");
  auto exact = RunOptimizeNet(net + " --planner memonger-greedy --caffe2-bugs");
  ASSERT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_THAT(exact.err, HasSubstr("warning: Caffe2's answer mixes devices: blob 'fc3' holds "
                                   "values on cuda:0 and cpu"));
}

TEST(Caffe2NetsTest, Caffe2BugsRefusesWhatNeedsAPlan) {
  const std::string net = Binary("n1.pb", kN1Training);
  for (const char* extra : {" --plan-json /tmp/x.json", " --execute host", " --budget 1GB",
                            " --insert-free --net-out /tmp/x.pbtxt"}) {
    SCOPED_TRACE(extra);
    auto r = RunOptimizeNet(net + kN1Shapes + " --planner memonger-greedy --caffe2-bugs" + extra);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_THAT(r.err, HasSubstr("--caffe2-bugs"));
  }
  EXPECT_EQ(RunOptimizeNet(net + " --planner auto --caffe2-bugs").exit_code, 2);
  EXPECT_EQ(RunOptimizeNet("--workload mlp --planner memonger-fast --caffe2-bugs").exit_code, 2);
}

// The renamed nets compute what the original computes: each rewritten net (--net-out) runs on
// the CPU kernels, unplanned, and every output it writes is byte-identical to the original's,
// with the same seeded inputs (seeds follow the value names, which renaming never changes for
// inputs). Two nets: memonger_test's fast_memonger_unique_outputs (inference, `fc` written
// twice) and memonger's MLP trained, as optimize-net writes it (its outputs are the parameter
// gradients).
TEST(Caffe2NetsTest, RenamedNetsComputeTheSameOutputsBitForBit) {
  const std::string dir = TempDir() + "/renamed_runs";
  struct Case {
    std::string label;
    std::string source;  // the original net's file and flags
    std::vector<std::string> planners;
    std::string shapes;  // the inputs' shapes, for the rewritten net too
  };
  const std::string shapes =
      " --input-shape data0=4,2 --input-shape data1=4,2 --input-shape fc_w=2,2"
      " --input-shape fc_b=2";
  const std::string unique = Binary("unique.pb", kUniqueOutputs) + shapes;
  const std::string mlp_file = dir + "_mlp.pbtxt";
  auto written = RunOptimizeNet(
      "--workload mlp:layers=3,batch=4,dim=10,classes=8,mode=training --planner none --net-out " +
      mlp_file);
  ASSERT_EQ(written.exit_code, 0) << written.err;
  const std::vector<std::string> baselines = {"memonger-dag", "memonger-greedy", "memonger-dp",
                                              "memonger-fast"};
  std::vector<std::string> training = baselines;
  training[0] = "memonger-dag --mode training";
  training.push_back("memonger-dag --mode training --share-activations");
  training.push_back("memonger-dag --mode training --insert-free");
  for (const Case& c :
       {Case{"unique", unique, baselines, shapes}, Case{"mlp", mlp_file, training, ""}}) {
    const std::string reference = dir + "/" + c.label + "_reference";
    auto run = RunOptimizeNet(c.source + " --planner none --execute host --outputs-out " +
                              reference);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    std::vector<std::string> outputs;
    for (const auto& entry : std::filesystem::directory_iterator(reference)) {
      outputs.push_back(entry.path().filename().string());
    }
    ASSERT_FALSE(outputs.empty()) << c.label;
    for (size_t k = 0; k < c.planners.size(); ++k) {
      SCOPED_TRACE(absl::StrCat(c.label, ": ", c.planners[k]));
      const std::string net = absl::StrCat(dir, "/", c.label, k, ".pbtxt");
      auto planned = RunOptimizeNet(c.source + " --planner " + c.planners[k] + " --net-out " + net);
      ASSERT_EQ(planned.exit_code, 0) << planned.err;
      // Renaming happened: fewer names than the original's.
      const std::string plain = absl::StrCat(dir, "/", c.label, k, "_plain.pbtxt");
      ASSERT_EQ(RunOptimizeNet(c.source + " --planner none --net-out " + plain).exit_code, 0);
      EXPECT_LT(Stats(net).blobs, Stats(plain).blobs);
      const std::string got = absl::StrCat(dir, "/", c.label, k, "_outputs");
      auto rerun =
          RunOptimizeNet(net + c.shapes + " --planner none --execute host --outputs-out " + got);
      ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
      for (const std::string& file : outputs) {
        EXPECT_TRUE(ReadFile(reference + "/" + file) == ReadFile(got + "/" + file)) << file;
      }
    }
  }
}

// memonger_test.py's simple_memonger: N1 planned by GREEDY and DP with loss and fc1_w_grad
// static; optimized bytes below the baseline (compute_statistics, in the JSON plan).
TEST(Caffe2NetsTest, SimpleMemongerStatistics) {
  const std::string net = Binary("n1.pb", kN1Training);
  for (const char* planner : {"memonger-greedy", "memonger-dp"}) {
    SCOPED_TRACE(planner);
    auto r = RunOptimizeNet(absl::StrCat(net, kN1Shapes, " --planner ", planner,
                                         " --static loss --static fc1_w_grad --format json"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    ASSERT_TRUE(j.contains("memonger")) << r.out;
    EXPECT_LT(j["memonger"]["optimized_bytes"].get<int64_t>(),
              j["memonger"]["baseline_bytes"].get<int64_t>());
    EXPECT_GT(j["memonger"]["high_water_bytes"].get<int64_t>(), 0);
    for (const auto& v : j["values"]) {  // the static names are kept for the whole run
      if (v["name"] == "loss" || v["name"] == "fc1_w_grad") {
        EXPECT_EQ(v["last_step"].get<int>(), 12) << v["name"];
      }
    }
  }
}

}  // namespace
}  // namespace memonger

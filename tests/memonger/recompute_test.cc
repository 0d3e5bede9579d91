// Recomputation (memonger/recompute.h):
// - the model's lower bound equals liveness's on the rewritten net, for random choices;
// - the rewritten net plans, verifies, and runs to bit-identical outputs and parameter
//   gradients (host executor, fp32 and fp16), every recomputed value equal to the original;
// - on chain and residual training nets of 16-64 layers, under budgets of 30-90% of the
//   no-recomputation lower bound, auto fits or says the budget is infeasible with the smallest
//   lower bound it reached; the exact choice never costs more FLOPs than sqrt(n) segmenting at
//   sqrt's own lower bound.
#include "memonger/recompute.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/gradient_builder.h"
#include "graph/net_writer.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/op_flops.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/test_support.h"
#include "tests/training_support.h"
#include "workloads/workloads.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::OpId;
using graph::ValueId;

Graph Workload(const std::string& spec) {
  absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
  EXPECT_TRUE(parsed.ok()) << spec;
  absl::StatusOr<Graph> g = graph::BuildWorkload(*parsed);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// `net` trained on AveragedLoss(y): its backward pass built as --mode training builds it.
absl::StatusOr<Graph> TrainedOn(graph::NetWriter&& net, const std::string& y) {
  net.Op("AveragedLoss", "loss", {y}, {"loss"});
  net.builder().AddExternalOutput("loss");
  net.builder().AddLoss("loss");
  absl::StatusOr<Graph> forward = std::move(net).Finish();
  if (!forward.ok()) return forward.status();
  return graph::AddGradientOps(*forward, {"loss"});
}

// x_{i+1} = Relu(FC(x_i)) (+ x_i when residual), then AveragedLoss; training.
Graph ChainNet(int layers, bool residual, graph::DataType dtype = graph::DataType::kFloat32,
               int64_t batch = 64, int64_t width = 16) {
  graph::NetWriter net(absl::StrCat(residual ? "residual_" : "chain_", layers));
  net.Input("x0", dtype, {batch, width}, graph::Role::kInput);
  std::string x = "x0";
  for (int i = 0; i < layers; ++i) {
    const std::string fc = absl::StrCat("fc", i), relu = absl::StrCat("relu", i);
    net.Input(fc + "_w", dtype, {width, width}, graph::Role::kParam);
    net.Input(fc + "_b", dtype, {width}, graph::Role::kParam);
    net.Op("FC", fc, {x, fc + "_w", fc + "_b"}, {fc});
    net.Op("Relu", relu, {fc}, {relu});
    if (residual) {
      const std::string sum = absl::StrCat("x", i + 1);
      net.Op("Add", sum, {relu, x}, {sum});
      x = sum;
    } else {
      x = relu;
    }
  }
  absl::StatusOr<Graph> training = TrainedOn(std::move(net), x);
  EXPECT_TRUE(training.ok()) << training.status();
  return *std::move(training);
}

int64_t LivenessLowerBound(const Graph& g, const RecomputeOptions& options) {
  PlanOptions plan_options;
  plan_options.planner = PlannerKind::kNone;
  plan_options.alignment = options.alignment;
  plan_options.liveness.views = options.liveness.views;
  plan_options.liveness.plan_static = options.liveness.plan_static;
  plan_options.liveness.in_place = options.liveness.in_place;  // the model's: values apart
  absl::StatusOr<Plan> plan = PlanMemory(g, plan_options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? plan->lower_bound_bytes : -1;
}

std::vector<Graph> TrainingNets() {
  std::vector<Graph> nets;
  nets.push_back(ChainNet(16, false));
  nets.push_back(ChainNet(16, true));
  nets.push_back(Workload("mlp:layers=8,mode=training"));
  nets.push_back(Workload("random:ops=80,batch=2,width=8,seed=5,mode=training"));
  nets.push_back(Workload("random:ops=80,batch=2,width=8,seed=6,inplace=80,mode=training"));
  nets.push_back(Workload("randwire:nodes=12,stages=2,batch=2,width=8,seed=3,mode=training"));
  nets.push_back(Workload("attention:n=15,heads=2,dim=16,mlp=32,depth=2,mode=training"));
  return nets;
}

TEST(RecomputeTest, ModelLowerBoundEqualsLivenessOnTheRewrittenNet) {
  std::mt19937_64 rng(3);
  for (const Graph& g : TrainingNets()) {
    SCOPED_TRACE(g.name());
    for (int alignment : {1, 256}) {
     for (bool views : {false, true}) {
      RecomputeOptions options;
      options.alignment = alignment;
      options.liveness.views = views;
      const std::vector<OpId> candidates = RecomputeCandidates(g, options.liveness);
      ASSERT_FALSE(candidates.empty());
      for (int trial = 0; trial < 12; ++trial) {
        std::vector<OpId> ops;
        for (OpId op : candidates) {
          if (rng() % 3 == 0 || trial == 0) ops.push_back(op);
        }
        absl::StatusOr<int64_t> model = RecomputedLowerBound(g, ops, options);
        ASSERT_TRUE(model.ok()) << model.status();
        absl::StatusOr<Graph> rewritten = ApplyRecomputation(g, ops);
        ASSERT_TRUE(rewritten.ok()) << rewritten.status();
        EXPECT_LE(rewritten->num_ops(), g.num_ops() + static_cast<int>(ops.size()));
        EXPECT_EQ(*model, LivenessLowerBound(*rewritten, options)) << ops.size() << " ops";
      }
     }
    }
  }
}

// Runs `g` under the default planner and returns the watched values' bytes.
std::vector<std::string> RunAndWatch(const Graph& g, const std::vector<ValueId>& watch) {
  PlanOptions options;
  options.memonger.mode = Mode::kTraining;
  options.time_limit_seconds = 0.2;
  absl::StatusOr<Plan> plan = PlanMemory(g, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(VerifyPlan(g, *plan).ok()) << VerifyPlan(g, *plan);
  absl::StatusOr<std::unique_ptr<testing::TrainingRunner>> runner =
      testing::TrainingRunner::Create(g, *plan, watch);
  EXPECT_TRUE(runner.ok()) << runner.status();
  EXPECT_TRUE((*runner)->Run({}, /*seed=*/11).ok());
  std::vector<std::string> bytes;
  for (ValueId id : watch) bytes.push_back((*runner)->Bytes(id));
  return bytes;
}

std::vector<ValueId> OutputsAndGradients(const Graph& g) {
  std::vector<ValueId> watch(g.outputs().begin(), g.outputs().end());
  for (const auto& [param, grad] : g.param_grads()) watch.push_back(grad);
  return watch;
}

TEST(RecomputeTest, RewrittenNetsRunToBitIdenticalGradients) {
  std::vector<Graph> nets;
  nets.push_back(ChainNet(16, false));
  nets.push_back(ChainNet(16, true, graph::DataType::kFloat16));
  nets.push_back(Workload("random:ops=80,batch=2,width=8,seed=5,dtype=fp16,mode=training"));
  nets.push_back(Workload("randwire:nodes=12,stages=2,batch=2,width=8,seed=3,mode=training"));
  nets.push_back(Workload("attention:n=15,heads=2,dim=16,mlp=32,depth=2,dtype=fp16,mode=training"));
  std::map<int, int> rewritten_runs;  // per kind
  for (const Graph& g : nets) {
    SCOPED_TRACE(g.name());
    const std::vector<ValueId> watch = OutputsAndGradients(g);
    const std::vector<std::string> original = RunAndWatch(g, watch);
    for (RecomputeKind kind :
         {RecomputeKind::kSqrt, RecomputeKind::kAuto, RecomputeKind::kCheap}) {
      SCOPED_TRACE(RecomputeName(kind));
      RecomputeOptions options;
      options.kind = kind;
      options.budget_bytes = LivenessLowerBound(g, options) * 6 / 10;
      absl::StatusOr<RecomputeChoice> choice = ChooseRecomputation(g, options);
      ASSERT_TRUE(choice.ok()) << choice.status();
      if (kind != RecomputeKind::kAuto) {
        // sqrt and cheap ignore the budget; where rerunning would not lower the peak, nothing.
        EXPECT_LE(choice->lower_bound_bytes, choice->original_lower_bound_bytes);
        if (choice->ops.empty()) continue;
      }
      ASSERT_FALSE(choice->ops.empty());
      ++rewritten_runs[static_cast<int>(kind)];
      absl::StatusOr<Graph> rewritten = ApplyRecomputation(g, choice->ops);
      ASSERT_TRUE(rewritten.ok()) << rewritten.status();
      EXPECT_EQ(LivenessLowerBound(*rewritten, options), choice->lower_bound_bytes);
      // The same outputs and gradients, found by name in the rewritten net.
      std::vector<ValueId> rewritten_watch;
      for (ValueId id : watch) {
        const std::vector<ValueId> versions = rewritten->FindVersions(g.value(id).name);
        ASSERT_FALSE(versions.empty());
        rewritten_watch.push_back(versions.back());
      }
      const std::vector<std::string> again = RunAndWatch(*rewritten, rewritten_watch);
      for (size_t i = 0; i < watch.size(); ++i) {
        EXPECT_TRUE(again[i] == original[i]) << g.value(watch[i]).DisplayName() << " differs";
      }
    }
  }
  for (RecomputeKind kind : {RecomputeKind::kSqrt, RecomputeKind::kAuto, RecomputeKind::kCheap}) {
    EXPECT_GE(rewritten_runs[static_cast<int>(kind)], 3) << RecomputeName(kind);
  }
}

// cheap: only ops of a few FLOPs per output element, a lower peak or none at all, the model's
// lower bound the rewritten net's; on a transformer block and a conv net with batch
// normalisation it lowers the peak.
TEST(RecomputeTest, CheapRerunsOnlyCheapOpsToALowerPeak) {
  std::vector<Graph> nets = TrainingNets();
  int lowered = 0;
  for (const Graph& g : nets) {
    SCOPED_TRACE(g.name());
    RecomputeOptions options;
    options.kind = RecomputeKind::kCheap;
    absl::StatusOr<RecomputeChoice> choice = ChooseRecomputation(g, options);
    ASSERT_TRUE(choice.ok()) << choice.status();
    for (OpId op : choice->ops) {
      EXPECT_TRUE(IsCheapToRecompute(g, g.op(op))) << g.op(op).Label();
      EXPECT_NE(g.op(op).type, "FC");
      EXPECT_NE(g.op(op).type, "MatMul");
    }
    EXPECT_EQ(choice->original_lower_bound_bytes, LivenessLowerBound(g, options));
    if (choice->ops.empty()) {
      EXPECT_EQ(choice->method, "none");
      EXPECT_EQ(choice->lower_bound_bytes, choice->original_lower_bound_bytes);
      continue;
    }
    EXPECT_EQ(choice->method, "cheap");
    EXPECT_LT(choice->lower_bound_bytes, choice->original_lower_bound_bytes);
    absl::StatusOr<Graph> rewritten = ApplyRecomputation(g, choice->ops);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status();
    EXPECT_EQ(LivenessLowerBound(*rewritten, options), choice->lower_bound_bytes);
    // Each rerun op costs at most 5 FLOPs per element it writes or of its largest input.
    int64_t bound = 0;
    for (OpId op : choice->ops) {
      int64_t written = 0, largest_input = 1;
      for (ValueId v : g.op(op).outputs) {
        written += *graph::NumElements(g.value(v).type->dims, "output");
      }
      for (ValueId v : g.op(op).inputs) {
        largest_input = std::max(largest_input, *graph::NumElements(g.value(v).type->dims, "in"));
      }
      bound += kCheapFlopsPerElement * std::max(written, largest_input);
    }
    EXPECT_LE(choice->extra_flops, bound);
    EXPECT_GT(choice->extra_flops, 0);
    ++lowered;
  }
  EXPECT_GE(lowered, 2);
}

TEST(RecomputeTest, CheapOpsArePointwiseNormalisationsAndDataMovement) {
  graph::NetWriter net("ops");
  net.Input("x", graph::DataType::kFloat32, {8, 16}, graph::Role::kInput);
  net.Input("w", graph::DataType::kFloat32, {16, 16}, graph::Role::kParam);
  net.Input("b", graph::DataType::kFloat32, {16}, graph::Role::kParam);
  net.Op("FC", "fc", {"x", "w", "b"}, {"fc"});
  net.Op("Relu", "relu", {"fc"}, {"relu"});
  net.Op("Softmax", "softmax", {"relu"}, {"softmax"});
  net.Op("Transpose", "t", {"softmax"}, {"t"});
  net.builder().AddExternalOutput("t");
  absl::StatusOr<Graph> g = std::move(net).Finish();
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status typed = graph::InferShapes(*g, graph::ShapeBindings{});
  ASSERT_TRUE(typed.ok()) << typed;
  std::vector<std::string> cheap;
  for (const graph::Op& op : g->ops()) {
    if (IsCheapToRecompute(*g, op)) cheap.push_back(op.type);
  }
  EXPECT_THAT(cheap, ::testing::ElementsAre("Relu", "Softmax", "Transpose"));
}

// X [1, 16, 8, 8]; the outputs of ops without a schema of ours (Conv2D, ConvTranspose, Einsum,
// Frobnicate) declared, the others inferred.
constexpr char kOpZoo[] = R"pb(
  external_input: "x" external_input: "w" external_input: "wt" external_input: "a"
  external_input: "b" external_input: "k" external_input: "q" external_input: "s"
  value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 16 }
               dim { size: 8 } dim { size: 8 } }
  value_info { name: "w" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 16 }
               dim { size: 3 } dim { size: 3 } role: ROLE_PARAM }
  value_info { name: "wt" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 8 }
               dim { size: 2 } dim { size: 2 } role: ROLE_PARAM }
  value_info { name: "a" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 2 } }
  value_info { name: "b" dtype: FLOAT has_shape: true dim { size: 16 } dim { size: 32 } }
  value_info { name: "k" dtype: FLOAT has_shape: true dim { size: 32 } dim { size: 2 } }
  value_info { name: "q" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 32 } }
  value_info { name: "conv2d" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 16 }
               dim { size: 8 } dim { size: 8 } }
  value_info { name: "up" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 8 }
               dim { size: 16 } dim { size: 16 } }
  value_info { name: "ein" dtype: FLOAT has_shape: true dim { size: 32 } dim { size: 32 } }
  value_info { name: "s" dtype: FLOAT has_shape: true dim { size: 16 } role: ROLE_PARAM }
  value_info { name: "odd" dtype: FLOAT has_shape: true dim { size: 1 } dim { size: 16 }
               dim { size: 8 } dim { size: 8 } }
  op { name: "conv" type: "Conv" input: "x" input: "w" output: "conv"
       arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } }
  op { name: "conv2d" type: "Conv2D" input: "x" input: "w" output: "conv2d"
       arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } }
  op { name: "up" type: "ConvTranspose" input: "x" input: "wt" output: "up"
       arg { name: "kernel" i: 2 } arg { name: "stride" i: 2 } }
  op { name: "gemm" type: "Gemm" input: "a" input: "b" output: "gemm"
       arg { name: "transA" i: 1 } }
  op { name: "mm" type: "MatMul" input: "k" input: "q" output: "mm" }
  op { name: "mmt" type: "MatMul" input: "a" input: "b" output: "mmt"
       arg { name: "trans_a" i: 1 } }
  op { name: "ein" type: "Einsum" input: "k" input: "q" output: "ein"
       arg { name: "equation" s: "ij,jk->ik" } }
  op { name: "pool1" type: "MaxPool" input: "x" output: "pool1"
       arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } }
  op { name: "pool2" type: "MaxPool" input: "x" output: "pool2"
       arg { name: "kernel_shape" ints: 3 ints: 3 } arg { name: "strides" ints: 2 ints: 2 }
       arg { name: "pads" ints: 1 ints: 1 ints: 1 ints: 1 } }
  op { name: "gap" type: "GlobalAveragePool" input: "x" output: "gap" }
  op { name: "mean" type: "ReduceMean" input: "x" output: "mean"
       arg { name: "axes" ints: 2 ints: 3 } arg { name: "keepdims" i: 0 } }
  op { name: "relu" type: "Relu" input: "x" output: "relu" }
  op { name: "bn" type: "BatchNormalization" input: "x" input: "s" input: "s" input: "s"
       input: "s" output: "bn" output: "bn_mean" output: "bn_var"
       arg { name: "training_mode" i: 1 } }
  op { name: "odd" type: "Frobnicate" input: "x" output: "odd" }
)pb";

TEST(OpFlopsTest, ConvolutionsPoolingReductionsAndEinsum) {
  absl::StatusOr<Graph> g = testing::GraphFromText(kOpZoo);
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status typed = graph::InferShapes(*g, graph::ShapeBindings{});
  ASSERT_TRUE(typed.ok()) << typed;
  std::map<std::string, int64_t> flops;
  for (const graph::Op& op : g->ops()) flops[op.name] = OpFlops(*g, op);
  EXPECT_EQ(flops["conv"], 2 * 1024 * (16 * 3 * 3));
  EXPECT_EQ(flops["conv2d"], 2 * 1024 * (16 * 3 * 3));        // Caffe2's name, same cost
  EXPECT_EQ(flops["up"], 2 * 1024 * (8 * 2 * 2));             // per input element
  EXPECT_EQ(flops["gemm"], 2 * (2 * 32) * 16);                // transA: A is [K, M]
  EXPECT_EQ(flops["mm"], 2 * (32 * 32) * 2);
  EXPECT_EQ(flops["mmt"], 2 * (2 * 32) * 16);                 // Caffe2's trans_a
  EXPECT_EQ(flops["ein"], 2 * 32 * 2 * 32);
  EXPECT_EQ(flops["pool1"], 1024 * 9);                        // Caffe2's kernel, 2 spatial dims
  EXPECT_EQ(flops["pool2"], 256 * 9);                         // ONNX's kernel_shape
  EXPECT_EQ(flops["gap"], 1024);                              // every input element once
  EXPECT_EQ(flops["mean"], 1024);
  EXPECT_EQ(flops["relu"], 1024);
  EXPECT_EQ(flops["bn"], 5 * (1024 + 2 * 16));                 // every output
  EXPECT_EQ(flops["odd"], 1024);                              // unknown: one per output
}

// Products, convolutions and types not on the list are never cheap, whatever their FLOPs per
// element (a MatMul over K = 2, an Einsum); a pooling window is, where it costs a few FLOPs
// per input element (stride 2), not where its windows overlap more (stride 1); a batch
// normalisation with its statistics is.
TEST(RecomputeTest, CheapOpsAreMemoryBoundTypesOfFewFlopsPerElement) {
  absl::StatusOr<Graph> g = testing::GraphFromText(kOpZoo);
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status typed = graph::InferShapes(*g, graph::ShapeBindings{});
  ASSERT_TRUE(typed.ok()) << typed;
  std::vector<std::string> cheap;
  for (const graph::Op& op : g->ops()) {
    if (IsCheapToRecompute(*g, op)) cheap.push_back(op.name);
  }
  EXPECT_THAT(cheap, ::testing::ElementsAre("pool2", "gap", "mean", "relu", "bn"));
}

// A training Dropout's rerun would draw another mask than the one its DropoutGrad reads: never a
// candidate, while the Relu beside it is.
TEST(RecomputeTest, RandomOpsAreNeverCandidates) {
  graph::NetWriter net("dropout");
  net.Input("x", graph::DataType::kFloat32, {8, 16}, graph::Role::kInput);
  net.Input("w", graph::DataType::kFloat32, {16, 16}, graph::Role::kParam);
  net.Input("b", graph::DataType::kFloat32, {16}, graph::Role::kParam);
  net.Op("FC", "fc", {"x", "w", "b"}, {"fc"});
  net.Op("Relu", "relu", {"fc"}, {"relu"});
  net.Op("Dropout", "drop", {"relu"}, {"drop", "mask"}, {graph::Attribute{"ratio", 0.5}});
  net.Op("FC", "fc2", {"drop", "w", "b"}, {"fc2"});
  net.Op("Relu", "relu2", {"fc2"}, {"relu2"});
  absl::StatusOr<Graph> g = TrainedOn(std::move(net), "relu2");
  ASSERT_TRUE(g.ok()) << g.status();
  bool drop_grad = false;
  for (const graph::Op& op : g->ops()) drop_grad = drop_grad || op.type == "DropoutGrad";
  ASSERT_TRUE(drop_grad);  // the mask is read by the backward pass
  std::vector<std::string> candidates;
  for (OpId op : RecomputeCandidates(*g, LivenessOptions{})) candidates.push_back(g->op(op).name);
  EXPECT_THAT(candidates, ::testing::Contains("relu"));
  EXPECT_THAT(candidates, ::testing::Not(::testing::Contains("drop")));
}

// Values of 8 PiB: the live bytes summed over the steps (cheap's climb, budget 0) pass
// INT64_MAX; the sum saturates (the sanitizer job would stop at a signed overflow).
TEST(RecomputeTest, PetabyteValuesDoNotOverflowTheChoice) {
  graph::NetWriter net("petabytes");
  net.Input("x", graph::DataType::kFloat16, {int64_t{1} << 26, int64_t{1} << 26},
            graph::Role::kInput);
  net.Input("w", graph::DataType::kFloat16, {int64_t{1} << 26, int64_t{1} << 26},
            graph::Role::kParam);
  std::string x = "x";
  for (int i = 0; i < 36; ++i) {
    const std::string y = absl::StrCat("y", i);
    net.Op("Mul", y, {x, "w"}, {y});
    x = y;
  }
  absl::StatusOr<Graph> g = TrainedOn(std::move(net), x);
  ASSERT_TRUE(g.ok()) << g.status();
  for (RecomputeKind kind : {RecomputeKind::kCheap, RecomputeKind::kSqrt, RecomputeKind::kAuto}) {
    SCOPED_TRACE(RecomputeName(kind));
    RecomputeOptions options;
    options.kind = kind;
    options.budget_bytes = int64_t{1} << 57;
    options.liveness.in_place = true;  // as the tool plans: then rerunning a Mul lowers the peak
    absl::StatusOr<RecomputeChoice> choice = ChooseRecomputation(*g, options);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_GT(choice->original_lower_bound_bytes, int64_t{1} << 57);
    EXPECT_LT(choice->lower_bound_bytes, choice->original_lower_bound_bytes);
  }
}

TEST(RecomputeTest, ChainAndResidualNetsFitOrSayTheBudgetIsInfeasible) {
  for (int layers : {16, 32, 64}) {
    for (bool residual : {false, true}) {
      const Graph g = ChainNet(layers, residual);
      SCOPED_TRACE(g.name());
      RecomputeOptions options;
      const int64_t lower_bound = LivenessLowerBound(g, options);
      for (int percent : {30, 50, 70, 90}) {
        SCOPED_TRACE(percent);
        options.kind = RecomputeKind::kAuto;
        options.budget_bytes = lower_bound * percent / 100;
        options.time_limit_seconds = 0.5;
        absl::StatusOr<RecomputeChoice> choice = ChooseRecomputation(g, options);
        ASSERT_TRUE(choice.ok()) << choice.status();
        EXPECT_EQ(choice->original_lower_bound_bytes, lower_bound);
        absl::StatusOr<Graph> rewritten = ApplyRecomputation(g, choice->ops);
        ASSERT_TRUE(rewritten.ok()) << rewritten.status();
        const int64_t reached = LivenessLowerBound(*rewritten, options);
        EXPECT_EQ(reached, choice->lower_bound_bytes);
        if (choice->fits) {
          EXPECT_LE(reached, options.budget_bytes);
          EXPECT_GT(choice->extra_flops, 0);
        } else {
          // Infeasible: the lowest lower bound found is above the budget, and recomputing every
          // candidate does not go lower.
          EXPECT_GT(reached, options.budget_bytes);
          absl::StatusOr<int64_t> all = RecomputedLowerBound(
              g, RecomputeCandidates(g, options.liveness), options);
          ASSERT_TRUE(all.ok());
          EXPECT_LE(reached, *all);
        }
        if (percent >= 70) {
          EXPECT_TRUE(choice->fits) << "recomputation should reach 70%";
        }
      }
    }
  }
}

// first_fit (what --fit asks at every value): it fits exactly where the full search fits, its
// choice is a real one (the rewritten net's bound is the one it says), and the full search's
// FLOPs are never more.
TEST(RecomputeTest, FirstFitFitsWhereTheFullSearchDoes) {
  for (bool residual : {false, true}) {
    const Graph g = ChainNet(32, residual);
    SCOPED_TRACE(g.name());
    RecomputeOptions options;
    const int64_t lower_bound = LivenessLowerBound(g, options);
    for (int percent : {20, 50, 70, 90}) {
      SCOPED_TRACE(percent);
      options.kind = RecomputeKind::kAuto;
      options.budget_bytes = lower_bound * percent / 100;
      options.time_limit_seconds = 0.5;
      absl::StatusOr<RecomputeChoice> full = ChooseRecomputation(g, options);
      RecomputeOptions first = options;
      first.first_fit = true;
      absl::StatusOr<RecomputeChoice> quick = ChooseRecomputation(g, first);
      ASSERT_TRUE(full.ok() && quick.ok());
      EXPECT_EQ(quick->fits, full->fits);
      absl::StatusOr<Graph> rewritten = ApplyRecomputation(g, quick->ops);
      ASSERT_TRUE(rewritten.ok()) << rewritten.status();
      EXPECT_EQ(LivenessLowerBound(*rewritten, options), quick->lower_bound_bytes);
      if (full->fits) {
        EXPECT_LE(full->extra_flops, quick->extra_flops);
      }
    }
  }
}

// The ladder climbed at one batch, tried at a larger one (what --fit does): each choice is a
// real one (the rewritten net's bound is the one it says), the fewest-FLOPs pick fits wherever
// the lowest-peak pick does, never with more FLOPs, and the ladder reaches at least what
// Chen's sqrt segments reach. Another net is refused.
TEST(RecomputeTest, LadderFromOneBatchChoosesAtAnother) {
  for (bool residual : {false, true}) {
    const Graph climbed_at = ChainNet(24, residual, graph::DataType::kFloat32, /*batch=*/64);
    const Graph g = ChainNet(24, residual, graph::DataType::kFloat32, /*batch=*/96);
    SCOPED_TRACE(g.name());
    RecomputeOptions options;
    const int64_t lower_bound = LivenessLowerBound(climbed_at, options);
    options.kind = RecomputeKind::kAuto;
    options.budget_bytes = lower_bound / 2;
    absl::StatusOr<RecomputeLadder> ladder = ClimbRecomputation(climbed_at, options);
    ASSERT_TRUE(ladder.ok()) << ladder.status();
    EXPECT_FALSE(ladder->rungs.empty());
    RecomputeOptions sqrt = options;
    sqrt.kind = RecomputeKind::kSqrt;
    absl::StatusOr<RecomputeChoice> chen = ChooseRecomputation(g, sqrt);
    ASSERT_TRUE(chen.ok());
    for (int percent : {30, 50, 80}) {
      SCOPED_TRACE(percent);
      options.budget_bytes = LivenessLowerBound(g, options) * percent / 100;
      absl::StatusOr<RecomputeChoice> lowest =
          ChooseFromLadder(g, *ladder, options, LadderPick::kLowestPeak);
      absl::StatusOr<RecomputeChoice> cheapest =
          ChooseFromLadder(g, *ladder, options, LadderPick::kFewestFlops);
      ASSERT_TRUE(lowest.ok() && cheapest.ok()) << lowest.status() << cheapest.status();
      EXPECT_EQ(cheapest->fits, lowest->fits);
      if (lowest->fits) {
        EXPECT_LE(cheapest->extra_flops, lowest->extra_flops);
      }
      if (chen->lower_bound_bytes <= options.budget_bytes) {
        EXPECT_TRUE(lowest->fits);
      }
      for (const RecomputeChoice* c : {&*lowest, &*cheapest}) {
        absl::StatusOr<Graph> rewritten = ApplyRecomputation(g, c->ops);
        ASSERT_TRUE(rewritten.ok()) << rewritten.status();
        EXPECT_EQ(LivenessLowerBound(*rewritten, options), c->lower_bound_bytes);
        EXPECT_EQ(c->fits, c->lower_bound_bytes <= options.budget_bytes);
      }
    }
    const Graph other = ChainNet(12, residual);
    EXPECT_TRUE(absl::IsFailedPrecondition(ChooseFromLadder(other, *ladder, options).status()));
  }
}

TEST(RecomputeTest, ExactNeverCostsMoreThanSqrtAtItsLowerBound) {
  for (int layers : {4, 6, 8, 10}) {
    for (bool residual : {false, true}) {
      const Graph g = ChainNet(layers, residual);
      SCOPED_TRACE(g.name());
      RecomputeOptions sqrt;
      sqrt.kind = RecomputeKind::kSqrt;
      absl::StatusOr<RecomputeChoice> chen = ChooseRecomputation(g, sqrt);
      ASSERT_TRUE(chen.ok()) << chen.status();
      RecomputeOptions options;
      options.kind = RecomputeKind::kAuto;
      options.budget_bytes = chen->lower_bound_bytes;
      options.time_limit_seconds = 10;
      absl::StatusOr<RecomputeChoice> best = ChooseRecomputation(g, options);
      ASSERT_TRUE(best.ok()) << best.status();
      ASSERT_TRUE(best->fits);
      EXPECT_LE(best->extra_flops, chen->extra_flops);
      if (best->candidates <= options.max_exact_candidates) {
        EXPECT_TRUE(best->proven_optimal);
      }
    }
  }
}

// Chen's sqrt(n) segmenting is auto's first candidate, whatever the time: with no time at all
// auto fits every budget sqrt meets, and where it cannot fit, what it reports reaching is no
// higher than sqrt's. (Greedy ran first and could take the whole limit: an MLP of 300 layers
// whose sqrt reaches 9.9 MB was called infeasible at that budget, "lowest 72 MB".)
TEST(RecomputeTest, AutoReachesWhatSqrtReachesEvenWithoutTime) {
  std::vector<Graph> nets = TrainingNets();
  nets.push_back(Workload("mlp:layers=120,batch=64,dim=16,mode=training"));
  for (const Graph& g : nets) {
    SCOPED_TRACE(g.name());
    RecomputeOptions sqrt;
    sqrt.kind = RecomputeKind::kSqrt;
    absl::StatusOr<RecomputeChoice> chen = ChooseRecomputation(g, sqrt);
    ASSERT_TRUE(chen.ok()) << chen.status();
    for (int64_t budget : {chen->lower_bound_bytes, chen->lower_bound_bytes - 1}) {
      RecomputeOptions options;
      options.kind = RecomputeKind::kAuto;
      options.budget_bytes = budget;
      options.time_limit_seconds = 0;
      options.max_exact_candidates = 0;  // the portfolio, not the exact search
      absl::StatusOr<RecomputeChoice> choice = ChooseRecomputation(g, options);
      ASSERT_TRUE(choice.ok()) << choice.status();
      EXPECT_LE(choice->lower_bound_bytes, chen->lower_bound_bytes);
      if (budget == chen->lower_bound_bytes) {
        EXPECT_TRUE(choice->fits);
      }
    }
  }
}

TEST(RecomputeTest, Refusals) {
  const Graph forward = Workload("mlp:layers=3");
  RecomputeOptions options;
  options.budget_bytes = 1;
  EXPECT_EQ(ChooseRecomputation(forward, options).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const Graph g = ChainNet(4, false);
  options.budget_bytes = -1;
  EXPECT_EQ(ChooseRecomputation(g, options).status().code(), absl::StatusCode::kInvalidArgument);
  // A backward op is never a candidate.
  OpId backward = graph::kNone;
  for (OpId op = 0; op < g.num_ops(); ++op) {
    if (g.op(op).is_gradient_op) backward = op;
  }
  ASSERT_NE(backward, graph::kNone);
  EXPECT_EQ(ApplyRecomputation(g, {backward}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRecompute("everything").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OpFlopsTest, MatrixProductsAndElementwise) {
  const Graph g = ChainNet(1, false, graph::DataType::kFloat32, /*batch=*/4, /*width=*/16);
  for (const graph::Op& op : g.ops()) {
    if (op.type == "FC") {
      EXPECT_EQ(OpFlops(g, op), 2 * 4 * 16 * 16);
    } else if (op.type == "Relu") {
      EXPECT_EQ(OpFlops(g, op), 4 * 16);
    }
  }
}

// A bidirectional LSTM: X W^T and H R^T per step and direction, 2 per multiply-add.
TEST(OpFlopsTest, RecurrentOpsCountBothProducts) {
  absl::StatusOr<Graph> g = testing::GraphFromText(R"pb(
    external_input: "x" external_input: "w" external_input: "r"
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 5 } dim { size: 2 }
                 dim { size: 3 } }
    value_info { name: "w" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 16 }
                 dim { size: 3 } role: ROLE_PARAM }
    value_info { name: "r" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 16 }
                 dim { size: 4 } role: ROLE_PARAM }
    value_info { name: "y" dtype: FLOAT has_shape: true dim { size: 5 } dim { size: 2 }
                 dim { size: 2 } dim { size: 4 } }
    op { name: "lstm" type: "LSTM" input: "x" input: "w" input: "r" output: "y"
         arg { name: "direction" s: "bidirectional" } }
    external_output: "y"
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status typed = graph::InferShapes(*g, graph::ShapeBindings{});
  ASSERT_TRUE(typed.ok()) << typed;
  EXPECT_EQ(OpFlops(*g, g->op(0)), 2 * (5 * 2) * (2 * 16) * (3 + 4));
}

}  // namespace
}  // namespace memonger

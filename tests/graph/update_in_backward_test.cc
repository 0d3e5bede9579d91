// SGD in the backward pass (graph/update_in_backward.h): where the updates go, what is refused,
// and, executed, that every updated param is byte for byte its value minus the learning rate
// times the gradient the plain training net computes, under the default plan, without in-place
// reuse and with recomputation, every plan verified.
#include "graph/update_in_backward.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "graph/gradient_builder.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/recompute.h"
#include "memonger/verify_plan.h"
#include "tests/test_support.h"
#include "tests/training_support.h"

namespace memonger::testing {
namespace {

using graph::Graph;
using graph::ValueId;

constexpr double kRate = 0.125;

// A forward net in text, typed, with its backward pass for the loss "loss".
absl::StatusOr<Graph> TrainingOf(const char* text) {
  absl::StatusOr<Graph> forward = GraphFromText(text);
  if (!forward.ok()) return forward.status();
  if (absl::Status s = graph::InferShapes(*forward, graph::ShapeBindings{}); !s.ok()) return s;
  return graph::AddGradientOps(*forward, {"loss"});
}

// W is Gemm's first operand: its gradient rule makes dW first, then dX from W. The update of W
// must wait for that read. V's MatMul gives x a gradient, so that dX is needed.

absl::StatusOr<Graph> TrainingNet() {
  return TrainingOf(R"pb(
    external_input: "x0" external_input: "v" external_input: "w"
    value_info { name: "x0" dtype: FLOAT has_shape: true dim { size: 4 } dim { size: 3 } }
    value_info { name: "v" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 4 }
                 dim { size: 4 } }
    value_info { name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 5 }
                 dim { size: 4 } }
    op { type: "MatMul" input: "v" input: "x0" output: "x" }
    op { type: "Relu" input: "x" output: "h" }
    op { type: "Gemm" input: "w" input: "h" output: "y" }
    op { type: "AveragedLoss" input: "y" output: "loss" }
  )pb");
}

int PositionOf(const Graph& g, const std::string& op_name) {
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) {
    if (g.op(i).name == op_name) return i;
  }
  return -1;
}

TEST(UpdateInBackwardTest, EachUpdateFollowsItsGradientAndTheParamsLastReader) {
  absl::StatusOr<Graph> training = TrainingNet();
  ASSERT_TRUE(training.ok()) << training.status();
  absl::StatusOr<Graph> step = graph::UpdateInBackward(*training, kRate);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step->param_grads().empty());
  std::vector<std::string> outputs;
  for (ValueId id : step->outputs()) outputs.push_back(step->value(id).name);
  EXPECT_EQ(outputs, (std::vector<std::string>{"v", "w"}));
  for (const std::string param : {"v", "w"}) {
    const absl::Span<const ValueId> versions = step->Versions(param);
    ASSERT_EQ(versions.size(), 2u) << param;
    const graph::Value& updated = step->value(versions[1]);
    EXPECT_EQ(updated.role, graph::Role::kParam);
    EXPECT_EQ(updated.inplace_of, versions[0]);
    EXPECT_EQ(step->op(updated.producer).type, "Sub");
    // Every other reader of the old value runs before the update.
    for (graph::OpId reader : step->consumers(versions[0])) {
      if (reader == updated.producer) continue;
      EXPECT_LT(reader, updated.producer) << step->op(reader).name << " reads " << param;
    }
    const std::optional<ValueId> grad = step->FindValue(param + "_grad");
    ASSERT_TRUE(grad.has_value());
    EXPECT_LT(step->value(*grad).producer, updated.producer);
  }
  // w's gradient is made before the gradient of h, which still reads w.
  const std::optional<ValueId> dh = step->FindValue("h_grad");
  ASSERT_TRUE(dh.has_value());
  EXPECT_LT(step->value(step->Versions("w_grad").front()).producer, step->value(*dh).producer);
  EXPECT_LT(step->value(*dh).producer, PositionOf(*step, "w_update"));

  // The params are counted once outside the arena, and the gradients no longer live to the end.
  absl::StatusOr<Plan> plain = PlanMemory(*training, PlanOptions{});
  absl::StatusOr<Plan> fused = PlanMemory(*step, PlanOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(fused->static_bytes, plain->static_bytes);
  EXPECT_TRUE(VerifyPlan(*step, *fused).ok()) << VerifyPlan(*step, *fused);
  // w's gradient (and its scaled copy, which may take its bytes) dies at w's update, not at the
  // end (the last op updates v).
  const ValueId dw = *step->FindValue("w_grad");
  EXPECT_LE(fused->lifetime[dw].last_step, PositionOf(*step, "w_update"));
  EXPECT_LT(PositionOf(*step, "w_update"), step->num_ops() - 1);
}

TEST(UpdateInBackwardTest, RefusesWhatItCannotUpdate) {
  absl::StatusOr<Graph> training = TrainingNet();
  ASSERT_TRUE(training.ok()) << training.status();
  for (double rate : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    const absl::StatusOr<Graph> step = graph::UpdateInBackward(*training, rate);
    ASSERT_FALSE(step.ok()) << rate;
    EXPECT_TRUE(absl::StrContains(step.status().message(), "learning rate")) << step.status();
  }
  absl::StatusOr<Graph> forward = GraphFromText(R"pb(
    external_input: "x" value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } }
    op { type: "Relu" input: "x" output: "y" } external_output: "y"
  )pb");
  ASSERT_TRUE(forward.ok()) << forward.status();
  ASSERT_TRUE(graph::InferShapes(*forward, graph::ShapeBindings{}).ok());
  const absl::StatusOr<Graph> untrained = graph::UpdateInBackward(*forward, kRate);
  ASSERT_FALSE(untrained.ok());
  EXPECT_TRUE(absl::StrContains(untrained.status().message(), "pairs params with gradients"))
      << untrained.status();
  // Updated twice: a net that already writes its param (an optimizer of its own).
  absl::StatusOr<Graph> step = graph::UpdateInBackward(*training, kRate);
  ASSERT_TRUE(step.ok()) << step.status();
  absl::StatusOr<Graph> again = graph::UpdateInBackward(*step, kRate);
  EXPECT_FALSE(again.ok());  // no param-grad pairs left
}

// The reviewer's net: Div's rule makes dA (p's gradient) first, then reads the quotient y for
// dB; so recomputing y puts a clone that reads p after p's gradient, where the update of p
// would already have run if the clone were placed after it.
absl::StatusOr<Graph> DivNet() {
  return TrainingOf(R"pb(
    external_input: "x" external_input: "p" external_input: "w"
    value_info { name: "x" dtype: FLOAT has_shape: true dim { size: 2 } dim { size: 4 } }
    value_info { name: "p" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 2 }
                 dim { size: 4 } }
    value_info { name: "w" role: ROLE_PARAM dtype: FLOAT has_shape: true dim { size: 2 }
                 dim { size: 4 } }
    op { type: "Div" input: "p" input: "w" output: "y" }
    op { type: "Add" input: "x" input: "y" output: "h" }
    op { type: "Relu" input: "h" output: "z" }
    op { type: "AveragedLoss" input: "z" output: "loss" }
  )pb");
}

// Runs `training` and its step with the update under the default plan, without in-place reuse
// and with recomputation (each verified), and compares what the step writes over each param
// with p - lr * dp from the plain net's run (float32, the product rounded before the
// difference, as the net's Mul then Sub). Returns the recomputed net, for the caller to look at.
void ExpectUpdatesApplied(const Graph& training, const ValueData& data,
                          const std::vector<std::string>& params, Graph* recomputed) {
  absl::StatusOr<Graph> step = graph::UpdateInBackward(training, kRate);
  ASSERT_TRUE(step.ok()) << step.status();
  std::vector<ValueId> grads;
  absl::flat_hash_map<std::string, ValueId> grad_of;
  for (const auto& [param, grad] : training.param_grads()) {
    grads.push_back(grad);
    grad_of[training.value(param).name] = grad;
  }
  ASSERT_EQ(grad_of.size(), params.size());
  absl::StatusOr<Plan> plain_plan = PlanMemory(training, PlanOptions{});
  ASSERT_TRUE(plain_plan.ok()) << plain_plan.status();
  absl::StatusOr<std::unique_ptr<TrainingRunner>> plain =
      TrainingRunner::Create(training, *plain_plan, grads);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE((*plain)->Run(data, 3).ok());

  PlanOptions apart;
  apart.liveness.in_place = false;
  for (const char* how : {"default", "--no-in-place", "--recompute sqrt"}) {
    SCOPED_TRACE(how);
    const std::string mode = how;
    absl::StatusOr<RecomputedPlan> planned =
        mode == "--recompute sqrt"
            ? PlanWithRecomputation(*step, PlanOptions{}, RecomputeKind::kSqrt, -1)
            : absl::StatusOr<RecomputedPlan>(absl::UnimplementedError(""));
    if (mode != "--recompute sqrt") {
      absl::StatusOr<Plan> plan = PlanMemory(*step, mode == "default" ? PlanOptions{} : apart);
      ASSERT_TRUE(plan.ok()) << plan.status();
      planned = RecomputedPlan{*step, *std::move(plan), {}};
    }
    ASSERT_TRUE(planned.ok()) << planned.status();
    const Graph& run_graph = planned->graph;
    const Plan* plan = &planned->plan;
    ASSERT_TRUE(VerifyPlan(run_graph, *plan).ok()) << VerifyPlan(run_graph, *plan);
    if (mode == "--recompute sqrt") *recomputed = run_graph;
    std::vector<ValueId> updated;
    for (const std::string& param : params) updated.push_back(run_graph.Versions(param).back());
    absl::StatusOr<std::unique_ptr<TrainingRunner>> fused =
        TrainingRunner::Create(run_graph, *plan, updated);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE((*fused)->Run(data, 3).ok());
    for (size_t k = 0; k < updated.size(); ++k) {
      const std::string& name = run_graph.value(updated[k]).name;
      const std::vector<double>& before = data.at(name);
      ASSERT_TRUE(grad_of.contains(name)) << name;
      const std::string& dp = (*plain)->Bytes(grad_of.at(name));
      const std::string& after = (*fused)->Bytes(updated[k]);
      ASSERT_EQ(after.size(), before.size() * sizeof(float));
      ASSERT_EQ(dp.size(), after.size());
      for (size_t i = 0; i < before.size(); ++i) {
        float g, got;
        std::memcpy(&g, dp.data() + i * sizeof(float), sizeof(float));
        std::memcpy(&got, after.data() + i * sizeof(float), sizeof(float));
        volatile float scaled = g * static_cast<float>(kRate);
        const float expected = static_cast<float>(before[i]) - scaled;
        EXPECT_EQ(std::memcmp(&got, &expected, sizeof(float)), 0)
            << name << "[" << i << "]: " << got << " vs " << expected;
      }
    }
  }
}

TEST(UpdateInBackwardTest, ExecutedUpdatesAreTheGradientsAppliedByteForByte) {
  absl::StatusOr<Graph> training = TrainingNet();
  ASSERT_TRUE(training.ok()) << training.status();
  const ValueData data = {
      {"x0", {0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 0.25, 1.0, -0.75, 0.125, 3.0}},
      {"v", {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2, 0.13, -0.14, 0.15,
             0.16}},
      {"w", {0.3, -0.1, 0.2, 0.05, -0.4, 0.25, 0.6, -0.7, 0.8, 0.15, -0.35, 0.45, 0.55, -0.65,
             0.75, 0.85, -0.95, 0.05, 0.35, -0.25}}};
  Graph recomputed;
  ExpectUpdatesApplied(*training, data, {"v", "w"}, &recomputed);
}

// The update placed as early as its gradient allows (right after dp's producer; Div's rule
// still reads the quotient y afterwards, for w's gradient), by hand: recomputing y must then
// read p before the update, not the updated p its name means after it.
absl::StatusOr<Graph> EarlyUpdateNet(const Graph& training) {
  graph::GraphBuilder out(training.name());
  graph::CopyInterface(training, out);
  out.AddExternalOutput("p");
  ValueId dp = graph::kNone;
  for (const auto& [param, grad] : training.param_grads()) {
    if (training.value(param).name == "p") dp = grad;
  }
  if (dp == graph::kNone) return absl::InternalError("p has no gradient");
  const std::string dp_name = training.value(dp).name;
  for (graph::OpId id = 0; id < training.num_ops(); ++id) {
    out.AddOp(graph::SpecOf(training, training.op(id)));
    if (id != training.value(dp).producer) continue;
    auto spec = [](std::string type, std::vector<std::string> inputs, std::string output) {
      graph::OpSpec op;
      op.name = output == "p" ? "p_update" : output;
      op.type = std::move(type);
      op.inputs = std::move(inputs);
      op.outputs = {std::move(output)};
      op.is_gradient_op = true;
      return op;
    };
    graph::OpSpec rate = spec("ConstantFill", {}, "rate");
    rate.attrs = {graph::Attribute{"value", kRate}};
    graph::OpSpec scale = spec("Mul", {dp_name, "rate"}, "p_step");
    graph::OpSpec apply = spec("Sub", {"p", "p_step"}, "p");
    for (graph::OpSpec* op : {&rate, &scale, &apply}) out.AddOp(std::move(*op));
  }
  absl::StatusOr<Graph> g = std::move(out).Build();
  if (!g.ok()) return g.status();
  if (absl::Status st = graph::InferShapes(*g, graph::ShapeBindings{}); !st.ok()) return st;
  return g;
}

TEST(UpdateInBackwardTest, RecomputedReadersOfAnOverwrittenParamRunBeforeTheWrite) {
  absl::StatusOr<Graph> training = DivNet();
  ASSERT_TRUE(training.ok()) << training.status();
  const ValueData data = {{"x", {0.5, -1.25, 2.0, 0.75, -0.5, 1.5, -2.0, 0.25}},
                          {"p", {0.9, -0.7, 1.3, 0.4, -1.1, 0.6, 2.2, -0.35}},
                          {"w", {1.5, 2.0, -0.8, 1.25, 0.9, -1.6, 0.7, 1.1}}};
  Graph recomputed;
  ExpectUpdatesApplied(*training, data, {"p", "w"}, &recomputed);

  absl::StatusOr<Graph> early = EarlyUpdateNet(*training);
  ASSERT_TRUE(early.ok()) << early.status();
  absl::StatusOr<RecomputedPlan> rerun =
      PlanWithRecomputation(*early, PlanOptions{}, RecomputeKind::kSqrt, -1);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  const Graph& g = rerun->graph;
  ASSERT_TRUE(VerifyPlan(g, rerun->plan).ok()) << VerifyPlan(g, rerun->plan);
  int clone = -1;
  for (int i = 0; i < g.num_ops(); ++i) {
    if (g.op(i).type == "Div" && !g.op(i).is_gradient_op &&
        absl::StrContains(g.value(g.op(i).outputs[0]).name, "_recompute")) {
      clone = i;
    }
  }
  ASSERT_GE(clone, 0) << "--recompute sqrt reran no Div: the test would prove nothing";
  const absl::Span<const ValueId> p = g.Versions("p");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(g.op(clone).inputs[0], p[0]);
  EXPECT_LT(clone, g.value(p[1]).producer);

  // And it runs to the same bytes as the net without recomputation.
  absl::StatusOr<Plan> plain = PlanMemory(*early, PlanOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::vector<ValueId> watch_plain, watch_rerun;
  for (ValueId id : early->outputs()) {
    watch_plain.push_back(id);
    const std::optional<ValueId> same = g.FindValue(early->value(id).name);
    ASSERT_TRUE(same.has_value()) << early->value(id).name;
    watch_rerun.push_back(*same);
  }
  absl::StatusOr<std::unique_ptr<TrainingRunner>> a =
      TrainingRunner::Create(*early, *plain, watch_plain);
  absl::StatusOr<std::unique_ptr<TrainingRunner>> b =
      TrainingRunner::Create(g, rerun->plan, watch_rerun);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->Run(data, 3).ok());
  ASSERT_TRUE((*b)->Run(data, 3).ok());
  for (size_t k = 0; k < watch_plain.size(); ++k) {
    EXPECT_EQ((*a)->Bytes(watch_plain[k]), (*b)->Bytes(watch_rerun[k]))
        << early->value(watch_plain[k]).name;
  }
}

}  // namespace
}  // namespace memonger::testing

// Finite-difference checks of the gradient rules (graph/gradient_builder.h) as the CPU kernels
// compute them (kernels_cpu_backward.cc and friends): for each rule, a tiny float32 net gets its
// backward ops from the gradient builder, is planned (the default planner: values share memory)
// and runs in the arena through the executor; every parameter gradient it produces is compared
// with central differences of the loss,
//   fd_i = (L(p + h+ e_i) - L(p - h- e_i)) / (h+ + h-),
// where h+- are the steps eps = 1e-2 really takes once p +- eps is rounded to float32, and L is
// the same planned net run again (float32 kernels) with the perturbed parameter. Inputs that
// the builder gives gradients are made parameters, so input gradients (dX of FC, Conv, ...) are
// checked too. Most nets end in Mul(y, r) with r a constant of magnitude ~ the element count
// and then AveragedLoss, which keeps gradients O(1).
//
// Why eps = 1e-2: the float32 forward rounds L by ~1e-7 |L| per op, which central differences
// divide by 2 eps; with eps = 1e-3 that noise reached 2.6e-2 relative on the smallest attention
// gradients, with 1e-2 it is below 3e-3, while the truncation error (eps^2 f''' / 6) stays
// below 1e-4. The nets with kinks (Relu, MaxPool) use seeds for which no pre-activation or
// window maximum lies within eps of a kink (a crossing would show as a failure, not pass).
//
// Tolerance: per element |g - fd| <= 1e-2 * max(|fd|, 0.05 * max_j |fd_j|) (relative error 1e-2,
// elements below a twentieth of the parameter's largest gradient measured against that
// twentieth). Each case prints its worst relative error |g - fd| / max(|fd|, 0.05 max|fd|).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/gradient_builder.h"
#include "graph/shape_inference.h"
#include "graph/workloads.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/kernel_test_support.h"
#include "tests/test_support.h"
#include "tests/training_support.h"
#include "util/status_macros.h"

namespace memonger::testing {
namespace {

using graph::Graph;
using graph::ValueId;

constexpr double kEps = 1e-2;
constexpr double kRtol = 1e-2;
constexpr double kFloorFraction = 0.05;

// value_info for an external input: "name", "FLOAT", {dims}, "ROLE_PARAM".
std::string Decl(const std::string& name, const std::string& dtype, const std::vector<int64_t>& dims,
                 const std::string& role) {
  std::string s = absl::StrCat("external_input: \"", name, "\"\nvalue_info { name: \"", name,
                               "\" dtype: ", dtype, " has_shape: true");
  for (int64_t d : dims) absl::StrAppend(&s, " dim { size: ", d, " }");
  absl::StrAppend(&s, " role: ", role, " }\n");
  return s;
}
std::string Param(const std::string& name, const std::vector<int64_t>& dims) {
  return Decl(name, "FLOAT", dims, "ROLE_PARAM");
}
std::string Constant(const std::string& name, const std::vector<int64_t>& dims,
                     const std::string& dtype = "FLOAT") {
  return Decl(name, dtype, dims, "ROLE_CONSTANT");
}
// "Mul(y, r) -> m; AveragedLoss(m) -> loss", r declared with y's dims.
std::string ScaledLoss(const std::string& y, const std::vector<int64_t>& dims) {
  return absl::StrCat(Constant("r", dims),
                      "op { name: \"weight\" type: \"Mul\" input: \"", y,
                      "\" input: \"r\" output: \"m\" }\n"
                      "op { name: \"mean\" type: \"AveragedLoss\" input: \"m\" output: \"loss\" }\n"
                      "external_output: \"loss\"\nloss: \"loss\"\n");
}
// r: uniform [-1, 1) times the element count, so that dL/dy = r / count is O(1).
std::vector<double> Weights(const std::vector<int64_t>& dims, uint64_t seed) {
  std::vector<double> r = RandomValues(Count(dims), seed);
  for (double& v : r) v *= static_cast<double>(Count(dims));
  return r;
}

struct GradCase {
  const char* name = "";
  std::string net;     // a forward net whose loss is "loss"
  ValueData data;      // values not seeded (labels, r, biases)
  int max_checks = 48; // elements checked per parameter (evenly spaced when it has more)
  std::string workload;  // instead of `net`: a generated training net (its loss is "loss")
};

void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

GradCase Named(const char* name) {
  GradCase c;
  c.name = name;
  return c;
}

struct CheckResult {
  int64_t elements = 0;
  double worst = 0;  // worst |g - fd| / max(|fd|, floor)
  std::string worst_where;
};

absl::StatusOr<Graph> TrainingGraph(const GradCase& c) {
  if (!c.workload.empty()) {
    MG_ASSIGN_OR_RETURN(graph::WorkloadSpec spec, graph::ParseWorkloadSpec(c.workload));
    return graph::BuildWorkload(spec);
  }
  MG_ASSIGN_OR_RETURN(Graph forward, GraphFromText(absl::StrCat("name: \"", c.name, "\"\n", c.net)));
  MG_RETURN_IF_ERROR(graph::InferShapes(forward, graph::ShapeBindings{}));
  return graph::AddGradientOps(forward, {"loss"});
}

class GradientCheckTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradientCheckTest, ParameterGradientsMatchCentralDifferences) {
  const GradCase& c = GetParam();
  absl::StatusOr<Graph> g = TrainingGraph(c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_FALSE(g->param_grads().empty());
  PlanOptions options;
  options.mode = Mode::kTraining;
  options.time_limit_seconds = 0.2;
  absl::StatusOr<Plan> plan = PlanMemory(*g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(VerifyPlan(*g, *plan).ok());
  const std::optional<ValueId> loss = g->FindValue("loss");
  ASSERT_TRUE(loss.has_value());
  std::vector<ValueId> watch = {*loss};
  for (const auto& [param, grad] : g->param_grads()) {
    watch.push_back(param);
    watch.push_back(grad);
  }
  absl::StatusOr<std::unique_ptr<TrainingRunner>> runner = TrainingRunner::Create(*g, *plan, watch);
  ASSERT_TRUE(runner.ok()) << runner.status();
  constexpr uint64_t kSeed = 11;
  ASSERT_TRUE((*runner)->Run(c.data, kSeed).ok()) << (*runner)->Run(c.data, kSeed);
  // Analytic gradients and the parameters' values, all captured before any perturbation.
  struct ParamGrad {
    std::string name;
    std::vector<double> value, grad;
  };
  std::vector<ParamGrad> params;
  for (const auto& [param, grad] : g->param_grads()) {
    params.push_back({g->value(param).name, (*runner)->Doubles(param), (*runner)->Doubles(grad)});
  }
  auto loss_at = [&](const std::string& name, const std::vector<double>& values) -> double {
    ValueData data = c.data;
    data[name] = values;
    const absl::Status s = (*runner)->Run(data, kSeed);
    EXPECT_TRUE(s.ok()) << s;
    return (*runner)->Doubles(*loss)[0];
  };
  CheckResult result;
  for (const ParamGrad& p : params) {
    SCOPED_TRACE(p.name);
    const int64_t n = static_cast<int64_t>(p.value.size());
    const int64_t checks = std::min<int64_t>(n, c.max_checks);
    std::vector<int64_t> indices;
    for (int64_t k = 0; k < checks; ++k) indices.push_back(k * n / checks);
    std::vector<double> fd(indices.size());
    double scale = 0;
    for (size_t k = 0; k < indices.size(); ++k) {
      const int64_t i = indices[k];
      std::vector<double> values = p.value;
      const double up = static_cast<float>(p.value[i] + kEps);
      const double down = static_cast<float>(p.value[i] - kEps);
      values[i] = up;
      const double l_up = loss_at(p.name, values);
      values[i] = down;
      const double l_down = loss_at(p.name, values);
      fd[k] = (l_up - l_down) / (up - down);
      scale = std::max(scale, std::abs(fd[k]));
    }
    const double floor = std::max(kFloorFraction * scale, 1e-6);
    for (size_t k = 0; k < indices.size(); ++k) {
      const double analytic = p.grad[indices[k]];
      const double rel = std::abs(analytic - fd[k]) / std::max(std::abs(fd[k]), floor);
      ++result.elements;
      if (rel > result.worst) {
        result.worst = rel;
        result.worst_where = absl::StrCat(p.name, "[", indices[k], "]: analytic ", analytic,
                                          ", central difference ", fd[k]);
      }
      EXPECT_LE(rel, kRtol) << p.name << "[" << indices[k] << "]: analytic " << analytic
                            << ", central difference " << fd[k];
    }
  }
  std::printf("[gradient check] %-28s %4lld elements, worst relative error %.2e (%s)\n", c.name,
              static_cast<long long>(result.elements), result.worst, result.worst_where.c_str());
}

std::vector<GradCase> Cases() {
  std::vector<GradCase> cases;
  {
    // FC, in-place Relu, FC, Softmax, LabelCrossEntropy, AveragedLoss; x is a parameter so
    // FCGradient also computes dX.
    GradCase c = Named("fc_relu_softmax_xent");
    c.net = absl::StrCat(Param("x", {3, 4}), Param("w1", {5, 4}), Param("b1", {5}),
                         Param("w2", {6, 5}), Param("b2", {6}),
                         Decl("label", "INT32", {3}, "ROLE_INPUT"), R"pb(
      op { name: "fc1" type: "FC" input: "x" input: "w1" input: "b1" output: "h" }
      op { name: "relu" type: "Relu" input: "h" output: "h" }
      op { name: "fc2" type: "FC" input: "h" input: "w2" input: "b2" output: "z" }
      op { name: "softmax" type: "Softmax" input: "z" output: "p" }
      op { name: "xent" type: "LabelCrossEntropy" input: "p" input: "label" output: "xent" }
      op { name: "mean" type: "AveragedLoss" input: "xent" output: "loss" }
      external_output: "loss"
      loss: "loss"
    )pb");
    c.data = {{"label", {2, 0, 5}}};
    cases.push_back(c);
  }
  {
    // MatMul with a broadcast 2-D B (dB sums over the batch), Gelu, Mul by a constant.
    GradCase c = Named("matmul_broadcast_gelu_mul");
    c.net = absl::StrCat(Param("x", {2, 3, 4}), Param("w", {4, 5}), R"pb(
      op { name: "mm" type: "MatMul" input: "x" input: "w" output: "h" }
      op { name: "gelu" type: "Gelu" input: "h" output: "g" }
    )pb", ScaledLoss("g", {2, 3, 5}));
    c.data = {{"r", Weights({2, 3, 5}, 1)}};
    cases.push_back(c);
  }
  {
    // Batched MatMul (both operands [2, ., .]) and Gelu's tanh form.
    GradCase c = Named("batched_matmul_gelu_tanh");
    c.net = absl::StrCat(Param("a", {2, 3, 4}), Param("b", {2, 4, 5}), R"pb(
      op { name: "mm" type: "MatMul" input: "a" input: "b" output: "h" }
      op { name: "gelu" type: "Gelu" input: "h" output: "g" arg { name: "approximate" s: "tanh" } }
    )pb", ScaledLoss("g", {2, 3, 5}));
    c.data = {{"r", Weights({2, 3, 5}, 2)}};
    cases.push_back(c);
  }
  {
    // LayerNormalization (saved statistics), Add of a broadcast bias (ReduceSum), a residual
    // Add of equal shapes (x reaches the loss twice: the builder Sums the two gradients).
    GradCase c = Named("layernorm_bias_residual");
    c.net = absl::StrCat(Param("x", {2, 3, 8}), Param("scale", {8}), Param("beta", {8}),
                         Param("b2", {8}), R"pb(
      op { name: "ln" type: "LayerNormalization" input: "x" input: "scale" input: "beta"
           output: "ln" arg { name: "axis" i: -1 } }
      op { name: "add_bias" type: "Add" input: "ln" input: "b2" output: "a" }
      op { name: "residual" type: "Add" input: "x" input: "a" output: "res" }
      op { name: "gelu" type: "Gelu" input: "res" output: "g" }
    )pb", ScaledLoss("g", {2, 3, 8}));
    c.data = {{"r", Weights({2, 3, 8}, 3)}};
    cases.push_back(c);
  }
  {
    // Squeeze, Transpose, Reshape: the gradients are the inverse layout changes.
    GradCase c = Named("squeeze_transpose_reshape");
    c.net = absl::StrCat(Param("x", {2, 1, 3, 4}), R"pb(
      op { name: "squeeze" type: "Squeeze" input: "x" output: "s" arg { name: "axes" ints: 1 } }
      op { name: "transpose" type: "Transpose" input: "s" output: "t"
           arg { name: "perm" ints: 2 ints: 0 ints: 1 } }
      op { name: "reshape" type: "Reshape" input: "t" output: "rs"
           arg { name: "shape" ints: 4 ints: 6 } }
      op { name: "gelu" type: "Gelu" input: "rs" output: "g" }
    )pb", ScaledLoss("g", {4, 6}));
    c.data = {{"r", Weights({4, 6}, 4)}};
    cases.push_back(c);
  }
  {
    // Split (its gradient is a Concat), Sum (the gradient goes to each input) and a value read
    // twice (p0: by Relu and by Sum).
    GradCase c = Named("split_concat_sum");
    c.net = absl::StrCat(Param("x", {2, 6}), R"pb(
      op { name: "split" type: "Split" input: "x" output: "p0" output: "p1"
           arg { name: "axis" i: 1 } }
      op { name: "relu" type: "Relu" input: "p0" output: "r0" }
      op { name: "gelu" type: "Gelu" input: "p1" output: "g1" }
      op { name: "sum" type: "Sum" input: "r0" input: "g1" input: "p0" output: "s" }
    )pb", ScaledLoss("s", {2, 3}));
    c.data = {{"r", Weights({2, 3}, 5)}};
    cases.push_back(c);
  }
  {
    // Cast to float64 and back (the gradient casts back the other way).
    GradCase c = Named("cast_float64_roundtrip");
    c.net = absl::StrCat(Param("x", {2, 5}), Constant("r64", {2, 5}, "DOUBLE"), R"pb(
      op { name: "gelu" type: "Gelu" input: "x" output: "g" }
      op { name: "to64" type: "Cast" input: "g" output: "g64" arg { name: "to" s: "float64" } }
      op { name: "weight" type: "Mul" input: "g64" input: "r64" output: "m64" }
      op { name: "to32" type: "Cast" input: "m64" output: "m" arg { name: "to" s: "float32" } }
      op { name: "mean" type: "AveragedLoss" input: "m" output: "loss" }
      external_output: "loss"
      loss: "loss"
    )pb");
    c.data = {{"r64", Weights({2, 5}, 6)}};
    cases.push_back(c);
  }
  {
    // Math attention: MatMul(q, kT), AddAttentionBias in place with a padded bias (rows of 8
    // for L = 5), Softmax, MatMul(P, v).
    GradCase c = Named("math_attention_bias");
    c.net = absl::StrCat(Param("q", {1, 2, 5, 4}), Param("k", {1, 2, 5, 4}),
                         Param("v", {1, 2, 5, 4}), Constant("bias", {1, 2, 5, 8}), R"pb(
      op { name: "kt" type: "Transpose" input: "k" output: "kT"
           arg { name: "perm" ints: 0 ints: 1 ints: 3 ints: 2 } }
      op { name: "qk" type: "MatMul" input: "q" input: "kT" output: "S" }
      op { name: "add_bias" type: "AddAttentionBias" input: "S" input: "bias" output: "S" }
      op { name: "softmax" type: "Softmax" input: "S" output: "P" arg { name: "axis" i: -1 } }
      op { name: "pv" type: "MatMul" input: "P" input: "v" output: "O" }
    )pb", ScaledLoss("O", {1, 2, 5, 4}));
    c.data = {{"r", Weights({1, 2, 5, 4}, 7)}, {"bias", RandomValues(80, 8, -2, 0)}};
    cases.push_back(c);
  }
  {
    GradCase c = Named("efficient_attention");
    c.net = absl::StrCat(Param("q", {2, 2, 7, 4}), Param("k", {2, 2, 7, 4}),
                         Param("v", {2, 2, 7, 4}),
                         "value_info { name: \"ws\" role: ROLE_WORKSPACE }\n", R"pb(
      op { name: "attention" type: "EfficientAttention" input: "q" input: "k" input: "v"
           output: "O" output: "ws" }
    )pb", ScaledLoss("O", {2, 7, 8}));
    c.data = {{"r", Weights({2, 7, 8}, 9)}};
    cases.push_back(c);
  }
  {
    // With a bias broadcast over the batch, rows padded to 8, and three masked (-inf) scores.
    GradCase c = Named("efficient_attention_bias");
    c.net = absl::StrCat(Param("q", {2, 2, 7, 4}), Param("k", {2, 2, 7, 4}),
                         Param("v", {2, 2, 7, 4}), Constant("bias", {1, 2, 7, 8}),
                         "value_info { name: \"ws\" role: ROLE_WORKSPACE }\n", R"pb(
      op { name: "attention" type: "EfficientAttention" input: "q" input: "k" input: "v"
           input: "bias" output: "O" output: "ws" arg { name: "scale" f: 0.4 } }
    )pb", ScaledLoss("O", {2, 7, 8}));
    std::vector<double> bias = RandomValues(112, 10, -2, 0);
    const double inf = std::numeric_limits<double>::infinity();
    bias[1] = bias[8 * 3 + 5] = bias[56 + 8 * 6] = -inf;
    c.data = {{"r", Weights({2, 7, 8}, 11)}, {"bias", bias}};
    cases.push_back(c);
  }
  {
    // Conv with bias, dilation 2 and pad 2; then a grouped, strided Conv without bias.
    GradCase c = Named("conv_dilated_grouped_strided");
    c.net = absl::StrCat(Param("x", {2, 4, 6, 6}), Param("w1", {6, 4, 3, 3}), Param("b1", {6}),
                         Param("w2", {4, 3, 3, 3}), R"pb(
      op { name: "conv1" type: "Conv" input: "x" input: "w1" input: "b1" output: "c1"
           arg { name: "kernel" i: 3 } arg { name: "pad" i: 2 } arg { name: "dilation" i: 2 } }
      op { name: "conv2" type: "Conv" input: "c1" input: "w2" output: "c2"
           arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } arg { name: "stride" i: 2 }
           arg { name: "group" i: 2 } }
    )pb", ScaledLoss("c2", {2, 4, 3, 3}));
    c.data = {{"r", Weights({2, 4, 3, 3}, 12)}};
    c.max_checks = 24;
    cases.push_back(c);
  }
  {
    // SpatialBN in training mode (batch statistics, saved mean and inverse std), then Gelu.
    GradCase c = Named("spatial_bn_training");
    c.net = absl::StrCat(Param("x", {2, 3, 4, 4}), Param("scale", {3}), Param("bias", {3}),
                         Param("mean", {3}), Param("var", {3}), R"pb(
      op { name: "bn" type: "SpatialBN" input: "x" input: "scale" input: "bias" input: "mean"
           input: "var" output: "y" output: "running_mean" output: "running_var"
           output: "saved_mean" output: "saved_var"
           arg { name: "is_test" i: 0 } arg { name: "epsilon" f: 1e-5 } }
      op { name: "gelu" type: "Gelu" input: "y" output: "g" }
    )pb", ScaledLoss("g", {2, 3, 4, 4}));
    c.data = {{"r", Weights({2, 3, 4, 4}, 13)}};
    cases.push_back(c);
  }
  {
    // MaxPool 3x3/1 pad 1, then AveragePool 3x3/2 pad 1 (border windows average fewer elements).
    GradCase c = Named("max_and_average_pool");
    c.net = absl::StrCat(Param("x", {2, 2, 6, 6}), R"pb(
      op { name: "maxpool" type: "MaxPool" input: "x" output: "mp"
           arg { name: "kernel" i: 3 } arg { name: "stride" i: 1 } arg { name: "pad" i: 1 } }
      op { name: "avgpool" type: "AveragePool" input: "mp" output: "ap"
           arg { name: "kernel" i: 3 } arg { name: "stride" i: 2 } arg { name: "pad" i: 1 } }
    )pb", ScaledLoss("ap", {2, 2, 3, 3}));
    c.data = {{"r", Weights({2, 2, 3, 3}, 14)}};
    cases.push_back(c);
  }
  {
    // The generated fp32 attention training nets, end to end (both kernels): every rule of a
    // block at once. Coordinates on a 3x2 grid give the ALiBi bias distinct distances.
    for (const char* kernel : {"math", "efficient"}) {
      GradCase c = Named(kernel[0] == 'm' ? "workload_attention_math" : "workload_attention_efficient");
      c.workload = absl::StrCat("attention:n=6,heads=2,dim=8,mlp=16,depth=2,dtype=fp32,kernel=",
                                kernel, ",mode=training");
      c.data = {{"coords", {0, 0, 1, 0, 2, 0, 0, 1, 1, 1, 2, 1}}};
      c.max_checks = 6;
      cases.push_back(c);
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Rules, GradientCheckTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace memonger::testing

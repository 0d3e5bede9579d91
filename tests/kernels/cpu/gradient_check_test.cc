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
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/gradient_builder.h"
#include "graph/rebuild.h"
#include "graph/shape_inference.h"
#include "graph/tensor_data.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"
#include "memonger/verify_plan.h"
#include "tests/kernel_test_support.h"
#include "tests/test_support.h"
#include "tests/training_support.h"
#include "util/status_macros.h"
#include "workloads/workloads.h"

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
// value_info for an op output whose type has no shape function (Slice, HardSwish, Pad).
std::string Typed(const std::string& name, const std::vector<int64_t>& dims) {
  std::string s = absl::StrCat("value_info { name: \"", name, "\" dtype: FLOAT has_shape: true");
  for (int64_t d : dims) absl::StrAppend(&s, " dim { size: ", d, " }");
  return absl::StrCat(s, " }\n");
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
  // int64 constants the model holds as data (an importer's initializers: Slice bounds), given
  // to the graph's static data and to the run.
  std::map<std::string, std::vector<int64_t>> static_ints;
  int max_checks = 48; // elements checked per parameter (evenly spaced when it has more)
  std::string workload;  // instead of `net`: a generated training net (its loss is "loss")
  // Instead of `net`: a generated forward net whose AveragedLoss reads Mul(y, r) instead of y
  // (r as in ScaledLoss), so that deep nets still have gradients well above the noise of
  // central differences; then its backward pass.
  std::string weighted_workload;
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

// The forward net of `spec` with its AveragedLoss reading Mul(y, r), r a constant of y's type.
absl::StatusOr<Graph> WeightedWorkload(const std::string& spec) {
  MG_ASSIGN_OR_RETURN(graph::WorkloadSpec parsed, graph::ParseWorkloadSpec(spec));
  MG_ASSIGN_OR_RETURN(Graph forward, graph::BuildWorkload(parsed));
  graph::GraphBuilder builder(forward.name());
  graph::CopyInterface(forward, builder);
  for (const graph::Op& op : forward.ops()) {
    graph::OpSpec spec_of = graph::SpecOf(forward, op);
    if (op.type == "AveragedLoss") {
      const graph::TensorType& y = *forward.value(op.inputs[0]).type;
      builder.AddExternalInput("r");
      builder.Declare("r", graph::DeclarationOf(y));
      builder.DeclareRole("r", graph::Role::kConstant);
      graph::OpSpec weight;
      weight.name = "weight";
      weight.type = "Mul";
      weight.inputs = {spec_of.inputs[0], "r"};
      weight.outputs = {"weighted"};
      builder.AddOp(std::move(weight));
      spec_of.inputs[0] = "weighted";
    }
    builder.AddOp(std::move(spec_of));
  }
  MG_ASSIGN_OR_RETURN(Graph weighted, std::move(builder).Build());
  MG_RETURN_IF_ERROR(graph::InferShapes(weighted, graph::ShapeBindings{}));
  return graph::AddGradientOps(weighted, {"loss"});
}

absl::StatusOr<Graph> TrainingGraph(const GradCase& c) {
  if (!c.weighted_workload.empty()) return WeightedWorkload(c.weighted_workload);
  if (!c.workload.empty()) {
    MG_ASSIGN_OR_RETURN(graph::WorkloadSpec spec, graph::ParseWorkloadSpec(c.workload));
    return graph::BuildWorkload(spec);
  }
  MG_ASSIGN_OR_RETURN(Graph forward, GraphFromText(absl::StrCat("name: \"", c.name, "\"\n", c.net)));
  if (!c.static_ints.empty()) {
    auto data = std::make_shared<graph::StaticData>();
    for (const auto& [name, ints] : c.static_ints) {
      graph::TensorData& t = (*data)[name];
      t.type = graph::TensorType{graph::DataType::kInt64, {static_cast<int64_t>(ints.size())}};
      t.bytes.assign(reinterpret_cast<const char*>(ints.data()), ints.size() * sizeof(int64_t));
    }
    forward.set_static_data(std::move(data));
  }
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
  options.memonger.mode = Mode::kTraining;
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
  ValueData data = c.data;
  // static_ints reach the run as the graph's static data (exact int64s).
  if (!c.weighted_workload.empty()) {
    data["r"] = Weights(g->value(*g->FindValue("r")).type->dims, 16);
  }
  ASSERT_TRUE((*runner)->Run(data, kSeed).ok()) << (*runner)->Run(data, kSeed);
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
    ValueData perturbed = data;
    perturbed[name] = values;
    const absl::Status s = (*runner)->Run(perturbed, kSeed);
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

// One ONNX Gemm, Y = alpha op(A) op(B) + beta C (M = 3, K = 4, N = 5 unless `m` says), with
// A, B and C parameters: every gradient rule of Gemm, every C broadcast form.
struct GemmForm {
  const char* name;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 1;
  std::optional<std::vector<int64_t>> c_dims;  // nullopt: no C
  int64_t m = 3;
};

std::vector<GemmForm> GemmForms() {
  using Dims = std::vector<int64_t>;
  return {
      {"gemm_no_c", false, false, 1, 1, std::nullopt},
      {"gemm_trans_a_full_c", true, false, 0.5, 1, Dims{3, 5}},        // dC = dY itself
      {"gemm_full_c_scaled", false, false, 1, -0.5, Dims{3, 5}},       // Mul only
      {"gemm_trans_b_row_c", false, true, 1, -0.7, Dims{1, 5}},        // ReduceSum, Mul
      {"gemm_trans_ab_column_c", true, true, 1.3, 2, Dims{3, 1}},
      {"gemm_vector_c", false, false, 0.8, 1.5, Dims{5}},              // ReduceSum, Reshape, Mul
      {"gemm_scalar_c", true, false, 1, 0.6, Dims{}},
      {"gemm_one_element_c", false, true, 2, -1, Dims{1}},
      {"gemm_one_by_one_c", true, true, 1, 1, Dims{1, 1}},             // ReduceSum only
      {"gemm_single_row_vector_c", false, false, 1, 1, Dims{5}, 1},    // Reshape only
      {"gemm_beta_zero", false, false, 1, 0, Dims{3, 5}},              // dC = 0
  };
}

GradCase GemmCase(const GemmForm& f) {
  const int64_t m = f.m, k = 4, n = 5;
  GradCase c = Named(f.name);
  std::string gemm = absl::StrCat(
      "op { name: \"gemm\" type: \"Gemm\" input: \"a\" input: \"b\"",
      f.c_dims.has_value() ? " input: \"c\"" : "", " output: \"y\"",
      " arg { name: \"transA\" i: ", int{f.trans_a}, " } arg { name: \"transB\" i: ",
      int{f.trans_b}, " } arg { name: \"alpha\" f: ", f.alpha, " } arg { name: \"beta\" f: ",
      f.beta, " } }\n");
  using Dims = std::vector<int64_t>;
  c.net = absl::StrCat(Param("a", f.trans_a ? Dims{k, m} : Dims{m, k}),
                       Param("b", f.trans_b ? Dims{n, k} : Dims{k, n}),
                       f.c_dims.has_value() ? Param("c", *f.c_dims) : "", gemm,
                       ScaledLoss("y", {m, n}));
  c.data = {{"r", Weights({m, n}, 20 + static_cast<uint64_t>(f.alpha * 10))}};
  return c;
}

// A recurrent op's case (RNNGradient, GRUGradient, LSTMGradient): the op named `op_text`
// writes `outputs` (name, dims), each weighted by its own constant r<k> and averaged; the loss
// is their Sum, so that every incoming gradient (dY, dY_h, dY_c) is exercised.
GradCase RecurrentCase(const char* name, std::string params, const std::string& op_text,
                       const std::vector<std::pair<std::string, std::vector<int64_t>>>& outputs,
                       uint64_t seed) {
  GradCase c = Named(name);
  std::string loss_ops, sum = "op { name: \"total\" type: \"Sum\"";
  for (size_t k = 0; k < outputs.size(); ++k) {
    const auto& [out, dims] = outputs[k];
    const std::string r = absl::StrCat("r", k);
    absl::StrAppend(&params, Typed(out, dims), Constant(r, dims));
    absl::StrAppend(&loss_ops, "op { name: \"w", k, "\" type: \"Mul\" input: \"", out,
                    "\" input: \"", r, "\" output: \"m", k, "\" }\n", "op { name: \"mean", k,
                    "\" type: \"AveragedLoss\" input: \"m", k, "\" output: \"l", k, "\" }\n");
    absl::StrAppend(&sum, " input: \"l", k, "\"");
    c.data[r] = Weights(dims, seed + k);
  }
  c.net = absl::StrCat(params, op_text, loss_ops, sum, " output: \"loss\" }\n",
                       "external_output: \"loss\"\nloss: \"loss\"\n");
  return c;
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
    // Attention scores q @ k^T with k^T a Transpose of the heads' keys (perm [0, 2, 1]): the
    // gradient reads k with trans_b; the transposed copy gets no gradient of its own.
    GradCase c = Named("batched_matmul_transposed_keys");
    c.net = absl::StrCat(Param("q", {2, 3, 4}), Param("k", {2, 5, 4}), Typed("kt", {2, 4, 5}),
                         R"pb(
      op { name: "kt" type: "Transpose" input: "k" output: "kt" arg { name: "perm" ints: 0 ints: 2 ints: 1 } }
      op { name: "scores" type: "MatMul" input: "q" input: "kt" output: "s" }
    )pb", ScaledLoss("s", {2, 3, 5}));
    c.data = {{"r", Weights({2, 3, 5}, 3)}};
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
    // Sigmoid and Tanh (their gradients read the output), Concat of different widths (its
    // gradient is a Split into them), Tanh in place.
    GradCase c = Named("sigmoid_tanh_concat");
    c.net = absl::StrCat(Param("x", {2, 3}), Param("w", {2, 4}), R"pb(
      op { name: "sigmoid" type: "Sigmoid" input: "x" output: "s" }
      op { name: "gelu" type: "Gelu" input: "w" output: "h" }
      op { name: "tanh" type: "Tanh" input: "h" output: "h" }
      op { name: "concat" type: "Concat" input: "s" input: "h" input: "s" output: "c"
           arg { name: "axis" i: 1 } }
    )pb", ScaledLoss("c", {2, 10}));
    c.data = {{"r", Weights({2, 10}, 15)}};
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
    // ONNX attributes; a 1x1 stride-2 Conv that reads no odd row or column (resnet's
    // downsample): dX there is 0, whatever the arena held before.
    GradCase c = Named("conv_onnx_strided_uncovered");
    c.net = absl::StrCat(Param("x", {2, 3, 6, 6}), Param("w1", {4, 3, 3, 3}), Param("w2", {5, 4, 1, 1}),
                         Param("b2", {5}), R"pb(
      op { name: "conv1" type: "Conv" input: "x" input: "w1" output: "c1"
           arg { name: "kernel_shape" ints: 3 ints: 3 } arg { name: "pads" ints: 1 ints: 1 ints: 1 ints: 1 }
           arg { name: "strides" ints: 1 ints: 1 } }
      op { name: "gelu" type: "Gelu" input: "c1" output: "g1" }
      op { name: "conv2" type: "Conv" input: "g1" input: "w2" input: "b2" output: "c2"
           arg { name: "kernel_shape" ints: 1 ints: 1 } arg { name: "strides" ints: 2 ints: 2 } }
    )pb", ScaledLoss("c2", {2, 5, 3, 3}));
    c.data = {{"r", Weights({2, 5, 3, 3}, 13)}};
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
  for (const GemmForm& form : GemmForms()) cases.push_back(GemmCase(form));
  {
    // Y = x x^T: x is both A and B, its two gradients are summed.
    GradCase c = Named("gemm_shared_operand");
    c.net = absl::StrCat(Param("x", {3, 4}), R"pb(
      op { name: "gemm" type: "Gemm" input: "x" input: "x" output: "y" arg { name: "transB" i: 1 } }
    )pb", ScaledLoss("y", {3, 3}));
    c.data = {{"r", Weights({3, 3}, 30)}};
    cases.push_back(c);
  }
  {
    // Training mode (training_mode=1, Y alone: the builder adds running and saved statistics),
    // then Gelu. input_mean and input_var are parameters without a gradient (Y does not
    // depend on them).
    GradCase c = Named("batchnorm_training");
    c.net = absl::StrCat(Param("x", {2, 3, 4, 4}), Param("scale", {3}), Param("bias", {3}),
                         Param("mean", {3}), Param("var", {3}), R"pb(
      op { name: "bn" type: "BatchNormalization" input: "x" input: "scale" input: "bias"
           input: "mean" input: "var" output: "y"
           arg { name: "training_mode" i: 1 } arg { name: "epsilon" f: 1e-5 } }
      op { name: "gelu" type: "Gelu" input: "y" output: "g" }
    )pb", ScaledLoss("g", {2, 3, 4, 4}));
    c.data = {{"r", Weights({2, 3, 4, 4}, 15)}, {"var", {0.5, 1, 2}}};
    cases.push_back(c);
  }
  {
    // Rank 2 (statistics over the batch only, 6 rows), with running statistics and momentum.
    GradCase c = Named("batchnorm_training_rank2");
    c.net = absl::StrCat(Param("x", {6, 4}), Param("scale", {4}), Param("bias", {4}),
                         Param("mean", {4}), Param("var", {4}), R"pb(
      op { name: "bn" type: "BatchNormalization" input: "x" input: "scale" input: "bias"
           input: "mean" input: "var" output: "y" output: "running_mean" output: "running_var"
           arg { name: "training_mode" i: 1 } arg { name: "momentum" f: 0.8 } }
      op { name: "gelu" type: "Gelu" input: "y" output: "g" }
    )pb", ScaledLoss("g", {6, 4}));
    c.data = {{"r", Weights({6, 4}, 16)}, {"var", {0.5, 1, 2, 1.5}}};
    cases.push_back(c);
  }
  {
    // Opset 9's form: no training_mode, all five outputs (training); the gradient reads the
    // op's own saved_mean and saved_var.
    GradCase c = Named("batchnorm_opset9_saved_outputs");
    c.net = absl::StrCat(Param("x", {2, 3, 5}), Param("scale", {3}), Param("bias", {3}),
                         Param("mean", {3}), Param("var", {3}), R"pb(
      op { name: "bn" type: "BatchNormalization" input: "x" input: "scale" input: "bias"
           input: "mean" input: "var" output: "y" output: "running_mean" output: "running_var"
           output: "saved_mean" output: "saved_var" arg { name: "epsilon" f: 1e-3 } }
      op { name: "gelu" type: "Gelu" input: "y" output: "g" }
    )pb", ScaledLoss("g", {2, 3, 5}));
    c.data = {{"r", Weights({2, 3, 5}, 17)}, {"var", {0.5, 1, 2}}};
    cases.push_back(c);
  }
  {
    // Inference mode: the given statistics are parameters too, so dmean and dvar are checked
    // (var away from 0: central differences step it by 1e-2).
    GradCase c = Named("batchnorm_inference");
    c.net = absl::StrCat(Param("x", {2, 3, 4, 4}), Param("scale", {3}), Param("bias", {3}),
                         Param("mean", {3}), Param("var", {3}), R"pb(
      op { name: "bn" type: "BatchNormalization" input: "x" input: "scale" input: "bias"
           input: "mean" input: "var" output: "y"
           arg { name: "training_mode" i: 0 } arg { name: "epsilon" f: 1e-2 } }
      op { name: "gelu" type: "Gelu" input: "y" output: "g" }
    )pb", ScaledLoss("g", {2, 3, 4, 4}));
    c.data = {{"r", Weights({2, 3, 4, 4}, 18)}, {"var", {0.5, 1, 2}}};
    cases.push_back(c);
  }
  {
    // An MLP as ONNX writes it: Gemm (no bias: BatchNormalization in training mode would
    // subtract it again, its gradient is 0), BatchNormalization (training) over the rows, Gelu,
    // a second Gemm (transposed weight, column bias scaled by beta), then BatchNormalization in
    // inference (opset 6's is_test=1) with its statistics as parameters.
    GradCase c = Named("gemm_batchnorm_mlp");
    c.net = absl::StrCat(Param("x", {5, 4}), Param("w1", {4, 6}),
                         Param("s1", {6}), Param("b1", {6}), Param("m1", {6}), Param("v1", {6}),
                         Param("w2", {3, 6}), Param("c2", {5, 1}), Param("s2", {3}),
                         Param("b2", {3}), Param("m2", {3}), Param("v2", {3}), R"pb(
      op { name: "fc1" type: "Gemm" input: "x" input: "w1" output: "h"
           arg { name: "alpha" f: 0.7 } }
      op { name: "bn1" type: "BatchNormalization" input: "h" input: "s1" input: "b1" input: "m1"
           input: "v1" output: "hn" output: "m1_out" output: "v1_out"
           arg { name: "training_mode" i: 1 } }
      op { name: "gelu" type: "Gelu" input: "hn" output: "a" }
      op { name: "fc2" type: "Gemm" input: "a" input: "w2" input: "c2" output: "z"
           arg { name: "transB" i: 1 } arg { name: "beta" f: 0.5 } arg { name: "alpha" f: 1.5 } }
      op { name: "bn2" type: "BatchNormalization" input: "z" input: "s2" input: "b2" input: "m2"
           input: "v2" output: "zn" arg { name: "is_test" i: 1 } }
    )pb", ScaledLoss("zn", {5, 3}));
    c.data = {{"r", Weights({5, 3}, 19)},
              {"v1", {0.5, 1, 2, 1.5, 0.8, 1.2}},
              {"v2", {0.6, 1.1, 1.7}}};
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
  {
    // Generated random nets (workloads/workload_random.h), every rule they use differentiated at
    // once: FC, MatMul and its bias Add, Split, Concat, Add and Sum joins, in-place ops,
    // LayerNormalization, Softmax, Gelu, Relu, Sigmoid, Tanh, grouped Reshape views, the
    // attention mixer. The seeds are chosen like the kink seeds above: random weights in
    // [-1, 1) make deep nets sharp, and for about three seeds in four (measured over 32) some
    // parameter's central difference is off by more than 1 % through truncation error (it
    // shrinks as eps does, toward the analytic value) or a Relu kink; these two are not.
    struct Net {
      const char* name;
      const char* spec;
    };
    const Net nets[] = {{"workload_random_50_ops", "random:ops=50,batch=2,width=16,seed=15"},
                        {"workload_random_35_ops", "random:ops=35,batch=2,width=16,seed=2"}};
    for (const Net& net : nets) {
      GradCase c = Named(net.name);
      c.weighted_workload = net.spec;
      c.max_checks = 4;
      cases.push_back(c);
    }
  }
  // ---- The rules for the ops exporters write (ONNX forms) ----
  {
    // Sub and Div with operands that broadcast both ways (dB summed over the broadcast axes,
    // then reshaped), Exp (its gradient reads the output).
    GradCase c = Named("sub_div_exp_broadcast");
    c.net = absl::StrCat(Param("a", {2, 3, 4}), Param("b", {3, 1}), Param("c", {4}), R"pb(
      op { name: "sub" type: "Sub" input: "a" input: "b" output: "s" }
      op { name: "exp" type: "Exp" input: "c" output: "e" }
      op { name: "div" type: "Div" input: "s" input: "e" output: "y" }
    )pb", ScaledLoss("y", {2, 3, 4}));
    c.data = {{"r", Weights({2, 3, 4}, 31)}};
    cases.push_back(c);
  }
  {
    // Mul of two variables that broadcast, and of a value by itself (two contributions).
    GradCase c = Named("mul_two_variables");
    c.net = absl::StrCat(Param("a", {2, 3, 4}), Param("b", {1, 4}), R"pb(
      op { name: "mul" type: "Mul" input: "a" input: "b" output: "m1" }
      op { name: "square" type: "Mul" input: "m1" input: "m1" output: "y" }
    )pb", ScaledLoss("y", {2, 3, 4}));
    c.data = {{"r", Weights({2, 3, 4}, 32)}};
    cases.push_back(c);
  }
  {
    // Pow with a computed exponent (no data in the net: the general rule, Cast and Sub),
    // Sqrt and Log of positive values, Erf, Neg, Reciprocal.
    GradCase c = Named("pow_sqrt_log_erf_reciprocal");
    c.net = absl::StrCat(Param("x", {2, 5}), Constant("three", {}), Constant("one", {1}), R"pb(
      op { name: "pow" type: "Pow" input: "x" input: "three" output: "p" }
      op { name: "square" type: "Mul" input: "x" input: "x" output: "x2" }
      op { name: "shift" type: "Add" input: "x2" input: "one" output: "x2p1" }
      op { name: "sqrt" type: "Sqrt" input: "x2p1" output: "q" }
      op { name: "log" type: "Log" input: "x2p1" output: "l" }
      op { name: "erf" type: "Erf" input: "x" output: "e" }
      op { name: "reciprocal" type: "Reciprocal" input: "q" output: "rq" }
      op { name: "neg" type: "Neg" input: "e" output: "ne" }
      op { name: "sum" type: "Sum" input: "p" input: "rq" input: "l" input: "ne" output: "y" }
    )pb", ScaledLoss("y", {2, 5}));
    c.data = {{"r", Weights({2, 5}, 33)}, {"three", {3}}, {"one", {1}}};
    cases.push_back(c);
  }
  {
    // Where (each branch gets dY where chosen; a broadcast branch sums), Expand (dY summed
    // back), Clip (dY inside the bounds; no input within eps of them for this seed).
    GradCase c = Named("where_expand_clip");
    c.net = absl::StrCat(Param("a", {2, 3, 4}), Param("b", {4}), Param("c", {3, 1}),
                         Decl("cond", "BOOL", {2, 3, 4}, "ROLE_INPUT"), Constant("lo", {}),
                         Constant("hi", {}), R"pb(
      op { name: "where" type: "Where" input: "cond" input: "a" input: "b" output: "w" }
      op { name: "expand" type: "Expand" input: "c" output: "ce"
           arg { name: "shape" ints: 2 ints: 3 ints: 4 } }
      op { name: "clip" type: "Clip" input: "a" input: "lo" input: "hi" output: "ca" }
      op { name: "sum" type: "Sum" input: "w" input: "ce" input: "ca" output: "y" }
    )pb", ScaledLoss("y", {2, 3, 4}));
    std::vector<double> cond = RandomValues(24, 34);
    for (double& v : cond) v = v > 0 ? 1 : 0;
    c.data = {{"r", Weights({2, 3, 4}, 35)}, {"cond", cond}, {"lo", {-0.55}}, {"hi", {0.45}}};
    cases.push_back(c);
  }
  {
    // ReduceMean without keepdims, ReduceSum over two axes with keepdims, GlobalAveragePool:
    // dY (divided by the count for a mean) expanded back over the reduced axes.
    GradCase c = Named("reduce_mean_sum_global_pool");
    c.net = absl::StrCat(Param("x", {2, 3, 4, 5}), R"pb(
      op { name: "gelu" type: "Gelu" input: "x" output: "g" }
      op { name: "mean" type: "ReduceMean" input: "g" output: "m"
           arg { name: "axes" ints: 1 } arg { name: "keepdims" i: 0 } }
      op { name: "sum" type: "ReduceSum" input: "g" output: "s"
           arg { name: "axes" ints: 0 ints: 3 } arg { name: "keepdims" i: 1 } }
      op { name: "pool" type: "GlobalAveragePool" input: "g" output: "p" }
      op { name: "ps" type: "Reshape" input: "p" output: "pr" arg { name: "shape" ints: 2 ints: 3 } }
      op { name: "mean_all" type: "ReduceMean" input: "pr" output: "pm"
           arg { name: "keepdims" i: 0 } }
      op { name: "msum" type: "ReduceSum" input: "m" output: "ms"
           arg { name: "axes" ints: 0 ints: 1 ints: 2 } arg { name: "keepdims" i: 0 } }
      op { name: "ssum" type: "ReduceSum" input: "s" output: "ss"
           arg { name: "keepdims" i: 0 } }
      op { name: "add1" type: "Add" input: "ms" input: "ss" output: "t" }
      op { name: "add2" type: "Add" input: "t" input: "pm" output: "y" }
    )pb", ScaledLoss("y", {}));
    c.data = {{"r", {1.0}}};
    cases.push_back(c);
  }
  {
    // Gather along axis 0 (an embedding: a scatter-add, indices repeated), Slice with unit
    // steps (dY padded back), LogSoftmax.
    GradCase c = Named("gather_slice_logsoftmax");
    c.net = absl::StrCat(Param("table", {6, 4}), Decl("ids", "INT64", {2, 3}, "ROLE_INPUT"),
                         Typed("s", {2, 3, 3}), R"pb(
      op { name: "embed" type: "Gather" input: "table" input: "ids" output: "e" }
      op { name: "slice" type: "Slice" input: "e" output: "s"
           arg { name: "starts" ints: 1 } arg { name: "ends" ints: 4 } arg { name: "axes" ints: 2 } }
      op { name: "log_softmax" type: "LogSoftmax" input: "s" output: "y"
           arg { name: "axis" i: -1 } }
    )pb", ScaledLoss("y", {2, 3, 3}));
    c.data = {{"r", Weights({2, 3, 3}, 36)}, {"ids", {0, 2, 5, 2, 2, 1}}};
    cases.push_back(c);
  }
  {
    // Pad in constant mode (pads and value as attributes, opset 2's form; the importer's
    // input form reads the same numbers from the model's data), a padding value given: dX is
    // the middle of dY.
    GradCase c = Named("pad_constant");
    c.net = absl::StrCat(Param("x", {1, 2, 3, 3}), Typed("y", {1, 2, 5, 5}), R"pb(
      op { name: "pad" type: "Pad" input: "x" output: "y" arg { name: "mode" s: "constant" }
           arg { name: "pads" ints: 0 ints: 0 ints: 1 ints: 0 ints: 0 ints: 0 ints: 1 ints: 2 }
           arg { name: "value" f: 0.5 } }
    )pb", ScaledLoss("y", {1, 2, 5, 5}));
    c.data = {{"r", Weights({1, 2, 5, 5}, 40)}};
    cases.push_back(c);
  }
  {
    // Resize as F.interpolate exports it, upsampling 2x from a scales input: bilinear
    // (pytorch_half_pixel), nearest (asymmetric, floor: nn.Upsample) and bicubic
    // (align_corners), summed; ResizeGradient adds each output's weights back.
    GradCase c = Named("resize_up_linear_nearest_cubic");
    std::string ops;
    const std::vector<std::string> modes = {
        "arg { name: \"mode\" s: \"linear\" } arg { name: \"coordinate_transformation_mode\" "
        "s: \"pytorch_half_pixel\" }",
        "arg { name: \"mode\" s: \"nearest\" } arg { name: \"coordinate_transformation_mode\" "
        "s: \"asymmetric\" } arg { name: \"nearest_mode\" s: \"floor\" }",
        "arg { name: \"mode\" s: \"cubic\" } arg { name: \"coordinate_transformation_mode\" "
        "s: \"align_corners\" } arg { name: \"cubic_coeff_a\" f: -0.75 }"};
    for (size_t k = 0; k < modes.size(); ++k) {
      absl::StrAppend(&ops, Typed(absl::StrCat("r", k), {1, 2, 6, 8}), "op { name: \"resize", k,
                      "\" type: \"Resize\" input: \"x\" input: \"scales\" output: \"r", k,
                      "\" ", modes[k], " }\n");
    }
    c.net = absl::StrCat(Param("x", {1, 2, 3, 4}), Constant("scales", {4}), ops, R"pb(
      op { name: "sum" type: "Sum" input: "r0" input: "r1" input: "r2" output: "y" }
    )pb", ScaledLoss("y", {1, 2, 6, 8}));
    c.data = {{"scales", {1, 1, 2, 2}}, {"r", Weights({1, 2, 6, 8}, 41)}};
    cases.push_back(c);
  }
  {
    // Downsampling to given sizes (an int64 sizes input after an empty scales), bilinear.
    GradCase c = Named("resize_down_sizes");
    c.net = absl::StrCat(Param("x", {1, 1, 4, 5}), Constant("sizes", {4}, "INT64"),
                         Typed("y", {1, 1, 2, 3}), R"pb(
      op { name: "resize" type: "Resize" input: "x" input: "sizes" output: "y"
           arg { name: "mode" s: "linear" } }
    )pb", ScaledLoss("y", {1, 1, 2, 3}));
    c.data = {{"sizes", {1, 1, 2, 3}}, {"r", Weights({1, 1, 2, 3}, 42)}};
    cases.push_back(c);
  }
  {
    // ConvTranspose as nn.ConvTranspose2d exports it (stride 2, padding 1, output_padding 1,
    // a bias): dX a Conv of dY, dW a ConvGradient, db a ReduceSum.
    GradCase c = Named("conv_transpose");
    c.net = absl::StrCat(Param("x", {1, 2, 3, 3}), Param("w", {2, 3, 3, 3}), Param("b", {3}),
                         Typed("y", {1, 3, 6, 6}), R"pb(
      op { name: "up" type: "ConvTranspose" input: "x" input: "w" input: "b" output: "y"
           arg { name: "kernel_shape" ints: 3 ints: 3 } arg { name: "strides" ints: 2 ints: 2 }
           arg { name: "pads" ints: 1 ints: 1 ints: 1 ints: 1 }
           arg { name: "output_padding" ints: 1 ints: 1 } }
    )pb", ScaledLoss("y", {1, 3, 6, 6}));
    c.data = {{"r", Weights({1, 3, 6, 6}, 43)}};
    cases.push_back(c);
  }
  {
    // Slices with steps as x[:, 0::2, 1::2] and x[..., ::-2] export them (opset 10+: bounds
    // as int64 inputs of the model's data; Swin's patch merging): SliceGradient writes dY into
    // zeros at the elements read.
    GradCase c = Named("slice_steps");
    std::string ints;
    for (const char* name : {"s1", "e1", "a1", "t1", "s2", "e2", "a2", "t2"}) {
      absl::StrAppend(&ints, Constant(name, {std::string(name)[1] == '1' ? 2 : 1}, "INT64"));
    }
    c.net = absl::StrCat(Param("x", {2, 5, 6}), ints, Typed("a", {2, 3, 3}), Typed("b", {2, 5, 3}),
                         R"pb(
      op { name: "even_odd" type: "Slice" input: "x" input: "s1" input: "e1" input: "a1"
           input: "t1" output: "a" }
      op { name: "backwards" type: "Slice" input: "x" input: "s2" input: "e2" input: "a2"
           input: "t2" output: "b" }
      op { name: "a_sum" type: "ReduceSum" input: "a" output: "as"
           arg { name: "axes" ints: 1 } arg { name: "keepdims" i: 0 } }
      op { name: "b_sum" type: "ReduceSum" input: "b" output: "bs"
           arg { name: "axes" ints: 1 } arg { name: "keepdims" i: 0 } }
      op { name: "mul" type: "Mul" input: "as" input: "bs" output: "y" }
    )pb", ScaledLoss("y", {2, 3}));
    // An open end as exporters write it: INT64_MAX (read as int64, never through a double).
    c.static_ints = {{"s1", {0, 1}}, {"e1", {INT64_MAX, 6}}, {"a1", {1, 2}}, {"t1", {2, 2}},
                     {"s2", {-1}}, {"e2", {-100}}, {"a2", {-1}}, {"t2", {-2}}};
    c.data = {{"r", Weights({2, 3}, 44)}};
    cases.push_back(c);
  }
  {
    // x @ W.T as exporters write a Linear on 3-D x: MatMul(x, Transpose(W)); the rule reads W
    // with trans_b (dW straight into W's gradient).
    GradCase c = Named("matmul_transposed_weight");
    c.net = absl::StrCat(Param("x", {2, 3, 4}), Param("w", {5, 4}), R"pb(
      op { name: "wt" type: "Transpose" input: "w" output: "wT" arg { name: "perm" ints: 1 ints: 0 } }
      op { name: "mm" type: "MatMul" input: "x" input: "wT" output: "y" }
    )pb", ScaledLoss("y", {2, 3, 5}));
    c.data = {{"r", Weights({2, 3, 5}, 38)}};
    cases.push_back(c);
  }
  {
    // SoftmaxCrossEntropyLoss as torch.onnx.export writes F.cross_entropy: mean over class
    // weights with an ignored sample; then per-sample ('none') over a spatial dim.
    GradCase c = Named("softmax_cross_entropy_mean_weighted");
    c.net = absl::StrCat(Param("scores", {4, 3}), Decl("labels", "INT64", {4}, "ROLE_INPUT"),
                         Constant("weights", {3}), R"pb(
      op { name: "sce" type: "SoftmaxCrossEntropyLoss" input: "scores" input: "labels"
           input: "weights" output: "loss"
           arg { name: "reduction" s: "mean" } arg { name: "ignore_index" i: 1 } }
      external_output: "loss"
      loss: "loss"
    )pb");
    c.data = {{"labels", {0, 1, 2, 2}}, {"weights", {0.5, 2.0, 1.5}}};
    cases.push_back(c);
  }
  {
    GradCase c = Named("softmax_cross_entropy_none_spatial");
    c.net = absl::StrCat(Param("scores", {2, 3, 2}), Decl("labels", "INT64", {2, 2}, "ROLE_INPUT"),
                         R"pb(
      op { name: "sce" type: "SoftmaxCrossEntropyLoss" input: "scores" input: "labels"
           output: "per_sample" arg { name: "reduction" s: "none" } }
    )pb", ScaledLoss("per_sample", {2, 2}));
    c.data = {{"labels", {2, 0, 1, 2}}, {"r", Weights({2, 2}, 39)}};
    cases.push_back(c);
  }
  {
    // HardSwish and HardSigmoid inside their linear parts (inputs in [-1, 1)), Dropout
    // without training_mode (the identity).
    GradCase c = Named("hard_swish_sigmoid_dropout");
    c.net = absl::StrCat(Param("x", {3, 4}), Typed("h", {3, 4}), Typed("y", {3, 4}), R"pb(
      op { name: "swish" type: "HardSwish" input: "x" output: "h" }
      op { name: "dropout" type: "Dropout" input: "h" output: "d" }
      op { name: "sigmoid" type: "HardSigmoid" input: "d" output: "y"
           arg { name: "alpha" f: 0.3 } arg { name: "beta" f: 0.4 } }
    )pb", ScaledLoss("y", {3, 4}));
    c.data = {{"r", Weights({3, 4}, 37)}};
    cases.push_back(c);
  }
  {
    // LSTM as nn.LSTM(bidirectional=True) exports it, and what PyTorch does not write besides:
    // peepholes and initial states that need gradients; sequence_lens omitted (a gap at 4).
    // S = 4, B = 2, I = 3, H = 3; every output weighted.
    cases.push_back(RecurrentCase(
        "lstm_bidirectional_peepholes",
        absl::StrCat(Param("x", {4, 2, 3}), Param("w", {2, 12, 3}), Param("rw", {2, 12, 3}),
                     Param("b", {2, 24}), Param("h0", {2, 2, 3}), Param("c0", {2, 2, 3}),
                     Param("p", {2, 9})),
        R"pb(op { name: "lstm" type: "LSTM" input: "x" input: "w" input: "rw" input: "b"
                  input: "h0" input: "c0" input: "p" output: "y" output: "y_h" output: "y_c"
                  arg { name: "direction" s: "bidirectional" } arg { name: "hidden_size" i: 3 }
                  arg { name: "onnx_input_slots" ints: 0 ints: 1 ints: 2 ints: 3 ints: 5
                        ints: 6 ints: 7 } }
        )pb",
        {{"y", {4, 2, 2, 3}}, {"y_h", {2, 2, 3}}, {"y_c", {2, 2, 3}}}, 50));
  }
  {
    // LSTM batch-major (layout 1), reversed, rows of lengths 3, 1 and 0 (a row that runs no
    // step: its Y_h is initial_h), clip 0.7 (gate inputs beyond it get no gradient), Y_h only.
    GradCase c = RecurrentCase(
        "lstm_layout1_reverse_lengths_clip",
        absl::StrCat(Param("x", {3, 3, 2}), Param("w", {1, 8, 2}), Param("rw", {1, 8, 2}),
                     Decl("lens", "INT32", {3}, "ROLE_INPUT"), Param("h0", {3, 1, 2})),
        R"pb(op { name: "lstm" type: "LSTM" input: "x" input: "w" input: "rw" input: "lens"
                  input: "h0" output: "y_h"
                  arg { name: "direction" s: "reverse" } arg { name: "layout" i: 1 }
                  arg { name: "clip" f: 0.7 }
                  arg { name: "onnx_input_slots" ints: 0 ints: 1 ints: 2 ints: 4 ints: 5 }
                  arg { name: "onnx_output_slots" ints: 1 } }
        )pb",
        {{"y_h", {3, 1, 2}}}, 53);
    c.data["lens"] = {3, 1, 0};
    cases.push_back(c);
  }
  {
    // GRU as nn.GRU exports it (linear_before_reset), bidirectional, Y and Y_h weighted.
    cases.push_back(RecurrentCase(
        "gru_linear_before_reset_bidirectional",
        absl::StrCat(Param("x", {3, 2, 3}), Param("w", {2, 9, 3}), Param("rw", {2, 9, 3}),
                     Param("b", {2, 18}), Param("h0", {2, 2, 3})),
        R"pb(op { name: "gru" type: "GRU" input: "x" input: "w" input: "rw" input: "b"
                  input: "h0" output: "y" output: "y_h"
                  arg { name: "direction" s: "bidirectional" } arg { name: "hidden_size" i: 3 }
                  arg { name: "linear_before_reset" i: 1 }
                  arg { name: "onnx_input_slots" ints: 0 ints: 1 ints: 2 ints: 3 ints: 5 } }
        )pb",
        {{"y", {3, 2, 2, 3}}, {"y_h", {2, 2, 3}}}, 55));
  }
  {
    // GRU of ONNX's default form (r applied before R_h), batch-major, lengths 2 and 3, other
    // activations (Softsign for the candidate); Y only.
    GradCase c = RecurrentCase(
        "gru_reset_before_layout1_lengths",
        absl::StrCat(Param("x", {2, 3, 2}), Param("w", {1, 9, 2}), Param("rw", {1, 9, 3}),
                     Param("b", {1, 18}), Decl("lens", "INT32", {2}, "ROLE_INPUT")),
        R"pb(op { name: "gru" type: "GRU" input: "x" input: "w" input: "rw" input: "b"
                  input: "lens" output: "y"
                  arg { name: "layout" i: 1 }
                  arg { name: "activations" strings: "Sigmoid" strings: "Softsign" } }
        )pb",
        {{"y", {2, 3, 1, 3}}}, 57);
    c.data["lens"] = {2, 3};
    cases.push_back(c);
  }
  {
    // RNN, bidirectional with a function per direction (Tanh; ScaledTanh with alpha, beta).
    cases.push_back(RecurrentCase(
        "rnn_bidirectional_activations",
        absl::StrCat(Param("x", {3, 2, 2}), Param("w", {2, 3, 2}), Param("rw", {2, 3, 3}),
                     Param("b", {2, 6})),
        R"pb(op { name: "rnn" type: "RNN" input: "x" input: "w" input: "rw" input: "b"
                  output: "y" output: "y_h"
                  arg { name: "direction" s: "bidirectional" }
                  arg { name: "activations" strings: "Tanh" strings: "ScaledTanh" }
                  arg { name: "activation_alpha" floats: 1.3 }
                  arg { name: "activation_beta" floats: 0.7 } }
        )pb",
        {{"y", {3, 2, 2, 3}}, {"y_h", {2, 2, 3}}}, 59));
  }
  return cases;
}

// The Gemm and BatchNormalization gradients in float16 and bfloat16 storage (float32
// statistics) against the same net in float32 on the same (rounded) values: every parameter
// gradient within max |g - g32| <= tol max |g32| (tol 5e-3 for float16, 3e-2 for bfloat16;
// measured at most 1.0e-3 and 9.4e-3). The first Gemm has no bias: before a training-mode
// batch norm its gradient is 0, which would leave no scale to compare against.
std::string HalfMlp(const std::string& dtype) {
  auto p = [&](const std::string& name, const std::vector<int64_t>& dims) {
    return Decl(name, dtype, dims, "ROLE_PARAM");
  };
  auto stat = [&](const std::string& name, int64_t c) { return Param(name, {c}); };
  return absl::StrCat(
      "name: \"half_mlp\"\n", p("x", {6, 4}), p("w1", {4, 5}), p("s1", {5}),
      p("b1", {5}), stat("m1", 5), stat("v1", 5), p("w2", {3, 5}), p("c2", {1, 3}), p("s2", {3}),
      p("b2", {3}), stat("m2", 3), stat("v2", 3), Decl("r", dtype, {6, 3}, "ROLE_CONSTANT"), R"pb(
      op { name: "fc1" type: "Gemm" input: "x" input: "w1" output: "h"
           arg { name: "alpha" f: 0.5 } }
      op { name: "bn1" type: "BatchNormalization" input: "h" input: "s1" input: "b1" input: "m1"
           input: "v1" output: "hn" arg { name: "training_mode" i: 1 } }
      op { name: "gelu" type: "Gelu" input: "hn" output: "a" }
      op { name: "fc2" type: "Gemm" input: "a" input: "w2" input: "c2" output: "z"
           arg { name: "transB" i: 1 } arg { name: "beta" f: -1.5 } }
      op { name: "bn2" type: "BatchNormalization" input: "z" input: "s2" input: "b2" input: "m2"
           input: "v2" output: "zn" }
      op { name: "weight" type: "Mul" input: "zn" input: "r" output: "wz" }
      op { name: "mean" type: "AveragedLoss" input: "wz" output: "loss" }
      external_output: "loss"
      loss: "loss"
    )pb");
}

class HalfPrecisionGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HalfPrecisionGradientTest, GemmAndBatchNormalizationFollowFloat32) {
  const std::string dtype = GetParam();
  const double tol = dtype == "FLOAT16" ? 5e-3 : 3e-2;
  // Runs the net in `type`; returns the runner (after one run) and its graph, which the runner
  // points to (hence on the heap: a Run may move).
  struct Run {
    std::unique_ptr<Graph> graph;
    std::unique_ptr<TrainingRunner> runner;
  };
  auto run = [](const std::string& type, const ValueData& data) -> absl::StatusOr<Run> {
    MG_ASSIGN_OR_RETURN(Graph forward, GraphFromText(HalfMlp(type)));
    MG_RETURN_IF_ERROR(graph::InferShapes(forward, graph::ShapeBindings{}));
    Run r;
    MG_ASSIGN_OR_RETURN(Graph training, graph::AddGradientOps(forward, {"loss"}));
    r.graph = std::make_unique<Graph>(std::move(training));
    PlanOptions options;
    options.memonger.mode = Mode::kTraining;
    options.time_limit_seconds = 0.2;
    MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(*r.graph, options));
    std::vector<ValueId> watch;
    for (const auto& [param, grad] : r.graph->param_grads()) {
      watch.push_back(param);
      watch.push_back(grad);
    }
    watch.push_back(*r.graph->FindValue("r"));
    MG_ASSIGN_OR_RETURN(r.runner, TrainingRunner::Create(*r.graph, plan, watch));
    MG_RETURN_IF_ERROR(r.runner->Run(data, /*seed=*/5));
    return r;
  };
  ValueData data = {{"r", Weights({6, 3}, 31)},
                    {"v1", {0.5, 1, 2, 1.5, 0.8}},
                    {"v2", {0.6, 1.1, 1.7}}};
  absl::StatusOr<Run> half = run(dtype, data);
  ASSERT_TRUE(half.ok()) << half.status();
  // float32 on the values the half net held (its parameters rounded to its type).
  ValueData rounded = data;
  rounded["r"] = half->runner->Doubles(*half->graph->FindValue("r"));
  for (const auto& [param, grad] : half->graph->param_grads()) {
    rounded[half->graph->value(param).name] = half->runner->Doubles(param);
  }
  absl::StatusOr<Run> full = run("FLOAT", rounded);
  ASSERT_TRUE(full.ok()) << full.status();
  // Every parameter but bn1's statistics, which Y does not depend on in training mode.
  ASSERT_EQ(half->graph->param_grads().size(), 10u);
  for (const auto& [param, grad] : half->graph->param_grads()) {
    const std::string& name = half->graph->value(param).name;
    SCOPED_TRACE(name);
    ASSERT_EQ(half->graph->value(grad).type->dtype, half->graph->value(param).type->dtype);
    const std::vector<double> g = half->runner->Doubles(grad);
    std::vector<double> ref;
    for (const auto& [full_param, full_grad] : full->graph->param_grads()) {
      if (full->graph->value(full_param).name == name) ref = full->runner->Doubles(full_grad);
    }
    ASSERT_EQ(g.size(), ref.size());
    double scale = 0, worst = 0;
    for (double v : ref) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - ref[i]));
    EXPECT_LE(worst, tol * scale);
    std::printf("[half gradient] %-9s %-3s max |g - g32| / max |g32| = %.2e\n", dtype.c_str(),
                name.c_str(), scale > 0 ? worst / scale : 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HalfPrecisionGradientTest, ::testing::Values("FLOAT16", "BFLOAT16"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

INSTANTIATE_TEST_SUITE_P(Rules, GradientCheckTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace memonger::testing

// SpatialBN (test and training mode), ONNX BatchNormalization (training and inference, the
// opset-9 five-output form, omitted outputs) and their gradients (kernels_cpu_batchnorm.cc)
// against double-precision formulas, fp16/bf16 activations with fp32 statistics, running
// statistics written in place over mean/var, and what the kernels refuse.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::Attribute;
using graph::DataType;
using testing::CompareClose;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

constexpr int64_t kN = 2, kC = 3, kS = 10;  // [2, 3, 2, 5]: 10 elements per (n, c)
const std::vector<int64_t> kDims = {kN, kC, 2, 5};

class SpatialBnTest : public ::testing::TestWithParam<DataType> {};

TEST_P(SpatialBnTest, TrainingModeAndGradientMatchTheFormulas) {
  const DataType dtype = GetParam();
  TestTensor x = MakeTensor(dtype, kDims, RandomValues(kN * kC * kS, 1, -2, 3));
  TestTensor scale = MakeTensor(DataType::kFloat32, {kC}, {0.5, -1.5, 2});
  TestTensor bias = MakeTensor(DataType::kFloat32, {kC}, {0.1, 0.2, -0.3});
  TestTensor mean = MakeTensor(DataType::kFloat32, {kC}, {1, 2, 3});
  TestTensor var = MakeTensor(DataType::kFloat32, {kC}, {4, 5, 6});
  const std::vector<double> xv = ToDoubles(x), sc = ToDoubles(scale), bi = ToDoubles(bias);
  const double eps = 1e-3, momentum = 0.75;
  const std::vector<Attribute> attrs = {{"is_test", int64_t{0}}, {"epsilon", eps}, {"momentum", momentum}};
  std::vector<double> mu(kC, 0), sigma2(kC, 0);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t i = 0; i < kS; ++i) mu[c] += xv[(n * kC + c) * kS + i] / (kN * kS);
  for (int64_t n = 0; n < kN; ++n)
    for (int64_t c = 0; c < kC; ++c)
      for (int64_t i = 0; i < kS; ++i) {
        const double d = xv[(n * kC + c) * kS + i] - mu[c];
        sigma2[c] += d * d / (kN * kS);
      }
  std::vector<double> y_ref(xv.size()), rstd(kC), rm(kC), rv(kC);
  for (int64_t c = 0; c < kC; ++c) {
    rstd[c] = 1 / std::sqrt(sigma2[c] + eps);
    rm[c] = momentum * (c + 1) + (1 - momentum) * mu[c];
    rv[c] = momentum * (c + 4) + (1 - momentum) * sigma2[c];
  }
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = (i / kS) % kC;
    y_ref[i] = (xv[i] - mu[c]) * rstd[c] * sc[c] + bi[c];
  }
  TestTensor y = EmptyTensor(dtype, kDims);
  TestTensor saved_mean = EmptyTensor(DataType::kFloat32, {kC});
  TestTensor saved_var = EmptyTensor(DataType::kFloat32, {kC});
  // running_mean / running_var in place over mean / var (Caffe2's usual wiring).
  ASSERT_TRUE(RunKernel("SpatialBN", attrs, {&x, &scale, &bias, &mean, &var},
                        {&y, &mean, &var, &saved_mean, &saved_var})
                  .ok());
  const double rtol = dtype == DataType::kFloat32 ? 1e-5 : dtype == DataType::kFloat16 ? 2e-3 : 1.6e-2;
  EXPECT_EQ(CompareClose(ToDoubles(y), y_ref, rtol, 1e-5), "");
  EXPECT_EQ(CompareClose(ToDoubles(mean), rm, 1e-5, 1e-6), "");
  EXPECT_EQ(CompareClose(ToDoubles(var), rv, 1e-5, 1e-6), "");
  EXPECT_EQ(CompareClose(ToDoubles(saved_mean), mu, 1e-5, 1e-6), "");
  EXPECT_EQ(CompareClose(ToDoubles(saved_var), rstd, 1e-5, 1e-6), "");  // the inverse std

  TestTensor dy = MakeTensor(dtype, kDims, RandomValues(xv.size(), 2));
  const std::vector<double> g = ToDoubles(dy);
  std::vector<double> dbias(kC, 0), dscale(kC, 0), dx_ref(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = (i / kS) % kC;
    dbias[c] += g[i];
    dscale[c] += g[i] * (xv[i] - mu[c]) * rstd[c];
  }
  const double m = kN * kS;
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = (i / kS) % kC;
    const double xhat = (xv[i] - mu[c]) * rstd[c];
    dx_ref[i] = sc[c] * rstd[c] / m * (m * g[i] - dbias[c] - xhat * dscale[c]);
  }
  TestTensor dx = EmptyTensor(dtype, kDims);
  TestTensor dscale_t = EmptyTensor(DataType::kFloat32, {kC}), dbias_t = EmptyTensor(DataType::kFloat32, {kC});
  ASSERT_TRUE(RunKernel("SpatialBNGradient", attrs, {&x, &scale, &dy, &saved_mean, &saved_var},
                        {&dx, &dscale_t, &dbias_t})
                  .ok());
  EXPECT_EQ(CompareClose(ToDoubles(dx), dx_ref, rtol, 1e-4), "");
  EXPECT_EQ(CompareClose(ToDoubles(dscale_t), dscale, 1e-4, 1e-5), "");
  EXPECT_EQ(CompareClose(ToDoubles(dbias_t), dbias, 1e-4, 1e-5), "");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SpatialBnTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16));

TEST(SpatialBnTest, TestModeUsesTheGivenStatistics) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 2, 1, 2}, {1, 2, 3, 4});
  TestTensor scale = MakeTensor(DataType::kFloat32, {2}, {2, 1});
  TestTensor bias = MakeTensor(DataType::kFloat32, {2}, {0, 1});
  TestTensor mean = MakeTensor(DataType::kFloat32, {2}, {1, 3});
  TestTensor var = MakeTensor(DataType::kFloat32, {2}, {4, 0.25});
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 2, 1, 2});
  ASSERT_TRUE(RunKernel("SpatialBN", {{"is_test", int64_t{1}}, {"epsilon", 0.0}},
                        {&x, &scale, &bias, &mean, &var}, {&y})
                  .ok());
  EXPECT_EQ(CompareClose(ToDoubles(y), {0, 1, 1, 3}, 1e-6, 1e-7), "");
}

TEST(SpatialBnTest, RefusesWhatIsNotImplemented) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 2, 1, 2}, {1, 2, 3, 4});
  TestTensor p = MakeTensor(DataType::kFloat32, {2}, {1, 1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 2, 1, 2});
  EXPECT_EQ(RunKernel("SpatialBN", {{"is_test", int64_t{1}}}, {&x, &p, &p, &p, &p, &p, &p}, {&y}).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RunKernel("SpatialBN", {{"is_test", int64_t{1}}, {"order", std::string("NHWC")}},
                      {&x, &p, &p, &p, &p}, {&y})
                .code(),
            absl::StatusCode::kUnimplemented);
  // Training mode needs all five outputs.
  EXPECT_EQ(RunKernel("SpatialBN", {}, {&x, &p, &p, &p, &p}, {&y}).code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- ONNX BatchNormalization -----------------------------------------------------------------

// The double-precision reference of one BatchNormalization forward and backward pass over X
// [kN, kC, 2, 5].
struct BnReference {
  std::vector<double> mu, sigma2, rstd, y, running_mean, running_var;
  std::vector<double> dx, dscale, dbias, dmean, dvar;
};

BnReference Reference(const std::vector<double>& xv, const std::vector<double>& sc,
                      const std::vector<double>& bi, const std::vector<double>& mean,
                      const std::vector<double>& var, const std::vector<double>& g,
                      bool training, double eps, double momentum) {
  BnReference r;
  r.mu.assign(kC, 0);
  r.sigma2.assign(kC, 0);
  const double m = kN * kS;
  for (size_t i = 0; i < xv.size(); ++i) r.mu[(i / kS) % kC] += xv[i] / m;
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = (i / kS) % kC;
    r.sigma2[c] += (xv[i] - r.mu[c]) * (xv[i] - r.mu[c]) / m;
  }
  const std::vector<double>& use_mu = training ? r.mu : mean;
  const std::vector<double>& use_var = training ? r.sigma2 : var;
  r.rstd.resize(kC);
  for (int64_t c = 0; c < kC; ++c) {
    r.rstd[c] = 1 / std::sqrt(use_var[c] + eps);
    r.running_mean.push_back(momentum * mean[c] + (1 - momentum) * r.mu[c]);
    r.running_var.push_back(momentum * var[c] + (1 - momentum) * r.sigma2[c]);
  }
  r.dscale.assign(kC, 0);
  r.dbias.assign(kC, 0);
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = (i / kS) % kC;
    const double xhat = (xv[i] - use_mu[c]) * r.rstd[c];
    r.y.push_back(xhat * sc[c] + bi[c]);
    r.dbias[c] += g[i];
    r.dscale[c] += g[i] * xhat;
  }
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t c = (i / kS) % kC;
    const double xhat = (xv[i] - use_mu[c]) * r.rstd[c];
    r.dx.push_back(training ? sc[c] * r.rstd[c] / m * (m * g[i] - r.dbias[c] - xhat * r.dscale[c])
                            : sc[c] * r.rstd[c] * g[i]);
  }
  for (int64_t c = 0; c < kC; ++c) {
    // Inference: Y = (X - mean) * scale / sqrt(var + eps) + B, differentiated directly.
    r.dmean.push_back(-sc[c] * r.rstd[c] * r.dbias[c]);
    r.dvar.push_back(-0.5 * sc[c] * std::pow(r.rstd[c], 3) * [&] {
      double s = 0;
      for (size_t i = 0; i < xv.size(); ++i) {
        if (static_cast<int64_t>((i / kS) % kC) == c) s += g[i] * (xv[i] - mean[c]);
      }
      return s;
    }());
  }
  return r;
}

class BatchNormalizationTest : public ::testing::TestWithParam<DataType> {};

TEST_P(BatchNormalizationTest, BothModesAndTheirGradientsMatchTheFormulas) {
  const DataType dtype = GetParam();
  TestTensor x = MakeTensor(dtype, kDims, RandomValues(kN * kC * kS, 3, -2, 3));
  TestTensor scale = MakeTensor(dtype, {kC}, {0.5, -1.5, 2});
  TestTensor bias = MakeTensor(dtype, {kC}, {0.1, 0.2, -0.3});
  TestTensor mean = MakeTensor(DataType::kFloat32, {kC}, {0.3, -0.2, 0.6});
  TestTensor var = MakeTensor(DataType::kFloat32, {kC}, {1.5, 0.5, 2.5});
  TestTensor dy = MakeTensor(dtype, kDims, RandomValues(kN * kC * kS, 4));
  const double eps = 1e-3, momentum = 0.75;
  const double rtol =
      dtype == DataType::kFloat32 ? 1e-5 : dtype == DataType::kFloat16 ? 4e-3 : 3e-2;
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    const BnReference ref = Reference(ToDoubles(x), ToDoubles(scale), ToDoubles(bias),
                                      ToDoubles(mean), ToDoubles(var), ToDoubles(dy), training,
                                      eps, momentum);
    const std::vector<Attribute> attrs = {{"training_mode", int64_t{training}},
                                          {"epsilon", eps},
                                          {"momentum", momentum}};
    TestTensor y = EmptyTensor(dtype, kDims);
    TestTensor running_mean = EmptyTensor(DataType::kFloat32, {kC});
    TestTensor running_var = EmptyTensor(DataType::kFloat32, {kC});
    TestTensor saved_mean = EmptyTensor(DataType::kFloat32, {kC});
    TestTensor saved_var = EmptyTensor(DataType::kFloat32, {kC});
    std::vector<TestTensor*> outputs = {&y};
    // Training: the five outputs the gradient builder gives the op.
    if (training) outputs = {&y, &running_mean, &running_var, &saved_mean, &saved_var};
    const absl::Status forward =
        RunKernel("BatchNormalization", attrs, {&x, &scale, &bias, &mean, &var}, outputs);
    ASSERT_TRUE(forward.ok()) << forward;
    EXPECT_EQ(CompareClose(ToDoubles(y), ref.y, rtol, 1e-4), "");
    if (training) {
      EXPECT_EQ(CompareClose(ToDoubles(running_mean), ref.running_mean, 1e-5, 1e-6), "");
      EXPECT_EQ(CompareClose(ToDoubles(running_var), ref.running_var, 1e-5, 1e-6), "");
      EXPECT_EQ(CompareClose(ToDoubles(saved_mean), ref.mu, 1e-5, 1e-6), "");
      EXPECT_EQ(CompareClose(ToDoubles(saved_var), ref.sigma2, 1e-5, 1e-6), "");  // the variance
    }
    TestTensor dx = EmptyTensor(dtype, kDims);
    TestTensor dscale = EmptyTensor(dtype, {kC}), dbias = EmptyTensor(dtype, {kC});
    TestTensor dmean = EmptyTensor(DataType::kFloat32, {kC});
    TestTensor dvar = EmptyTensor(DataType::kFloat32, {kC});
    std::vector<TestTensor*> grads = {&dx, &dscale, &dbias};
    if (!training) grads = {&dx, &dscale, &dbias, &dmean, &dvar};
    const std::vector<Attribute> grad_attrs = {{"training_mode", int64_t{training}},
                                               {"epsilon", eps}};
    const absl::Status backward = RunKernel(
        "BatchNormalizationGradient", grad_attrs,
        {&dy, &x, &scale, training ? &saved_mean : &mean, training ? &saved_var : &var}, grads);
    ASSERT_TRUE(backward.ok()) << backward;
    EXPECT_EQ(CompareClose(ToDoubles(dx), ref.dx, rtol, 1e-4), "");
    EXPECT_EQ(CompareClose(ToDoubles(dscale), ref.dscale, rtol, 1e-4), "");
    EXPECT_EQ(CompareClose(ToDoubles(dbias), ref.dbias, rtol, 1e-4), "");
    if (!training) {
      EXPECT_EQ(CompareClose(ToDoubles(dmean), ref.dmean, 1e-4, 1e-5), "");
      EXPECT_EQ(CompareClose(ToDoubles(dvar), ref.dvar, 1e-4, 1e-5), "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BatchNormalizationTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                           DataType::kBFloat16),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(graph::DataTypeName(info.param));
                         });

// Opset 9 without training_mode: five outputs mean training; an importer that dropped the
// running statistics ("" outputs) records where the saved ones sit.
TEST(BatchNormalizationTest, OutputsFollowTheirOnnxPositions) {
  TestTensor x = MakeTensor(DataType::kFloat32, {4, 2}, {1, 10, 2, 20, 3, 30, 6, 40});
  TestTensor one = MakeTensor(DataType::kFloat32, {2}, {1, 1});
  TestTensor zero = MakeTensor(DataType::kFloat32, {2}, {0, 0});
  TestTensor y = EmptyTensor(DataType::kFloat32, {4, 2});
  TestTensor saved_mean = EmptyTensor(DataType::kFloat32, {2});
  TestTensor saved_var = EmptyTensor(DataType::kFloat32, {2});
  ASSERT_TRUE(RunKernel("BatchNormalization",
                        {{"epsilon", 0.0}, {"onnx_output_slots", std::vector<int64_t>{0, 3, 4}}},
                        {&x, &one, &zero, &zero, &one}, {&y, &saved_mean, &saved_var})
                  .ok());
  EXPECT_EQ(CompareClose(ToDoubles(saved_mean), {3, 25}, 1e-6, 1e-7), "");
  EXPECT_EQ(CompareClose(ToDoubles(saved_var), {3.5, 125}, 1e-6, 1e-7), "");
  const double s0 = 1 / std::sqrt(3.5), s1 = 1 / std::sqrt(125.0);
  EXPECT_EQ(CompareClose(ToDoubles(y),
                         {-2 * s0, -15 * s1, -1 * s0, -5 * s1, 0, 5 * s1, 3 * s0, 15 * s1}, 1e-6,
                         1e-7),
            "");
  // Running statistics in place over input_mean / input_var (a NetDef's wiring).
  TestTensor mean = MakeTensor(DataType::kFloat32, {2}, {1, 2});
  TestTensor var = MakeTensor(DataType::kFloat32, {2}, {4, 8});
  ASSERT_TRUE(RunKernel("BatchNormalization", {{"momentum", 0.5}}, {&x, &one, &zero, &mean, &var},
                        {&y, &mean, &var})
                  .ok());
  EXPECT_EQ(CompareClose(ToDoubles(mean), {2, 13.5}, 1e-6, 1e-7), "");
  EXPECT_EQ(CompareClose(ToDoubles(var), {3.75, 66.5}, 1e-6, 1e-7), "");
}

TEST(BatchNormalizationTest, RefusesWhatItCannotCompute) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 2, 3}, RandomValues(12, 5));
  TestTensor p = MakeTensor(DataType::kFloat32, {2}, {1, 1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 2, 3});
  TestTensor s1 = EmptyTensor(DataType::kFloat32, {2}), s2 = EmptyTensor(DataType::kFloat32, {2});
  // Inference with running statistics (ONNX: "extra outputs are invalid").
  EXPECT_EQ(RunKernel("BatchNormalization", {{"training_mode", int64_t{0}}}, {&x, &p, &p, &p, &p},
                      {&y, &s1, &s2})
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Opset 7's per-activation statistics.
  EXPECT_EQ(RunKernel("BatchNormalization", {{"spatial", int64_t{0}}}, {&x, &p, &p, &p, &p}, {&y})
                .code(),
            absl::StatusCode::kUnimplemented);
  // Statistics of the wrong size, and running statistics over anything but mean/var.
  TestTensor three = MakeTensor(DataType::kFloat32, {3}, {1, 1, 1});
  EXPECT_EQ(RunKernel("BatchNormalization", {}, {&x, &p, &p, &three, &p}, {&y}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunKernel("BatchNormalization", {{"training_mode", int64_t{1}}}, {&x, &p, &s1, &p, &p},
                      {&y, &s1, &s2})
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // The gradient: dmean and dvar exist in inference only; no output over an input.
  TestTensor dx = EmptyTensor(DataType::kFloat32, {2, 2, 3});
  TestTensor g3 = EmptyTensor(DataType::kFloat32, {2}), g4 = EmptyTensor(DataType::kFloat32, {2});
  EXPECT_EQ(RunKernel("BatchNormalizationGradient", {{"training_mode", int64_t{1}}},
                      {&x, &x, &p, &p, &p}, {&dx, &s1, &s2, &g3, &g4})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RunKernel("BatchNormalizationGradient", {}, {&x, &x, &p, &p, &p}, {&x, &s1, &s2}).code(),
      absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace memonger::alloc

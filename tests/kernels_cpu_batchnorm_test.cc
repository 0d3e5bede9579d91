// SpatialBN (test and training mode) and SpatialBNGradient (kernels_cpu_batchnorm.cc) against
// double-precision formulas, fp16 activations with fp32 statistics, running statistics written
// in place over mean/var, and the Unimplemented 7-input forms.
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

}  // namespace
}  // namespace memonger::alloc

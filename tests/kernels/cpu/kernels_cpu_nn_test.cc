// Softmax, LogSoftmax, LayerNormalization (with Mean and InvStdDev) and Caffe2 LayerNorm
// against double-precision references; in place (Y at X's address); axis handling.
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

double Rtol(DataType d) {
  return d == DataType::kFloat16 ? 2e-3 : d == DataType::kBFloat16 ? 1.6e-2 : 1e-5;
}

// Softmax over `axis` of a [d0, d1, d2] tensor, in double.
std::vector<double> ReferenceSoftmax(const std::vector<double>& x, const std::vector<int64_t>& dims,
                                     int64_t axis, bool log) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t n = dims[axis];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) max = std::max(max, x[(o * n + j) * inner + i]);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(x[(o * n + j) * inner + i] - max);
      for (int64_t j = 0; j < n; ++j) {
        const double v = x[(o * n + j) * inner + i] - max;
        y[(o * n + j) * inner + i] = log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  }
  return y;
}

class SoftmaxKernelTest : public ::testing::TestWithParam<std::tuple<int64_t, DataType>> {};

TEST_P(SoftmaxKernelTest, OverOneAxis) {
  const auto [axis, dtype] = GetParam();
  const std::vector<int64_t> dims = {3, 5, 7};
  TestTensor x = MakeTensor(dtype, dims, RandomValues(105, 3, -5, 5));
  TestTensor y = EmptyTensor(dtype, dims);
  const int64_t normalized = axis < 0 ? axis + 3 : axis;
  for (bool log : {false, true}) {
    SCOPED_TRACE(log);
    const char* op = log ? "LogSoftmax" : "Softmax";
    ASSERT_TRUE(RunKernel(op, {{"axis", axis}}, {&x}, {&y}).ok());
    EXPECT_EQ(CompareClose(ToDoubles(y), ReferenceSoftmax(ToDoubles(x), dims, normalized, log),
                           Rtol(dtype), 1e-6),
              "");
  }
  // In place gives the same bytes.
  const std::vector<double> expected = ToDoubles(y);
  ASSERT_TRUE(RunKernel("LogSoftmax", {{"axis", axis}}, {&x}, {&x}).ok());
  EXPECT_EQ(ToDoubles(x), expected);
}

INSTANTIATE_TEST_SUITE_P(Axes, SoftmaxKernelTest,
                         ::testing::Combine(::testing::Values(0, 1, -1),
                                            ::testing::Values(DataType::kFloat32,
                                                              DataType::kFloat16,
                                                              DataType::kBFloat16)));

TEST(SoftmaxKernelTest, DefaultAxisIsLastAndMaskedRowsStayFinite) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 3}, {1, 2, 3, -INFINITY, -INFINITY, 0});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 3});
  ASSERT_TRUE(RunKernel("Softmax", {}, {&x}, {&y}).ok());
  const std::vector<double> v = ToDoubles(y);
  EXPECT_EQ(CompareClose(v, ReferenceSoftmax(ToDoubles(x), {2, 3}, 1, false), 1e-6, 1e-7), "");
  EXPECT_EQ(v[3], 0);
  EXPECT_EQ(v[5], 1);
  EXPECT_EQ(RunKernel("Softmax", {{"axis", int64_t{2}}}, {&x}, {&y}).code(),
            absl::StatusCode::kInvalidArgument);
}

class LayerNormKernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(LayerNormKernelTest, NormalisesFromAxisWithStatistics) {
  const DataType dtype = GetParam();
  // X [2, 3, 8], axis 1: rows of 24; Scale [3, 8], B [8] (broadcast).
  TestTensor x = MakeTensor(dtype, {2, 3, 8}, RandomValues(48, 5, -3, 3));
  TestTensor scale = MakeTensor(dtype, {3, 8}, RandomValues(24, 6));
  TestTensor bias = MakeTensor(dtype, {8}, RandomValues(8, 7));
  TestTensor y = EmptyTensor(dtype, {2, 3, 8});
  TestTensor mean = EmptyTensor(DataType::kFloat32, {2, 1, 1});
  TestTensor inv = EmptyTensor(DataType::kFloat32, {2, 1, 1});
  const std::vector<Attribute> attrs = {{"axis", int64_t{1}}, {"epsilon", 1e-3}};
  ASSERT_TRUE(RunKernel("LayerNormalization", attrs, {&x, &scale, &bias}, {&y, &mean, &inv}).ok());
  const std::vector<double> xv = ToDoubles(x), sv = ToDoubles(scale), bv = ToDoubles(bias);
  std::vector<double> expected(48), expected_mean(2), expected_inv(2);
  for (int r = 0; r < 2; ++r) {
    double m = 0, var = 0;
    for (int j = 0; j < 24; ++j) m += xv[r * 24 + j] / 24;
    for (int j = 0; j < 24; ++j) var += (xv[r * 24 + j] - m) * (xv[r * 24 + j] - m) / 24;
    const double is = 1 / std::sqrt(var + 1e-3);
    for (int j = 0; j < 24; ++j) expected[r * 24 + j] = (xv[r * 24 + j] - m) * is * sv[j] + bv[j % 8];
    expected_mean[r] = m;
    expected_inv[r] = is;
  }
  EXPECT_EQ(CompareClose(ToDoubles(y), expected, Rtol(dtype), 1e-5), "");
  EXPECT_EQ(CompareClose(ToDoubles(mean), expected_mean, 1e-5, 1e-6), "");
  EXPECT_EQ(CompareClose(ToDoubles(inv), expected_inv, 1e-5, 1e-6), "");
  // In place, without the optional outputs.
  const std::vector<double> y_values = ToDoubles(y);
  ASSERT_TRUE(RunKernel("LayerNormalization", attrs, {&x, &scale, &bias}, {&x}).ok());
  EXPECT_EQ(ToDoubles(x), y_values);
}

INSTANTIATE_TEST_SUITE_P(Types, LayerNormKernelTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                           DataType::kBFloat16));

TEST(LayerNormKernelTest, OnlyInvStdDevRequestedThroughOutputSlots) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 4}, {1, 2, 3, 4, 0, 0, 0, 4});
  TestTensor scale = MakeTensor(DataType::kFloat32, {4}, {1, 1, 1, 1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 4});
  TestTensor inv = EmptyTensor(DataType::kFloat32, {2, 1});
  ASSERT_TRUE(RunKernel("LayerNormalization",
                        {{"epsilon", 0.0}, {"onnx_output_slots", std::vector<int64_t>{0, 2}}},
                        {&x, &scale}, {&y, &inv})
                  .ok());
  EXPECT_EQ(CompareClose(ToDoubles(inv), {1 / std::sqrt(1.25), 1 / std::sqrt(3.0)}, 1e-6, 0), "");
}

TEST(LayerNormKernelTest, Caffe2LayerNormGivesMeanAndStd) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 2}, {1, 3, 2, 6});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 2});
  TestTensor mean = EmptyTensor(DataType::kFloat32, {2, 1});
  TestTensor std_dev = EmptyTensor(DataType::kFloat32, {2, 1});
  ASSERT_TRUE(RunKernel("LayerNorm", {{"epsilon", 0.0}}, {&x}, {&y, &mean, &std_dev}).ok());
  EXPECT_EQ(ToDoubles(mean), (std::vector<double>{2, 4}));
  EXPECT_EQ(ToDoubles(std_dev), (std::vector<double>{1, 2}));
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{-1, 1, -1, 1}));
}

}  // namespace
}  // namespace memonger::alloc

// LabelCrossEntropy, AveragedLoss and their gradients (kernels_cpu_loss.cc) against the
// formulas; the log threshold; labels out of range are an InvalidArgument naming the op.
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::CompareClose;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

class LossKernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(LossKernelTest, CrossEntropyAndMeanWithGradients) {
  const DataType dtype = GetParam();
  const double rtol = dtype == DataType::kFloat32 ? 1e-6 : dtype == DataType::kFloat16 ? 1e-3 : 8e-3;
  TestTensor x = MakeTensor(dtype, {3, 4}, {0.1, 0.2, 0.3, 0.4, 0.7, 0.1, 0.1, 0.1, 0, 0.5, 0.25, 0.25});
  TestTensor label = MakeTensor(DataType::kInt32, {3}, {3, 0, 0});
  TestTensor y = EmptyTensor(dtype, {3});
  ASSERT_TRUE(RunKernel("LabelCrossEntropy", {}, {&x, &label}, {&y}).ok());
  const std::vector<double> xv = ToDoubles(x);
  // X[2, 0] = 0: -log(1e-20), not infinity.
  EXPECT_EQ(CompareClose(ToDoubles(y), {-std::log(xv[3]), -std::log(xv[4]), -std::log(1e-20)}, rtol, 0), "");
  TestTensor dy = MakeTensor(dtype, {3}, {1, -2, 0.5});
  TestTensor dx = EmptyTensor(dtype, {3, 4});
  ASSERT_TRUE(RunKernel("LabelCrossEntropyGradient", {}, {&x, &label, &dy}, {&dx}).ok());
  std::vector<double> dx_ref(12, 0);
  dx_ref[3] = -1 / xv[3];
  dx_ref[4] = 2 / xv[4];
  dx_ref[8] = -0.5 / 1e-20;
  if (dtype == DataType::kFloat16) dx_ref[8] = -INFINITY;  // beyond float16's range
  EXPECT_EQ(CompareClose(ToDoubles(dx), dx_ref, rtol, 0), "");

  TestTensor loss = EmptyTensor(dtype, {});
  ASSERT_TRUE(RunKernel("AveragedLoss", {}, {&x}, {&loss}).ok());
  double sum = 0;
  for (double v : xv) sum += v;
  EXPECT_EQ(CompareClose(ToDoubles(loss), {sum / 12}, rtol, 0), "");
  TestTensor dloss = MakeTensor(dtype, {}, {3});
  ASSERT_TRUE(RunKernel("AveragedLossGradient", {}, {&x, &dloss}, {&dx}).ok());
  EXPECT_EQ(CompareClose(ToDoubles(dx), std::vector<double>(12, 0.25), rtol, 0), "");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LossKernelTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16));

TEST(LossKernelTest, LabelsOutOfRangeAreRefused) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 3}, {0.2, 0.3, 0.5, 0.1, 0.1, 0.8});
  TestTensor label = MakeTensor(DataType::kInt32, {2}, {1, 3});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2});
  const absl::Status s = RunKernel("LabelCrossEntropy", {}, {&x, &label}, {&y});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("LabelCrossEntropy: label[1] = 3"), std::string::npos) << s;
  TestTensor label64 = MakeTensor(DataType::kInt64, {2}, {1, 1});
  EXPECT_EQ(RunKernel("LabelCrossEntropy", {}, {&x, &label64}, {&y}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memonger::alloc

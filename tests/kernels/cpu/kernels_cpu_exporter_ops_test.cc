// Kernels for ops torch.onnx.export writes for the model zoo's models (tests/zoo/):
// GlobalAveragePool and GlobalMaxPool (every torchvision CNN's head), HardSwish (MobileNetV3),
// Dropout in inference (left in by some exports), Range (torch.arange positions),
// ConstantOfShape (RNN initial states, masks), Resize (segmentation heads), each against
// a double-precision reference of the ONNX definition.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;
using ::testing::HasSubstr;

double Rtol(DataType d) {
  return d == DataType::kFloat16 ? 2e-3 : d == DataType::kBFloat16 ? 1.6e-2 : 1e-6;
}

class GlobalPoolTest : public ::testing::TestWithParam<DataType> {};

TEST_P(GlobalPoolTest, MeanAndMaximumOfEveryPlane) {
  const DataType dtype = GetParam();
  const std::vector<int64_t> dims = {2, 3, 5, 7};
  const std::vector<double> x = RandomValues(2 * 3 * 5 * 7, 11, -3, 3);
  TestTensor in = MakeTensor(dtype, dims, x);
  const std::vector<double> stored = ToDoubles(in);  // x as the storage type rounded it
  TestTensor mean = EmptyTensor(dtype, {2, 3, 1, 1});
  TestTensor max = EmptyTensor(dtype, {2, 3, 1, 1});
  ASSERT_TRUE(RunKernel("GlobalAveragePool", {}, {&in}, {&mean}).ok());
  ASSERT_TRUE(RunKernel("GlobalMaxPool", {}, {&in}, {&max}).ok());
  const std::vector<double> got_mean = ToDoubles(mean), got_max = ToDoubles(max);
  for (int p = 0; p < 6; ++p) {
    double sum = 0, m = -INFINITY;
    for (int k = 0; k < 35; ++k) {
      sum += stored[p * 35 + k];
      m = std::max(m, stored[p * 35 + k]);
    }
    EXPECT_NEAR(got_mean[p], sum / 35, Rtol(dtype) * 3 + 1e-7) << p;
    EXPECT_NEAR(got_max[p], m, std::abs(m) * 1e-6) << p;  // float64 is pooled in float32
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GlobalPoolTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                           DataType::kBFloat16, DataType::kFloat64));

TEST(GlobalPoolTest, RefusesOutputsThatAreNotOnePerPlane) {
  TestTensor in = MakeTensor(DataType::kFloat32, {1, 2, 2, 2}, RandomValues(8, 1));
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {1, 2, 2, 1});
  EXPECT_FALSE(RunKernel("GlobalAveragePool", {}, {&in}, {&wrong}).ok());
}

TEST(HardSwishTest, IsXTimesTheClippedLine) {
  const std::vector<double> x = {-5, -3, -1.5, 0, 0.25, 1.5, 3, 4.5};
  TestTensor in = MakeTensor(DataType::kFloat32, {8}, x);
  TestTensor out = EmptyTensor(DataType::kFloat32, {8});
  ASSERT_TRUE(RunKernel("HardSwish", {}, {&in}, {&out}).ok());
  const std::vector<double> y = ToDoubles(out);
  for (size_t i = 0; i < x.size(); ++i) {
    const double expected = x[i] * std::clamp(x[i] / 6 + 0.5, 0.0, 1.0);
    EXPECT_NEAR(y[i], expected, 1e-6) << x[i];
  }
}

TEST(DropoutTest, InferenceCopiesAndMasksNothing) {
  const std::vector<double> x = RandomValues(12, 3);
  TestTensor in = MakeTensor(DataType::kFloat32, {3, 4}, x);
  TestTensor ratio = MakeTensor(DataType::kFloat32, {}, {0.5});
  TestTensor training = MakeTensor(DataType::kBool, {}, {0});
  TestTensor out = EmptyTensor(DataType::kFloat32, {3, 4});
  TestTensor mask = EmptyTensor(DataType::kBool, {3, 4});
  ASSERT_TRUE(RunKernel("Dropout", {}, {&in, &ratio, &training}, {&out, &mask}).ok());
  EXPECT_EQ(ToDoubles(out), ToDoubles(in));
  EXPECT_EQ(ToDoubles(mask), std::vector<double>(12, 1.0));
  TestTensor train = MakeTensor(DataType::kBool, {}, {1});
  const absl::Status s = RunKernel("Dropout", {}, {&in, &ratio, &train}, {&out});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  // Training mode with ratio 0 (torchvision's Swin exports it) is the identity, as ONNX says.
  TestTensor zero = MakeTensor(DataType::kFloat32, {}, {0.0});
  TestTensor out2 = EmptyTensor(DataType::kFloat32, {3, 4});
  TestTensor mask2 = EmptyTensor(DataType::kBool, {3, 4});
  ASSERT_TRUE(RunKernel("Dropout", {}, {&in, &zero, &train}, {&out2, &mask2}).ok());
  EXPECT_EQ(ToDoubles(out2), ToDoubles(in));
  EXPECT_EQ(ToDoubles(mask2), std::vector<double>(12, 1.0));
}

TEST(RangeTest, ArangeInEveryTypeAndPlannedSizeChecked) {
  struct Case {
    DataType dtype;
    double start, limit, delta;
  };
  for (const Case& c : {Case{DataType::kInt64, 0, 10, 3}, Case{DataType::kInt32, 5, -4, -2},
                        Case{DataType::kFloat32, 0.5, 2.0, 0.25},
                        Case{DataType::kFloat64, 1, 1, 1}, Case{DataType::kInt16, -3, 3, 1}}) {
    SCOPED_TRACE(graph::DataTypeName(c.dtype));
    const int64_t n =
        std::max<int64_t>(static_cast<int64_t>(std::ceil((c.limit - c.start) / c.delta)), 0);
    TestTensor start = MakeTensor(c.dtype, {}, {c.start});
    TestTensor limit = MakeTensor(c.dtype, {}, {c.limit});
    TestTensor delta = MakeTensor(c.dtype, {}, {c.delta});
    TestTensor out = EmptyTensor(c.dtype, {n});
    ASSERT_TRUE(RunKernel("Range", {}, {&start, &limit, &delta}, {&out}).ok());
    const std::vector<double> y = ToDoubles(out);
    for (int64_t i = 0; i < n; ++i) EXPECT_DOUBLE_EQ(y[i], c.start + i * c.delta) << i;
    // A size planned from other values is refused, never overrun.
    TestTensor longer = EmptyTensor(c.dtype, {n + 1});
    const absl::Status s = RunKernel("Range", {}, {&start, &limit, &delta}, {&longer});
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("planned with"));
  }
}

TEST(ConstantOfShapeTest, FillsWithTheCarriedValueExactly) {
  TestTensor shape = MakeTensor(DataType::kInt64, {2}, {2, 3});
  TestTensor ints = EmptyTensor(DataType::kInt64, {2, 3});
  // 2^53 + 1 does not survive a double: the int64 attribute is used as it is.
  const int64_t big = (int64_t{1} << 53) + 1;
  ASSERT_TRUE(RunKernel("ConstantOfShape", {{"value", big}}, {&shape}, {&ints}).ok());
  const int64_t* p = reinterpret_cast<const int64_t*>(ints.bytes());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p[i], big);
  TestTensor floats = EmptyTensor(DataType::kFloat32, {2, 3});
  ASSERT_TRUE(RunKernel("ConstantOfShape", {}, {&shape}, {&floats}).ok());  // default 0
  EXPECT_EQ(ToDoubles(floats), std::vector<double>(6, 0.0));
  ASSERT_TRUE(RunKernel("ConstantOfShape", {{"value", 0.5}}, {&shape}, {&floats}).ok());
  EXPECT_EQ(ToDoubles(floats), std::vector<double>(6, 0.5));
  const absl::Status s =
      RunKernel("ConstantOfShape", {{"value_not_carried", int64_t{1}}}, {&shape}, {&floats});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
}

// F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False) and mode="nearest" of
// [[1, 2], [3, 4]], as PyTorch computes them (its documented results for this input).
TEST(ResizeTest, BilinearAndNearestAsPyTorchExportsThem) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
  TestTensor roi = MakeTensor(DataType::kFloat32, {0}, {});
  TestTensor scales = MakeTensor(DataType::kFloat32, {4}, {1, 1, 2, 2});
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 1, 4, 4});
  ASSERT_TRUE(RunKernel("Resize",
                        {{"mode", std::string("linear")},
                         {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}},
                        {&x, &roi, &scales}, {&y})
                  .ok());
  const std::vector<double> bilinear = {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5,
                                        2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0};
  const std::vector<double> got = ToDoubles(y);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], bilinear[i], 1e-6) << i;
  ASSERT_TRUE(RunKernel("Resize",
                        {{"mode", std::string("nearest")},
                         {"coordinate_transformation_mode", std::string("asymmetric")},
                         {"nearest_mode", std::string("floor")}},
                        {&x, &roi, &scales}, {&y})
                  .ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // mode="bicubic" exports cubic with a = -0.75 and pytorch_half_pixel; PyTorch's result
  // (F.interpolate of this input) is exact in binary.
  ASSERT_TRUE(RunKernel("Resize",
                        {{"mode", std::string("cubic")}, {"cubic_coeff_a", -0.75},
                         {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}},
                        {&x, &roi, &scales}, {&y})
                  .ok());
  const std::vector<double> bicubic = {
      0.68359375, 1.015625,  1.5625,    1.89453125, 1.34765625, 1.6796875, 2.2265625, 2.55859375,
      2.44140625, 2.7734375, 3.3203125, 3.65234375, 3.10546875, 3.4375,    3.984375,  4.31640625};
  const std::vector<double> cubic_got = ToDoubles(y);
  for (size_t i = 0; i < cubic_got.size(); ++i) EXPECT_NEAR(cubic_got[i], bicubic[i], 1e-6) << i;
  const absl::Status antialias = RunKernel("Resize", {{"antialias", int64_t{1}}},
                                           {&x, &roi, &scales}, {&y});
  EXPECT_EQ(antialias.code(), absl::StatusCode::kUnimplemented);
}

// F.grid_sample of [[1, 2], [3, 4]] at the corners and the centre, as PyTorch samples them; a
// grid is data, so NaN and huge coordinates read as padding (zeros) and never reach an
// out-of-range conversion (UBSan would report one).
TEST(GridSampleTest, BilinearAsPyTorchAndHostileCoordinatesReadAsPadding) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const double nan = std::nan("");
  TestTensor grid = MakeTensor(DataType::kFloat32, {1, 1, 4, 2},
                               {-1, -1, 0, 0, nan, 0.5, 1e30, -1e30});
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 1, 1, 4});
  ASSERT_TRUE(RunKernel("GridSample", {{"align_corners", int64_t{1}}}, {&x, &grid}, {&y}).ok());
  const std::vector<double> got = ToDoubles(y);
  EXPECT_EQ(got[0], 1.0);  // the top-left corner with align_corners
  EXPECT_EQ(got[1], 2.5);  // the centre: the mean of the four
  EXPECT_TRUE(std::isnan(got[2]) || got[2] == 0.0);
  EXPECT_EQ(got[3], 0.0);
  for (const char* mode : {"nearest", "bicubic"}) {
    SCOPED_TRACE(mode);
    for (const char* padding : {"zeros", "border", "reflection"}) {
      ASSERT_TRUE(RunKernel("GridSample",
                            {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}},
                            {&x, &grid}, {&y})
                      .ok());
    }
  }
}

}  // namespace
}  // namespace memonger::alloc

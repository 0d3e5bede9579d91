// NonZero and NonMaxSuppression beyond the ONNX node tests: the exact-size contract (a count
// other than the planned one is an error unless the run measures), the measured layout within a
// larger planned buffer, half-precision storage, NaN and -0.0, center boxes, thresholds and ties;
// Compress and Unique (no ONNX node test runs them: their cases need sizes the data decides)
// against the ONNX specification's examples and numpy.unique's answers, NaNs included;
// RoiAlign in both coordinate modes against hand-computed samples, and in float16 storage.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernels_cpu.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RunKernel;
using testing::RunKernelMeasuring;
using testing::TestTensor;
using testing::ToDoubles;
using ::testing::HasSubstr;

// Runs `type` with its outputs planned at upper bounds, measuring: the dims each output
// measured and its values in that layout.
struct MeasuredRun {
  absl::Status status;
  std::vector<std::vector<int64_t>> dims;
  std::vector<std::vector<double>> values;
};
MeasuredRun RunMeasuring(const std::string& type, std::vector<graph::Attribute> attrs,
                         std::vector<TestTensor*> inputs, std::vector<TestTensor*> outputs) {
  MeasuredRun r;
  r.status = RunKernelMeasuring(type, std::move(attrs), inputs, outputs, &r.dims);
  for (size_t k = 0; k < r.dims.size() && r.status.ok(); ++k) {
    TestTensor view = *outputs[k];
    view.type.dims = r.dims[k];
    r.values.push_back(ToDoubles(view));
  }
  return r;
}

TEST(NonZeroTest, CoordinatesInRowMajorOrderNanCountsAndNegativeZeroDoesNot) {
  const double nan = std::nan("");
  TestTensor x = MakeTensor(DataType::kFloat16, {2, 3}, {0, 1.5, -0.0, nan, 0, -2});
  TestTensor y = EmptyTensor(DataType::kInt64, {2, 3});
  ASSERT_TRUE(RunKernel("NonZero", {}, {&x}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{0, 1, 1, 1, 0, 2}));

  TestTensor flags = MakeTensor(DataType::kBool, {4}, {1, 0, 0, 1});
  TestTensor at = EmptyTensor(DataType::kInt64, {1, 2});
  ASSERT_TRUE(RunKernel("NonZero", {}, {&flags}, {&at}).ok());
  EXPECT_EQ(ToDoubles(at), (std::vector<double>{0, 3}));
}

TEST(NonZeroTest, AnotherCountThanPlannedIsAnErrorUnlessTheRunMeasures) {
  TestTensor x = MakeTensor(DataType::kFloat32, {4}, {1, 0, 2, 0});
  TestTensor y = EmptyTensor(DataType::kInt64, {1, 4});  // the bound
  const absl::Status s = RunKernel("NonZero", {}, {&x}, {&y});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[1, 2] on this data; the plan has [1, 4]"));

  // Measuring: [2, 2] of a [2, 3] input's coordinates, written as [2, 2] within the bound.
  TestTensor m = MakeTensor(DataType::kFloat32, {2, 3}, {0, 5, 0, 0, 0, 7});
  TestTensor out = EmptyTensor(DataType::kInt64, {2, 6});
  const MeasuredRun r = RunMeasuring("NonZero", {}, {&m}, {&out});
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.dims.size(), 1u);
  EXPECT_EQ(r.dims[0], (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(r.values[0], (std::vector<double>{0, 1, 1, 2}));
}

TEST(CompressTest, SelectsElementsOrSlicesAsTheSpecificationsExamples) {
  TestTensor x = MakeTensor(DataType::kFloat16, {3, 2}, {1, 2, 3, 4, 5, 6});
  TestTensor rows = MakeTensor(DataType::kBool, {3}, {0, 1, 1});
  TestTensor y0 = EmptyTensor(DataType::kFloat16, {2, 2});
  ASSERT_TRUE(RunKernel("Compress", {{"axis", int64_t{0}}}, {&x, &rows}, {&y0}).ok());
  EXPECT_EQ(ToDoubles(y0), (std::vector<double>{3, 4, 5, 6}));
  // A condition shorter than the axis selects nothing past its end; a negative axis.
  TestTensor columns = MakeTensor(DataType::kBool, {1}, {1});
  TestTensor y1 = EmptyTensor(DataType::kFloat16, {3, 1});
  ASSERT_TRUE(RunKernel("Compress", {{"axis", int64_t{-1}}}, {&x, &columns}, {&y1}).ok());
  EXPECT_EQ(ToDoubles(y1), (std::vector<double>{1, 3, 5}));
  TestTensor flat = MakeTensor(DataType::kBool, {5}, {0, 1, 0, 0, 1});
  TestTensor y2 = EmptyTensor(DataType::kFloat16, {2});
  ASSERT_TRUE(RunKernel("Compress", {}, {&x, &flat}, {&y2}).ok());
  EXPECT_EQ(ToDoubles(y2), (std::vector<double>{2, 5}));

  TestTensor too_long = MakeTensor(DataType::kBool, {4}, {1, 1, 1, 1});
  const absl::Status s = RunKernel("Compress", {{"axis", int64_t{0}}}, {&x, &too_long}, {&y0});
  EXPECT_THAT(s.message(), HasSubstr("4 entries for 3 slices"));

  // Measured within the bound [3, 2]: the rows kept, as [1, 2].
  TestTensor bound = EmptyTensor(DataType::kFloat16, {3, 2});
  TestTensor last = MakeTensor(DataType::kBool, {3}, {0, 0, 1});
  const MeasuredRun r = RunMeasuring("Compress", {{"axis", int64_t{0}}}, {&x, &last}, {&bound});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.dims[0], (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.values[0], (std::vector<double>{5, 6}));
}

// Y, indices, inverse_indices, counts of Unique on `x`, planned at the exact sizes.
std::vector<std::vector<double>> UniqueOf(TestTensor x, std::vector<graph::Attribute> attrs,
                                          std::vector<int64_t> y_dims) {
  const int64_t distinct = y_dims.empty() ? 0 : y_dims[0];
  const int64_t n = static_cast<int64_t>(ToDoubles(x).size());
  TestTensor y = EmptyTensor(x.type.dtype, y_dims);
  TestTensor indices = EmptyTensor(DataType::kInt64, {distinct});
  TestTensor inverse = EmptyTensor(DataType::kInt64, {n});
  TestTensor counts = EmptyTensor(DataType::kInt64, {distinct});
  const absl::Status s = RunKernel("Unique", attrs, {&x}, {&y, &indices, &inverse, &counts});
  EXPECT_TRUE(s.ok()) << s;
  return {ToDoubles(y), ToDoubles(indices), ToDoubles(inverse), ToDoubles(counts)};
}

TEST(UniqueTest, FlattenedSortedOrInOrderOfFirstOccurrence) {
  const TestTensor x = MakeTensor(DataType::kInt32, {2, 3}, {2, 1, 1, 3, 4, 3});
  EXPECT_EQ(UniqueOf(x, {{"sorted", int64_t{0}}}, {4}),
            (std::vector<std::vector<double>>{{2, 1, 3, 4}, {0, 1, 3, 4}, {0, 1, 1, 2, 3, 2},
                                              {1, 2, 2, 1}}));
  EXPECT_EQ(UniqueOf(x, {}, {4}),
            (std::vector<std::vector<double>>{{1, 2, 3, 4}, {1, 0, 3, 4}, {1, 0, 0, 2, 3, 2},
                                              {2, 1, 2, 1}}));
  // As numpy.unique: NaNs are one value, after every number.
  const double nan = std::nan("");
  const std::vector<std::vector<double>> f =
      UniqueOf(MakeTensor(DataType::kFloat16, {4}, {nan, 1, nan, -1}), {}, {3});
  EXPECT_EQ(f[0][0], -1);
  EXPECT_EQ(f[0][1], 1);
  EXPECT_TRUE(std::isnan(f[0][2]));
  EXPECT_EQ(f[1], (std::vector<double>{3, 1, 0}));
  EXPECT_EQ(f[2], (std::vector<double>{2, 1, 2, 0}));
  EXPECT_EQ(f[3], (std::vector<double>{1, 1, 2}));
}

TEST(UniqueTest, SlicesAlongAnAxisAreComparedLexicographically) {
  TestTensor rows = MakeTensor(DataType::kFloat32, {3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 3});
  TestTensor indices = EmptyTensor(DataType::kInt64, {2});
  TestTensor inverse = EmptyTensor(DataType::kInt64, {3});
  TestTensor counts = EmptyTensor(DataType::kInt64, {2});
  ASSERT_TRUE(
      RunKernel("Unique", {{"axis", int64_t{0}}}, {&rows}, {&y, &indices, &inverse, &counts})
          .ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{1, 0, 0, 2, 3, 4}));
  EXPECT_EQ(ToDoubles(indices), (std::vector<double>{0, 2}));
  EXPECT_EQ(ToDoubles(inverse), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(ToDoubles(counts), (std::vector<double>{2, 1}));

  // The specification's axis = 1 example: [2, 4, 2], slices [:, j, :].
  TestTensor x = MakeTensor(DataType::kInt64, {2, 4, 2},
                            {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1});
  TestTensor bound = EmptyTensor(DataType::kInt64, {2, 4, 2});
  TestTensor at = EmptyTensor(DataType::kInt64, {4});
  TestTensor back = EmptyTensor(DataType::kInt64, {4});
  TestTensor many = EmptyTensor(DataType::kInt64, {4});
  const MeasuredRun r =
      RunMeasuring("Unique", {{"axis", int64_t{1}}}, {&x}, {&bound, &at, &back, &many});
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.dims, (std::vector<std::vector<int64_t>>{{2, 3, 2}, {3}, {4}, {3}}));
  EXPECT_EQ(r.values[0], (std::vector<double>{0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1}));
  EXPECT_EQ(r.values[1], (std::vector<double>{1, 0, 2}));
  EXPECT_EQ(r.values[2], (std::vector<double>{1, 0, 2, 0}));
  EXPECT_EQ(r.values[3], (std::vector<double>{2, 1, 1}));

  // Planned exactly, another count is an error.
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {3, 3});
  EXPECT_THAT(RunKernel("Unique", {{"axis", int64_t{0}}}, {&rows}, {&wrong}).message(),
              HasSubstr("[2, 3] on this data; the plan has [3, 3]"));
}

// Three boxes of one class (corners [y1, x1, y2, x2]): 0 and 1 overlap by IoU 0.6, 2 is apart.
TestTensor Boxes(DataType dtype) {
  return MakeTensor(dtype, {1, 3, 4}, {0, 0, 10, 10, 0, 2.5, 10, 12.5, 20, 20, 30, 30});
}

std::vector<double> Nms(const TestTensor& boxes, std::vector<double> scores, double iou,
                        int64_t max_per_class, int64_t expected_count,
                        std::vector<graph::Attribute> attrs = {}) {
  TestTensor s = MakeTensor(DataType::kFloat32, {1, 1, 3}, scores);
  TestTensor max = MakeTensor(DataType::kInt64, {1}, {static_cast<double>(max_per_class)});
  TestTensor threshold = MakeTensor(DataType::kFloat32, {1}, {iou});
  TestTensor out = EmptyTensor(DataType::kInt64, {expected_count, 3});
  TestTensor b = boxes;
  const absl::Status status =
      RunKernel("NonMaxSuppression", attrs, {&b, &s, &max, &threshold}, {&out});
  EXPECT_TRUE(status.ok()) << status;
  return ToDoubles(out);
}

TEST(NonMaxSuppressionTest, SuppressesAboveTheIouThresholdInScoreOrder) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(static_cast<int>(dtype));
    // Box 1 scores highest and suppresses box 0 (IoU 0.6 > 0.5); box 2 stays.
    EXPECT_EQ(Nms(Boxes(dtype), {0.8, 0.9, 0.3}, 0.5, 10, 2),
              (std::vector<double>{0, 0, 1, 0, 0, 2}));
    // At IoU 0.7 nothing overlaps enough.
    EXPECT_EQ(Nms(Boxes(dtype), {0.8, 0.9, 0.3}, 0.7, 10, 3),
              (std::vector<double>{0, 0, 1, 0, 0, 0, 0, 0, 2}));
    // Ties go to the lower index; at most one per class.
    EXPECT_EQ(Nms(Boxes(dtype), {0.5, 0.5, 0.5}, 0.7, 1, 1), (std::vector<double>{0, 0, 0}));
  }
  // The same boxes as centres and sizes.
  TestTensor centres = MakeTensor(DataType::kFloat32, {1, 3, 4},
                                  {5, 5, 10, 10, 7.5, 5, 10, 10, 25, 25, 10, 10});
  EXPECT_EQ(Nms(centres, {0.8, 0.9, 0.3}, 0.5, 10, 2, {{"center_point_box", int64_t{1}}}),
            (std::vector<double>{0, 0, 1, 0, 0, 2}));
}

TEST(NonMaxSuppressionTest, ScoreThresholdAndAnOmittedMaximumSelectNothingBelowIt) {
  TestTensor b = Boxes(DataType::kFloat32);
  TestTensor s = MakeTensor(DataType::kFloat32, {1, 1, 3}, {0.8, 0.9, 0.3});
  TestTensor max = MakeTensor(DataType::kInt64, {1}, {10});
  TestTensor iou = MakeTensor(DataType::kFloat32, {1}, {0.7});
  TestTensor score = MakeTensor(DataType::kFloat32, {1}, {0.5});
  TestTensor two = EmptyTensor(DataType::kInt64, {2, 3});
  ASSERT_TRUE(RunKernel("NonMaxSuppression", {}, {&b, &s, &max, &iou, &score}, {&two}).ok());
  EXPECT_EQ(ToDoubles(two), (std::vector<double>{0, 0, 1, 0, 0, 0}));
  // max_output_boxes_per_class omitted: ONNX's default 0 selects none.
  TestTensor none = EmptyTensor(DataType::kInt64, {0, 3});
  ASSERT_TRUE(RunKernel("NonMaxSuppression", {}, {&b, &s}, {&none}).ok());
}

// X [1, 1, 4, 4] holding 10 y + x: bilinear samples of it are exact, so a bin's mean is the
// value at the mean of its sample points.
TEST(RoiAlignTest, BothCoordinateModesSampleWhereTorchvisionDoes) {
  std::vector<double> ramp;
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) ramp.push_back(10 * y + x);
  }
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(static_cast<int>(dtype));
    TestTensor x = MakeTensor(dtype, {1, 1, 4, 4}, ramp);
    TestTensor rois = MakeTensor(dtype, {1, 4}, {0, 0, 2, 2});
    TestTensor batch = MakeTensor(DataType::kInt64, {1}, {0});
    const std::vector<graph::Attribute> common = {
        {"output_height", int64_t{1}}, {"output_width", int64_t{1}},
        {"sampling_ratio", int64_t{2}}};
    // output_half_pixel (aligned=False): samples at 0.5 and 1.5 per axis, mean at (1, 1): 11.
    TestTensor y = EmptyTensor(dtype, {1, 1, 1, 1});
    std::vector<graph::Attribute> attrs = common;
    attrs.push_back({"coordinate_transformation_mode", std::string("output_half_pixel")});
    ASSERT_TRUE(RunKernel("RoiAlign", attrs, {&x, &rois, &batch}, {&y}).ok());
    EXPECT_DOUBLE_EQ(ToDoubles(y)[0], 11);
    // half_pixel (aligned=True, the default): half a pixel back, samples at 0 and 1: 5.5.
    ASSERT_TRUE(RunKernel("RoiAlign", common, {&x, &rois, &batch}, {&y}).ok());
    EXPECT_DOUBLE_EQ(ToDoubles(y)[0], 5.5);
  }
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 1, 4, 4}, ramp);
  TestTensor rois = MakeTensor(DataType::kFloat32, {1, 4}, {0, 0, 2, 2});
  TestTensor bad_batch = MakeTensor(DataType::kInt64, {1}, {1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 1, 1, 1});
  EXPECT_THAT(RunKernel("RoiAlign", {}, {&x, &rois, &bad_batch}, {&y}).message(),
              HasSubstr("batch index 1"));
  EXPECT_EQ(RunKernel("RoiAlign", {{"mode", std::string("max")}}, {&x, &rois, &bad_batch}, {&y})
                .code(),
            absl::StatusCode::kUnimplemented);
  // Hostile regions: not finite (bins of 0, no read outside X), or too many samples a bin.
  TestTensor batch = MakeTensor(DataType::kInt64, {2}, {0, 0});
  const double nan = std::nan(""), inf = HUGE_VAL;
  TestTensor odd = MakeTensor(DataType::kFloat32, {2, 4}, {nan, 0, 2, 2, 0, 0, inf, 2});
  TestTensor two = EmptyTensor(DataType::kFloat32, {2, 1, 1, 1});
  ASSERT_TRUE(RunKernel("RoiAlign", {}, {&x, &odd, &batch}, {&two}).ok());
  EXPECT_EQ(ToDoubles(two), (std::vector<double>{0, 0}));
  TestTensor huge = MakeTensor(DataType::kFloat32, {1, 4}, {0, 0, 1e9, 1e9});
  TestTensor one_batch = MakeTensor(DataType::kInt64, {1}, {0});
  EXPECT_THAT(RunKernel("RoiAlign", {}, {&x, &huge, &one_batch}, {&y}).message(),
              HasSubstr("samples per bin"));
}

}  // namespace
}  // namespace memonger::alloc

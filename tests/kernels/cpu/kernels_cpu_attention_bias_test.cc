// AddAttentionBias and PadLastDim (kernels_cpu_attention_bias.cc): a padded bias read with its
// row stride, broadcast over the batch, in place over S; PadLastDim's zero tail; refusals.
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
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

class AddAttentionBiasTest : public ::testing::TestWithParam<DataType> {};

TEST_P(AddAttentionBiasTest, AddsTheFirstLEntriesOfEachPaddedRowInPlace) {
  const DataType dtype = GetParam();
  const int64_t b = 2, h = 3, l = 5, lp = 8;
  TestTensor s = MakeTensor(dtype, {b, h, l, l}, RandomValues(b * h * l * l, 1));
  TestTensor bias = MakeTensor(dtype, {1, h, l, lp}, RandomValues(h * l * lp, 2));
  const std::vector<double> sv = ToDoubles(s), bv = ToDoubles(bias);
  std::vector<double> expected(sv.size());
  for (int64_t n = 0; n < b; ++n)
    for (int64_t k = 0; k < h; ++k)
      for (int64_t i = 0; i < l; ++i)
        for (int64_t j = 0; j < l; ++j) {
          const int64_t at = ((n * h + k) * l + i) * l + j;
          expected[at] = sv[at] + bv[(k * l + i) * lp + j];
        }
  ASSERT_TRUE(RunKernel("AddAttentionBias", {}, {&s, &bias}, {&s}).ok());  // in place
  const double rtol = dtype == DataType::kFloat32 ? 1e-7 : dtype == DataType::kFloat16 ? 1e-3 : 8e-3;
  EXPECT_EQ(CompareClose(ToDoubles(s), expected, rtol, 1e-3), "");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AddAttentionBiasTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16));

TEST(AddAttentionBiasTest, RefusesABiasThatDoesNotFit) {
  TestTensor s = MakeTensor(DataType::kFloat32, {1, 2, 4, 4}, RandomValues(32, 1));
  TestTensor short_rows = MakeTensor(DataType::kFloat32, {1, 2, 4, 3}, RandomValues(24, 2));
  TestTensor other_type = MakeTensor(DataType::kFloat16, {1, 2, 4, 4}, RandomValues(32, 3));
  TestTensor out = EmptyTensor(DataType::kFloat32, {1, 2, 4, 4});
  EXPECT_EQ(RunKernel("AddAttentionBias", {}, {&s, &short_rows}, {&out}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunKernel("AddAttentionBias", {}, {&s, &other_type}, {&out}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PadLastDimTest, CopiesRowsAndZeroesTheTail) {
  TestTensor x = MakeTensor(DataType::kBFloat16, {2, 3}, {1, 2, 3, 4, 5, 6});
  TestTensor y = EmptyTensor(DataType::kBFloat16, {2, 8});
  ASSERT_TRUE(RunKernel("PadLastDim", {{"multiple", int64_t{8}}}, {&x}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{1, 2, 3, 0, 0, 0, 0, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
  TestTensor wrong = EmptyTensor(DataType::kBFloat16, {2, 4});
  EXPECT_EQ(RunKernel("PadLastDim", {{"multiple", int64_t{8}}}, {&x}, {&wrong}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunKernel("PadLastDim", {}, {&x}, {&y}).code(), absl::StatusCode::kInvalidArgument);
  // The output must not overlap the input.
  EXPECT_EQ(RunKernel("PadLastDim", {{"multiple", int64_t{3}}}, {&x}, {&x}).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace memonger::alloc

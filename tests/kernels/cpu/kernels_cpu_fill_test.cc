// ConstantFill (kernels_cpu_fill.cc): the value rounded to each element type, the optional
// input unread, a value an integer type cannot hold refused.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

TEST(ConstantFillTest, FillsEveryElementTypeWithTheRoundedValue) {
  struct Case {
    DataType dtype;
    double value, expected;
  };
  for (const Case& c : {Case{DataType::kFloat32, 1.0, 1.0}, Case{DataType::kFloat16, 0.1, 0.0999755859375},
                        Case{DataType::kBFloat16, 3.14159, 3.140625}, Case{DataType::kFloat64, 0.1, 0.1},
                        Case{DataType::kInt32, -7.9, -7}, Case{DataType::kInt64, 3, 3},
                        Case{DataType::kBool, 2, 1}}) {
    SCOPED_TRACE(graph::DataTypeName(c.dtype));
    TestTensor shape_source = MakeTensor(DataType::kFloat32, {2, 3}, std::vector<double>(6, 9));
    TestTensor y = EmptyTensor(c.dtype, {2, 3});
    ASSERT_TRUE(RunKernel("ConstantFill", {{"value", c.value}}, {&shape_source}, {&y}).ok());
    EXPECT_EQ(ToDoubles(y), std::vector<double>(6, c.expected));
  }
  TestTensor scalar = EmptyTensor(DataType::kFloat32, {});
  ASSERT_TRUE(RunKernel("ConstantFill", {}, {}, {&scalar}).ok());
  EXPECT_EQ(ToDoubles(scalar), std::vector<double>{0});
  TestTensor small = EmptyTensor(DataType::kUInt8, {2});
  EXPECT_EQ(RunKernel("ConstantFill", {{"value", 300.0}}, {}, {&small}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memonger::alloc

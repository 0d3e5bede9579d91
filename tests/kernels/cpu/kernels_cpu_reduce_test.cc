// Reductions: axes from the attribute or the second input, keepdims, all axes, the no-op form,
// integer sums, float16 accumulated in float32.
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::Attribute;
using graph::DataType;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

struct ReduceCase {
  const char* name;
  const char* op;
  std::vector<Attribute> attrs;
  std::vector<int64_t> axes_input;  // empty: no second input
  std::vector<int64_t> out_dims;
  std::vector<double> expected;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const ReduceCase& c, std::ostream* os) { *os << c.name; }

class ReduceKernelTest : public ::testing::TestWithParam<ReduceCase> {};

// X [2, 3] = [[1, 2, 3], [4, 5, 6]].
TEST_P(ReduceKernelTest, Reduces) {
  const ReduceCase& c = GetParam();
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kInt64}) {
    if (dtype == DataType::kInt64 && std::string(c.op) == "ReduceMean") continue;
    SCOPED_TRACE(graph::DataTypeName(dtype));
    TestTensor x = MakeTensor(dtype, {2, 3}, {1, 2, 3, 4, 5, 6});
    TestTensor axes = MakeTensor(DataType::kInt64, {static_cast<int64_t>(c.axes_input.size())},
                                 std::vector<double>(c.axes_input.begin(), c.axes_input.end()));
    TestTensor y = EmptyTensor(dtype, c.out_dims);
    std::vector<TestTensor*> inputs = {&x};
    if (!c.axes_input.empty()) inputs.push_back(&axes);
    const absl::Status s = RunKernel(c.op, c.attrs, inputs, {&y});
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(ToDoubles(y), c.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ReduceKernelTest,
    ::testing::Values(
        ReduceCase{"sum_rows_attr", "ReduceSum", {{"axes", std::vector<int64_t>{1}}}, {}, {2, 1}, {6, 15}},
        ReduceCase{"sum_cols_input_no_keepdims", "ReduceSum", {{"keepdims", int64_t{0}}}, {0}, {3}, {5, 7, 9}},
        ReduceCase{"sum_all", "ReduceSum", {}, {}, {1, 1}, {21}},
        ReduceCase{"sum_negative_axis", "ReduceSum", {{"axes", std::vector<int64_t>{-1}}}, {}, {2, 1}, {6, 15}},
        ReduceCase{"mean_rows", "ReduceMean", {{"axes", std::vector<int64_t>{1}}}, {}, {2, 1}, {2, 5}},
        ReduceCase{"max_cols", "ReduceMax", {{"axes", std::vector<int64_t>{0}}}, {}, {1, 3}, {4, 5, 6}},
        ReduceCase{"min_all", "ReduceMin", {{"keepdims", int64_t{0}}}, {}, {}, {1}},
        ReduceCase{"prod_rows", "ReduceProd", {{"axes", std::vector<int64_t>{1}}}, {}, {2, 1}, {6, 120}},
        ReduceCase{"l1_cols", "ReduceL1", {{"axes", std::vector<int64_t>{0}}}, {}, {1, 3}, {5, 7, 9}},
        ReduceCase{"noop_with_empty_axes", "ReduceSum", {{"noop_with_empty_axes", int64_t{1}}}, {}, {2, 3},
                   {1, 2, 3, 4, 5, 6}}),
    [](const ::testing::TestParamInfo<ReduceCase>& info) { return info.param.name; });

TEST(ReduceKernelTest, Float16SumsAreAccumulatedInFloat32) {
  // 4096 ones: float16 accumulation would stop at 2048.
  TestTensor x = MakeTensor(DataType::kFloat16, {4096}, std::vector<double>(4096, 1.0));
  TestTensor y = EmptyTensor(DataType::kFloat16, {1});
  ASSERT_TRUE(RunKernel("ReduceSum", {}, {&x}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y)[0], 4096);
  EXPECT_EQ(RunKernel("ReduceSum", {}, {&x}, {&x}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ReduceKernelTest, LogSumExpAndArgMax) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 2}, {1000, 1000, 0, 2});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 1});
  ASSERT_TRUE(RunKernel("ReduceLogSumExp", {{"axes", std::vector<int64_t>{1}}}, {&x}, {&y}).ok());
  const std::vector<double> v = ToDoubles(y);
  EXPECT_NEAR(v[0], 1000 + std::log(2.0), 1e-3);  // no overflow
  EXPECT_NEAR(v[1], std::log(1 + std::exp(2.0)), 1e-6);
  TestTensor idx = EmptyTensor(DataType::kInt64, {2});
  ASSERT_TRUE(RunKernel("ArgMax", {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}, {&x}, {&idx}).ok());
  EXPECT_EQ(ToDoubles(idx), (std::vector<double>{0, 1}));
  ASSERT_TRUE(RunKernel("ArgMax", {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}}, {&x}, {&idx}).ok());
  EXPECT_EQ(ToDoubles(idx), (std::vector<double>{1, 1}));
}

}  // namespace
}  // namespace memonger::alloc

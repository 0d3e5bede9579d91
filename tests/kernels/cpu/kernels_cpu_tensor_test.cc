// Layout and copy kernels: Transpose, copies and views (nothing written when the output is the
// input's address), Concat, Split, Slice (inputs, attributes, negative steps, omitted optional
// inputs), Pad (constant value, cropping), Gather, Expand, Shape; refusal of aliased outputs.
#include <numeric>
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

std::vector<double> Iota(int n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}

TEST(TensorKernelTest, TransposeWithPermAndByDefault) {
  for (DataType dtype : {DataType::kFloat16, DataType::kFloat32, DataType::kInt64, DataType::kUInt8}) {
    SCOPED_TRACE(graph::DataTypeName(dtype));
    TestTensor x = MakeTensor(dtype, {2, 3, 4}, Iota(24));
    TestTensor y = EmptyTensor(dtype, {3, 4, 2});
    ASSERT_TRUE(RunKernel("Transpose", {{"perm", std::vector<int64_t>{1, 2, 0}}}, {&x}, {&y}).ok());
    std::vector<double> expected;
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        for (int i = 0; i < 2; ++i) expected.push_back(i * 12 + j * 4 + k);
    EXPECT_EQ(ToDoubles(y), expected);
    TestTensor r = EmptyTensor(dtype, {4, 3, 2});
    ASSERT_TRUE(RunKernel("Transpose", {}, {&x}, {&r}).ok());
    EXPECT_EQ(ToDoubles(r)[1], 12);  // r[0][0][1] = x[1][0][0]
    EXPECT_EQ(RunKernel("Transpose", {}, {&x}, {&x}).code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(TensorKernelTest, CopiesAndViews) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 3}, Iota(6));
  TestTensor y = EmptyTensor(DataType::kFloat32, {3, 2});
  ASSERT_TRUE(RunKernel("Reshape", {{"shape", std::vector<int64_t>{3, 2}}}, {&x}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), Iota(6));
  // A view: input and output at one address; nothing changes.
  ASSERT_TRUE(RunKernel("Flatten", {}, {&x}, {&x}).ok());
  EXPECT_EQ(ToDoubles(x), Iota(6));
  // Caffe2's Reshape writes old_shape.
  TestTensor old_shape = EmptyTensor(DataType::kInt64, {2});
  ASSERT_TRUE(RunKernel("Reshape", {}, {&x}, {&y, &old_shape}).ok());
  EXPECT_EQ(ToDoubles(old_shape), (std::vector<double>{2, 3}));
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {7});
  EXPECT_EQ(RunKernel("Squeeze", {}, {&x}, {&wrong}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorKernelTest, ConcatAndSplitAreInverse) {
  TestTensor a = MakeTensor(DataType::kBFloat16, {2, 1, 3}, Iota(6));
  TestTensor b = MakeTensor(DataType::kBFloat16, {2, 2, 3}, std::vector<double>(12, 7));
  TestTensor c = EmptyTensor(DataType::kBFloat16, {2, 3, 3});
  ASSERT_TRUE(RunKernel("Concat", {{"axis", int64_t{-2}}}, {&a, &b}, {&c}).ok());
  EXPECT_EQ(ToDoubles(c), (std::vector<double>{0, 1, 2, 7, 7, 7, 7, 7, 7, 3, 4, 5, 7, 7, 7, 7, 7, 7}));
  TestTensor a2 = EmptyTensor(DataType::kBFloat16, {2, 1, 3});
  TestTensor b2 = EmptyTensor(DataType::kBFloat16, {2, 2, 3});
  ASSERT_TRUE(RunKernel("Split", {{"axis", int64_t{1}}}, {&c}, {&a2, &b2}).ok());
  EXPECT_EQ(ToDoubles(a2), ToDoubles(a));
  EXPECT_EQ(ToDoubles(b2), ToDoubles(b));
  // Caffe2's add_axis stacks along a new axis; Split with add_axis takes it apart again.
  TestTensor p = MakeTensor(DataType::kFloat32, {2}, {1, 2});
  TestTensor q = MakeTensor(DataType::kFloat32, {2}, {3, 4});
  TestTensor stacked = EmptyTensor(DataType::kFloat32, {2, 2});
  ASSERT_TRUE(RunKernel("Concat", {{"axis", int64_t{1}}, {"add_axis", int64_t{1}}}, {&p, &q}, {&stacked}).ok());
  EXPECT_EQ(ToDoubles(stacked), (std::vector<double>{1, 3, 2, 4}));
  TestTensor p2 = EmptyTensor(DataType::kFloat32, {2});
  TestTensor q2 = EmptyTensor(DataType::kFloat32, {2});
  ASSERT_TRUE(RunKernel("Split", {{"axis", int64_t{1}}, {"add_axis", int64_t{1}}}, {&stacked}, {&p2, &q2}).ok());
  EXPECT_EQ(ToDoubles(p2), ToDoubles(p));
  EXPECT_EQ(ToDoubles(q2), ToDoubles(q));
  // ONNX Split without an axis: 0 (the outputs are not pieces along 1).
  TestTensor top = EmptyTensor(DataType::kFloat32, {1, 2});
  TestTensor bottom = EmptyTensor(DataType::kFloat32, {1, 2});
  ASSERT_TRUE(RunKernel("Split", {}, {&stacked}, {&top, &bottom}).ok());
  EXPECT_EQ(ToDoubles(top), (std::vector<double>{1, 3}));
  // Caffe2's split_info output.
  TestTensor info = EmptyTensor(DataType::kInt32, {2});
  ASSERT_TRUE(RunKernel("Concat", {{"axis", int64_t{1}}}, {&a, &b}, {&c, &info}).ok());
  EXPECT_EQ(ToDoubles(info), (std::vector<double>{1, 2}));
}

struct SliceCase {
  const char* name;
  std::vector<int64_t> starts, ends, axes, steps;  // axes/steps empty: omitted
  std::vector<int64_t> out_dims;
  std::vector<double> expected;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const SliceCase& c, std::ostream* os) { *os << c.name; }

class SliceKernelTest : public ::testing::TestWithParam<SliceCase> {};

// X [3, 4] = 0..11.
TEST_P(SliceKernelTest, SlicesLikeOnnx) {
  const SliceCase& c = GetParam();
  TestTensor x = MakeTensor(DataType::kFloat32, {3, 4}, Iota(12));
  auto ints = [](const std::vector<int64_t>& v) {
    return MakeTensor(DataType::kInt64, {static_cast<int64_t>(v.size())},
                      std::vector<double>(v.begin(), v.end()));
  };
  TestTensor starts = ints(c.starts), ends = ints(c.ends), axes = ints(c.axes), steps = ints(c.steps);
  TestTensor y = EmptyTensor(DataType::kFloat32, c.out_dims);
  std::vector<TestTensor*> inputs = {&x, &starts, &ends};
  std::vector<Attribute> attrs;
  if (!c.axes.empty()) inputs.push_back(&axes);
  if (!c.steps.empty()) {
    inputs.push_back(&steps);
    if (c.axes.empty()) attrs.push_back({"onnx_input_slots", std::vector<int64_t>{0, 1, 2, 4}});
  }
  const absl::Status s = RunKernel("Slice", attrs, inputs, {&y});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ToDoubles(y), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SliceKernelTest,
    ::testing::Values(
        SliceCase{"rows", {1}, {3}, {0}, {}, {2, 4}, {4, 5, 6, 7, 8, 9, 10, 11}},
        SliceCase{"both_axes", {0, 1}, {2, 3}, {}, {}, {2, 2}, {1, 2, 5, 6}},
        SliceCase{"negative_and_clamped", {-1}, {1000}, {1}, {}, {3, 1}, {3, 7, 11}},
        SliceCase{"reverse_columns", {-1}, {-1000}, {1}, {-1}, {3, 4},
                  {3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}},
        SliceCase{"steps_without_axes", {0, 0}, {3, 4}, {}, {2, 3}, {2, 2}, {0, 3, 8, 11}},
        SliceCase{"empty", {2}, {1}, {0}, {}, {0, 4}, {}}),
    [](const ::testing::TestParamInfo<SliceCase>& info) { return info.param.name; });

TEST(TensorKernelTest, SliceOpset1Attributes) {
  TestTensor x = MakeTensor(DataType::kFloat32, {3, 4}, Iota(12));
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 2});
  ASSERT_TRUE(RunKernel("Slice",
                        {{"starts", std::vector<int64_t>{2, 1}}, {"ends", std::vector<int64_t>{3, 3}}},
                        {&x}, {&y})
                  .ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{9, 10}));
}

TEST(TensorKernelTest, PadConstantAndCrop) {
  TestTensor x = MakeTensor(DataType::kFloat16, {2, 3}, Iota(6));
  TestTensor pads = MakeTensor(DataType::kInt64, {4}, {1, -1, 0, 1});  // rows +1 before; cols -1 before, +1 after
  TestTensor value = MakeTensor(DataType::kFloat16, {}, {9});
  TestTensor y = EmptyTensor(DataType::kFloat16, {3, 3});
  ASSERT_TRUE(RunKernel("Pad", {}, {&x, &pads, &value}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{9, 9, 9, 1, 2, 9, 4, 5, 9}));
  // Opset 2: attributes.
  TestTensor y2 = EmptyTensor(DataType::kFloat16, {2, 5});
  ASSERT_TRUE(RunKernel("Pad", {{"pads", std::vector<int64_t>{0, 1, 0, 1}}, {"value", 0.5}}, {&x}, {&y2}).ok());
  EXPECT_EQ(ToDoubles(y2), (std::vector<double>{0.5, 0, 1, 2, 0.5, 0.5, 3, 4, 5, 0.5}));
  ASSERT_TRUE(RunKernel("Pad", {{"pads", std::vector<int64_t>{0, 1, 0, 1}}, {"mode", std::string("reflect")}},
                        {&x}, {&y2})
                  .ok());
  EXPECT_EQ(ToDoubles(y2), (std::vector<double>{1, 0, 1, 2, 1, 4, 3, 4, 5, 4}));
  EXPECT_EQ(RunKernel("Pad", {{"pads", std::vector<int64_t>{0, 1, 0, 1}}, {"mode", std::string("wrap")}},
                      {&x}, {&y2})
                .code(),
            absl::StatusCode::kUnimplemented);
}

TEST(TensorKernelTest, GatherExpandShape) {
  TestTensor data = MakeTensor(DataType::kFloat32, {3, 2}, Iota(6));
  TestTensor idx = MakeTensor(DataType::kInt64, {2, 2}, {2, -3, 1, 1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 2, 2});
  ASSERT_TRUE(RunKernel("Gather", {}, {&data, &idx}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{4, 5, 0, 1, 2, 3, 2, 3}));
  TestTensor col_idx = MakeTensor(DataType::kInt32, {1}, {1});
  TestTensor y2 = EmptyTensor(DataType::kFloat32, {3, 1});
  ASSERT_TRUE(RunKernel("Gather", {{"axis", int64_t{1}}}, {&data, &col_idx}, {&y2}).ok());
  EXPECT_EQ(ToDoubles(y2), (std::vector<double>{1, 3, 5}));
  TestTensor bad = MakeTensor(DataType::kInt64, {1}, {3});
  TestTensor y3 = EmptyTensor(DataType::kFloat32, {1, 2});
  EXPECT_EQ(RunKernel("Gather", {}, {&data, &bad}, {&y3}).code(), absl::StatusCode::kInvalidArgument);

  TestTensor row = MakeTensor(DataType::kFloat32, {1, 2}, {7, 8});
  TestTensor e = EmptyTensor(DataType::kFloat32, {2, 2, 2});
  ASSERT_TRUE(RunKernel("Expand", {}, {&row}, {&e}).ok());
  EXPECT_EQ(ToDoubles(e), (std::vector<double>{7, 8, 7, 8, 7, 8, 7, 8}));

  TestTensor shape = EmptyTensor(DataType::kInt64, {2});
  ASSERT_TRUE(RunKernel("Shape", {{"start", int64_t{1}}}, {&e}, {&shape}).ok());
  EXPECT_EQ(ToDoubles(shape), (std::vector<double>{2, 2}));
}

TEST(TensorKernelTest, TileTriluSize) {
  TestTensor x = MakeTensor(DataType::kInt64, {2, 2}, {1, 2, 3, 4});
  TestTensor tiled = EmptyTensor(DataType::kInt64, {2, 4});
  TestTensor repeats = MakeTensor(DataType::kInt64, {2}, {1, 2});
  ASSERT_TRUE(RunKernel("Tile", {}, {&x, &repeats}, {&tiled}).ok());
  EXPECT_EQ(ToDoubles(tiled), (std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4}));
  TestTensor m = MakeTensor(DataType::kFloat32, {3, 3}, Iota(9));
  TestTensor lower = EmptyTensor(DataType::kFloat32, {3, 3});
  ASSERT_TRUE(RunKernel("Trilu", {{"upper", int64_t{0}}}, {&m}, {&lower}).ok());
  EXPECT_EQ(ToDoubles(lower), (std::vector<double>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  TestTensor k = MakeTensor(DataType::kInt64, {}, {1});
  ASSERT_TRUE(RunKernel("Trilu", {}, {&m, &k}, {&m}).ok());  // in place, upper, k = 1
  EXPECT_EQ(ToDoubles(m), (std::vector<double>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  TestTensor size = EmptyTensor(DataType::kInt64, {});
  ASSERT_TRUE(RunKernel("Size", {}, {&tiled}, {&size}).ok());
  EXPECT_EQ(ToDoubles(size), (std::vector<double>{8}));
}

}  // namespace
}  // namespace memonger::alloc

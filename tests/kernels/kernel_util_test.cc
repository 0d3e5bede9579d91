// Kernel helpers: strided loops visit every index once with merged dims, broadcasting strides,
// axes, attributes of the wrong kind, integer inputs, overlap checks.
#include "kernels/kernel_util.h"

#include <map>
#include <ostream>
#include <vector>

#include "graph/graph.h"
#include "gtest/gtest.h"

namespace memonger::alloc::kernel_internal {
namespace {

struct StridedCase {
  const char* name;
  Dims dims;
  Dims in;  // an input broadcast to dims
  int expected_runs;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const StridedCase& c, std::ostream* os) { *os << c.name; }

class ForEachStridedTest : public ::testing::TestWithParam<StridedCase> {};

TEST_P(ForEachStridedTest, VisitsEveryIndexOnceInRowMajorOrder) {
  const StridedCase& c = GetParam();
  const std::array<Dims, 2> strides{Strides(c.dims), BroadcastStrides(c.in, c.dims)};
  std::vector<int64_t> out_offsets, in_offsets;
  int runs = 0;
  ForEachStrided<2>(c.dims, strides,
                    [&](int64_t n, const std::array<int64_t, 2>& base,
                        const std::array<int64_t, 2>& step) {
                      ++runs;
                      for (int64_t i = 0; i < n; ++i) {
                        out_offsets.push_back(base[0] + i * step[0]);
                        in_offsets.push_back(base[1] + i * step[1]);
                      }
                    });
  const int64_t count = NumElements(c.dims);
  ASSERT_EQ(static_cast<int64_t>(out_offsets.size()), count);
  for (int64_t i = 0; i < count; ++i) {
    EXPECT_EQ(out_offsets[i], i);
    // The input offset of multi-index i, computed directly.
    int64_t rest = i, expected = 0;
    for (size_t d = c.dims.size(); d-- > 0;) {
      expected += (rest % c.dims[d]) * strides[1][d];
      rest /= c.dims[d];
    }
    EXPECT_EQ(in_offsets[i], expected) << i;
  }
  EXPECT_EQ(runs, c.expected_runs);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ForEachStridedTest,
    ::testing::Values(StridedCase{"contiguous_merges_to_one_run", {2, 3, 4}, {2, 3, 4}, 1},
                      StridedCase{"row_bias", {5, 4}, {4}, 5},
                      StridedCase{"column", {3, 4}, {3, 1}, 3},
                      StridedCase{"middle_broadcast", {2, 3, 4}, {2, 1, 4}, 6},
                      StridedCase{"scalar_output", {}, {}, 1},
                      StridedCase{"ones_are_skipped", {1, 3, 1, 2}, {3, 1, 2}, 1},
                      StridedCase{"empty", {2, 0, 3}, {1}, 0}),
    [](const ::testing::TestParamInfo<StridedCase>& info) { return info.param.name; });

TEST(KernelUtilTest, AttributesAxesIntsAndOverlaps) {
  graph::Op op;
  op.type = "Test";
  op.attrs = {{"axis", int64_t{-1}}, {"name", std::string("x")}, {"eps", 0.5}};
  KernelArgs args;
  args.op = &op;
  EXPECT_EQ(*IntAttr(args, "axis", 0), -1);
  EXPECT_EQ(*IntAttr(args, "missing", 7), 7);
  EXPECT_EQ(IntAttr(args, "name", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*FloatAttr(args, "eps", 1), 0.5);
  EXPECT_EQ(*FloatAttr(args, "axis", 1), -1.0);  // an int reads as a float
  EXPECT_EQ(*NormalizeAxis(args, -1, 3, "axis"), 2);
  EXPECT_EQ(*NormalizeAxis(args, 3, 3, "axis", /*allow_end=*/true), 3);
  EXPECT_EQ(NormalizeAxis(args, 3, 3, "axis").status().code(), absl::StatusCode::kInvalidArgument);

  const int32_t values[] = {4, -2};
  graph::TensorType t{graph::DataType::kInt32, {2}};
  args.inputs = {reinterpret_cast<const std::byte*>(values)};
  args.input_types = {&t};
  EXPECT_EQ(*ReadInts(args, 0, "axes"), (Dims{4, -2}));
  EXPECT_EQ(ReadInts(args, 1, "axes").status().code(), absl::StatusCode::kInvalidArgument);

  std::byte buffer[16];
  EXPECT_TRUE(Overlaps(buffer, 8, buffer + 4, 8));
  EXPECT_FALSE(Overlaps(buffer, 8, buffer + 8, 8));
  EXPECT_FALSE(Overlaps(buffer, 0, buffer, 8));
}

TEST(KernelUtilTest, InputSlotsFollowTheImporter) {
  graph::Op op;
  op.type = "Slice";
  op.attrs = {{"onnx_input_slots", std::vector<int64_t>{0, 1, 2, 4}}};
  KernelArgs args;
  args.op = &op;
  args.inputs.resize(4);
  EXPECT_EQ(FindInputSlot(args, 4), 3);
  EXPECT_EQ(FindInputSlot(args, 3), -1);
  op.attrs.clear();
  EXPECT_EQ(FindInputSlot(args, 3), 3);
}

}  // namespace
}  // namespace memonger::alloc::kernel_internal

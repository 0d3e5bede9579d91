// MaxPool, AveragePool and their gradients (kernels_cpu_pool.cc) against double-precision
// loops: padded and strided windows, count_include_pad, global pooling, ties in MaxPoolGradient
// (the first maximum gets the gradient), fp32/fp16/bf16; the indices output is Unimplemented.
#include <cmath>
#include <limits>
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

// 2-D windows over [N*C, H, W] planes: kernel k, stride s, pad p (both ends).
struct Pool2d {
  int64_t planes, h, w, k, s, p;
  int64_t oh() const { return (h + 2 * p - k) / s + 1; }
  int64_t ow() const { return (w + 2 * p - k) / s + 1; }
  // Calls f(plane, out index, in index) over the in-bounds window elements, row-major.
  template <typename F>
  void ForEach(F&& f) const {
    for (int64_t c = 0; c < planes; ++c)
      for (int64_t oy = 0; oy < oh(); ++oy)
        for (int64_t ox = 0; ox < ow(); ++ox)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              f(c, (c * oh() + oy) * ow() + ox, (c * h + iy) * w + ix);
            }
  }
};

class PoolKernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(PoolKernelTest, WindowsMatchTheDefinition) {
  const DataType dtype = GetParam();
  const Pool2d g{2 * 3, 7, 6, 3, 2, 1};
  const std::vector<int64_t> xd = {2, 3, 7, 6}, yd = {2, 3, g.oh(), g.ow()};
  TestTensor x = MakeTensor(dtype, xd, RandomValues(2 * 3 * 7 * 6, 1));
  const std::vector<double> xv = ToDoubles(x);
  const int64_t ny = 2 * 3 * g.oh() * g.ow();
  const std::vector<Attribute> attrs = {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"pad", int64_t{1}}};
  const double rtol = dtype == DataType::kFloat32 ? 1e-6 : dtype == DataType::kFloat16 ? 1e-3 : 8e-3;

  std::vector<double> max_ref(ny, -INFINITY), sum(ny, 0), count(ny, 0);
  std::vector<int64_t> argmax(ny, -1);
  g.ForEach([&](int64_t, int64_t o, int64_t i) {
    if (xv[i] > max_ref[o]) {
      max_ref[o] = xv[i];
      argmax[o] = i;
    }
    sum[o] += xv[i];
    count[o] += 1;
  });
  TestTensor y = EmptyTensor(dtype, yd);
  ASSERT_TRUE(RunKernel("MaxPool", attrs, {&x}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), max_ref);  // a maximum is one of the inputs: exact
  TestTensor dy = MakeTensor(dtype, yd, RandomValues(ny, 2));
  const std::vector<double> dyv = ToDoubles(dy);
  std::vector<double> dx_ref(xv.size(), 0);
  for (int64_t o = 0; o < ny; ++o) dx_ref[argmax[o]] += dyv[o];
  TestTensor dx = EmptyTensor(dtype, xd);
  ASSERT_TRUE(RunKernel("MaxPoolGradient", attrs, {&x, &y, &dy}, {&dx}).ok());
  EXPECT_EQ(CompareClose(ToDoubles(dx), dx_ref, rtol, 1e-6), "");

  for (bool include_pad : {false, true}) {
    SCOPED_TRACE(include_pad);
    std::vector<Attribute> a = attrs;
    a.push_back({"count_include_pad", int64_t{include_pad ? 1 : 0}});
    std::vector<double> avg_ref(ny), dx_avg(xv.size(), 0);
    for (int64_t o = 0; o < ny; ++o) avg_ref[o] = sum[o] / (include_pad ? 9.0 : count[o]);
    g.ForEach([&](int64_t, int64_t o, int64_t i) { dx_avg[i] += dyv[o] / (include_pad ? 9.0 : count[o]); });
    ASSERT_TRUE(RunKernel("AveragePool", a, {&x}, {&y}).ok());
    EXPECT_EQ(CompareClose(ToDoubles(y), avg_ref, rtol, 1e-6), "");
    ASSERT_TRUE(RunKernel("AveragePoolGradient", a, {&x, &y, &dy}, {&dx}).ok());
    EXPECT_EQ(CompareClose(ToDoubles(dx), dx_avg, rtol, 1e-6), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PoolKernelTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16));

TEST(PoolKernelTest, TiesSendTheGradientToTheFirstMaximumOnce) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 1, 2, 2}, {5, 5, 5, 1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 1, 1, 1});
  const std::vector<Attribute> attrs = {{"kernel", int64_t{2}}};
  ASSERT_TRUE(RunKernel("MaxPool", attrs, {&x}, {&y}).ok());
  TestTensor dy = MakeTensor(DataType::kFloat32, {1, 1, 1, 1}, {3});
  TestTensor dx = EmptyTensor(DataType::kFloat32, {1, 1, 2, 2});
  ASSERT_TRUE(RunKernel("MaxPoolGradient", attrs, {&x, &y, &dy}, {&dx}).ok());
  EXPECT_EQ(ToDoubles(dx), (std::vector<double>{3, 0, 0, 0}));
}

TEST(PoolKernelTest, GlobalPoolingAndRefusals) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 2, 3, 3}, RandomValues(18, 3));
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 2, 1, 1});
  ASSERT_TRUE(RunKernel("AveragePool", {{"global_pooling", int64_t{1}}}, {&x}, {&y}).ok());
  const std::vector<double> xv = ToDoubles(x);
  double s0 = 0, s1 = 0;
  for (int i = 0; i < 9; ++i) {
    s0 += xv[i];
    s1 += xv[9 + i];
  }
  EXPECT_EQ(CompareClose(ToDoubles(y), {s0 / 9, s1 / 9}, 1e-6, 1e-7), "");
  TestTensor indices = EmptyTensor(DataType::kInt64, {1, 2, 1, 1});
  EXPECT_EQ(RunKernel("MaxPool", {{"kernel", int64_t{3}}}, {&x}, {&y, &indices}).code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RunKernel("MaxPool", {}, {&x}, {&y}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memonger::alloc

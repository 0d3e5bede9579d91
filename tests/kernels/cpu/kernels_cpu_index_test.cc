// ConvTranspose against a direct double-precision scatter of every input position (groups,
// strides, dilations, pads, output_padding, 1 and 2 spatial dims, every storage type), and the
// indexing kernels' contracts the ONNX node tests do not reach: ScatterND in place and with a
// reduction, indices out of range refused, TopK's K checked against the plan, ties and NaN,
// Mod's signs, Pad's reflect and edge modes, InstanceNormalization in place.
#include <cmath>
#include <limits>
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

struct TransposeCase {
  std::vector<int64_t> in;  // spatial dims of X
  int64_t channels, outputs, group;
  std::vector<int64_t> kernel, stride, dilation, pads, output_padding;
};

class ConvTransposeTest : public ::testing::TestWithParam<DataType> {};

TEST_P(ConvTransposeTest, EqualsTheDirectScatterOfEveryInputPosition) {
  const DataType dtype = GetParam();
  const std::vector<TransposeCase> cases = {
      {{5, 4}, 4, 6, 2, {3, 2}, {2, 3}, {1, 2}, {1, 0, 2, 1}, {1, 0}},
      {{7}, 3, 2, 1, {4}, {3}, {2}, {2, 1}, {2}},
      {{3, 3}, 2, 2, 1, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}},  // UNet's upsampling
  };
  for (const TransposeCase& c : cases) {
    const size_t sp = c.in.size();
    std::vector<int64_t> x_dims = {2, c.channels}, w_dims = {c.channels, c.outputs / c.group};
    std::vector<int64_t> y_dims = {2, c.outputs}, out(sp);
    for (size_t i = 0; i < sp; ++i) {
      x_dims.push_back(c.in[i]);
      w_dims.push_back(c.kernel[i]);
      out[i] = c.stride[i] * (c.in[i] - 1) + c.output_padding[i] +
               (c.kernel[i] - 1) * c.dilation[i] + 1 - c.pads[i] - c.pads[sp + i];
      y_dims.push_back(out[i]);
    }
    TestTensor x = MakeTensor(dtype, x_dims, RandomValues(testing::Count(x_dims), 1));
    TestTensor w = MakeTensor(dtype, w_dims, RandomValues(testing::Count(w_dims), 2));
    TestTensor b = MakeTensor(dtype, {c.outputs}, RandomValues(c.outputs, 3));
    const std::vector<double> xv = ToDoubles(x), wv = ToDoubles(w), bv = ToDoubles(b);
    // Widened to 2 spatial dims for the reference's loops.
    const int64_t ih = sp == 2 ? c.in[0] : 1, iw = c.in[sp - 1];
    const int64_t kh = sp == 2 ? c.kernel[0] : 1, kw = c.kernel[sp - 1];
    const int64_t oh = sp == 2 ? out[0] : 1, ow = out[sp - 1];
    const int64_t sh = sp == 2 ? c.stride[0] : 1, sw = c.stride[sp - 1];
    const int64_t dh = sp == 2 ? c.dilation[0] : 1, dw = c.dilation[sp - 1];
    const int64_t ph = sp == 2 ? c.pads[0] : 0, pw = c.pads[sp - 1];
    const int64_t cg = c.channels / c.group, mg = c.outputs / c.group;
    std::vector<double> want(2 * c.outputs * oh * ow);
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t m = 0; m < c.outputs; ++m) {
        for (int64_t i = 0; i < oh * ow; ++i) want[(n * c.outputs + m) * oh * ow + i] = bv[m];
      }
      for (int64_t ci = 0; ci < c.channels; ++ci) {
        const int64_t g = ci / cg;
        for (int64_t y0 = 0; y0 < ih; ++y0)
          for (int64_t x0 = 0; x0 < iw; ++x0)
            for (int64_t om = 0; om < mg; ++om)
              for (int64_t a = 0; a < kh; ++a)
                for (int64_t bb = 0; bb < kw; ++bb) {
                  const int64_t oy = y0 * sh + a * dh - ph, ox = x0 * sw + bb * dw - pw;
                  if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                  const int64_t m = g * mg + om;
                  want[((n * c.outputs + m) * oh + oy) * ow + ox] +=
                      xv[((n * c.channels + ci) * ih + y0) * iw + x0] *
                      wv[((ci * mg + om) * kh + a) * kw + bb];
                }
      }
    }
    TestTensor y = EmptyTensor(dtype, y_dims);
    ASSERT_TRUE(RunKernel("ConvTranspose",
                          {{"group", c.group}, {"kernel_shape", c.kernel}, {"strides", c.stride},
                           {"dilations", c.dilation}, {"pads", c.pads},
                           {"output_padding", c.output_padding}},
                          {&x, &w, &b}, {&y})
                    .ok());
    const double tol = dtype == DataType::kFloat16 ? 1e-2 : dtype == DataType::kBFloat16 ? 6e-2 : 1e-5;
    const std::vector<double> got = ToDoubles(y);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
    }
    // A planned output the attributes do not give is refused.
    std::vector<int64_t> wrong = y_dims;
    wrong.back() += 1;
    TestTensor bad = EmptyTensor(dtype, wrong);
    EXPECT_FALSE(RunKernel("ConvTranspose", {{"group", c.group}, {"strides", c.stride},
                                             {"dilations", c.dilation}, {"pads", c.pads},
                                             {"output_padding", c.output_padding}},
                           {&x, &w, &b}, {&bad})
                     .ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ConvTransposeTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                           DataType::kBFloat16, DataType::kFloat64));

TEST(ScatterNDTest, InPlaceWithReductionsAndOutOfRangeIndicesRefused) {
  // data [4, 3]; rows 1 and -1 (= 3) replaced, then added.
  TestTensor data = MakeTensor(DataType::kFloat32, {4, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  TestTensor indices = MakeTensor(DataType::kInt64, {2, 1}, {1, -1});
  TestTensor updates = MakeTensor(DataType::kFloat32, {2, 3}, {10, 20, 30, 40, 50, 60});
  TestTensor out = EmptyTensor(DataType::kFloat32, {4, 3});
  ASSERT_TRUE(RunKernel("ScatterND", {}, {&data, &indices, &updates}, {&out}).ok());
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{0, 1, 2, 10, 20, 30, 6, 7, 8, 40, 50, 60}));
  // In place (the output is data): added to the old rows.
  ASSERT_TRUE(RunKernel("ScatterND", {{"reduction", std::string("add")}},
                        {&data, &indices, &updates}, {&data})
                  .ok());
  EXPECT_EQ(ToDoubles(data), (std::vector<double>{0, 1, 2, 13, 24, 35, 6, 7, 8, 49, 60, 71}));
  TestTensor far = MakeTensor(DataType::kInt64, {2, 1}, {1, 4});
  const absl::Status s = RunKernel("ScatterND", {}, {&data, &far, &updates}, {&out});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("index 4 is out of range for axis 0 of size 4"));
  // Updates over the output: refused, never computed.
  EXPECT_FALSE(RunKernel("ScatterND", {}, {&data, &indices, &data}, {&data}).ok());
}

TEST(GatherTest, ElementsAndNdWithBatchDims) {
  TestTensor data = MakeTensor(DataType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  TestTensor idx = MakeTensor(DataType::kInt64, {2, 2}, {2, 0, -1, 1});
  TestTensor out = EmptyTensor(DataType::kInt32, {2, 2});
  ASSERT_TRUE(RunKernel("GatherElements", {{"axis", int64_t{1}}}, {&data, &idx}, {&out}).ok());
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{3, 1, 6, 5}));
  // batch_dims 1: row b of data indexed by indices[b].
  TestTensor nd = MakeTensor(DataType::kInt64, {2, 1}, {2, 0});
  TestTensor picked = EmptyTensor(DataType::kInt32, {2});
  ASSERT_TRUE(RunKernel("GatherND", {{"batch_dims", int64_t{1}}}, {&data, &nd}, {&picked}).ok());
  EXPECT_EQ(ToDoubles(picked), (std::vector<double>{3, 4}));
}

TEST(TopKTest, LargestFirstTiesByIndexNanFirstAndKCheckedAgainstThePlan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 6}, {3, 7, nan, 7, -1, 3});
  TestTensor k = MakeTensor(DataType::kInt64, {1}, {4});
  TestTensor values = EmptyTensor(DataType::kFloat32, {1, 4});
  TestTensor indices = EmptyTensor(DataType::kInt64, {1, 4});
  ASSERT_TRUE(RunKernel("TopK", {}, {&x, &k}, {&values, &indices}).ok());
  EXPECT_EQ(ToDoubles(indices), (std::vector<double>{2, 1, 3, 0}));
  ASSERT_TRUE(RunKernel("TopK", {{"largest", int64_t{0}}}, {&x, &k}, {&values, &indices}).ok());
  EXPECT_EQ(ToDoubles(indices), (std::vector<double>{4, 0, 5, 1}));
  EXPECT_EQ(ToDoubles(values), (std::vector<double>{-1, 3, 3, 7}));
  // K = 3 at run time, a plan for 4: refused, never written past or short of the plan.
  TestTensor k3 = MakeTensor(DataType::kInt64, {1}, {3});
  const absl::Status s = RunKernel("TopK", {}, {&x, &k3}, {&values, &indices});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("the plan has [1, 4]"));
}

TEST(OneHotTest, NegativeAndOutOfRangeIndicesAndDepthCheckedAgainstThePlan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor idx = MakeTensor(DataType::kFloat32, {4}, {1, -1, 3, nan});
  TestTensor depth = MakeTensor(DataType::kInt64, {1}, {3});
  TestTensor values = MakeTensor(DataType::kFloat32, {2}, {0, 5});
  TestTensor out = EmptyTensor(DataType::kFloat32, {4, 3});
  ASSERT_TRUE(RunKernel("OneHot", {}, {&idx, &depth, &values}, {&out}).ok());
  // 1 -> column 1; -1 -> column 2; 3 and NaN are outside: rows of off.
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{0, 5, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0}));
  TestTensor depth4 = MakeTensor(DataType::kInt64, {1}, {4});
  const absl::Status s = RunKernel("OneHot", {}, {&idx, &depth4, &values}, {&out});
  EXPECT_THAT(s.message(), HasSubstr("the plan has [4,3]"));
}

TEST(ModTest, SignsOfBothModesAndDivisionByZeroRefused) {
  TestTensor a = MakeTensor(DataType::kInt32, {4}, {7, -7, 7, -7});
  TestTensor b = MakeTensor(DataType::kInt32, {4}, {3, 3, -3, -3});
  TestTensor out = EmptyTensor(DataType::kInt32, {4});
  ASSERT_TRUE(RunKernel("Mod", {}, {&a, &b}, {&out}).ok());
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{1, 2, -2, -1}));  // Python's %
  ASSERT_TRUE(RunKernel("Mod", {{"fmod", int64_t{1}}}, {&a, &b}, {&out}).ok());
  EXPECT_EQ(ToDoubles(out), (std::vector<double>{1, -1, 1, -1}));  // C's fmod
  TestTensor zero = MakeTensor(DataType::kInt32, {4}, {3, 0, 1, 1});
  EXPECT_THAT(RunKernel("Mod", {}, {&a, &zero}, {&out}).message(), HasSubstr("division by zero"));
  TestTensor fa = MakeTensor(DataType::kFloat32, {1}, {-7.5});
  TestTensor fb = MakeTensor(DataType::kFloat32, {1}, {2});
  TestTensor fo = EmptyTensor(DataType::kFloat32, {1});
  EXPECT_FALSE(RunKernel("Mod", {}, {&fa, &fb}, {&fo}).ok());  // ONNX: floats need fmod=1
  ASSERT_TRUE(RunKernel("Mod", {{"fmod", int64_t{1}}}, {&fa, &fb}, {&fo}).ok());
  EXPECT_EQ(ToDoubles(fo), (std::vector<double>{-1.5}));
}

TEST(PadTest, ReflectAndEdgeAsNumpyPadsThem) {
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  TestTensor pads = MakeTensor(DataType::kInt64, {4}, {1, 2, 0, 1});  // rows 1 before; cols 2, 1
  TestTensor y = EmptyTensor(DataType::kFloat32, {3, 6});
  ASSERT_TRUE(RunKernel("Pad", {{"mode", std::string("reflect")}}, {&x, &pads}, {&y}).ok());
  // np.pad([[1,2,3],[4,5,6]], ((1,0),(2,1)), mode="reflect")
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2,
                                               6, 5, 4, 5, 6, 5}));
  ASSERT_TRUE(RunKernel("Pad", {{"mode", std::string("edge")}}, {&x, &pads}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{1, 1, 1, 2, 3, 3, 1, 1, 1, 2, 3, 3,
                                               4, 4, 4, 5, 6, 6}));
  EXPECT_EQ(RunKernel("Pad", {{"mode", std::string("wrap")}}, {&x, &pads}, {&y}).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(InstanceNormalizationTest, EachPlaneNormalisedInPlace) {
  const std::vector<double> v = RandomValues(2 * 3 * 4, 5, -2, 2);
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 3, 4}, v);
  TestTensor scale = MakeTensor(DataType::kFloat32, {3}, {1, 2, 0.5});
  TestTensor bias = MakeTensor(DataType::kFloat32, {3}, {0, -1, 3});
  ASSERT_TRUE(RunKernel("InstanceNormalization", {{"epsilon", 1e-3}}, {&x, &scale, &bias}, {&x})
                  .ok());
  const std::vector<double> got = ToDoubles(x);
  const std::vector<double> stored = ToDoubles(MakeTensor(DataType::kFloat32, {24}, v));
  const double sc[3] = {1, 2, 0.5}, sh[3] = {0, -1, 3};
  for (int p = 0; p < 6; ++p) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += stored[p * 4 + i] / 4;
    for (int i = 0; i < 4; ++i) var += (stored[p * 4 + i] - mean) * (stored[p * 4 + i] - mean) / 4;
    for (int i = 0; i < 4; ++i) {
      const double want = sc[p % 3] * (stored[p * 4 + i] - mean) / std::sqrt(var + 1e-3) + sh[p % 3];
      EXPECT_NEAR(got[p * 4 + i], want, 1e-5) << p << " " << i;
    }
  }
}

}  // namespace
}  // namespace memonger::alloc

// Conv and ConvGradient (kernels_cpu_conv.cc) against double-precision loops written directly
// from the definition, for 1, 2 and 3 spatial dims with groups, strides, dilations, explicit
// and SAME padding, 1x1 windows read directly, column matrices built in chunks, in float32,
// float16 and bfloat16 storage (the reference reads the rounded inputs); the same bits for any
// thread count; NHWC and mismatched output dims are refused.
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/kernel_test_support.h"

namespace memonger::alloc {
namespace {

using graph::Attribute;
using graph::DataType;
using testing::CompareClose;
using testing::Count;
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;


struct ConvCase {
  const char* name;
  std::vector<int64_t> x, w;  // NCHW dims, W [M, C/group, k...]
  std::vector<int64_t> stride, pad_begin, pad_end, dilation;
  int64_t group;
  std::vector<Attribute> attrs;  // as the op spells them
};

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name; }

// Output spatial dims and the reference loops. `visit(n, m, out_flat, c, in_flat, tap_flat)`
// is called for every (output, input, tap) triple that multiplies.
template <typename Visit>
std::vector<int64_t> ForEachProduct(const ConvCase& c, Visit&& visit) {
  const size_t s = c.x.size() - 2;
  std::vector<int64_t> out(s);
  for (size_t i = 0; i < s; ++i) {
    const int64_t span = c.dilation[i] * (c.w[2 + i] - 1) + 1;
    out[i] = (c.x[2 + i] + c.pad_begin[i] + c.pad_end[i] - span) / c.stride[i] + 1;
  }
  const int64_t maps = c.w[0], cg = c.w[1], mg = maps / c.group;
  const int64_t out_count = Count(out);
  const std::vector<int64_t> kernel(c.w.begin() + 2, c.w.end());
  const int64_t taps = Count(kernel);
  for (int64_t n = 0; n < c.x[0]; ++n) {
    for (int64_t m = 0; m < maps; ++m) {
      const int64_t g = m / mg;
      for (int64_t o = 0; o < out_count; ++o) {
        for (int64_t ci = 0; ci < cg; ++ci) {
          for (int64_t t = 0; t < taps; ++t) {
            // Unflatten o and t (row-major), find the input position.
            int64_t orest = o, trest = t, in_flat = 0;
            bool inside = true;
            std::vector<int64_t> oi(s), ti(s);
            for (size_t i = s; i-- > 0;) {
              oi[i] = orest % out[i];
              orest /= out[i];
              ti[i] = trest % kernel[i];
              trest /= kernel[i];
            }
            for (size_t i = 0; i < s; ++i) {
              const int64_t p = oi[i] * c.stride[i] - c.pad_begin[i] + ti[i] * c.dilation[i];
              inside = inside && p >= 0 && p < c.x[2 + i];
              in_flat = in_flat * c.x[2 + i] + p;
            }
            if (inside) visit(n, m, o, g * cg + ci, in_flat, ci * taps + t);
          }
        }
      }
    }
  }
  return out;
}

class ConvKernelTest : public ::testing::TestWithParam<std::tuple<ConvCase, DataType>> {};

TEST_P(ConvKernelTest, ForwardAndGradientMatchTheDefinition) {
  // Named references, not a structured binding: the lambdas below capture c (C++17 allows no
  // capture of a binding; clang refuses it).
  const ConvCase& c = std::get<0>(GetParam());
  const DataType dtype = std::get<1>(GetParam());
  const int64_t maps = c.w[0];
  TestTensor x = MakeTensor(dtype, c.x, RandomValues(Count(c.x), 1));
  TestTensor w = MakeTensor(dtype, c.w, RandomValues(Count(c.w), 2));
  TestTensor b = MakeTensor(dtype, {maps}, RandomValues(maps, 3));
  const std::vector<double> xv = ToDoubles(x), wv = ToDoubles(w), bv = ToDoubles(b);
  const int64_t in_plane = Count(std::vector<int64_t>(c.x.begin() + 2, c.x.end()));
  const int64_t w_per_map = Count(std::vector<int64_t>(c.w.begin() + 1, c.w.end()));
  std::vector<double> y_ref;
  int64_t out_plane = 0;
  const std::vector<int64_t> out = ForEachProduct(c, [](auto...) {});
  out_plane = Count(out);
  std::vector<int64_t> y_dims = {c.x[0], maps};
  y_dims.insert(y_dims.end(), out.begin(), out.end());
  y_ref.assign(Count(y_dims), 0.0);
  for (int64_t i = 0; i < Count(y_dims); ++i) y_ref[i] = bv[(i / out_plane) % maps];
  ForEachProduct(c, [&](int64_t n, int64_t m, int64_t o, int64_t ch, int64_t in, int64_t wt) {
    y_ref[(n * maps + m) * out_plane + o] +=
        wv[m * w_per_map + wt] * xv[(n * c.x[1] + ch) * in_plane + in];
  });
  const double rtol = dtype == DataType::kFloat32 ? 1e-5 : dtype == DataType::kFloat16 ? 2e-3 : 1.6e-2;
  TestTensor y = EmptyTensor(dtype, y_dims);
  ASSERT_TRUE(RunKernel("Conv", c.attrs, {&x, &w, &b}, {&y}).ok())
      << RunKernel("Conv", c.attrs, {&x, &w, &b}, {&y});
  EXPECT_EQ(CompareClose(ToDoubles(y), y_ref, rtol, 1e-4), "");

  // Gradients of sum(y * dy).
  TestTensor dy = MakeTensor(dtype, y_dims, RandomValues(Count(y_dims), 4));
  const std::vector<double> dyv = ToDoubles(dy);
  std::vector<double> dw_ref(wv.size(), 0.0), db_ref(maps, 0.0), dx_ref(xv.size(), 0.0);
  for (size_t i = 0; i < dyv.size(); ++i) db_ref[(i / out_plane) % maps] += dyv[i];
  ForEachProduct(c, [&](int64_t n, int64_t m, int64_t o, int64_t ch, int64_t in, int64_t wt) {
    const double g = dyv[(n * maps + m) * out_plane + o];
    dw_ref[m * w_per_map + wt] += g * xv[(n * c.x[1] + ch) * in_plane + in];
    dx_ref[(n * c.x[1] + ch) * in_plane + in] += g * wv[m * w_per_map + wt];
  });
  TestTensor dw = EmptyTensor(dtype, c.w), db = EmptyTensor(dtype, {maps}), dx = EmptyTensor(dtype, c.x);
  ASSERT_TRUE(RunKernel("ConvGradient", c.attrs, {&x, &w, &dy}, {&dw, &db, &dx}).ok());
  const double grad_rtol = dtype == DataType::kFloat32 ? 1e-4 : rtol;
  EXPECT_EQ(CompareClose(ToDoubles(dw), dw_ref, grad_rtol, 1e-3), "");
  EXPECT_EQ(CompareClose(ToDoubles(db), db_ref, grad_rtol, 1e-3), "");
  EXPECT_EQ(CompareClose(ToDoubles(dx), dx_ref, grad_rtol, 1e-3), "");
  // no_bias=1: dW and dX only, the same values.
  std::vector<Attribute> no_bias = c.attrs;
  no_bias.push_back({"no_bias", int64_t{1}});
  TestTensor dw2 = EmptyTensor(dtype, c.w), dx2 = EmptyTensor(dtype, c.x);
  ASSERT_TRUE(RunKernel("ConvGradient", no_bias, {&x, &w, &dy}, {&dw2, &dx2}).ok());
  EXPECT_EQ(ToDoubles(dw2), ToDoubles(dw));
  EXPECT_EQ(ToDoubles(dx2), ToDoubles(dx));
}

std::vector<ConvCase> Cases() {
  return {
      {"conv2d_grouped_strided_padded", {2, 4, 7, 6}, {6, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2,
       {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"pad", int64_t{1}}, {"group", int64_t{2}}}},
      // Depthwise (one input channel per group): the direct path, with a channel multiplier of
      // 2 in the second.
      {"conv2d_depthwise_strided_padded", {2, 4, 7, 6}, {4, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 4,
       {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"pad", int64_t{1}}, {"group", int64_t{4}}}},
      {"conv2d_depthwise_multiplier_dilated", {1, 3, 8, 7}, {6, 1, 3, 2}, {1, 2}, {2, 0}, {1, 1}, {2, 1}, 3,
       {{"pads", std::vector<int64_t>{2, 0, 1, 1}}, {"strides", std::vector<int64_t>{1, 2}},
        {"dilations", std::vector<int64_t>{2, 1}}, {"group", int64_t{3}}}},
      {"conv2d_asymmetric_pads_dilated", {1, 3, 8, 7}, {4, 3, 3, 2}, {1, 2}, {2, 0}, {1, 1}, {2, 1}, 1,
       {{"pads", std::vector<int64_t>{2, 0, 1, 1}}, {"strides", std::vector<int64_t>{1, 2}},
        {"dilations", std::vector<int64_t>{2, 1}}}},
      {"conv2d_same_upper", {1, 2, 5, 5}, {3, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1,
       {{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2, 2}}}},
      {"conv1d_dilated", {2, 3, 9}, {4, 3, 2}, {1}, {0}, {0}, {3}, 1,
       {{"dilations", std::vector<int64_t>{3}}}},
      {"conv3d_strided", {1, 2, 4, 5, 4}, {3, 2, 2, 2, 2}, {2, 1, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1,
       {{"strides", std::vector<int64_t>{2, 1, 2}}}},
      // 1x1, unit strides, no padding: the product reads X directly where an image has 512
      // positions or more, else through the column matrix, both images in one product.
      {"conv2d_pointwise_grouped_direct", {2, 4, 24, 24}, {6, 2, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1},
       2, {{"group", int64_t{2}}}},
      {"conv2d_pointwise_grouped_small", {2, 4, 5, 6}, {6, 2, 1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 2,
       {{"group", int64_t{2}}}},
      // 1x1 but strided, or padded: through the column matrix.
      {"conv2d_pointwise_strided", {1, 3, 7, 7}, {4, 3, 1, 1}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 1,
       {{"strides", std::vector<int64_t>{2, 2}}}},
      {"conv2d_pointwise_padded", {1, 3, 4, 4}, {2, 3, 1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1,
       {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}},
      // 576 column rows: the forward pass builds its column matrix in two chunks of output
      // rows (21 rows, then 3).
      {"conv2d_column_chunks", {1, 64, 24, 24}, {1, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1,
       {{"kernel", int64_t{3}}, {"pad", int64_t{1}}}},
  };
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConvKernelTest,
    ::testing::Combine(::testing::ValuesIn(Cases()),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16)),
    [](const ::testing::TestParamInfo<std::tuple<ConvCase, DataType>>& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::string(graph::DataTypeName(std::get<1>(info.param)));
    });

// Threads split whole pieces (the product's tiles, depthwise planes): the same bits for any
// count, on shapes large enough to be split (the pointwise, column-chunk and depthwise paths).
TEST(ConvKernelTest, AnyThreadCountGivesTheSameBits) {
  struct Shape {
    const char* name;
    std::vector<int64_t> x, w;
    std::vector<graph::Attribute> attrs;
    std::vector<int64_t> y;
  };
  const std::vector<Shape> shapes = {
      {"pointwise", {1, 128, 64, 64}, {64, 128, 1, 1}, {}, {1, 64, 64, 64}},
      {"3x3_chunks", {1, 64, 40, 40}, {16, 64, 3, 3}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}},
       {1, 16, 40, 40}},
      {"depthwise", {4, 32, 64, 64}, {32, 1, 3, 3},
       {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"group", int64_t{32}}}, {4, 32, 64, 64}},
  };
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(sh.name);
    TestTensor x = MakeTensor(DataType::kFloat32, sh.x, RandomValues(Count(sh.x), 5));
    TestTensor w = MakeTensor(DataType::kFloat32, sh.w, RandomValues(Count(sh.w), 6));
    TestTensor one = EmptyTensor(DataType::kFloat32, sh.y);
    ASSERT_TRUE(RunKernel("Conv", sh.attrs, {&x, &w}, {&one}, 1).ok());
    for (int threads : {2, 3}) {
      TestTensor y = EmptyTensor(DataType::kFloat32, sh.y);
      ASSERT_TRUE(RunKernel("Conv", sh.attrs, {&x, &w}, {&y}, threads).ok());
      EXPECT_EQ(std::memcmp(y.bytes(), one.bytes(), Count(sh.y) * sizeof(float)), 0) << threads;
    }
  }
}

TEST(ConvKernelTest, RefusesNhwcAndOutputsTheAttributesDoNotGive) {
  TestTensor x = MakeTensor(DataType::kFloat32, {1, 2, 4, 4}, RandomValues(32, 1));
  TestTensor w = MakeTensor(DataType::kFloat32, {3, 2, 3, 3}, RandomValues(54, 2));
  TestTensor y = EmptyTensor(DataType::kFloat32, {1, 3, 2, 2});
  EXPECT_EQ(RunKernel("Conv", {{"order", std::string("NHWC")}}, {&x, &w}, {&y}).code(),
            absl::StatusCode::kUnimplemented);
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {1, 3, 4, 4});  // pad 0 gives 2x2
  const absl::Status s = RunKernel("Conv", {}, {&x, &w}, {&wrong});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("Conv"), std::string::npos) << s;
  ASSERT_TRUE(RunKernel("Conv", {}, {&x, &w}, {&y}).ok());
  TestTensor x8 = MakeTensor(DataType::kInt8, {1, 2, 4, 4}, std::vector<double>(32, 1));
  TestTensor w8 = MakeTensor(DataType::kInt8, {3, 2, 3, 3}, std::vector<double>(54, 1));
  TestTensor y8 = EmptyTensor(DataType::kInt8, {1, 3, 2, 2});
  EXPECT_EQ(RunKernel("Conv", {}, {&x8, &w8}, {&y8}).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace memonger::alloc

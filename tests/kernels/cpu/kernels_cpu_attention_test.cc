// AlibiBias and EfficientAttention, called through KernelArgs with hand-made types:
//   - AlibiBias against its formula (int64 and float32 coordinates, cls rows/columns, padding);
//   - EfficientAttention against a straightforward math attention in double (scores
//     materialised, softmax, times V) for float32, float16 and bfloat16, with and without a
//     bias (broadcast over the batch, padded rows whose padding holds garbage that must not be
//     read, -inf entries), the default and an explicit scale, and the lse output. Tolerances
//     (|diff| <= atol + rtol |expected|): float32 1e-5 + 1e-4; float16 1e-3 + 4e-3; bfloat16
//     8e-3 + 3e-2 (the output's rounding and the rounding of the inputs' products dominate);
//   - the workspace holds the last head's running max and sum; aliasing outputs are refused.
#include <cmath>
#include <limits>
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
using testing::EmptyTensor;
using testing::MakeTensor;
using testing::RandomValues;
using testing::RunKernel;
using testing::TestTensor;
using testing::ToDoubles;

TEST(AlibiBiasKernelTest, MatchesTheFormula) {
  // 3 patches at (0,0), (3,4), (1,0); cls 1; pad 8: L = 4, Lp = 8.
  for (DataType coords_type : {DataType::kInt64, DataType::kFloat32}) {
    for (DataType out_type : {DataType::kFloat32, DataType::kFloat16}) {
      SCOPED_TRACE(std::string(graph::DataTypeName(coords_type)) + " -> " +
                   std::string(graph::DataTypeName(out_type)));
      TestTensor coords = MakeTensor(coords_type, {3, 2}, {0, 0, 3, 4, 1, 0});
      TestTensor bias = EmptyTensor(out_type, {1, 2, 4, 8});
      ASSERT_TRUE(RunKernel("AlibiBias", {{"heads", int64_t{2}}, {"pad", int64_t{8}}}, {&coords},
                            {&bias})
                      .ok());
      const std::vector<double> xs = {0, 3, 1}, ys = {0, 4, 0};
      std::vector<double> expected(64, 0.0);
      for (int h = 0; h < 2; ++h) {
        const double slope = std::pow(2.0, -8.0 * (h + 1) / 2);
        for (int i = 1; i < 4; ++i) {
          for (int j = 1; j < 4; ++j) {
            const double dist = std::hypot(xs[i - 1] - xs[j - 1], ys[i - 1] - ys[j - 1]);
            expected[(h * 4 + i) * 8 + j] = -slope * dist;
          }
        }
      }
      EXPECT_EQ(CompareClose(ToDoubles(bias), expected, out_type == DataType::kFloat16 ? 1e-3 : 1e-6, 0),
                "");
    }
  }
}

TEST(AlibiBiasKernelTest, NoClsNoPadAndBadShapes) {
  TestTensor coords = MakeTensor(DataType::kFloat32, {2, 2}, {0, 0, 0, 2});
  TestTensor bias = EmptyTensor(DataType::kFloat32, {1, 1, 2, 2});
  ASSERT_TRUE(RunKernel("AlibiBias", {{"heads", int64_t{1}}, {"cls", int64_t{0}}}, {&coords}, {&bias}).ok());
  EXPECT_EQ(ToDoubles(bias), (std::vector<double>{0, -2.0 / 256, -2.0 / 256, 0}));
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {1, 1, 3, 3});
  EXPECT_EQ(RunKernel("AlibiBias", {{"heads", int64_t{1}}, {"cls", int64_t{0}}}, {&coords}, {&wrong}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunKernel("AlibiBias", {}, {&coords}, {&bias}).code(), absl::StatusCode::kInvalidArgument);
}

// softmax(q k^T * scale + bias) v per (b, h), heads merged: [B, L, H*d]; lse [B, H, L].
void MathAttention(const std::vector<double>& q, const std::vector<double>& k,
                   const std::vector<double>& v, const std::vector<double>* bias,
                   int64_t bias_batch, int64_t lp, int64_t B, int64_t H, int64_t L, int64_t d,
                   double scale, std::vector<double>& out, std::vector<double>& lse) {
  out.assign(static_cast<size_t>(B * L * H * d), 0);
  lse.assign(static_cast<size_t>(B * H * L), 0);
  std::vector<double> s(static_cast<size_t>(L));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t head = (b * H + h) * L * d;
      for (int64_t i = 0; i < L; ++i) {
        double max = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          double dot = 0;
          for (int64_t kk = 0; kk < d; ++kk) dot += q[head + i * d + kk] * k[head + j * d + kk];
          s[j] = dot * scale;
          if (bias != nullptr) s[j] += (*bias)[(((bias_batch == 1 ? 0 : b) * H + h) * L + i) * lp + j];
          max = std::max(max, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < L; ++j) sum += std::exp(s[j] - max);
        for (int64_t kk = 0; kk < d; ++kk) {
          double o = 0;
          for (int64_t j = 0; j < L; ++j) o += std::exp(s[j] - max) / sum * v[head + j * d + kk];
          out[(b * L + i) * H * d + h * d + kk] = o;
        }
        lse[(b * H + h) * L + i] = max + std::log(sum);
      }
    }
  }
}

struct AttentionCase {
  const char* name;
  int64_t B, H, L, d;
  int bias_kind;  // 0 none, 1 bias [1, H, L, Lp] with garbage padding, 2 bias [B, H, L, L] with -inf
  double scale;   // 0: the default 1/sqrt(d)
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

class EfficientAttentionTest
    : public ::testing::TestWithParam<std::tuple<AttentionCase, DataType>> {};

TEST_P(EfficientAttentionTest, MatchesMathAttention) {
  const auto& [c, dtype] = GetParam();
  const int64_t n = c.B * c.H * c.L * c.d;
  TestTensor q = MakeTensor(dtype, {c.B, c.H, c.L, c.d}, RandomValues(n, 1, -2, 2));
  TestTensor k = MakeTensor(dtype, {c.B, c.H, c.L, c.d}, RandomValues(n, 2, -2, 2));
  TestTensor v = MakeTensor(dtype, {c.B, c.H, c.L, c.d}, RandomValues(n, 3));
  TestTensor o = EmptyTensor(dtype, {c.B, c.L, c.H * c.d});
  TestTensor ws = EmptyTensor(DataType::kFloat32, {c.L, c.d + 2});
  TestTensor lse = EmptyTensor(DataType::kFloat32, {c.B, c.H, c.L});
  std::vector<TestTensor*> inputs = {&q, &k, &v};
  TestTensor bias;
  int64_t bias_batch = 1, lp = c.L;
  if (c.bias_kind == 1) {
    lp = c.L + 5;
    std::vector<double> values = RandomValues(c.H * c.L * lp, 4, -3, 0);
    for (int64_t r = 0; r < c.H * c.L; ++r) {
      for (int64_t j = c.L; j < lp; ++j) values[r * lp + j] = 1e4;  // padding: never read
    }
    bias = MakeTensor(dtype, {1, c.H, c.L, lp}, values);
    inputs.push_back(&bias);
  } else if (c.bias_kind == 2) {
    bias_batch = c.B;
    std::vector<double> values = RandomValues(c.B * c.H * c.L * c.L, 5, -1, 1);
    for (size_t i = 0; i < values.size(); i += 3) values[i] = -INFINITY;  // masked keys
    for (int64_t r = 0; r < c.B * c.H * c.L; ++r) values[r * c.L + (r % c.L)] = 0;  // keep one
    bias = MakeTensor(dtype, {c.B, c.H, c.L, c.L}, values);
    inputs.push_back(&bias);
  }
  std::vector<Attribute> attrs;
  const double scale = c.scale != 0 ? c.scale : 1 / std::sqrt(static_cast<double>(c.d));
  if (c.scale != 0) attrs.push_back({"scale", c.scale});
  const absl::Status s = RunKernel("EfficientAttention", attrs, inputs, {&o, &ws, &lse});
  ASSERT_TRUE(s.ok()) << s;
  std::vector<double> expected, expected_lse;
  const std::vector<double> bias_values = c.bias_kind != 0 ? ToDoubles(bias) : std::vector<double>();
  MathAttention(ToDoubles(q), ToDoubles(k), ToDoubles(v), c.bias_kind != 0 ? &bias_values : nullptr,
                bias_batch, lp, c.B, c.H, c.L, c.d, scale, expected, expected_lse);
  const double rtol = dtype == DataType::kFloat32 ? 1e-4 : dtype == DataType::kFloat16 ? 4e-3 : 3e-2;
  const double atol = dtype == DataType::kFloat32 ? 1e-5 : dtype == DataType::kFloat16 ? 1e-3 : 8e-3;
  EXPECT_EQ(CompareClose(ToDoubles(o), expected, rtol, atol), "");
  EXPECT_EQ(CompareClose(ToDoubles(lse), expected_lse, 1e-5, 1e-5), "");
  // The workspace holds the last head's statistics: max + log(sum) is its lse.
  const std::vector<double> w = ToDoubles(ws);
  for (int64_t i = 0; i < c.L; ++i) {
    const double last = expected_lse[((c.B - 1) * c.H + c.H - 1) * c.L + i];
    EXPECT_NEAR(w[i * (c.d + 2) + c.d] + std::log(w[i * (c.d + 2) + c.d + 1]), last, 1e-4) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EfficientAttentionTest,
    ::testing::Combine(
        ::testing::Values(AttentionCase{"one_tile", 1, 2, 9, 8, 0, 0},
                          AttentionCase{"ragged_tiles", 2, 2, 70, 16, 0, 0},
                          AttentionCase{"padded_bias_broadcast_over_batch", 2, 3, 130, 8, 1, 0},
                          AttentionCase{"masked_bias_explicit_scale", 2, 1, 67, 12, 2, 0.3}),
        ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16)),
    [](const ::testing::TestParamInfo<std::tuple<AttentionCase, DataType>>& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::string(graph::DataTypeName(std::get<1>(info.param)));
    });

TEST(EfficientAttentionTest, RefusesBadShapesAndAliasing) {
  TestTensor q = MakeTensor(DataType::kFloat32, {1, 1, 4, 2}, RandomValues(8, 1));
  TestTensor o = EmptyTensor(DataType::kFloat32, {1, 4, 2});
  TestTensor ws = EmptyTensor(DataType::kFloat32, {4, 4});
  ASSERT_TRUE(RunKernel("EfficientAttention", {}, {&q, &q, &q}, {&o, &ws}).ok());
  TestTensor small_ws = EmptyTensor(DataType::kFloat32, {4, 3});
  EXPECT_EQ(RunKernel("EfficientAttention", {}, {&q, &q, &q}, {&o, &small_ws}).code(),
            absl::StatusCode::kInvalidArgument);
  TestTensor o16 = EmptyTensor(DataType::kFloat16, {1, 4, 2});
  EXPECT_EQ(RunKernel("EfficientAttention", {}, {&q, &q, &q}, {&o16, &ws}).code(),
            absl::StatusCode::kInvalidArgument);
  TestTensor ws_in_q = EmptyTensor(DataType::kFloat32, {1, 1, 4, 4});
  // The workspace at q's address: refused before anything is computed.
  EXPECT_EQ(RunKernel("EfficientAttention", {}, {&ws_in_q, &q, &q}, {&o, &ws_in_q}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(RunKernel("EfficientAttention", {}, {&q, &q, &q}, {&o, &o}).code(),
            absl::StatusCode::kFailedPrecondition);
  TestTensor q64 = MakeTensor(DataType::kFloat64, {1, 1, 4, 2}, RandomValues(8, 1));
  TestTensor o64 = EmptyTensor(DataType::kFloat64, {1, 4, 2});
  EXPECT_EQ(RunKernel("EfficientAttention", {}, {&q64, &q64, &q64}, {&o64, &ws}).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace memonger::alloc

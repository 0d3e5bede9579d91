// EfficientAttentionGradient (kernels_cpu_attention_backward.cc) against the materialised
// backward pass in double (S = q k^T scale + bias, P = softmax(S), dV = P^T dO,
// dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K scale, dK = dS^T Q scale), with O and lse from
// the forward kernel: fp32, fp16, bf16; several query blocks and key tiles (L = 70 > 64); a
// padded bias broadcast over the batch with masked scores and one fully masked row; refusals.
#include <cmath>
#include <limits>
#include <ostream>
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

struct Case {
  const char* name;
  int64_t batch, heads, l, d, lp;  // lp 0: no bias
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class EfficientAttentionGradientTest : public ::testing::TestWithParam<std::tuple<Case, DataType>> {};

TEST_P(EfficientAttentionGradientTest, MatchesTheMaterialisedBackwardPass) {
  const auto& [c, dtype] = GetParam();
  const int64_t B = c.batch, H = c.heads, L = c.l, D = c.d, n = B * H * L * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  TestTensor q = MakeTensor(dtype, {B, H, L, D}, RandomValues(n, 1, -1.5, 1.5));
  TestTensor k = MakeTensor(dtype, {B, H, L, D}, RandomValues(n, 2, -1.5, 1.5));
  TestTensor v = MakeTensor(dtype, {B, H, L, D}, RandomValues(n, 3));
  std::vector<double> bias_values;
  if (c.lp > 0) {
    bias_values = RandomValues(H * L * c.lp, 4, -3, 0);
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c.lp; ++j) bias_values[2 * c.lp + j] = -inf;  // head 0, row 2: all masked
    bias_values[5 * c.lp + 1] = bias_values[((H - 1) * L + 3) * c.lp + 4] = -inf;
  }
  TestTensor bias = MakeTensor(dtype, {1, H, L, std::max<int64_t>(c.lp, 1)}, bias_values);
  TestTensor o = EmptyTensor(dtype, {B, L, H * D});
  TestTensor ws = EmptyTensor(DataType::kFloat32, {L, D + 2});
  TestTensor lse = EmptyTensor(DataType::kFloat32, {B, H, L});
  std::vector<TestTensor*> fwd_in = {&q, &k, &v};
  if (c.lp > 0) fwd_in.push_back(&bias);
  ASSERT_TRUE(RunKernel("EfficientAttention", {}, fwd_in, {&o, &ws, &lse}).ok());
  TestTensor d_o = MakeTensor(dtype, {B, L, H * D}, RandomValues(n, 5));

  const std::vector<double> qv = ToDoubles(q), kv = ToDoubles(k), vv = ToDoubles(v),
                            gv = ToDoubles(d_o), bv = ToDoubles(bias);
  std::vector<double> dq(n, 0), dk(n, 0), dv(n, 0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t head = (b * H + h) * L * D;
      std::vector<double> p(L * L, 0), dp(L * L, 0);
      for (int64_t i = 0; i < L; ++i) {
        double max = -INFINITY;
        std::vector<double> s(L);
        for (int64_t j = 0; j < L; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e) dot += qv[head + i * D + e] * kv[head + j * D + e];
          s[j] = dot * scale + (c.lp > 0 ? bv[(h * L + i) * c.lp + j] : 0);
          max = std::max(max, s[j]);
        }
        if (std::isinf(max)) continue;  // a fully masked row: P = 0
        double sum = 0;
        for (int64_t j = 0; j < L; ++j) sum += std::exp(s[j] - max);
        for (int64_t j = 0; j < L; ++j) p[i * L + j] = std::exp(s[j] - max) / sum;
      }
      auto g = [&](int64_t i, int64_t e) { return gv[(b * L + i) * H * D + h * D + e]; };
      for (int64_t i = 0; i < L; ++i) {
        double row = 0;
        for (int64_t j = 0; j < L; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e) dot += g(i, e) * vv[head + j * D + e];
          dp[i * L + j] = dot;
          row += dot * p[i * L + j];
        }
        for (int64_t j = 0; j < L; ++j) {
          const double ds = p[i * L + j] * (dp[i * L + j] - row);
          for (int64_t e = 0; e < D; ++e) {
            dq[head + i * D + e] += ds * kv[head + j * D + e] * scale;
            dk[head + j * D + e] += ds * qv[head + i * D + e] * scale;
            dv[head + j * D + e] += p[i * L + j] * g(i, e);
          }
        }
      }
    }
  }
  TestTensor tdq = EmptyTensor(dtype, {B, H, L, D}), tdk = EmptyTensor(dtype, {B, H, L, D}),
             tdv = EmptyTensor(dtype, {B, H, L, D});
  TestTensor gws = EmptyTensor(DataType::kFloat32, {L, 3 * D + 1});
  std::vector<TestTensor*> in = {&d_o, &q, &k, &v, &o, &lse};
  if (c.lp > 0) in.push_back(&bias);
  const absl::Status s = RunKernel("EfficientAttentionGradient", {}, in, {&tdq, &tdk, &tdv, &gws});
  ASSERT_TRUE(s.ok()) << s;
  // fp16/bf16: O (read for D_i = dO . O) is rounded to the storage type, the reference's is not.
  const double rtol = dtype == DataType::kFloat32 ? 1e-4 : dtype == DataType::kFloat16 ? 1e-2 : 5e-2;
  const double atol = dtype == DataType::kFloat32 ? 1e-5 : dtype == DataType::kFloat16 ? 2e-3 : 1e-2;
  EXPECT_EQ(CompareClose(ToDoubles(tdq), dq, rtol, atol), "");
  EXPECT_EQ(CompareClose(ToDoubles(tdk), dk, rtol, atol), "");
  EXPECT_EQ(CompareClose(ToDoubles(tdv), dv, rtol, atol), "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EfficientAttentionGradientTest,
    ::testing::Combine(::testing::Values(Case{"no_bias", 2, 2, 9, 4, 0},
                                         Case{"padded_bias", 2, 2, 9, 4, 16},
                                         Case{"several_tiles", 1, 1, 70, 8, 72}),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16)),
    [](const ::testing::TestParamInfo<std::tuple<Case, DataType>>& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::string(graph::DataTypeName(std::get<1>(info.param)));
    });

TEST(EfficientAttentionGradientTest, RefusesWrongShapesAndSharedOutputs) {
  TestTensor q = MakeTensor(DataType::kFloat32, {1, 1, 4, 2}, RandomValues(8, 1));
  TestTensor o = MakeTensor(DataType::kFloat32, {1, 4, 2}, RandomValues(8, 2));
  TestTensor lse = MakeTensor(DataType::kFloat32, {1, 1, 4}, RandomValues(4, 3));
  TestTensor dq = EmptyTensor(DataType::kFloat32, {1, 1, 4, 2}), dk = dq, dv = dq;
  TestTensor small_ws = EmptyTensor(DataType::kFloat32, {4, 2});
  EXPECT_EQ(RunKernel("EfficientAttentionGradient", {}, {&o, &q, &q, &q, &o, &lse},
                      {&dq, &dk, &dv, &small_ws})
                .code(),
            absl::StatusCode::kInvalidArgument);
  TestTensor ws = EmptyTensor(DataType::kFloat32, {4, 7});
  EXPECT_EQ(RunKernel("EfficientAttentionGradient", {}, {&o, &q, &q, &q, &o, &lse},
                      {&dq, &dq, &dv, &ws})
                .code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(RunKernel("EfficientAttentionGradient", {}, {&o, &q, &q, &q, &o, &lse},
                        {&dq, &dk, &dv, &ws})
                  .ok());
}

}  // namespace
}  // namespace memonger::alloc

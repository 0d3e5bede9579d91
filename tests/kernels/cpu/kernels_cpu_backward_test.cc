// The backward kernels of kernels_cpu_backward.cc against double-precision formulas, in
// float32, float16 and bfloat16 storage (references read the rounded inputs): ReluGradient,
// SigmoidGradient and TanhGradient (in place over dY too), GeluGradient (erf and tanh forms),
// SoftmaxGradient (in place over dY too), FCGradient and FCTransposedGradient, MatMulGradient
// (broadcast batch dims summed away, 1-D operands, trans_a/trans_b), LayerNormalizationGradient
// (with a broadcast Scale).
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

double Rtol(DataType d) {
  return d == DataType::kFloat16 ? 3e-3 : d == DataType::kBFloat16 ? 2e-2 : 1e-5;
}

class BackwardKernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(BackwardKernelTest, PointwiseGradients) {
  const DataType dtype = GetParam();
  const std::vector<int64_t> dims = {3, 7};
  TestTensor x = MakeTensor(dtype, dims, RandomValues(21, 1, -3, 3));
  TestTensor dy = MakeTensor(dtype, dims, RandomValues(21, 2));
  const std::vector<double> xv = ToDoubles(x), g = ToDoubles(dy);
  TestTensor dx = EmptyTensor(dtype, dims);
  // ReluGradient(Y, dY): Y = relu(x).
  TestTensor y = MakeTensor(dtype, dims, {});
  ASSERT_TRUE(RunKernel("Relu", {}, {&x}, {&y}).ok());
  ASSERT_TRUE(RunKernel("ReluGradient", {}, {&y, &dy}, {&dx}).ok());
  std::vector<double> ref(21);
  for (int i = 0; i < 21; ++i) ref[i] = xv[i] > 0 ? g[i] : 0;
  EXPECT_EQ(ToDoubles(dx), ref);
  // SigmoidGradient(Y, dY) = dY y (1 - y) and TanhGradient(Y, dY) = dY (1 - y^2), from the
  // stored (rounded) Y; also in place over dY.
  for (const char* type : {"Sigmoid", "Tanh"}) {
    SCOPED_TRACE(type);
    const bool sigmoid = std::string(type) == "Sigmoid";
    ASSERT_TRUE(RunKernel(type, {}, {&x}, {&y}).ok());
    const std::vector<double> yv = ToDoubles(y);
    for (int i = 0; i < 21; ++i) {
      ref[i] = sigmoid ? g[i] * yv[i] * (1 - yv[i]) : g[i] * (1 - yv[i] * yv[i]);
    }
    ASSERT_TRUE(RunKernel(absl::StrCat(type, "Gradient"), {}, {&y, &dy}, {&dx}).ok());
    EXPECT_EQ(CompareClose(ToDoubles(dx), ref, Rtol(dtype), 1e-6), "");
    TestTensor in_place = dy;
    ASSERT_TRUE(RunKernel(absl::StrCat(type, "Gradient"), {}, {&y, &in_place}, {&in_place}).ok());
    EXPECT_EQ(ToDoubles(in_place), ToDoubles(dx));
  }
  // GeluGradient(dY, X), both forms.
  for (bool tanh_form : {false, true}) {
    SCOPED_TRACE(tanh_form);
    for (int i = 0; i < 21; ++i) {
      const double v = xv[i];
      double d;
      if (tanh_form) {
        const double c = std::sqrt(2 / M_PI), u = c * (v + 0.044715 * v * v * v), t = std::tanh(u);
        d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
      } else {
        d = 0.5 * (1 + std::erf(v / std::sqrt(2))) + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
      }
      ref[i] = g[i] * d;
    }
    std::vector<Attribute> attrs;
    if (tanh_form) attrs.push_back({"approximate", std::string("tanh")});
    ASSERT_TRUE(RunKernel("GeluGradient", attrs, {&dy, &x}, {&dx}).ok());
    EXPECT_EQ(CompareClose(ToDoubles(dx), ref, Rtol(dtype), 1e-6), "");
  }
  // SoftmaxGradient(Y, dY) over axis 0 and the last axis; in place over dY gives the same.
  for (int64_t axis : {0, -1}) {
    SCOPED_TRACE(axis);
    ASSERT_TRUE(RunKernel("Softmax", {{"axis", axis}}, {&x}, {&y}).ok());
    const std::vector<double> p = ToDoubles(y);
    const int64_t n = axis == 0 ? 3 : 7, stride = axis == 0 ? 7 : 1, rows = axis == 0 ? 7 : 3;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = axis == 0 ? r : r * 7;
      double dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += p[base + j * stride] * g[base + j * stride];
      for (int64_t j = 0; j < n; ++j) {
        ref[base + j * stride] = p[base + j * stride] * (g[base + j * stride] - dot);
      }
    }
    ASSERT_TRUE(RunKernel("SoftmaxGradient", {{"axis", axis}}, {&y, &dy}, {&dx}).ok());
    EXPECT_EQ(CompareClose(ToDoubles(dx), ref, Rtol(dtype), 1e-6), "");
    TestTensor in_place = dy;
    ASSERT_TRUE(RunKernel("SoftmaxGradient", {{"axis", axis}}, {&y, &in_place}, {&in_place}).ok());
    EXPECT_EQ(ToDoubles(in_place), ToDoubles(dx));
  }
}

TEST_P(BackwardKernelTest, FcGradients) {
  const DataType dtype = GetParam();
  // X [2, 3, 4] flattened at axis 1: M = 2, K = 12; W [5, 12]; dY [2, 5].
  TestTensor x = MakeTensor(dtype, {2, 3, 4}, RandomValues(24, 1));
  TestTensor w = MakeTensor(dtype, {5, 12}, RandomValues(60, 2));
  TestTensor dy = MakeTensor(dtype, {2, 5}, RandomValues(10, 3));
  const std::vector<double> xv = ToDoubles(x), wv = ToDoubles(w), g = ToDoubles(dy);
  std::vector<double> dw(60, 0), db(5, 0), dx(24, 0);
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 5; ++n) {
      db[n] += g[m * 5 + n];
      for (int k = 0; k < 12; ++k) {
        dw[n * 12 + k] += g[m * 5 + n] * xv[m * 12 + k];
        dx[m * 12 + k] += g[m * 5 + n] * wv[n * 12 + k];
      }
    }
  TestTensor tdw = EmptyTensor(dtype, {5, 12}), tdb = EmptyTensor(dtype, {5}), tdx = EmptyTensor(dtype, {2, 3, 4});
  ASSERT_TRUE(RunKernel("FCGradient", {}, {&x, &w, &dy}, {&tdw, &tdb, &tdx}).ok());
  EXPECT_EQ(CompareClose(ToDoubles(tdw), dw, Rtol(dtype), 1e-5), "");
  EXPECT_EQ(CompareClose(ToDoubles(tdb), db, Rtol(dtype), 1e-5), "");
  EXPECT_EQ(CompareClose(ToDoubles(tdx), dx, Rtol(dtype), 1e-5), "");
  // FCTransposed: W stored [K, N].
  std::vector<double> wt(60);
  for (int n = 0; n < 5; ++n)
    for (int k = 0; k < 12; ++k) wt[k * 5 + n] = wv[n * 12 + k];
  TestTensor w_t = MakeTensor(dtype, {12, 5}, wt);
  TestTensor tdw_t = EmptyTensor(dtype, {12, 5});
  ASSERT_TRUE(RunKernel("FCTransposedGradient", {}, {&x, &w_t, &dy}, {&tdw_t, &tdb}).ok());
  std::vector<double> dw_t(60);
  for (int n = 0; n < 5; ++n)
    for (int k = 0; k < 12; ++k) dw_t[k * 5 + n] = dw[n * 12 + k];
  EXPECT_EQ(CompareClose(ToDoubles(tdw_t), dw_t, Rtol(dtype), 1e-5), "");
}

// MatMul cases: stored dims of A and B, the flags, the output dims.
struct MatMulCase {
  const char* name;
  std::vector<int64_t> a, b, c;
  bool ta, tb;
};

void PrintTo(const MatMulCase& c, std::ostream* os) { *os << c.name; }

// op(A) [.., M, K] x op(B) [.., K, N] with right-aligned batch broadcasting, in double:
// returns dA, dB for dC.
void ReferenceMatMulGradient(const MatMulCase& mc, const std::vector<double>& a,
                             const std::vector<double>& b, const std::vector<double>& dc,
                             std::vector<double>& da, std::vector<double>& db) {
  std::vector<int64_t> ad = mc.a, bd = mc.b;
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  const bool ta = mc.a.size() > 1 && mc.ta, tb = mc.b.size() > 1 && mc.tb;
  const int64_t ra = ad.size(), rb = bd.size();
  const int64_t m = ta ? ad[ra - 1] : ad[ra - 2], k = ta ? ad[ra - 2] : ad[ra - 1];
  const int64_t n = tb ? bd[rb - 2] : bd[rb - 1];
  const std::vector<int64_t> ba(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(ba.size(), bb.size());
  std::vector<int64_t> batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t x = i + ba.size() >= rank ? ba[i + ba.size() - rank] : 1;
    const int64_t y = i + bb.size() >= rank ? bb[i + bb.size() - rank] : 1;
    batch[i] = std::max(x, y);
  }
  auto operand_batch = [&](const std::vector<int64_t>& own, std::vector<int64_t> idx) {
    int64_t flat = 0;
    for (size_t i = 0; i < own.size(); ++i) {
      const int64_t v = own[i] == 1 ? 0 : idx[i + rank - own.size()];
      flat = flat * own[i] + v;
    }
    return flat;
  };
  da.assign(a.size(), 0);
  db.assign(b.size(), 0);
  const int64_t batches = Count(batch);
  for (int64_t bi = 0; bi < batches; ++bi) {
    std::vector<int64_t> idx(rank);
    for (int64_t rest = bi, i = static_cast<int64_t>(rank) - 1; i >= 0; --i) {
      idx[i] = rest % batch[i];
      rest /= batch[i];
    }
    const int64_t oa = operand_batch(ba, idx) * m * k, ob = operand_batch(bb, idx) * k * n;
    auto at_a = [&](int64_t i, int64_t j) { return oa + (ta ? j * m + i : i * k + j); };
    auto at_b = [&](int64_t i, int64_t j) { return ob + (tb ? j * k + i : i * n + j); };
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double g = dc[(bi * m + i) * n + j];
        for (int64_t p = 0; p < k; ++p) {
          da[at_a(i, p)] += g * b[at_b(p, j)];
          db[at_b(p, j)] += a[at_a(i, p)] * g;
        }
      }
  }
}

class MatMulGradientTest : public ::testing::TestWithParam<std::tuple<MatMulCase, DataType>> {};

TEST_P(MatMulGradientTest, MatchesTheDefinition) {
  const auto& [mc, dtype] = GetParam();
  TestTensor a = MakeTensor(dtype, mc.a, RandomValues(Count(mc.a), 1));
  TestTensor b = MakeTensor(dtype, mc.b, RandomValues(Count(mc.b), 2));
  TestTensor dc = MakeTensor(dtype, mc.c, RandomValues(Count(mc.c), 3));
  std::vector<double> da, db;
  ReferenceMatMulGradient(mc, ToDoubles(a), ToDoubles(b), ToDoubles(dc), da, db);
  std::vector<Attribute> attrs;
  if (mc.ta) attrs.push_back({"trans_a", int64_t{1}});
  if (mc.tb) attrs.push_back({"trans_b", int64_t{1}});
  TestTensor tda = EmptyTensor(dtype, mc.a), tdb = EmptyTensor(dtype, mc.b);
  const absl::Status s = RunKernel("MatMulGradient", attrs, {&dc, &a, &b}, {&tda, &tdb});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(CompareClose(ToDoubles(tda), da, Rtol(dtype), 1e-5), "");
  EXPECT_EQ(CompareClose(ToDoubles(tdb), db, Rtol(dtype), 1e-5), "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatMulGradientTest,
    ::testing::Combine(
        ::testing::Values(MatMulCase{"plain", {3, 4}, {4, 5}, {3, 5}, false, false},
                          MatMulCase{"broadcast_weight", {2, 3, 4}, {4, 5}, {2, 3, 5}, false, false},
                          MatMulCase{"broadcast_batch_of_a", {1, 3, 4}, {2, 4, 5}, {2, 3, 5}, false, false},
                          MatMulCase{"four_d", {2, 2, 3, 4}, {2, 2, 4, 3}, {2, 2, 3, 3}, false, false},
                          MatMulCase{"transposed", {2, 4, 3}, {2, 5, 4}, {2, 3, 5}, true, true},
                          MatMulCase{"vector_times_matrix", {4}, {4, 5}, {5}, false, false},
                          MatMulCase{"matrix_times_vector", {3, 4}, {4}, {3}, false, false}),
        ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16)),
    [](const ::testing::TestParamInfo<std::tuple<MatMulCase, DataType>>& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::string(graph::DataTypeName(std::get<1>(info.param)));
    });

TEST_P(BackwardKernelTest, LayerNormalizationGradient) {
  const DataType dtype = GetParam();
  const int64_t rows = 4, n = 6;
  for (bool broadcast_scale : {false, true}) {
    SCOPED_TRACE(broadcast_scale);
    const std::vector<int64_t> sd = broadcast_scale ? std::vector<int64_t>{1} : std::vector<int64_t>{n};
    TestTensor x = MakeTensor(dtype, {2, 2, n}, RandomValues(rows * n, 1, -2, 2));
    TestTensor scale = MakeTensor(dtype, sd, RandomValues(Count(sd), 2));
    TestTensor bias = MakeTensor(dtype, sd, RandomValues(Count(sd), 3));
    TestTensor y = EmptyTensor(dtype, {2, 2, n});
    TestTensor mean = EmptyTensor(DataType::kFloat32, {2, 2, 1});
    TestTensor inv = EmptyTensor(DataType::kFloat32, {2, 2, 1});
    const double eps = 1e-5;
    ASSERT_TRUE(RunKernel("LayerNormalization", {{"axis", int64_t{-1}}, {"epsilon", eps}},
                          {&x, &scale, &bias}, {&y, &mean, &inv})
                    .ok());
    TestTensor dy = MakeTensor(dtype, {2, 2, n}, RandomValues(rows * n, 4));
    const std::vector<double> xv = ToDoubles(x), sv = ToDoubles(scale), g = ToDoubles(dy);
    std::vector<double> dx(rows * n), dscale(Count(sd), 0), dbias(Count(sd), 0);
    for (int64_t r = 0; r < rows; ++r) {
      double mu = 0, var = 0;
      for (int64_t j = 0; j < n; ++j) mu += xv[r * n + j] / n;
      for (int64_t j = 0; j < n; ++j) var += (xv[r * n + j] - mu) * (xv[r * n + j] - mu) / n;
      const double is = 1 / std::sqrt(var + eps);
      double sum_g = 0, sum_gx = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double xhat = (xv[r * n + j] - mu) * is, gs = g[r * n + j] * sv[broadcast_scale ? 0 : j];
        sum_g += gs;
        sum_gx += gs * xhat;
        dscale[broadcast_scale ? 0 : j] += g[r * n + j] * xhat;
        dbias[broadcast_scale ? 0 : j] += g[r * n + j];
      }
      for (int64_t j = 0; j < n; ++j) {
        const double xhat = (xv[r * n + j] - mu) * is, gs = g[r * n + j] * sv[broadcast_scale ? 0 : j];
        dx[r * n + j] = is * (gs - sum_g / n - xhat * sum_gx / n);
      }
    }
    TestTensor tdx = EmptyTensor(dtype, {2, 2, n}), tds = EmptyTensor(dtype, sd), tdb = EmptyTensor(dtype, sd);
    ASSERT_TRUE(RunKernel("LayerNormalizationGradient", {{"axis", int64_t{-1}}},
                          {&dy, &x, &scale, &mean, &inv}, {&tdx, &tds, &tdb})
                    .ok());
    const double rtol = dtype == DataType::kFloat32 ? 1e-4 : Rtol(dtype);
    EXPECT_EQ(CompareClose(ToDoubles(tdx), dx, rtol, 1e-4), "");
    EXPECT_EQ(CompareClose(ToDoubles(tds), dscale, rtol, 1e-4), "");
    EXPECT_EQ(CompareClose(ToDoubles(tdb), dbias, rtol, 1e-4), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BackwardKernelTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16));

TEST(BackwardKernelTest, RefusalsNameTheOp) {
  TestTensor a = MakeTensor(DataType::kFloat32, {3, 4}, RandomValues(12, 1));
  TestTensor b = MakeTensor(DataType::kFloat32, {5, 6}, RandomValues(30, 2));
  TestTensor dc = MakeTensor(DataType::kFloat32, {3, 6}, RandomValues(18, 3));
  TestTensor da = EmptyTensor(DataType::kFloat32, {3, 4}), db = EmptyTensor(DataType::kFloat32, {5, 6});
  const absl::Status s = RunKernel("MatMulGradient", {}, {&dc, &a, &b}, {&da, &db});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()).rfind("MatMulGradient: ", 0), 0u) << s;
  TestTensor i32 = MakeTensor(DataType::kInt32, {3}, {1, 2, 3});
  TestTensor out = EmptyTensor(DataType::kInt32, {3});
  EXPECT_EQ(RunKernel("ReluGradient", {}, {&i32, &i32}, {&out}).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace memonger::alloc

// Matrix-product CPU kernels against a double-precision reference: ONNX MatMul (1-D operands,
// broadcast batch dims), Caffe2 trans_a/trans_b, Gemm (transA, transB, alpha, beta, C
// broadcast), FC and FCTransposed with axes; float32, float16, bfloat16 storage; outputs that
// overlap an input are refused.
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


// Sums of k products of values in [-1, 1): float32 accumulation keeps ~1e-6 relative; the
// output's rounding dominates for the half types.
double Rtol(DataType d) {
  return d == DataType::kFloat16 ? 2e-3 : d == DataType::kBFloat16 ? 1.6e-2 : 2e-5;
}

// Reference numpy matmul on doubles (batch broadcasting; 1-D promotion).
std::vector<double> ReferenceMatMul(std::vector<int64_t> da, const std::vector<double>& a,
                                    std::vector<int64_t> db, const std::vector<double>& b,
                                    bool ta, bool tb) {
  if (da.size() == 1) da.insert(da.begin(), 1);
  if (db.size() == 1) db.push_back(1);
  const size_t ra = da.size(), rb = db.size();
  const int64_t m = ta ? da[ra - 1] : da[ra - 2], k = ta ? da[ra - 2] : da[ra - 1];
  const int64_t n = tb ? db[rb - 2] : db[rb - 1];
  const size_t br = std::max(ra, rb) - 2;
  std::vector<int64_t> batch(br);
  auto dim = [&](const std::vector<int64_t>& d, size_t i) -> int64_t {
    const size_t r = d.size() - 2;
    return i + r >= br ? d[i + r - br] : 1;
  };
  for (size_t i = 0; i < br; ++i) batch[i] = std::max(dim(da, i), dim(db, i));
  const int64_t nb = Count(batch);
  std::vector<double> out(static_cast<size_t>(nb * m * n));
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rest = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (size_t i = br; i-- > 0;) {
      const int64_t idx = rest % batch[i];
      rest /= batch[i];
      if (dim(da, i) != 1) oa += idx * sa;
      if (dim(db, i) != 1) ob += idx * sb;
      sa *= dim(da, i);
      sb *= dim(db, i);
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = a[oa * m * k + (ta ? p * m + i : i * k + p)];
          const double y = b[ob * k * n + (tb ? j * k + p : p * n + j)];
          s += x * y;
        }
        out[(bi * m + i) * n + j] = s;
      }
    }
  }
  return out;
}

struct MatMulCase {
  const char* name;
  std::vector<int64_t> a, b, out;
  bool trans_a = false, trans_b = false;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const MatMulCase& c, std::ostream* os) { *os << c.name; }

class MatMulKernelTest
    : public ::testing::TestWithParam<std::tuple<MatMulCase, DataType>> {};

TEST_P(MatMulKernelTest, MatchesReference) {
  const auto& [c, dtype] = GetParam();
  TestTensor a = MakeTensor(dtype, c.a, RandomValues(Count(c.a), 1));
  TestTensor b = MakeTensor(dtype, c.b, RandomValues(Count(c.b), 2));
  TestTensor y = EmptyTensor(dtype, c.out);
  std::vector<Attribute> attrs;
  if (c.trans_a) attrs.push_back({"trans_a", int64_t{1}});
  if (c.trans_b) attrs.push_back({"trans_b", int64_t{1}});
  const absl::Status s = RunKernel(c.a.size() > 2 || c.b.size() > 2 ? "BatchMatMul" : "MatMul",
                                   attrs, {&a, &b}, {&y});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(CompareClose(ToDoubles(y),
                         ReferenceMatMul(c.a, ToDoubles(a), c.b, ToDoubles(b), c.trans_a,
                                         c.trans_b),
                         Rtol(dtype), 1e-5),
            "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatMulKernelTest,
    ::testing::Combine(
        ::testing::Values(MatMulCase{"matrix", {7, 19}, {19, 23}, {7, 23}},
                          MatMulCase{"vector_times_matrix", {19}, {19, 5}, {5}},
                          MatMulCase{"matrix_times_vector", {4, 19}, {19}, {4}},
                          MatMulCase{"dot", {19}, {19}, {}},
                          MatMulCase{"batched", {3, 5, 8}, {3, 8, 6}, {3, 5, 6}},
                          MatMulCase{"broadcast_batch", {2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},
                          MatMulCase{"shared_weight", {2, 9, 16}, {16, 33}, {2, 9, 33}},
                          MatMulCase{"caffe2_transposes", {2, 8, 5}, {2, 6, 8}, {2, 5, 6}, true, true}),
        ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16)),
    [](const ::testing::TestParamInfo<std::tuple<MatMulCase, DataType>>& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::string(graph::DataTypeName(std::get<1>(info.param)));
    });

TEST(MatMulKernelTest, GemmWithTransposesAlphaBetaAndBroadcastC) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(graph::DataTypeName(dtype));
    TestTensor a = MakeTensor(dtype, {6, 4}, RandomValues(24, 3));  // transA: [K=6, M=4]
    TestTensor b = MakeTensor(dtype, {5, 6}, RandomValues(30, 4));  // transB: [N=5, K=6]
    TestTensor c = MakeTensor(dtype, {1, 5}, RandomValues(5, 5));
    TestTensor y = EmptyTensor(dtype, {4, 5});
    const std::vector<Attribute> attrs = {{"transA", int64_t{1}}, {"transB", int64_t{1}},
                                          {"alpha", 0.5}, {"beta", 2.0}};
    ASSERT_TRUE(RunKernel("Gemm", attrs, {&a, &b, &c}, {&y}).ok());
    std::vector<double> expected = ReferenceMatMul({6, 4}, ToDoubles(a), {5, 6}, ToDoubles(b), true, true);
    const std::vector<double> cv = ToDoubles(c);
    for (int64_t i = 0; i < 4; ++i) {
      for (int64_t j = 0; j < 5; ++j) expected[i * 5 + j] = 0.5 * expected[i * 5 + j] + 2.0 * cv[j];
    }
    EXPECT_EQ(CompareClose(ToDoubles(y), expected, Rtol(dtype), 1e-5), "");
  }
}

TEST(MatMulKernelTest, FcAndFcTransposed) {
  // X [2, 3, 4] flattened at axis 1: [2, 12]; W [5, 12]; b [5].
  TestTensor x = MakeTensor(DataType::kFloat32, {2, 3, 4}, RandomValues(24, 6));
  TestTensor w = MakeTensor(DataType::kFloat32, {5, 12}, RandomValues(60, 7));
  TestTensor b = MakeTensor(DataType::kFloat32, {5}, RandomValues(5, 8));
  TestTensor y = EmptyTensor(DataType::kFloat32, {2, 5});
  ASSERT_TRUE(RunKernel("FC", {}, {&x, &w, &b}, {&y}).ok());
  std::vector<double> expected = ReferenceMatMul({2, 12}, ToDoubles(x), {5, 12}, ToDoubles(w), false, true);
  for (int64_t i = 0; i < 10; ++i) expected[i] += ToDoubles(b)[i % 5];
  EXPECT_EQ(CompareClose(ToDoubles(y), expected, 2e-6, 1e-6), "");
  // FCTransposed with W [12, 5] and X flattened at axis 2: [6, 4] x ... needs K = 4.
  TestTensor wt = MakeTensor(DataType::kFloat32, {4, 5}, RandomValues(20, 9));
  TestTensor y2 = EmptyTensor(DataType::kFloat32, {2, 3, 5});
  ASSERT_TRUE(RunKernel("FCTransposed", {{"axis", int64_t{2}}}, {&x, &wt, &b}, {&y2}).ok());
  std::vector<double> expected2 = ReferenceMatMul({6, 4}, ToDoubles(x), {4, 5}, ToDoubles(wt), false, false);
  for (int64_t i = 0; i < 30; ++i) expected2[i] += ToDoubles(b)[i % 5];
  EXPECT_EQ(CompareClose(ToDoubles(y2), expected2, 2e-6, 1e-6), "");
}

TEST(MatMulKernelTest, RefusesAliasedOutputsAndOtherTypes) {
  TestTensor a = MakeTensor(DataType::kFloat32, {3, 3}, RandomValues(9, 1));
  TestTensor b = MakeTensor(DataType::kFloat32, {3, 3}, RandomValues(9, 2));
  EXPECT_EQ(RunKernel("MatMul", {}, {&a, &b}, {&a}).code(), absl::StatusCode::kFailedPrecondition);
  TestTensor i = MakeTensor(DataType::kInt64, {3, 3}, RandomValues(9, 1));
  TestTensor o = EmptyTensor(DataType::kInt64, {3, 3});
  EXPECT_EQ(RunKernel("MatMul", {}, {&i, &i}, {&o}).code(), absl::StatusCode::kUnimplemented);
  TestTensor wrong = EmptyTensor(DataType::kFloat32, {3, 4});
  EXPECT_EQ(RunKernel("MatMul", {}, {&a, &b}, {&wrong}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memonger::alloc

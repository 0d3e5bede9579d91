// Elementwise CPU kernels: unary functions against double-precision references in every float
// storage type, numpy and Caffe2 legacy broadcasting, in-place execution (out == in), refusal
// of partial overlaps, comparisons, Where, Sum/Mean, Cast, and Unimplemented for unsupported
// element types.
#include <cmath>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "allocator/executor.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernels_cpu.h"
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

// Storage rounding: float32 ~6e-8, float16 ~4.9e-4, bfloat16 ~3.9e-3 relative (half an ulp),
// plus what the float32 math adds.
double Rtol(DataType d) {
  switch (d) {
    case DataType::kFloat16: return 1e-3;
    case DataType::kBFloat16: return 8e-3;
    default: return 1e-6;
  }
}

struct UnaryCase {
  const char* op;
  std::function<double(double)> reference;
  double lo, hi;  // input range
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const UnaryCase& c, std::ostream* os) { *os << c.op; }

class UnaryKernelTest
    : public ::testing::TestWithParam<std::tuple<UnaryCase, DataType>> {};

TEST_P(UnaryKernelTest, MatchesDoubleReference) {
  const auto& [c, dtype] = GetParam();
  TestTensor x = MakeTensor(dtype, {3, 37}, RandomValues(3 * 37, 11, c.lo, c.hi));
  TestTensor y = EmptyTensor(dtype, {3, 37});
  ASSERT_TRUE(RunKernel(c.op, {}, {&x}, {&y}).ok()) << RunKernel(c.op, {}, {&x}, {&y});
  std::vector<double> expected = ToDoubles(x);
  for (double& v : expected) v = c.reference(v);
  EXPECT_EQ(CompareClose(ToDoubles(y), expected, Rtol(dtype), 1e-6), "");
  // In place: the same memory as input and output.
  const std::vector<double> before = ToDoubles(x);
  ASSERT_TRUE(RunKernel(c.op, {}, {&x}, {&x}).ok());
  EXPECT_EQ(ToDoubles(x), ToDoubles(y));
}

const UnaryCase kUnaryCases[] = {
    {"Relu", [](double x) { return x > 0 ? x : 0; }, -2, 2},
    {"Gelu", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4},
    {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30},
    {"Tanh", [](double x) { return std::tanh(x); }, -5, 5},
    {"Exp", [](double x) { return std::exp(x); }, -5, 5},
    {"Log", [](double x) { return std::log(x); }, 0.01, 50},
    {"Sqrt", [](double x) { return std::sqrt(x); }, 0, 100},
    {"Neg", [](double x) { return -x; }, -3, 3},
    {"Abs", [](double x) { return std::abs(x); }, -3, 3},
    {"Erf", [](double x) { return std::erf(x); }, -3, 3},
    {"Softplus", [](double x) { return std::log1p(std::exp(x)); }, -20, 20},
};

INSTANTIATE_TEST_SUITE_P(
    Ops, UnaryKernelTest,
    ::testing::Combine(::testing::ValuesIn(kUnaryCases),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                         DataType::kBFloat16, DataType::kFloat64)),
    [](const ::testing::TestParamInfo<std::tuple<UnaryCase, DataType>>& info) {
      return std::string(std::get<0>(info.param).op) + "_" +
             std::string(graph::DataTypeName(std::get<1>(info.param)));
    });

TEST(ElementwiseKernelTest, GeluTanhApproximation) {
  TestTensor x = MakeTensor(DataType::kFloat32, {5}, {-3, -1, 0, 1, 3});
  TestTensor y = EmptyTensor(DataType::kFloat32, {5});
  ASSERT_TRUE(RunKernel("Gelu", {{"approximate", std::string("tanh")}}, {&x}, {&y}).ok());
  std::vector<double> expected;
  for (double v : ToDoubles(x)) {
    expected.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  EXPECT_EQ(CompareClose(ToDoubles(y), expected, 1e-6, 1e-7), "");
  EXPECT_EQ(RunKernel("Gelu", {{"approximate", std::string("cubic")}}, {&x}, {&y}).code(),
            absl::StatusCode::kInvalidArgument);
}

struct BinaryCase {
  const char* name;
  const char* op;
  std::vector<int64_t> a, b, out;
  std::vector<Attribute> attrs;
};
// Printed by name (gtest would otherwise dump the bytes, padding included).
void PrintTo(const BinaryCase& c, std::ostream* os) { *os << c.name; }

double Apply(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  return a / b;
}

class BinaryKernelTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinaryKernelTest, BroadcastsLikeTheReference) {
  const BinaryCase& c = GetParam();
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(graph::DataTypeName(dtype));
    int64_t na = 1, nb = 1, n = 1;
    for (int64_t d : c.a) na *= d;
    for (int64_t d : c.b) nb *= d;
    for (int64_t d : c.out) n *= d;
    TestTensor a = MakeTensor(dtype, c.a, RandomValues(na, 1, 0.5, 2));
    TestTensor b = MakeTensor(dtype, c.b, RandomValues(nb, 2, 0.5, 2));
    TestTensor y = EmptyTensor(dtype, c.out);
    ASSERT_TRUE(RunKernel(c.op, c.attrs, {&a, &b}, {&y}).ok())
        << RunKernel(c.op, c.attrs, {&a, &b}, {&y});
    // Reference: index by multi-index, right-aligned (numpy) or at `axis` (legacy).
    int64_t axis = static_cast<int64_t>(c.out.size() - c.b.size());
    for (const Attribute& attr : c.attrs) {
      if (attr.name == "axis") axis = std::get<int64_t>(attr.data);
    }
    const bool legacy = !c.attrs.empty();
    const std::vector<double> av = ToDoubles(a), bv = ToDoubles(b);
    std::vector<double> expected(n);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> idx(c.out.size());
      int64_t rest = i;
      for (size_t d = c.out.size(); d-- > 0;) {
        idx[d] = rest % c.out[d];
        rest /= c.out[d];
      }
      auto offset = [&](const std::vector<int64_t>& dims, size_t start) {
        int64_t off = 0;
        for (size_t d = 0; d < dims.size(); ++d) off = off * dims[d] + (dims[d] == 1 ? 0 : idx[start + d]);
        return off;
      };
      const int64_t ia = offset(c.a, c.out.size() - c.a.size());
      const int64_t ib = offset(c.b, legacy ? axis : c.out.size() - c.b.size());
      expected[i] = Apply(c.op, av[ia], bv[ib]);
    }
    EXPECT_EQ(CompareClose(ToDoubles(y), expected, Rtol(dtype), 1e-6), "");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BinaryKernelTest,
    ::testing::Values(
        BinaryCase{"same_shape", "Add", {2, 3}, {2, 3}, {2, 3}, {}},
        BinaryCase{"row_bias", "Add", {4, 5}, {5}, {4, 5}, {}},
        BinaryCase{"column", "Sub", {4, 5}, {4, 1}, {4, 5}, {}},
        BinaryCase{"both_ways", "Mul", {3, 1, 5}, {1, 4, 1}, {3, 4, 5}, {}},
        BinaryCase{"scalar", "Div", {2, 3, 4}, {}, {2, 3, 4}, {}},
        BinaryCase{"scalar_first", "Div", {}, {2, 3}, {2, 3}, {}},
        BinaryCase{"caffe2_legacy_axis", "Add", {2, 3, 4}, {3}, {2, 3, 4},
                   {{"broadcast", int64_t{1}}, {"axis", int64_t{1}}}},
        BinaryCase{"caffe2_legacy_trailing", "Mul", {2, 3, 4}, {3, 4}, {2, 3, 4},
                   {{"broadcast", int64_t{1}}}}),
    [](const ::testing::TestParamInfo<BinaryCase>& info) { return info.param.name; });

TEST(ElementwiseKernelTest, InPlaceAddOfABias) {
  // Caffe2's Add(S, bias) -> S: output and input 0 at one address.
  TestTensor s = MakeTensor(DataType::kFloat16, {2, 3}, {1, 2, 3, 4, 5, 6});
  TestTensor bias = MakeTensor(DataType::kFloat16, {3}, {10, 20, 30});
  ASSERT_TRUE(RunKernel("Add", {}, {&s, &bias}, {&s}).ok());
  EXPECT_EQ(ToDoubles(s), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  // The output at the address of input 1 (same shape) is in place too.
  TestTensor a = MakeTensor(DataType::kFloat32, {3}, {1, 2, 3});
  TestTensor b = MakeTensor(DataType::kFloat32, {3}, {5, 5, 5});
  ASSERT_TRUE(RunKernel("Sub", {}, {&a, &b}, {&b}).ok());
  EXPECT_EQ(ToDoubles(b), (std::vector<double>{-4, -3, -2}));
}

TEST(ElementwiseKernelTest, PartialOverlapIsRefused) {
  // The output starts one element into the input: computing it would read overwritten values.
  TestTensor buffer = MakeTensor(DataType::kFloat32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  graph::TensorType in_type{DataType::kFloat32, {6}};
  graph::Op op;
  op.type = "Relu";
  KernelArgs args;
  args.op = &op;
  args.inputs = {buffer.bytes()};
  args.input_types = {&in_type};
  args.outputs = {buffer.bytes() + 4};
  args.output_types = {&in_type};
  const KernelTable table = MakeCpuKernelTable();
  const absl::Status s = (*table.Find("Relu"))(args);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Relu")) << s;
  // A broadcast input at the output's address is not the identity either.
  TestTensor big = MakeTensor(DataType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  graph::TensorType small{DataType::kFloat32, {3}};
  graph::TensorType big_type = big.type;
  op.type = "Add";
  args.inputs = {big.bytes(), big.bytes()};
  args.input_types = {&small, &big_type};
  args.outputs = {big.bytes()};
  args.output_types = {&big_type};
  EXPECT_EQ((*table.Find("Add"))(args).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ElementwiseKernelTest, ComparisonsWhereAndLogic) {
  TestTensor a = MakeTensor(DataType::kFloat32, {4}, {1, 2, 3, 4});
  TestTensor b = MakeTensor(DataType::kFloat32, {1}, {2.5});
  TestTensor c = EmptyTensor(DataType::kBool, {4});
  ASSERT_TRUE(RunKernel("Less", {}, {&a, &b}, {&c}).ok());
  EXPECT_EQ(ToDoubles(c), (std::vector<double>{1, 1, 0, 0}));
  TestTensor y = EmptyTensor(DataType::kFloat32, {4});
  ASSERT_TRUE(RunKernel("Where", {}, {&c, &a, &b}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{1, 2, 2.5, 2.5}));
  TestTensor n = EmptyTensor(DataType::kBool, {4});
  ASSERT_TRUE(RunKernel("Not", {}, {&c}, {&n}).ok());
  EXPECT_EQ(ToDoubles(n), (std::vector<double>{0, 0, 1, 1}));
  TestTensor x = EmptyTensor(DataType::kBool, {4});
  ASSERT_TRUE(RunKernel("Xor", {}, {&c, &n}, {&x}).ok());
  EXPECT_EQ(ToDoubles(x), (std::vector<double>{1, 1, 1, 1}));
}

TEST(ElementwiseKernelTest, SumMeanMaxOfSeveralInputs) {
  TestTensor a = MakeTensor(DataType::kFloat16, {2, 2}, {1, 2, 3, 4});
  TestTensor b = MakeTensor(DataType::kFloat16, {2}, {10, 20});
  TestTensor c = MakeTensor(DataType::kFloat16, {2, 1}, {100, 200});
  TestTensor y = EmptyTensor(DataType::kFloat16, {2, 2});
  ASSERT_TRUE(RunKernel("Sum", {}, {&a, &b, &c}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{111, 122, 213, 224}));
  ASSERT_TRUE(RunKernel("Max", {}, {&a, &b}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{10, 20, 10, 20}));
  ASSERT_TRUE(RunKernel("Mean", {}, {&a, &a}, {&a}).ok());  // in place over input 0
  EXPECT_EQ(ToDoubles(a), (std::vector<double>{1, 2, 3, 4}));
}

TEST(ElementwiseKernelTest, CastBetweenTypes) {
  TestTensor x = MakeTensor(DataType::kFloat32, {5}, {-1.7, 0.1, 2.5, 65519, 1e6});
  TestTensor h = EmptyTensor(DataType::kFloat16, {5});
  ASSERT_TRUE(RunKernel("Cast", {{"to", int64_t{10}}}, {&x}, {&h}).ok());
  std::vector<double> hv = ToDoubles(h);
  EXPECT_EQ(hv[0], -1.7001953125);
  EXPECT_EQ(hv[1], 0.0999755859375);
  EXPECT_EQ(hv[3], 65504);
  EXPECT_TRUE(std::isinf(hv[4]));
  TestTensor i = EmptyTensor(DataType::kInt64, {5});
  ASSERT_TRUE(RunKernel("Cast", {{"to", int64_t{7}}}, {&x}, {&i}).ok());
  EXPECT_EQ(ToDoubles(i), (std::vector<double>{-1, 0, 2, 65519, 1000000}));
  TestTensor b = EmptyTensor(DataType::kBFloat16, {5});
  ASSERT_TRUE(RunKernel("Cast", {{"to", int64_t{16}}}, {&i}, {&b}).ok());
  EXPECT_EQ(ToDoubles(b)[4], 999424);  // 1e6 in bfloat16 (8 significant bits)
}

TEST(ElementwiseKernelTest, ClipWithOmittedMinAndMixedPow) {
  TestTensor x = MakeTensor(DataType::kFloat32, {4}, {-5, 0.5, 2, 9});
  TestTensor hi = MakeTensor(DataType::kFloat32, {}, {1});
  TestTensor y = EmptyTensor(DataType::kFloat32, {4});
  // Clip(x, "", max): the importer keeps slots 0 and 2.
  ASSERT_TRUE(RunKernel("Clip", {{"onnx_input_slots", std::vector<int64_t>{0, 2}}}, {&x, &hi}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{-5, 0.5, 1, 1}));
  ASSERT_TRUE(RunKernel("Clip", {{"min", 0.0}, {"max", 3.0}}, {&x}, {&x}).ok());  // opset 6, in place
  EXPECT_EQ(ToDoubles(x), (std::vector<double>{0, 0.5, 2, 3}));
  TestTensor e = MakeTensor(DataType::kInt64, {1}, {2});
  ASSERT_TRUE(RunKernel("Pow", {}, {&x, &e}, {&y}).ok());
  EXPECT_EQ(ToDoubles(y), (std::vector<double>{0, 0.25, 4, 9}));
}

// In place (one pointer, its own vectorised loop) and out of place give the same bytes, NaN and
// infinities included, over whole vectors and a tail.
TEST(ElementwiseKernelTest, InPlaceUnaryAndClipGiveTheOutOfPlaceBytes) {
  std::vector<double> values;
  for (int i = 0; i < 1003; ++i) values.push_back((i % 17) * 0.75 - 6.0);
  values[5] = std::nan("");
  values[100] = INFINITY;
  values[1001] = -INFINITY;
  struct Case {
    const char* op;
    std::vector<Attribute> attrs;
  };
  for (const Case& c : {Case{"Relu", {}}, Case{"Sigmoid", {}},
                        Case{"Clip", {{"min", 0.0}, {"max", 6.0}}}}) {
    SCOPED_TRACE(c.op);
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
      TestTensor x = MakeTensor(dtype, {1003}, values);
      TestTensor y = EmptyTensor(dtype, {1003});
      ASSERT_TRUE(RunKernel(c.op, c.attrs, {&x}, {&y}).ok());
      ASSERT_TRUE(RunKernel(c.op, c.attrs, {&x}, {&x}).ok());
      ASSERT_EQ(x.num_bytes(), y.num_bytes());
      EXPECT_EQ(std::memcmp(x.bytes(), y.bytes(), static_cast<size_t>(x.num_bytes())), 0);
    }
  }
  // Clip keeps NaN.
  TestTensor x = MakeTensor(DataType::kFloat32, {1003}, values);
  ASSERT_TRUE(RunKernel("Clip", {{"min", 0.0}, {"max", 6.0}}, {&x}, {&x}).ok());
  EXPECT_TRUE(std::isnan(ToDoubles(x)[5]));
  EXPECT_EQ(ToDoubles(x)[100], 6.0);
  EXPECT_EQ(ToDoubles(x)[1001], 0.0);
}

TEST(ElementwiseKernelTest, UnsupportedTypesAreUnimplementedNamingTheOp) {
  TestTensor x = MakeTensor(DataType::kBool, {2}, {1, 0});
  TestTensor y = EmptyTensor(DataType::kBool, {2});
  const absl::Status s = RunKernel("Exp", {}, {&x}, {&y});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Exp")) << s;
  TestTensor i = MakeTensor(DataType::kInt64, {2}, {1, 0});
  TestTensor o = EmptyTensor(DataType::kInt64, {2});
  EXPECT_EQ(RunKernel("Div", {}, {&i, &i}, {&o}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunKernel("Add", {}, {&i}, {&o}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memonger::alloc

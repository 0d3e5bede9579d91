// Shape and dtype functions of the built-in op schemas (graph/schemas_*.cc), table-driven, plus
// end-to-end InferShapes runs over small text nets.
#include "graph/shape_inference.h"

#include <algorithm>
#include <fstream>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/op_schema.h"
#include "graph/tensor_type.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace memonger::graph {

// gtest prints TensorTypes as "float16[2,3]" (found by argument-dependent lookup).
void PrintTo(const TensorType& type, std::ostream* os) { *os << TensorTypeToString(type); }

namespace {

using ::memonger::testing::GraphFromText;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

using Dims = std::vector<int64_t>;

TensorType F32(Dims dims) { return TensorType{DataType::kFloat32, std::move(dims)}; }
TensorType F16(Dims dims) { return TensorType{DataType::kFloat16, std::move(dims)}; }
TensorType BF16(Dims dims) { return TensorType{DataType::kBFloat16, std::move(dims)}; }
TensorType F64(Dims dims) { return TensorType{DataType::kFloat64, std::move(dims)}; }
TensorType I16(Dims dims) { return TensorType{DataType::kInt16, std::move(dims)}; }
TensorType I32(Dims dims) { return TensorType{DataType::kInt32, std::move(dims)}; }
TensorType I64(Dims dims) { return TensorType{DataType::kInt64, std::move(dims)}; }
TensorType Bool(Dims dims) { return TensorType{DataType::kBool, std::move(dims)}; }

Attribute AttrInt(std::string name, int64_t v) { return Attribute{std::move(name), v}; }
Attribute AttrInts(std::string name, Dims v) { return Attribute{std::move(name), std::move(v)}; }
Attribute AttrStr(std::string name, std::string v) {
  return Attribute{std::move(name), std::move(v)};
}
Attribute AttrFloat(std::string name, double v) { return Attribute{std::move(name), v}; }

// One row of a table: an op type applied to input types and attributes, and either the output
// types it must produce or a fragment of the error it must report.
struct SchemaCase {
  std::string name;
  std::string op;
  std::vector<TensorType> inputs;
  std::vector<Attribute> attrs;
  int num_outputs = 1;
  std::vector<TensorType> expected;  // when `error` is empty
  std::string error;                 // a substring of the message
  absl::StatusCode code = absl::StatusCode::kOk;
};

// Parameterised test names already say which case failed; print just the name.
void PrintTo(const SchemaCase& c, std::ostream* os) { *os << c.name; }

SchemaCase Ok(std::string name, std::string op, std::vector<TensorType> inputs,
              std::vector<Attribute> attrs, std::vector<TensorType> expected) {
  SchemaCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.attrs = std::move(attrs);
  c.num_outputs = static_cast<int>(expected.size());
  c.expected = std::move(expected);
  return c;
}

SchemaCase Fails(std::string name, std::string op, std::vector<TensorType> inputs,
                 std::vector<Attribute> attrs, std::string error, int num_outputs = 1,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  SchemaCase c;
  c.name = std::move(name);
  c.op = std::move(op);
  c.inputs = std::move(inputs);
  c.attrs = std::move(attrs);
  c.num_outputs = num_outputs;
  c.error = std::move(error);
  c.code = code;
  return c;
}

SchemaCase NeedsValues(std::string name, std::string op, std::vector<TensorType> inputs,
                       std::vector<Attribute> attrs, std::string error, int num_outputs = 1) {
  return Fails(std::move(name), std::move(op), std::move(inputs), std::move(attrs),
               std::move(error), num_outputs, absl::StatusCode::kUnimplemented);
}

class ShapeFunctionTest : public ::testing::TestWithParam<SchemaCase> {};

TEST_P(ShapeFunctionTest, InfersTypesOrReportsTheProblem) {
  const SchemaCase& c = GetParam();
  const OpSchema* schema = OpSchemaTable::Builtin().Find(c.op);
  ASSERT_NE(schema, nullptr) << "no schema for " << c.op;
  const ShapeContext ctx{c.op, "op_under_test", c.inputs, c.num_outputs,
                         AttributeView(c.attrs)};
  const absl::StatusOr<std::vector<TensorType>> result = schema->infer(ctx);
  if (c.error.empty()) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(*result, ElementsAreArray(c.expected));
  } else {
    ASSERT_FALSE(result.ok()) << "expected an error mentioning '" << c.error << "'";
    EXPECT_EQ(result.status().code(), c.code) << result.status();
    EXPECT_THAT(result.status().message(), HasSubstr(c.error));
    // Every message names the op, so that a user can find it in a big net.
    EXPECT_THAT(result.status().message(), HasSubstr(absl::StrCat(c.op, " op 'op_under_test'")));
  }
}

std::string CaseName(const ::testing::TestParamInfo<SchemaCase>& info) { return info.param.name; }

// ---- elementwise ------------------------------------------------------------------------------

const char* const kAnyTypeUnary[] = {"Relu",  "LeakyRelu",    "Neg",          "Abs",
                                     "Sign",  "Floor",        "Ceil",         "Round",
                                     "Copy",  "StopGradient", "CopyGPUToCPU", "CopyCPUToGPU",
                                     "Scale", "Identity", "Free", "Alias", "IndexFreeze"};
const char* const kFloatUnary[] = {"Gelu",    "Sigmoid",    "Tanh",     "Sqrt",        "Rsqrt",
                                   "Exp",     "Log",        "Erf",      "Reciprocal",  "Elu",
                                   "Celu",    "Selu",       "Softplus", "Softsign",    "HardSigmoid",
                                   "Swish",   "Sin",        "Cos"};
const char* const kComparisons[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                    "EQ",    "NE",   "LT",      "LE",          "GT",
                                    "GE"};

std::vector<SchemaCase> ElementwiseCases() {
  std::vector<SchemaCase> cases;
  for (const char* op : kAnyTypeUnary) {
    cases.push_back(Ok(absl::StrCat(op, "_keeps_type"), op, {F16({2, 3})}, {}, {F16({2, 3})}));
  }
  for (const char* op : kFloatUnary) {
    cases.push_back(Ok(absl::StrCat(op, "_keeps_type"), op, {BF16({4})}, {}, {BF16({4})}));
  }
  cases.push_back(Ok("Relu_int32", "Relu", {I32({5})}, {}, {I32({5})}));
  cases.push_back(Fails("Sigmoid_int_input", "Sigmoid", {I32({5})}, {},
                        "X must be floating-point, got int32"));
  cases.push_back(Fails("Relu_two_inputs", "Relu", {F32({1}), F32({1})}, {},
                        "takes 1 inputs, got 2"));
  cases.push_back(Fails("Relu_two_outputs", "Relu", {F32({1})}, {}, "takes 1 outputs, got 2", 2));
  cases.push_back(Fails("Relu_negative_input_dim", "Relu", {F32({2, -1})}, {},
                        "has a negative dimension"));
  cases.push_back(Fails("Relu_untyped_input", "Relu", {TensorType{DataType::kUndefined, {2}}},
                        {}, "input 0 has no element type"));

  cases.push_back(Ok("Add_numpy_broadcast", "Add", {F32({2, 3, 4}), F32({3, 1})}, {},
                     {F32({2, 3, 4})}));
  cases.push_back(Ok("Add_scalar", "Add", {F32({2, 3}), F32({})}, {}, {F32({2, 3})}));
  cases.push_back(Ok("Mul_both_directions", "Mul", {F32({2, 1, 4}), F32({3, 1})}, {},
                     {F32({2, 3, 4})}));
  cases.push_back(Ok("Sub_fp16", "Sub", {F16({5}), F16({5})}, {}, {F16({5})}));
  cases.push_back(Ok("Div_bf16", "Div", {BF16({2, 8}), BF16({8})}, {}, {BF16({2, 8})}));
  cases.push_back(Ok("Add_zero_sized_dim", "Add", {F32({0, 3}), F32({1, 3})}, {},
                     {F32({0, 3})}));
  cases.push_back(Ok("Add_caffe2_broadcast_axis", "Add", {F32({2, 3, 4, 5}), F32({3, 4})},
                     {AttrInt("broadcast", 1), AttrInt("axis", 1)}, {F32({2, 3, 4, 5})}));
  cases.push_back(Ok("Mul_caffe2_broadcast_suffix", "Mul", {F32({2, 3, 4, 5}), F32({5})},
                     {AttrInt("broadcast", 1)}, {F32({2, 3, 4, 5})}));
  cases.push_back(Fails("Add_caffe2_broadcast_mismatch", "Add", {F32({2, 3, 4, 5}), F32({4, 3})},
                        {AttrInt("broadcast", 1), AttrInt("axis", 1)}, "does not match A"));
  cases.push_back(Fails("Add_caffe2_broadcast_axis_outside", "Add", {F32({2, 3}), F32({3})},
                        {AttrInt("broadcast", 1), AttrInt("axis", 2)}, "does not place B"));
  cases.push_back(Fails("Add_no_broadcast", "Add", {F32({2, 3}), F32({4, 3})}, {},
                        "inputs [2,3] and [4,3] do not broadcast"));
  cases.push_back(Fails("Add_dtype_mismatch", "Add", {F16({2}), F32({2})}, {},
                        "dtype mismatch: A is float16 but B is float32"));
  cases.push_back(Fails("Add_one_input", "Add", {F32({2})}, {}, "takes 2 inputs, got 1"));
  cases.push_back(Fails("Add_axis_not_an_int", "Add", {F32({2}), F32({2})},
                        {AttrInt("broadcast", 1), AttrStr("axis", "one")},
                        "attribute 'axis' must be an int"));
  cases.push_back(Ok("Pow_int_exponent", "Pow", {F32({2, 3}), I32({})}, {}, {F32({2, 3})}));
  for (const char* op : kComparisons) {
    cases.push_back(Ok(absl::StrCat(op, "_gives_bool"), op, {I64({3, 1}), I64({4})}, {},
                       {Bool({3, 4})}));
  }
  cases.push_back(Fails("Less_dtype_mismatch", "Less", {I64({3}), I32({3})}, {},
                        "dtype mismatch"));
  for (const char* op : {"And", "Or", "Xor"}) {
    cases.push_back(Ok(absl::StrCat(op, "_bool"), op, {Bool({2}), Bool({2})}, {}, {Bool({2})}));
  }
  cases.push_back(Fails("And_not_bool", "And", {Bool({2}), I32({2})}, {},
                        "B must be bool, got int32"));
  cases.push_back(Ok("Not_bool", "Not", {Bool({2, 2})}, {}, {Bool({2, 2})}));
  cases.push_back(Ok("Sum_three_equal", "Sum", {F32({2, 3}), F32({2, 3}), F32({2, 3})}, {},
                     {F32({2, 3})}));
  cases.push_back(Ok("Sum_one_input", "Sum", {F16({7})}, {}, {F16({7})}));
  cases.push_back(Ok("Sum_broadcast", "Sum", {F32({2, 3}), F32({3}), F32({1, 1})}, {},
                     {F32({2, 3})}));
  cases.push_back(Ok("Max_broadcast", "Max", {F32({4, 1}), F32({1, 5})}, {}, {F32({4, 5})}));
  cases.push_back(Ok("Min_equal", "Min", {I32({3}), I32({3})}, {}, {I32({3})}));
  cases.push_back(Ok("Mean_equal", "Mean", {F64({3}), F64({3})}, {}, {F64({3})}));
  cases.push_back(Fails("Sum_dtype_mismatch", "Sum", {F32({2}), F32({2}), F16({2})}, {},
                        "input 0 is float32 but input 2 is float16"));
  cases.push_back(Fails("Sum_shape_mismatch", "Sum", {F32({2}), F32({3})}, {},
                        "do not broadcast"));
  cases.push_back(Fails("Sum_no_input", "Sum", {}, {}, "takes at least 1 inputs, got 0"));
  cases.push_back(Ok("Where_three_way", "Where", {Bool({2, 1}), F16({1, 3}), F16({2, 3})}, {},
                     {F16({2, 3})}));
  cases.push_back(Fails("Where_condition_not_bool", "Where", {F32({2}), F32({2}), F32({2})}, {},
                        "condition must be bool"));
  cases.push_back(Ok("Clip_with_bounds", "Clip", {F32({4}), F32({}), F32({})}, {}, {F32({4})}));
  cases.push_back(Ok("Clip_caffe2", "Clip", {F16({4})}, {AttrFloat("min", 0)}, {F16({4})}));
  cases.push_back(Fails("Clip_bound_dtype", "Clip", {F32({4}), F16({})}, {}, "dtype mismatch"));
  cases.push_back(Ok("PRelu_per_channel", "PRelu", {F32({2, 3, 4, 4}), F32({3})}, {},
                     {F32({2, 3, 4, 4})}));
  cases.push_back(Ok("PRelu_broadcast", "PRelu", {F32({2, 3, 4}), F32({3, 1})}, {},
                     {F32({2, 3, 4})}));
  cases.push_back(Fails("PRelu_bad_slope", "PRelu", {F32({2, 3}), F32({5})}, {},
                        "slope float32[5] does not broadcast to X float32[2,3]"));
  cases.push_back(Ok("Cast_onnx_number", "Cast", {F32({2, 3})}, {AttrInt("to", 10)},
                     {F16({2, 3})}));
  cases.push_back(Ok("Cast_onnx_bfloat16", "Cast", {F32({2, 3})}, {AttrInt("to", 16)},
                     {BF16({2, 3})}));
  cases.push_back(Ok("Cast_name", "Cast", {F16({2})}, {AttrStr("to", "float32")}, {F32({2})}));
  cases.push_back(Ok("Cast_caffe2_upper_case_name", "Cast", {F32({2})},
                     {AttrStr("to", "FLOAT16")}, {F16({2})}));
  cases.push_back(Ok("Cast_alias_name", "Cast", {F32({2})}, {AttrStr("to", "bf16")},
                     {BF16({2})}));
  cases.push_back(Ok("Cast_to_int64", "Cast", {F32({})}, {AttrInt("to", 7)}, {I64({})}));
  cases.push_back(Fails("Cast_missing_to", "Cast", {F32({2})}, {}, "attribute 'to'"));
  cases.push_back(Fails("Cast_string_type", "Cast", {F32({2})}, {AttrInt("to", 8)}, "STRING"));
  cases.push_back(Fails("Cast_undefined_type", "Cast", {F32({2})}, {AttrInt("to", 0)},
                        "UNDEFINED"));
  cases.push_back(Fails("Cast_unknown_name", "Cast", {F32({2})}, {AttrStr("to", "float8")},
                        "unknown dtype 'float8'"));
  cases.push_back(Fails("Cast_to_is_a_list", "Cast", {F32({2})}, {AttrInts("to", {1, 2})},
                        "attribute 'to' must be an element type number or name"));
  cases.push_back(Ok("FloatToHalf", "FloatToHalf", {F32({2, 2})}, {}, {F16({2, 2})}));
  cases.push_back(Ok("HalfToFloat", "HalfToFloat", {F16({2, 2})}, {}, {F32({2, 2})}));
  cases.push_back(Fails("FloatToHalf_given_half", "FloatToHalf", {F16({2})}, {},
                        "X must be float32, got float16"));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Elementwise, ShapeFunctionTest, ::testing::ValuesIn(ElementwiseCases()),
                         CaseName);

// ---- tensor -----------------------------------------------------------------------------------

std::vector<SchemaCase> TensorCases() {
  std::vector<SchemaCase> cases;
  cases.push_back(Ok("Transpose_default_reverses", "Transpose", {F32({2, 3, 4})}, {},
                     {F32({4, 3, 2})}));
  cases.push_back(Ok("Transpose_perm", "Transpose", {F16({2, 3, 4})},
                     {AttrInts("perm", {0, 2, 1})}, {F16({2, 4, 3})}));
  cases.push_back(Ok("Transpose_caffe2_axes", "Transpose", {F32({2, 3})},
                     {AttrInts("axes", {1, 0})}, {F32({3, 2})}));
  cases.push_back(Ok("Transpose_scalar", "Transpose", {F32({})}, {}, {F32({})}));
  cases.push_back(Fails("Transpose_repeated_axis", "Transpose", {F32({2, 3, 4})},
                        {AttrInts("perm", {0, 0, 1})}, "perm [0,0,1] is not a permutation of 0..2"));
  cases.push_back(Fails("Transpose_short_perm", "Transpose", {F32({2, 3, 4})},
                        {AttrInts("perm", {1, 0})}, "is not a permutation of 0..2"));
  cases.push_back(Fails("Transpose_axis_out_of_range", "Transpose", {F32({2, 3})},
                        {AttrInts("perm", {0, 2})}, "is not a permutation of 0..1"));

  cases.push_back(Ok("Reshape_minus_one", "Reshape", {F32({2, 3, 4})},
                     {AttrInts("shape", {-1, 4})}, {F32({6, 4})}));
  cases.push_back(Ok("Reshape_zero_copies_input_dim", "Reshape", {F32({2, 3, 4})},
                     {AttrInts("shape", {0, -1})}, {F32({2, 12})}));
  cases.push_back(Ok("Reshape_zeros_and_minus_one", "Reshape", {F16({2, 3, 4})},
                     {AttrInts("shape", {0, 0, -1})}, {F16({2, 3, 4})}));
  cases.push_back(Ok("Reshape_allowzero_keeps_zero", "Reshape", {F32({0, 3})},
                     {AttrInts("shape", {3, 0}), AttrInt("allowzero", 1)}, {F32({3, 0})}));
  cases.push_back(Ok("Reshape_to_scalar", "Reshape", {F32({1, 1})}, {AttrInts("shape", {})},
                     {F32({})}));
  cases.push_back(Ok("Reshape_caffe2_old_shape_output", "Reshape", {BF16({2, 3})},
                     {AttrInts("shape", {3, 2})}, {BF16({3, 2}), I64({2})}));
  cases.push_back(Fails("Reshape_two_minus_ones", "Reshape", {F32({2, 3})},
                        {AttrInts("shape", {-1, -1})}, "reshape to [-1,-1]: more than one -1"));
  cases.push_back(Fails("Reshape_element_count", "Reshape", {F32({2, 3})},
                        {AttrInts("shape", {4, 2})},
                        "cannot reshape X float32[2,3] (6 elements) to [4,2] (8 elements)"));
  cases.push_back(Fails("Reshape_not_a_multiple", "Reshape", {F32({2, 3})},
                        {AttrInts("shape", {-1, 4})}, "6 is not a multiple of 4"));
  cases.push_back(Fails("Reshape_zero_beyond_input_rank", "Reshape", {F32({6})},
                        {AttrInts("shape", {1, 0})}, "the 0 at position 1 copies an input dim"));
  cases.push_back(Fails("Reshape_negative_size", "Reshape", {F32({6})},
                        {AttrInts("shape", {-2, 3})}, "invalid size -2"));
  cases.push_back(Fails("Reshape_minus_one_beside_zero_size", "Reshape", {F32({0, 3})},
                        {AttrInts("shape", {0, -1}), AttrInt("allowzero", 1)},
                        "cannot be inferred next to a zero-sized dim"));
  cases.push_back(Fails("Reshape_overflow", "Reshape", {F32({2})},
                        {AttrInts("shape", {int64_t{1} << 40, int64_t{1} << 40})},
                        "more elements than fit in 64 bits"));
  cases.push_back(Fails("Reshape_missing_shape", "Reshape", {F32({2})}, {},
                        "attribute 'shape' is missing"));
  cases.push_back(Fails("Reshape_shape_is_a_string", "Reshape", {F32({2})},
                        {AttrStr("shape", "2")}, "attribute 'shape' must be a list of ints"));
  cases.push_back(NeedsValues("Reshape_shape_from_input", "Reshape", {F32({2, 3}), I64({2})},
                              {}, "the target shape is the value of input 1"));

  cases.push_back(Ok("Flatten_default_axis", "Flatten", {F32({2, 3, 4})}, {}, {F32({2, 12})}));
  cases.push_back(Ok("Flatten_axis_0", "Flatten", {F32({2, 3, 4})}, {AttrInt("axis", 0)},
                     {F32({1, 24})}));
  cases.push_back(Ok("Flatten_axis_rank", "Flatten", {F32({2, 3, 4})}, {AttrInt("axis", 3)},
                     {F32({24, 1})}));
  cases.push_back(Ok("Flatten_negative_axis", "Flatten", {F16({2, 3, 4})},
                     {AttrInt("axis", -1)}, {F16({6, 4})}));
  cases.push_back(Fails("Flatten_axis_out_of_range", "Flatten", {F32({2, 3, 4})},
                        {AttrInt("axis", 4)}, "axis 4 is out of range for rank 3 (valid: -3..3)"));
  cases.push_back(Ok("FlattenToVec", "FlattenToVec", {F32({2, 3, 4})}, {}, {F32({24})}));

  cases.push_back(Ok("Concat_axis_1", "Concat", {F32({2, 3}), F32({2, 5})},
                     {AttrInt("axis", 1)}, {F32({2, 8})}));
  cases.push_back(Ok("Concat_caffe2_default_axis", "Concat", {F32({2, 3, 4}), F32({2, 1, 4})},
                     {}, {F32({2, 4, 4})}));
  cases.push_back(Ok("Concat_negative_axis", "Concat", {F32({2, 3}), F32({4, 3})},
                     {AttrInt("axis", -2)}, {F32({6, 3})}));
  cases.push_back(Ok("Concat_split_info_output", "Concat", {F16({2, 3}), F16({2, 5})},
                     {AttrInt("axis", 1)}, {F16({2, 8}), I32({2})}));
  cases.push_back(Ok("Concat_add_axis", "Concat", {F32({2, 3}), F32({2, 3}), F32({2, 3})},
                     {AttrInt("axis", 0), AttrInt("add_axis", 1)}, {F32({3, 2, 3})}));
  cases.push_back(Ok("Concat_order_nhwc", "Concat", {F32({1, 2, 2, 3}), F32({1, 2, 2, 5})},
                     {AttrStr("order", "NHWC")}, {F32({1, 2, 2, 8})}));
  cases.push_back(Fails("Concat_shape_mismatch", "Concat", {F32({2, 3}), F32({3, 3})},
                        {AttrInt("axis", 1)},
                        "input 1 float32[3,3] does not match input 0 float32[2,3] outside axis 1"));
  cases.push_back(Fails("Concat_rank_mismatch", "Concat", {F32({2, 3}), F32({2, 3, 1})},
                        {AttrInt("axis", 1)}, "does not match input 0"));
  cases.push_back(Fails("Concat_dtype_mismatch", "Concat", {F16({2, 3}), F32({2, 3})},
                        {AttrInt("axis", 1)}, "dtype mismatch"));
  cases.push_back(Fails("Concat_axis_out_of_range", "Concat", {F32({2, 3}), F32({2, 3})},
                        {AttrInt("axis", 2)}, "axis 2 is out of range for rank 2"));
  cases.push_back(Fails("Concat_add_axis_unequal", "Concat", {F32({2, 3}), F32({2, 4})},
                        {AttrInt("axis", 0), AttrInt("add_axis", 1)}, "needs equal shapes"));
  cases.push_back(Fails("Concat_scalar", "Concat", {F32({}), F32({})}, {AttrInt("axis", 0)},
                        "out of range"));

  cases.push_back(Ok("Split_equal", "Split", {F32({2, 6})}, {AttrInt("axis", 1)},
                     {F32({2, 2}), F32({2, 2}), F32({2, 2})}));
  cases.push_back(Ok("Split_sizes", "Split", {F16({2, 6})},
                     {AttrInt("axis", 1), AttrInts("split", {1, 5})}, {F16({2, 1}), F16({2, 5})}));
  cases.push_back(Ok("Split_caffe2_default_axis", "Split", {F32({2, 4})}, {},
                     {F32({2, 2}), F32({2, 2})}));
  cases.push_back(Ok("Split_onnx_num_outputs_uneven", "Split", {F32({7})},
                     {AttrInt("axis", 0), AttrInt("num_outputs", 3)},
                     {F32({3}), F32({3}), F32({1})}));
  cases.push_back(Ok("Split_add_axis", "Split", {F32({2, 3})},
                     {AttrInt("axis", 0), AttrInt("add_axis", 1)}, {F32({3}), F32({3})}));
  cases.push_back(Fails("Split_uneven", "Split", {F32({2, 5})}, {AttrInt("axis", 1)},
                        "has size 5, which does not split evenly into 2 outputs", 2));
  cases.push_back(Fails("Split_sizes_sum", "Split", {F32({2, 5})},
                        {AttrInt("axis", 1), AttrInts("split", {2, 2})},
                        "split [2,2] sums to 4 but axis 1", 2));
  cases.push_back(Fails("Split_sizes_count", "Split", {F32({2, 6})},
                        {AttrInt("axis", 1), AttrInts("split", {1, 2, 3})},
                        "has 3 sizes for 2 outputs", 2));
  cases.push_back(Fails("Split_negative_size", "Split", {F32({2, 6})},
                        {AttrInt("axis", 1), AttrInts("split", {-1, 7})}, "has size -1", 2));
  cases.push_back(Fails("Split_num_outputs_disagrees", "Split", {F32({6})},
                        {AttrInt("axis", 0), AttrInt("num_outputs", 3)}, "num_outputs 3", 2));
  cases.push_back(NeedsValues("Split_sizes_from_input", "Split", {F32({4}), I64({2})},
                              {AttrInt("axis", 0)}, "split sizes are the value of input 1", 2));

  cases.push_back(Ok("Squeeze_axes", "Squeeze", {F32({1, 3, 1, 2})}, {AttrInts("axes", {0, 2})},
                     {F32({3, 2})}));
  cases.push_back(Ok("Squeeze_all_ones", "Squeeze", {F32({1, 3, 1, 2})}, {}, {F32({3, 2})}));
  cases.push_back(Ok("Squeeze_caffe2_dims", "Squeeze", {F32({1, 3, 1, 2})},
                     {AttrInts("dims", {0})}, {F32({3, 1, 2})}));
  cases.push_back(Ok("Squeeze_negative_axis", "Squeeze", {F32({1, 3, 1, 2})},
                     {AttrInts("axes", {-2})}, {F32({1, 3, 2})}));
  cases.push_back(Fails("Squeeze_not_one", "Squeeze", {F32({1, 3})}, {AttrInts("axes", {1})},
                        "cannot squeeze axis 1 of size 3"));
  cases.push_back(Fails("Squeeze_axis_out_of_range", "Squeeze", {F32({1, 3})},
                        {AttrInts("axes", {2})}, "axis 2 is out of range"));
  cases.push_back(Ok("Unsqueeze_axes", "Unsqueeze", {F32({3, 4})}, {AttrInts("axes", {0, 3})},
                     {F32({1, 3, 4, 1})}));
  cases.push_back(Ok("Unsqueeze_negative_axis", "Unsqueeze", {F32({3, 4})},
                     {AttrInts("axes", {-1})}, {F32({3, 4, 1})}));
  cases.push_back(Ok("Unsqueeze_scalar", "Unsqueeze", {F32({})}, {AttrInts("axes", {0})},
                     {F32({1})}));
  cases.push_back(Ok("ExpandDims_caffe2", "ExpandDims", {F16({3, 4})}, {AttrInts("dims", {1})},
                     {F16({3, 1, 4})}));
  cases.push_back(Fails("Unsqueeze_repeated_axis", "Unsqueeze", {F32({3})},
                        {AttrInts("axes", {1, 1})}, "axes [1,1] name axis 1 twice"));
  cases.push_back(Fails("Unsqueeze_axis_out_of_range", "Unsqueeze", {F32({3, 4})},
                        {AttrInts("axes", {3})}, "axis 3 is out of range for rank 3"));
  cases.push_back(Fails("Unsqueeze_missing_axes", "Unsqueeze", {F32({3})}, {},
                        "attribute 'axes' is missing"));
  cases.push_back(NeedsValues("Unsqueeze_axes_from_input", "Unsqueeze", {F32({3}), I64({1})},
                              {}, "the axes are the value of input 1"));
  cases.push_back(Ok("Expand_broadcast", "Expand", {F32({3, 1})},
                     {AttrInts("shape", {2, 3, 4})}, {F32({2, 3, 4})}));
  cases.push_back(Ok("Expand_ones_keep_dims", "Expand", {F16({3, 4})},
                     {AttrInts("shape", {1, 1})}, {F16({3, 4})}));
  cases.push_back(Fails("Expand_incompatible", "Expand", {F32({3})}, {AttrInts("shape", {4})},
                        "inputs [3] and [4] do not broadcast"));
  cases.push_back(Fails("Expand_negative", "Expand", {F32({3})}, {AttrInts("shape", {-1})},
                        "negative size -1"));
  cases.push_back(NeedsValues("Expand_shape_from_input", "Expand", {F32({3}), I64({2})}, {},
                              "the target shape is the value of input 1"));

  cases.push_back(Ok("ConstantFill_shape", "ConstantFill", {}, {AttrInts("shape", {2, 3})},
                     {F32({2, 3})}));
  cases.push_back(Ok("ConstantFill_caffe2_int64", "ConstantFill", {},
                     {AttrInts("shape", {4}), AttrInt("dtype", 10)}, {I64({4})}));
  cases.push_back(Ok("ConstantFill_caffe2_float16", "ConstantFill", {},
                     {AttrInts("shape", {4}), AttrInt("dtype", 12)}, {F16({4})}));
  cases.push_back(Ok("ConstantFill_caffe2_int32", "ConstantFill", {},
                     {AttrInts("shape", {4}), AttrInt("dtype", 2)}, {I32({4})}));
  cases.push_back(Ok("ConstantFill_caffe2_bool", "ConstantFill", {},
                     {AttrInts("shape", {4}), AttrInt("dtype", 5)}, {Bool({4})}));
  cases.push_back(Ok("ConstantFill_caffe2_double", "ConstantFill", {},
                     {AttrInts("shape", {4}), AttrInt("dtype", 13)}, {F64({4})}));
  cases.push_back(Ok("ConstantFill_dtype_name", "ConstantFill", {},
                     {AttrInts("shape", {4}), AttrStr("dtype", "bfloat16")}, {BF16({4})}));
  cases.push_back(Ok("ConstantFill_like_input", "ConstantFill", {F16({4, 5})},
                     {AttrFloat("value", 1.0)}, {F32({4, 5})}));
  cases.push_back(Ok("ConstantFill_extra_shape", "ConstantFill", {F32({2})},
                     {AttrInts("extra_shape", {3})}, {F32({2, 3})}));
  cases.push_back(Ok("ConstantFill_int_value_is_int64", "ConstantFill", {},
                     {AttrInts("shape", {2}), AttrInt("value", 1)}, {I64({2})}));
  cases.push_back(Ok("ConstantFill_scalar", "ConstantFill", {}, {}, {F32({})}));
  cases.push_back(NeedsValues("ConstantFill_input_as_shape", "ConstantFill", {I64({2})},
                              {AttrInt("input_as_shape", 1)}, "input_as_shape=1"));
  cases.push_back(Fails("ConstantFill_shape_and_input", "ConstantFill", {F32({2})},
                        {AttrInts("shape", {2})}, "not both"));
  cases.push_back(Fails("ConstantFill_string_dtype", "ConstantFill", {},
                        {AttrInts("shape", {2}), AttrInt("dtype", 4)},
                        "Caffe2 dtype 4 (STRING) is not supported"));
  cases.push_back(Fails("ConstantFill_negative_shape", "ConstantFill", {},
                        {AttrInts("shape", {2, -1})}, "negative size -1"));
  const std::vector<std::pair<const char*, TensorType>> fills = {
      {"GivenTensorFill", F32({3})},      {"XavierFill", F32({3})},
      {"MSRAFill", F32({3})},             {"GaussianFill", F32({3})},
      {"UniformFill", F32({3})},          {"GivenTensorDoubleFill", F64({3})},
      {"GivenTensorIntFill", I32({3})},   {"UniformIntFill", I32({3})},
      {"GivenTensorInt64Fill", I64({3})}, {"GivenTensorInt16Fill", I16({3})},
      {"GivenTensorBoolFill", Bool({3})}};
  for (const auto& [op, type] : fills) {
    cases.push_back(Ok(absl::StrCat(op, "_shape"), op, {}, {AttrInts("shape", {3})}, {type}));
  }

  cases.push_back(Ok("Shape", "Shape", {F32({2, 3, 4})}, {}, {I64({3})}));
  cases.push_back(Ok("Shape_start_end", "Shape", {F32({2, 3, 4})},
                     {AttrInt("start", 1), AttrInt("end", -1)}, {I64({1})}));
  cases.push_back(Ok("Gather_axis_0", "Gather", {F32({10, 4}), I64({2, 3})}, {},
                     {F32({2, 3, 4})}));
  cases.push_back(Ok("Gather_axis_1", "Gather", {F16({10, 4}), I32({5})}, {AttrInt("axis", 1)},
                     {F16({10, 5})}));
  cases.push_back(Fails("Gather_float_indices", "Gather", {F32({10, 4}), F32({2})}, {},
                        "indices must be int32 or int64, got float32"));
  cases.push_back(Ok("ReduceMean_axis", "ReduceMean", {F32({2, 3, 4})}, {AttrInts("axes", {1})},
                     {F32({2, 1, 4})}));
  cases.push_back(Ok("ReduceSum_no_keepdims", "ReduceSum", {F32({2, 3, 4})},
                     {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, {F32({2, 4})}));
  cases.push_back(Ok("ReduceMax_all", "ReduceMax", {F32({2, 3})}, {}, {F32({1, 1})}));
  cases.push_back(Ok("ReduceMin_all_to_scalar", "ReduceMin", {F32({2, 3})},
                     {AttrInt("keepdims", 0)}, {F32({})}));
  cases.push_back(Fails("ReduceSum_repeated_axis", "ReduceSum", {F32({2, 3})},
                        {AttrInts("axes", {1, -1})}, "name axis 1 twice"));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Tensor, ShapeFunctionTest, ::testing::ValuesIn(TensorCases()), CaseName);

// ---- nn ---------------------------------------------------------------------------------------

std::vector<SchemaCase> NnCases() {
  std::vector<SchemaCase> cases;
  cases.push_back(Ok("FC", "FC", {F32({4, 10}), F32({8, 10}), F32({8})}, {}, {F32({4, 8})}));
  cases.push_back(Ok("FC_fp16", "FC", {F16({4, 10}), F16({8, 10}), F16({8})}, {},
                     {F16({4, 8})}));
  cases.push_back(Ok("FC_flattens_at_axis_1", "FC", {F32({2, 3, 4}), F32({5, 12}), F32({5})},
                     {}, {F32({2, 5})}));
  cases.push_back(Ok("FC_axis_2", "FC", {F32({2, 3, 4, 5}), F32({6, 20}), F32({6})},
                     {AttrInt("axis", 2)}, {F32({2, 3, 6})}));
  cases.push_back(Ok("FC_axis_w", "FC", {F32({4, 10}), F32({8, 2, 5}), F32({8})},
                     {AttrInt("axis_w", 1)}, {F32({4, 8})}));
  cases.push_back(Ok("FCTransposed", "FCTransposed", {F32({4, 10}), F32({10, 8}), F32({8})},
                     {}, {F32({4, 8})}));
  cases.push_back(Fails("FC_inner_mismatch", "FC", {F32({4, 10}), F32({8, 9}), F32({8})}, {},
                        "has K=10 but W float32[8,9] has K=9"));
  cases.push_back(Fails("FC_bias_mismatch", "FC", {F32({4, 10}), F32({8, 10}), F32({7})}, {},
                        "b float32[7] must be [8]"));
  cases.push_back(Fails("FC_dtype_mismatch", "FC", {F16({4, 10}), F32({8, 10}), F32({8})}, {},
                        "dtype mismatch: X is float16 but W is float32"));
  cases.push_back(Fails("FC_axis_out_of_range", "FC", {F32({4, 10}), F32({8, 10}), F32({8})},
                        {AttrInt("axis", 2)}, "axis (for X float32[4,10]) 2 is out of range"));
  cases.push_back(Fails("FC_without_bias", "FC", {F32({4, 10}), F32({8, 10})}, {},
                        "takes 3 inputs, got 2"));

  cases.push_back(Ok("MatMul_2d", "MatMul", {F32({2, 3}), F32({3, 4})}, {}, {F32({2, 4})}));
  cases.push_back(Ok("MatMul_batch_broadcast", "MatMul", {F32({5, 1, 2, 3}), F32({4, 3, 6})}, {},
                     {F32({5, 4, 2, 6})}));
  cases.push_back(Ok("MatMul_attention_fp16", "MatMul", {F16({1, 12, 8, 64}), F16({1, 12, 64, 8})},
                     {}, {F16({1, 12, 8, 8})}));
  cases.push_back(Ok("MatMul_vector_matrix", "MatMul", {F32({3}), F32({2, 3, 4})}, {},
                     {F32({2, 4})}));
  cases.push_back(Ok("MatMul_matrix_vector", "MatMul", {F32({2, 3}), F32({3})}, {}, {F32({2})}));
  cases.push_back(Ok("MatMul_vector_vector", "MatMul", {F32({3}), F32({3})}, {}, {F32({})}));
  cases.push_back(Ok("MatMul_caffe2_axis_a", "MatMul", {F32({2, 3, 4}), F32({12, 5})},
                     {AttrInt("axis_a", 1)}, {F32({2, 5})}));
  cases.push_back(Ok("BatchMatMul_trans_b", "BatchMatMul", {F32({2, 3, 4}), F32({2, 5, 4})},
                     {AttrInt("trans_b", 1)}, {F32({2, 3, 5})}));
  cases.push_back(Fails("MatMul_inner_mismatch", "MatMul", {F32({2, 3}), F32({4, 5})}, {},
                        "inner dimensions differ: A float32[2,3] has K=3 but B float32[4,5] has K=4"));
  cases.push_back(Fails("MatMul_fp16_times_fp32", "MatMul", {F16({2, 3}), F32({3, 4})}, {},
                        "dtype mismatch: A is float16 but B is float32"));
  cases.push_back(Fails("MatMul_batch_mismatch", "MatMul", {F32({2, 2, 3}), F32({3, 3, 4})}, {},
                        "batch dims [2] of A and [3] of B do not broadcast"));
  cases.push_back(Fails("MatMul_scalar", "MatMul", {F32({}), F32({3})}, {}, "rank >= 1"));

  cases.push_back(Ok("Gemm", "Gemm", {F32({4, 3}), F32({3, 5})}, {}, {F32({4, 5})}));
  cases.push_back(Ok("Gemm_transposed", "Gemm", {F32({3, 4}), F32({5, 3}), F32({5})},
                     {AttrInt("transA", 1), AttrInt("transB", 1)}, {F32({4, 5})}));
  cases.push_back(Ok("Gemm_column_bias", "Gemm", {F16({4, 3}), F16({3, 5}), F16({4, 1})}, {},
                     {F16({4, 5})}));
  cases.push_back(Fails("Gemm_bad_bias", "Gemm", {F32({4, 3}), F32({3, 5}), F32({3})}, {},
                        "C float32[3] does not broadcast to [4,5]"));
  cases.push_back(Fails("Gemm_inner_mismatch", "Gemm", {F32({4, 3}), F32({4, 5})}, {},
                        "inner dimensions differ"));
  cases.push_back(Fails("Gemm_rank_3", "Gemm", {F32({1, 4, 3}), F32({3, 5})}, {},
                        "A float32[1,4,3] must be 2-D"));

  cases.push_back(Ok("Softmax", "Softmax", {F16({2, 3})}, {}, {F16({2, 3})}));
  cases.push_back(Ok("Softmax_axis", "Softmax", {F32({2, 3, 4})}, {AttrInt("axis", -1)},
                     {F32({2, 3, 4})}));
  cases.push_back(Ok("LogSoftmax", "LogSoftmax", {F32({2, 3})}, {}, {F32({2, 3})}));
  cases.push_back(Fails("Softmax_axis_out_of_range", "Softmax", {F32({2, 3})},
                        {AttrInt("axis", 2)}, "axis 2 is out of range for rank 2"));
  cases.push_back(Fails("Softmax_int", "Softmax", {I32({2, 3})}, {}, "floating-point"));

  cases.push_back(Ok("LayerNormalization_fp16", "LayerNormalization",
                     {F16({2, 5, 16}), F16({16}), F16({16})}, {},
                     {F16({2, 5, 16}), F32({2, 5, 1}), F32({2, 5, 1})}));
  cases.push_back(Ok("LayerNormalization_axis_1", "LayerNormalization",
                     {F32({2, 5, 16}), F32({5, 16})}, {AttrInt("axis", 1)},
                     {F32({2, 5, 16}), F32({2, 1, 1})}));
  cases.push_back(Ok("LayerNormalization_y_only", "LayerNormalization",
                     {BF16({4, 8}), BF16({8})}, {}, {BF16({4, 8})}));
  cases.push_back(Ok("LayerNormalization_stash_bfloat16", "LayerNormalization",
                     {BF16({4, 8}), BF16({8})}, {AttrInt("stash_type", 16)},
                     {BF16({4, 8}), BF16({4, 1}), BF16({4, 1})}));
  cases.push_back(Fails("LayerNormalization_bad_scale", "LayerNormalization",
                        {F32({2, 5, 16}), F32({8})}, {},
                        "Scale float32[8] does not broadcast to the normalised dims [16]"));
  cases.push_back(Fails("LayerNormalization_scale_dtype", "LayerNormalization",
                        {F16({2, 16}), F32({16})}, {}, "dtype mismatch"));
  cases.push_back(Fails("LayerNormalization_int_stash", "LayerNormalization",
                        {F32({2, 16}), F32({16})}, {AttrInt("stash_type", 7)},
                        "stash_type 7 is not a floating-point type"));
  cases.push_back(Ok("LayerNorm_caffe2", "LayerNorm", {F32({4, 10})}, {},
                     {F32({4, 10}), F32({4, 1}), F32({4, 1})}));
  cases.push_back(Ok("LayerNorm_caffe2_affine", "LayerNorm",
                     {F32({2, 3, 4}), F32({12}), F32({12})}, {AttrInt("axis", 1)},
                     {F32({2, 3, 4}), F32({2, 1}), F32({2, 1})}));
  cases.push_back(Ok("LayerNorm_caffe2_axis_2", "LayerNorm", {F16({2, 3, 4})},
                     {AttrInt("axis", 2)}, {F16({2, 3, 4}), F16({2, 3, 1}), F16({2, 3, 1})}));
  cases.push_back(Fails("LayerNorm_caffe2_bad_gamma", "LayerNorm",
                        {F32({4, 10}), F32({5}), F32({5})}, {}, "gamma float32[5] must hold 10",
                        3));

  // Conv: NCHW unless said otherwise.
  const std::vector<TensorType> conv_in = {F32({2, 3, 32, 32}), F32({16, 3, 3, 3}), F32({16})};
  cases.push_back(Ok("Conv_onnx_pads", "Conv", conv_in, {AttrInts("pads", {1, 1, 1, 1})},
                     {F32({2, 16, 32, 32})}));
  cases.push_back(Ok("Conv_no_pad", "Conv", conv_in, {}, {F32({2, 16, 30, 30})}));
  cases.push_back(Ok("Conv_caffe2_stride_pad", "Conv", conv_in,
                     {AttrInt("kernel", 3), AttrInt("stride", 2), AttrInt("pad", 1)},
                     {F32({2, 16, 16, 16})}));
  cases.push_back(Ok("Conv_caffe2_hw_attrs", "Conv", conv_in,
                     {AttrInt("kernel_h", 3), AttrInt("kernel_w", 3), AttrInt("stride_h", 1),
                      AttrInt("stride_w", 2), AttrInt("pad_t", 1), AttrInt("pad_b", 1),
                      AttrInt("pad_l", 0), AttrInt("pad_r", 0)},
                     {F32({2, 16, 32, 15})}));
  cases.push_back(Ok("Conv_caffe2_kernels_list", "Conv", conv_in,
                     {AttrInts("kernels", {3, 3}), AttrInts("strides", {2, 2})},
                     {F32({2, 16, 15, 15})}));
  cases.push_back(Ok("Conv_without_bias", "Conv", {F16({1, 3, 8, 8}), F16({4, 3, 1, 1})}, {},
                     {F16({1, 4, 8, 8})}));
  cases.push_back(Ok("Conv_1d", "Conv", {F32({1, 4, 10}), F32({8, 4, 3})}, {},
                     {F32({1, 8, 8})}));
  cases.push_back(Ok("Conv_3d", "Conv", {F32({1, 2, 8, 8, 8}), F32({4, 2, 3, 3, 3})},
                     {AttrInts("strides", {2, 2, 2})}, {F32({1, 4, 3, 3, 3})}));
  cases.push_back(Ok("Conv_group", "Conv", {F32({1, 4, 5, 5}), F32({8, 2, 3, 3})},
                     {AttrInt("group", 2)}, {F32({1, 8, 3, 3})}));
  cases.push_back(Ok("Conv_depthwise", "Conv", {F32({1, 4, 5, 5}), F32({4, 1, 3, 3})},
                     {AttrInt("group", 4), AttrInt("pad", 1)}, {F32({1, 4, 5, 5})}));
  cases.push_back(Ok("Conv_dilation", "Conv", {F32({1, 1, 7, 7}), F32({1, 1, 3, 3})},
                     {AttrInts("dilations", {2, 2})}, {F32({1, 1, 3, 3})}));
  cases.push_back(Ok("Conv_same_upper", "Conv", {F32({1, 1, 7, 7}), F32({1, 1, 3, 3})},
                     {AttrInts("strides", {2, 2}), AttrStr("auto_pad", "SAME_UPPER")},
                     {F32({1, 1, 4, 4})}));
  cases.push_back(Ok("Conv_same_lower", "Conv", {F32({1, 1, 7, 7}), F32({1, 1, 3, 3})},
                     {AttrStr("auto_pad", "SAME_LOWER")}, {F32({1, 1, 7, 7})}));
  cases.push_back(Ok("Conv_valid", "Conv", {F32({1, 1, 7, 7}), F32({1, 1, 3, 3})},
                     {AttrInts("strides", {2, 2}), AttrStr("auto_pad", "VALID"),
                      AttrInts("pads", {5, 5, 5, 5})},
                     {F32({1, 1, 3, 3})}));
  cases.push_back(Ok("Conv_nhwc", "Conv", {F32({2, 32, 32, 3}), F32({16, 3, 3, 3}), F32({16})},
                     {AttrStr("order", "NHWC"), AttrInt("pad", 1)}, {F32({2, 32, 32, 16})}));
  for (const char* op : {"Conv1D", "Conv2D", "Conv3D"}) {
    cases.push_back(Ok(absl::StrCat(op, "_alias"), op, conv_in, {}, {F32({2, 16, 30, 30})}));
  }
  cases.push_back(Fails("Conv_kernel_larger_than_input", "Conv",
                        {F32({1, 1, 3, 3}), F32({1, 1, 5, 5})}, {},
                        "kernel 5 larger than padded input 3"));
  cases.push_back(Fails("Conv_dilated_kernel_too_large", "Conv",
                        {F32({1, 1, 4, 4}), F32({1, 1, 3, 3})}, {AttrInt("dilation", 2)},
                        "dilated kernel 5 (kernel 3, dilation 2) larger than padded input 4"));
  cases.push_back(Fails("Conv_stride_zero", "Conv", conv_in, {AttrInt("stride", 0)},
                        "stride 0 in spatial dim 0 must be positive"));
  cases.push_back(Fails("Conv_group_zero", "Conv", conv_in, {AttrInt("group", 0)},
                        "group 0 must be positive"));
  cases.push_back(Fails("Conv_channels_not_divisible", "Conv",
                        {F32({1, 3, 5, 5}), F32({4, 1, 3, 3})}, {AttrInt("group", 2)},
                        "3 channels, not divisible by group 2"));
  cases.push_back(Fails("Conv_weight_channels", "Conv", {F32({1, 3, 5, 5}), F32({4, 4, 3, 3})},
                        {}, "has 4 input channels per group but X"));
  cases.push_back(Fails("Conv_kernel_attr_disagrees", "Conv", conv_in, {AttrInt("kernel", 5)},
                        "kernel attribute [5,5] does not match W"));
  cases.push_back(Fails("Conv_input_rank_2", "Conv", {F32({2, 3}), F32({4, 3})}, {},
                        "X float32[2,3] must have rank 3..5"));
  cases.push_back(Fails("Conv_weight_rank", "Conv", {F32({1, 3, 5, 5}), F32({4, 3, 3})}, {},
                        "must have the rank of X"));
  cases.push_back(Fails("Conv_bias_size", "Conv",
                        {F32({2, 3, 32, 32}), F32({16, 3, 3, 3}), F32({8})}, {},
                        "b float32[8] must be [16]"));
  cases.push_back(Fails("Conv_pads_length", "Conv", conv_in, {AttrInts("pads", {1, 1})},
                        "attribute 'pads' [1,1] has 2 entries; 2 spatial dims need 4"));
  cases.push_back(Fails("Conv_negative_pad", "Conv", conv_in, {AttrInt("pad", -1)},
                        "negative padding"));
  cases.push_back(Fails("Conv_fp16_input_fp32_weight", "Conv",
                        {F16({1, 3, 5, 5}), F32({4, 3, 3, 3})}, {}, "dtype mismatch"));
  cases.push_back(Fails("Conv_bad_auto_pad", "Conv", conv_in, {AttrStr("auto_pad", "FULL")},
                        "auto_pad 'FULL' must be"));
  cases.push_back(Fails("Conv_bad_order", "Conv", conv_in, {AttrStr("order", "CHWN")},
                        "order 'CHWN' must be NCHW or NHWC"));
  cases.push_back(Fails("Conv_kernel_h_only", "Conv", conv_in, {AttrInt("kernel_h", 3)},
                        "attribute 'kernel_w' is missing"));

  const TensorType pool_in = F32({2, 16, 32, 32});
  cases.push_back(Ok("MaxPool_caffe2", "MaxPool", {pool_in},
                     {AttrInt("kernel", 2), AttrInt("stride", 2)}, {F32({2, 16, 16, 16})}));
  cases.push_back(Ok("MaxPool_onnx_pads", "MaxPool", {pool_in},
                     {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}),
                      AttrInts("pads", {1, 1, 1, 1})},
                     {F32({2, 16, 16, 16})}));
  cases.push_back(Ok("MaxPool_indices_output", "MaxPool", {pool_in},
                     {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})},
                     {F32({2, 16, 16, 16}), I64({2, 16, 16, 16})}));
  cases.push_back(Ok("MaxPool_floor", "MaxPool", {F32({1, 1, 6, 6})},
                     {AttrInt("kernel", 3), AttrInt("stride", 2)}, {F32({1, 1, 2, 2})}));
  cases.push_back(Ok("MaxPool_ceil_mode", "MaxPool", {F32({1, 1, 6, 6})},
                     {AttrInt("kernel", 3), AttrInt("stride", 2), AttrInt("ceil_mode", 1)},
                     {F32({1, 1, 3, 3})}));
  cases.push_back(Ok("MaxPool_ceil_mode_drops_window_in_padding", "MaxPool", {F32({1, 1, 5, 5})},
                     {AttrInt("kernel", 2), AttrInt("stride", 2), AttrInt("pad", 1),
                      AttrInt("ceil_mode", 1)},
                     {F32({1, 1, 3, 3})}));
  cases.push_back(Ok("MaxPool_caffe2_legacy_pooling", "MaxPool", {F32({1, 1, 6, 6})},
                     {AttrInt("kernel", 3), AttrInt("stride", 2), AttrInt("legacy_pad", 3)},
                     {F32({1, 1, 3, 3})}));
  cases.push_back(Ok("MaxPool_dilations", "MaxPool", {F32({1, 1, 7, 7})},
                     {AttrInts("kernel_shape", {2, 2}), AttrInts("dilations", {2, 2})},
                     {F32({1, 1, 5, 5})}));
  cases.push_back(Ok("AveragePool_global_pooling", "AveragePool", {F16({2, 16, 7, 7})},
                     {AttrInt("global_pooling", 1)}, {F16({2, 16, 1, 1})}));
  cases.push_back(Ok("AveragePool_nhwc", "AveragePool", {F32({1, 8, 8, 3})},
                     {AttrInt("kernel", 2), AttrInt("stride", 2), AttrStr("order", "NHWC")},
                     {F32({1, 4, 4, 3})}));
  cases.push_back(Ok("AveragePool_1d", "AveragePool", {F32({1, 2, 10})},
                     {AttrInts("kernel_shape", {2}), AttrInts("strides", {2})},
                     {F32({1, 2, 5})}));
  for (const char* op : {"MaxPool1D", "MaxPool2D", "MaxPool3D", "AveragePool1D",
                         "AveragePool2D", "AveragePool3D"}) {
    cases.push_back(Ok(absl::StrCat(op, "_alias"), op, {pool_in},
                       {AttrInt("kernel", 2), AttrInt("stride", 2)}, {F32({2, 16, 16, 16})}));
  }
  cases.push_back(Fails("MaxPool_no_kernel", "MaxPool", {pool_in}, {}, "no kernel size"));
  cases.push_back(Fails("MaxPool_kernel_too_large", "MaxPool", {F32({1, 1, 2, 2})},
                        {AttrInt("kernel", 3)}, "kernel 3 larger than padded input 2"));
  cases.push_back(Fails("MaxPool_zero_kernel", "MaxPool", {pool_in}, {AttrInt("kernel", 0)},
                        "kernel size 0 in spatial dim 0 must be positive"));
  cases.push_back(Fails("AveragePool_kernel_list_length", "AveragePool", {pool_in},
                        {AttrInts("kernel_shape", {2, 2, 2})},
                        "attribute 'kernel_shape' [2,2,2] has 3 entries for 2 spatial dims"));
  cases.push_back(Fails("MaxPool_rank_2", "MaxPool", {F32({2, 3})}, {AttrInt("kernel", 1)},
                        "must have rank >= 3"));
  cases.push_back(Ok("GlobalAveragePool", "GlobalAveragePool", {F32({2, 16, 7, 7})}, {},
                     {F32({2, 16, 1, 1})}));
  cases.push_back(Ok("GlobalMaxPool_3d", "GlobalMaxPool", {F16({2, 16, 4, 4, 4})}, {},
                     {F16({2, 16, 1, 1, 1})}));
  cases.push_back(Fails("GlobalAveragePool_rank_2", "GlobalAveragePool", {F32({2, 16})}, {},
                        "must have rank >= 3"));

  const TensorType c16 = F32({16});
  const TensorType bn_x = F32({2, 16, 8, 8});
  cases.push_back(Ok("SpatialBN_test_mode", "SpatialBN", {bn_x, c16, c16, c16, c16},
                     {AttrInt("is_test", 1)}, {bn_x}));
  cases.push_back(Ok("SpatialBN_training", "SpatialBN", {bn_x, c16, c16, c16, c16}, {},
                     {bn_x, c16, c16, c16, c16}));
  cases.push_back(Ok("SpatialBN_fp16_input_fp32_params", "SpatialBN",
                     {F16({2, 16, 8, 8}), c16, c16, c16, c16}, {AttrInt("is_test", 0)},
                     {F16({2, 16, 8, 8}), c16, c16, c16, c16}));
  cases.push_back(Ok("SpatialBN_nhwc", "SpatialBN", {F32({2, 8, 8, 16}), c16, c16, c16, c16},
                     {AttrInt("is_test", 1), AttrStr("order", "NHWC")}, {F32({2, 8, 8, 16})}));
  cases.push_back(Ok("SpatialBN_multi_batch_sums", "SpatialBN",
                     {bn_x, c16, c16, c16, c16, c16, c16}, {AttrInt("num_batches", 2)},
                     {bn_x, c16, c16, c16, c16}));
  cases.push_back(Fails("SpatialBN_training_one_output", "SpatialBN",
                        {bn_x, c16, c16, c16, c16}, {}, "has 5 outputs", 1));
  cases.push_back(Fails("SpatialBN_test_five_outputs", "SpatialBN", {bn_x, c16, c16, c16, c16},
                        {AttrInt("is_test", 1)}, "has 1 output (Y), got 5", 5));
  cases.push_back(Fails("SpatialBN_bad_scale", "SpatialBN", {bn_x, F32({8}), c16, c16, c16},
                        {AttrInt("is_test", 1)}, "scale float32[8] must be [16]"));
  cases.push_back(Fails("SpatialBN_six_inputs", "SpatialBN",
                        {bn_x, c16, c16, c16, c16, c16}, {AttrInt("is_test", 1)},
                        "takes 5 or 7 inputs, got 6"));
  cases.push_back(Ok("BatchNormalization_inference", "BatchNormalization",
                     {bn_x, c16, c16, c16, c16}, {}, {bn_x}));
  cases.push_back(Ok("BatchNormalization_training", "BatchNormalization",
                     {F16({2, 16, 8, 8}), F16({16}), F16({16}), c16, c16},
                     {AttrInt("training_mode", 1)}, {F16({2, 16, 8, 8}), c16, c16}));
  cases.push_back(Ok("BatchNormalization_opset9_training", "BatchNormalization",
                     {bn_x, c16, c16, c16, c16}, {}, {bn_x, c16, c16, c16, c16}));
  cases.push_back(Ok("BatchNormalization_training_with_saved", "BatchNormalization",
                     {bn_x, c16, c16, c16, c16}, {AttrInt("training_mode", 1)},
                     {bn_x, c16, c16, c16, c16}));
  cases.push_back(Fails("BatchNormalization_inference_extra_outputs", "BatchNormalization",
                        {bn_x, c16, c16, c16, c16}, {AttrInt("training_mode", 0)},
                        "in inference mode (training_mode=0) it has one output (Y), got 3", 3));
  cases.push_back(Fails("BatchNormalization_is_test_extra_outputs", "BatchNormalization",
                        {bn_x, c16, c16, c16, c16}, {AttrInt("is_test", 1)},
                        "in inference mode (is_test=1) it has one output (Y), got 5", 5));
  cases.push_back(Fails("BatchNormalization_bad_mean", "BatchNormalization",
                        {bn_x, c16, c16, F32({4}), c16}, {}, "input_mean float32[4] must be [16]"));
  cases.push_back(Ok("Dropout_with_mask", "Dropout", {F16({4, 8})}, {},
                     {F16({4, 8}), Bool({4, 8})}));
  cases.push_back(Ok("Dropout_onnx_inputs", "Dropout", {F32({4}), F32({}), Bool({})}, {},
                     {F32({4})}));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Nn, ShapeFunctionTest, ::testing::ValuesIn(NnCases()), CaseName);

// ---- loss -------------------------------------------------------------------------------------

std::vector<SchemaCase> LossCases() {
  std::vector<SchemaCase> cases;
  cases.push_back(Ok("LabelCrossEntropy", "LabelCrossEntropy", {F32({4, 10}), I32({4})}, {},
                     {F32({4})}));
  cases.push_back(Ok("LabelCrossEntropy_label_column", "LabelCrossEntropy",
                     {F16({4, 10}), I32({4, 1})}, {}, {F16({4})}));
  cases.push_back(Ok("LabelCrossEntropy_one_row", "LabelCrossEntropy", {F32({10}), I32({1})},
                     {}, {F32({1})}));
  cases.push_back(Fails("LabelCrossEntropy_int64_label", "LabelCrossEntropy",
                        {F32({4, 10}), I64({4})}, {}, "label must be int32, got int64"));
  cases.push_back(Fails("LabelCrossEntropy_label_count", "LabelCrossEntropy",
                        {F32({4, 10}), I32({5})}, {}, "label int32[5] must be [4] or [4,1]"));
  cases.push_back(Fails("LabelCrossEntropy_rank_3", "LabelCrossEntropy",
                        {F32({4, 10, 2}), I32({4})}, {}, "must have rank 1..2"));
  cases.push_back(Fails("LabelCrossEntropy_int_x", "LabelCrossEntropy", {I32({4, 10}), I32({4})},
                        {}, "X must be floating-point"));
  cases.push_back(Ok("CrossEntropy", "CrossEntropy", {F32({4, 10}), F32({4, 10})}, {},
                     {F32({4})}));
  cases.push_back(Fails("CrossEntropy_label_shape", "CrossEntropy", {F32({4, 10}), F32({4})}, {},
                        "must have the same shape"));
  cases.push_back(Ok("AveragedLoss", "AveragedLoss", {F32({4})}, {}, {F32({})}));
  cases.push_back(Ok("AveragedLoss_fp16", "AveragedLoss", {F16({4, 3})}, {}, {F16({})}));
  cases.push_back(Fails("AveragedLoss_int", "AveragedLoss", {I32({4})}, {}, "floating-point"));
  cases.push_back(Ok("SumElements", "SumElements", {I32({4, 2})}, {}, {I32({})}));
  cases.push_back(Ok("SoftmaxWithLoss", "SoftmaxWithLoss", {F32({4, 10}), I32({4})}, {},
                     {F32({4, 10}), F32({})}));
  cases.push_back(Ok("SoftmaxWithLoss_weighted", "SoftmaxWithLoss",
                     {F32({4, 10}), I32({4, 1}), F32({4})}, {}, {F32({4, 10}), F32({})}));
  cases.push_back(Ok("SoftmaxWithLoss_label_prob", "SoftmaxWithLoss",
                     {F32({4, 10}), F32({4, 10})}, {AttrInt("label_prob", 1)},
                     {F32({4, 10}), F32({})}));
  cases.push_back(Ok("SoftmaxWithLoss_axis_2", "SoftmaxWithLoss", {F32({2, 3, 4}), I32({2, 3})},
                     {AttrInt("axis", 2)}, {F32({2, 3, 4}), F32({})}));
  cases.push_back(Fails("SoftmaxWithLoss_label_count", "SoftmaxWithLoss",
                        {F32({4, 10}), I32({5})}, {}, "labels int32[5] must be [4] or [4,1]", 2));
  cases.push_back(Fails("SoftmaxWithLoss_float_labels", "SoftmaxWithLoss",
                        {F32({4, 10}), F32({4})}, {}, "labels must be int32", 2));
  cases.push_back(Fails("SoftmaxWithLoss_weights", "SoftmaxWithLoss",
                        {F32({4, 10}), I32({4}), F32({5})}, {}, "weights float32[5] must be [4]",
                        2));
  cases.push_back(Fails("SoftmaxWithLoss_label_prob_shape", "SoftmaxWithLoss",
                        {F32({4, 10}), F32({4})}, {AttrInt("label_prob", 1)},
                        "must be a distribution [4,10]", 2));
  cases.push_back(Fails("SoftmaxWithLoss_one_output", "SoftmaxWithLoss",
                        {F32({4, 10}), I32({4})}, {}, "takes 2 outputs, got 1", 1));
  cases.push_back(Ok("SquaredL2Distance", "SquaredL2Distance", {F32({4, 3}), F32({4, 3})}, {},
                     {F32({4})}));
  cases.push_back(Ok("SoftmaxCrossEntropyLoss_mean", "SoftmaxCrossEntropyLoss",
                     {F32({4, 10}), I64({4})}, {}, {F32({})}));
  cases.push_back(Ok("SoftmaxCrossEntropyLoss_none_with_log_prob", "SoftmaxCrossEntropyLoss",
                     {F16({4, 10, 3}), I64({4, 3}), F16({10})},
                     {AttrStr("reduction", "none")}, {F16({4, 3}), F16({4, 10, 3})}));
  cases.push_back(Fails("SoftmaxCrossEntropyLoss_labels", "SoftmaxCrossEntropyLoss",
                        {F32({4, 10}), I64({4, 10})}, {}, "labels int64[4,10] must be [4]"));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Loss, ShapeFunctionTest, ::testing::ValuesIn(LossCases()), CaseName);

// ---- gradients --------------------------------------------------------------------------------

std::vector<SchemaCase> GradientCases() {
  std::vector<SchemaCase> cases;
  for (const char* op : {"ReluGradient", "SigmoidGradient", "TanhGradient", "SoftmaxGradient",
                         "LeakyReluGradient", "EluGradient"}) {
    cases.push_back(Ok(absl::StrCat(op, "_Y_dY"), op, {F16({4, 8}), F16({4, 8})}, {},
                       {F16({4, 8})}));
  }
  cases.push_back(Fails("ReluGradient_shape_mismatch", "ReluGradient",
                        {F32({4, 8}), F32({4, 9})}, {}, "must have the same shape"));
  cases.push_back(Fails("SoftmaxGradient_dtype_mismatch", "SoftmaxGradient",
                        {F32({4, 8}), F16({4, 8})}, {}, "dtype mismatch"));
  cases.push_back(Ok("GeluGradient_dY_X", "GeluGradient", {BF16({2, 3}), BF16({2, 3})}, {},
                     {BF16({2, 3})}));

  cases.push_back(Ok("FCGradient", "FCGradient", {F32({4, 10}), F32({8, 10}), F32({4, 8})}, {},
                     {F32({8, 10}), F32({8}), F32({4, 10})}));
  cases.push_back(Ok("FCGradient_no_dX", "FCGradient",
                     {F16({4, 10}), F16({8, 10}), F16({4, 8})}, {},
                     {F16({8, 10}), F16({8})}));
  cases.push_back(Ok("FCTransposedGradient", "FCTransposedGradient",
                     {F32({4, 10}), F32({10, 8}), F32({4, 8})}, {},
                     {F32({10, 8}), F32({8}), F32({4, 10})}));
  cases.push_back(Fails("FCGradient_wrong_dY", "FCGradient",
                        {F32({4, 10}), F32({8, 10}), F32({4, 7})}, {},
                        "dY float32[4,7] does not match the FC output float32[4,8]", 3));
  cases.push_back(Fails("FCGradient_one_output", "FCGradient",
                        {F32({4, 10}), F32({8, 10}), F32({4, 8})}, {},
                        "takes 2 to 3 outputs, got 1", 1));

  cases.push_back(Ok("LabelCrossEntropyGradient", "LabelCrossEntropyGradient",
                     {F32({4, 10}), I32({4}), F32({4})}, {}, {F32({4, 10})}));
  cases.push_back(Fails("LabelCrossEntropyGradient_wrong_dY", "LabelCrossEntropyGradient",
                        {F32({4, 10}), I32({4}), F32({4, 10})}, {},
                        "does not match the LabelCrossEntropy output float32[4]"));
  cases.push_back(Ok("CrossEntropyGradient", "CrossEntropyGradient",
                     {F32({4, 10}), F32({4, 10}), F32({4})}, {}, {F32({4, 10})}));
  cases.push_back(Ok("AveragedLossGradient", "AveragedLossGradient", {F32({4}), F32({})}, {},
                     {F32({4})}));
  cases.push_back(Ok("SumElementsGradient", "SumElementsGradient", {F32({4, 2}), F32({1})}, {},
                     {F32({4, 2})}));
  cases.push_back(Fails("AveragedLossGradient_vector_dLoss", "AveragedLossGradient",
                        {F32({4}), F32({2})}, {}, "dLoss float32[2] must hold exactly one element"));
  cases.push_back(Ok("SoftmaxWithLossGradient", "SoftmaxWithLossGradient",
                     {F32({4, 10}), I32({4}), F32({4, 10}), F32({})}, {}, {F32({4, 10})}));
  cases.push_back(Ok("SoftmaxWithLossGradient_weighted", "SoftmaxWithLossGradient",
                     {F32({4, 10}), I32({4}), F32({4}), F32({4, 10}), F32({})}, {},
                     {F32({4, 10})}));
  cases.push_back(Fails("SoftmaxWithLossGradient_wrong_softmax", "SoftmaxWithLossGradient",
                        {F32({4, 10}), I32({4}), F32({4, 9}), F32({})}, {},
                        "softmax float32[4,9] must have the same shape"));

  cases.push_back(Ok("AddGradient_broadcast", "AddGradient",
                     {F32({2, 3, 4}), F32({2, 3, 4}), F32({4})}, {},
                     {F32({2, 3, 4}), F32({4})}));
  cases.push_back(Ok("SubGradient", "SubGradient", {F16({2, 3}), F16({2, 3}), F16({2, 3})}, {},
                     {F16({2, 3}), F16({2, 3})}));
  cases.push_back(Ok("MulGradient_both_broadcast", "MulGradient",
                     {F32({2, 3, 4}), F32({2, 1, 4}), F32({3, 1})}, {},
                     {F32({2, 1, 4}), F32({3, 1})}));
  cases.push_back(Ok("DivGradient", "DivGradient",
                     {F32({2, 3}), F32({2, 3}), F32({3}), F32({2, 3})}, {},
                     {F32({2, 3}), F32({3})}));
  cases.push_back(Fails("AddGradient_wrong_dC", "AddGradient",
                        {F32({2, 4}), F32({2, 3, 4}), F32({4})}, {},
                        "dC float32[2,4] does not match the output float32[2,3,4]", 2));
  cases.push_back(Ok("MatMulGradient", "MatMulGradient", {F32({2, 4}), F32({2, 3}), F32({3, 4})},
                     {}, {F32({2, 3}), F32({3, 4})}));
  cases.push_back(Ok("SoftmaxCrossEntropyLossGradient", "SoftmaxCrossEntropyLossGradient",
                     {F32({}), F32({4, 3, 2}), I64({4, 2})}, {}, {F32({4, 3, 2})}));
  cases.push_back(Fails("SoftmaxCrossEntropyLossGradient_scores_rank",
                        "SoftmaxCrossEntropyLossGradient", {F32({}), F32({4}), I64({4})}, {},
                        "scores must be [N, C, d...]"));
  cases.push_back(Fails("MatMulGradient_wrong_dY", "MatMulGradient",
                        {F32({4, 2}), F32({2, 3}), F32({3, 4})}, {},
                        "does not match the MatMul output float32[2,4]", 2));

  const std::vector<TensorType> conv_grad_in = {F32({2, 3, 8, 8}), F32({4, 3, 3, 3}),
                                                F32({2, 4, 6, 6})};
  cases.push_back(Ok("ConvGradient", "ConvGradient", conv_grad_in, {},
                     {F32({4, 3, 3, 3}), F32({4}), F32({2, 3, 8, 8})}));
  cases.push_back(Ok("ConvGradient_no_dX", "ConvGradient", conv_grad_in, {},
                     {F32({4, 3, 3, 3}), F32({4})}));
  cases.push_back(Ok("ConvGradient_no_bias", "ConvGradient", conv_grad_in,
                     {AttrInt("no_bias", 1)}, {F32({4, 3, 3, 3}), F32({2, 3, 8, 8})}));
  cases.push_back(Ok("Conv2DGradient_padded", "Conv2DGradient",
                     {F32({2, 3, 8, 8}), F32({4, 3, 3, 3}), F32({2, 4, 8, 8})},
                     {AttrInt("pad", 1)}, {F32({4, 3, 3, 3}), F32({4}), F32({2, 3, 8, 8})}));
  for (const char* op : {"Conv1DGradient", "Conv3DGradient"}) {
    cases.push_back(Ok(absl::StrCat(op, "_alias"), op, conv_grad_in, {},
                       {F32({4, 3, 3, 3}), F32({4}), F32({2, 3, 8, 8})}));
  }
  cases.push_back(Fails("ConvGradient_no_bias_three_outputs", "ConvGradient", conv_grad_in,
                        {AttrInt("no_bias", 1)}, "with no_bias=1 it has dW, [dX]", 3));
  cases.push_back(Fails("ConvGradient_wrong_dY", "ConvGradient",
                        {F32({2, 3, 8, 8}), F32({4, 3, 3, 3}), F32({2, 4, 8, 8})}, {},
                        "does not match the Conv output float32[2,4,6,6]", 3));

  const std::vector<Attribute> pool2 = {AttrInt("kernel", 2), AttrInt("stride", 2)};
  for (const char* op : {"MaxPoolGradient", "AveragePoolGradient", "MaxPool1DGradient",
                         "MaxPool2DGradient", "MaxPool3DGradient", "AveragePool1DGradient",
                         "AveragePool2DGradient", "AveragePool3DGradient"}) {
    cases.push_back(Ok(absl::StrCat(op, "_X_Y_dY"), op,
                       {F32({1, 2, 4, 4}), F32({1, 2, 2, 2}), F32({1, 2, 2, 2})}, pool2,
                       {F32({1, 2, 4, 4})}));
  }
  cases.push_back(Fails("MaxPoolGradient_wrong_Y", "MaxPoolGradient",
                        {F32({1, 2, 4, 4}), F32({1, 2, 3, 3}), F32({1, 2, 3, 3})}, pool2,
                        "Y float32[1,2,3,3] is not the pooled X"));
  cases.push_back(Fails("MaxPoolGradient_Y_dY_differ", "MaxPoolGradient",
                        {F32({1, 2, 4, 4}), F32({1, 2, 2, 2}), F16({1, 2, 2, 2})}, pool2,
                        "dtype mismatch"));

  const TensorType bn_x = F32({2, 16, 4, 4});
  const TensorType c16 = F32({16});
  cases.push_back(Ok("SpatialBNGradient", "SpatialBNGradient", {bn_x, c16, bn_x, c16, c16}, {},
                     {bn_x, c16, c16}));
  cases.push_back(Ok("SpatialBNGradient_fp16", "SpatialBNGradient",
                     {F16({2, 16, 4, 4}), c16, F16({2, 16, 4, 4}), c16, c16}, {},
                     {F16({2, 16, 4, 4}), c16, c16}));
  cases.push_back(Fails("SpatialBNGradient_saved_mean", "SpatialBNGradient",
                        {bn_x, c16, bn_x, F32({8}), c16}, {},
                        "saved_mean float32[8] must be float32[16]", 3));
  const TensorType bn_x16 = F16({2, 16, 4, 4});
  const TensorType c16h = F16({16});
  cases.push_back(Ok("BatchNormalizationGradient_training", "BatchNormalizationGradient",
                     {bn_x16, bn_x16, c16h, c16, c16}, {AttrInt("training_mode", 1)},
                     {bn_x16, c16h, c16h}));
  cases.push_back(Ok("BatchNormalizationGradient_inference_stats", "BatchNormalizationGradient",
                     {bn_x16, bn_x16, c16h, c16, c16}, {},
                     {bn_x16, c16h, c16h, c16, c16}));
  cases.push_back(Fails("BatchNormalizationGradient_training_stats", "BatchNormalizationGradient",
                        {bn_x, bn_x, c16, c16, c16}, {AttrInt("training_mode", 1)},
                        "got 5 outputs with training_mode=1", 5));
  cases.push_back(Fails("BatchNormalizationGradient_four_outputs", "BatchNormalizationGradient",
                        {bn_x, bn_x, c16, c16, c16}, {}, "got 4 outputs", 4));
  cases.push_back(Fails("BatchNormalizationGradient_dY", "BatchNormalizationGradient",
                        {bn_x16, bn_x, c16, c16, c16}, {}, "dtype mismatch", 3));
  cases.push_back(Fails("BatchNormalizationGradient_var", "BatchNormalizationGradient",
                        {bn_x, bn_x, c16, c16, F32({8})}, {},
                        "var float32[8] must be [16] (one entry per channel", 3));
  cases.push_back(Ok("LayerNormGradient", "LayerNormGradient",
                     {F32({4, 10}), F32({4, 10}), F32({4, 1}), F32({4, 1}), F32({4, 10})}, {},
                     {F32({4, 10})}));
  cases.push_back(Ok("LayerNormGradient_affine", "LayerNormGradient",
                     {F32({4, 10}), F32({4, 10}), F32({4, 1}), F32({4, 1}), F32({4, 10}),
                      F32({10})},
                     {}, {F32({4, 10}), F32({10}), F32({10})}));
  cases.push_back(Fails("LayerNormGradient_wrong_mean", "LayerNormGradient",
                        {F32({4, 10}), F32({4, 10}), F32({4}), F32({4, 1}), F32({4, 10})}, {},
                        "mean float32[4]"));
  cases.push_back(Ok("LayerNormalizationGradient", "LayerNormalizationGradient",
                     {F16({2, 5, 16}), F16({2, 5, 16}), F16({16}), F32({2, 5, 1}),
                      F32({2, 5, 1})},
                     {}, {F16({2, 5, 16}), F16({16}), F16({16})}));
  cases.push_back(Fails("LayerNormalizationGradient_wrong_stats", "LayerNormalizationGradient",
                        {F16({2, 5, 16}), F16({2, 5, 16}), F16({16}), F32({2, 5}),
                         F32({2, 5, 1})},
                        {}, "Mean float32[2,5] must have dims [2,5,1]", 2));
  cases.push_back(Ok("DropoutGrad", "DropoutGrad", {F16({4, 8}), Bool({4, 8})}, {},
                     {F16({4, 8})}));
  cases.push_back(Fails("DropoutGrad_mask_type", "DropoutGrad", {F16({4, 8}), F16({4, 8})}, {},
                        "mask float16[4,8] must be bool"));
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Gradient, ShapeFunctionTest, ::testing::ValuesIn(GradientCases()),
                         CaseName);

// ---- attention (ours) -------------------------------------------------------------------------

std::vector<SchemaCase> AttentionCases() {
  std::vector<SchemaCase> cases;
  // 5 patches + 1 class token = L 6; rows padded to 8.
  cases.push_back(Ok("AlibiBias_fp16_padded", "AlibiBias", {I64({5, 2})},
                     {AttrInt("heads", 4), AttrInt("pad", 8), AttrStr("dtype", "fp16")},
                     {F16({1, 4, 6, 8})}));
  cases.push_back(Ok("AlibiBias_defaults", "AlibiBias", {F32({5, 2})}, {AttrInt("heads", 2)},
                     {F32({1, 2, 6, 6})}));
  cases.push_back(Ok("AlibiBias_no_cls", "AlibiBias", {I64({5, 2})},
                     {AttrInt("heads", 2), AttrInt("cls", 0)}, {F32({1, 2, 5, 5})}));
  cases.push_back(Fails("AlibiBias_no_heads", "AlibiBias", {I64({5, 2})}, {},
                        "heads 0 must be at least 1"));
  cases.push_back(Fails("AlibiBias_coords_3", "AlibiBias", {I64({5, 3})}, {AttrInt("heads", 2)},
                        "must be [N, 2]"));
  cases.push_back(Fails("AlibiBias_negative_pad", "AlibiBias", {I64({5, 2})},
                        {AttrInt("heads", 2), AttrInt("pad", -8)}, "pad -8 is negative"));
  cases.push_back(Fails("AlibiBias_int_dtype", "AlibiBias", {I64({5, 2})},
                        {AttrInt("heads", 2), AttrStr("dtype", "int32")},
                        "not a floating-point type"));
  cases.push_back(Ok("AddAttentionBias", "AddAttentionBias",
                     {F16({2, 4, 6, 6}), F16({1, 4, 6, 8})}, {}, {F16({2, 4, 6, 6})}));
  cases.push_back(Fails("AddAttentionBias_short_rows", "AddAttentionBias",
                        {F16({2, 4, 6, 6}), F16({1, 4, 6, 5})}, {}, "does not fit scores"));
  cases.push_back(Fails("AddAttentionBias_dtype", "AddAttentionBias",
                        {F16({2, 4, 6, 6}), F32({1, 4, 6, 6})}, {}, "dtype"));
  cases.push_back(Fails("AddAttentionBias_not_square", "AddAttentionBias",
                        {F16({2, 4, 6, 7}), F16({1, 4, 6, 7})}, {}, "is not [B, H, L, L]"));
  cases.push_back(Ok("PadLastDim", "PadLastDim", {F16({1, 4, 6, 6})}, {AttrInt("multiple", 8)},
                     {F16({1, 4, 6, 8})}));
  cases.push_back(Ok("PadLastDim_already", "PadLastDim", {F16({3, 16})},
                     {AttrInt("multiple", 8)}, {F16({3, 16})}));
  cases.push_back(Fails("PadLastDim_zero", "PadLastDim", {F16({3, 16})}, {},
                        "multiple 0 must be at least 1"));
  cases.push_back(Ok("EfficientAttention", "EfficientAttention",
                     {F16({2, 4, 6, 8}), F16({2, 4, 6, 8}), F16({2, 4, 6, 8}),
                      F16({1, 4, 6, 8})},
                     {}, {F16({2, 6, 32}), F32({6, 10})}));
  cases.push_back(Ok("EfficientAttention_lse_no_bias", "EfficientAttention",
                     {BF16({1, 2, 5, 4}), BF16({1, 2, 5, 4}), BF16({1, 2, 5, 4})}, {},
                     {BF16({1, 5, 8}), F32({5, 6}), F32({1, 2, 5})}));
  cases.push_back(Fails("EfficientAttention_k_differs", "EfficientAttention",
                        {F16({1, 2, 5, 4}), F16({1, 2, 6, 4}), F16({1, 2, 5, 4})}, {},
                        "k float16[1,2,6,4] differs from q", 2));
  cases.push_back(Fails("EfficientAttention_bias_batch", "EfficientAttention",
                        {F16({2, 2, 5, 4}), F16({2, 2, 5, 4}), F16({2, 2, 5, 4}),
                         F16({3, 2, 5, 8})},
                        {}, "does not fit scores", 2));
  cases.push_back(Ok("EfficientAttentionGradient", "EfficientAttentionGradient",
                     {F16({2, 6, 8}), F16({2, 2, 6, 4}), F16({2, 2, 6, 4}), F16({2, 2, 6, 4}),
                      F16({2, 6, 8}), F32({2, 2, 6}), F16({1, 2, 6, 8})},
                     {}, {F16({2, 2, 6, 4}), F16({2, 2, 6, 4}), F16({2, 2, 6, 4}), F32({6, 13})}));
  cases.push_back(Fails("EfficientAttentionGradient_lse", "EfficientAttentionGradient",
                        {F16({2, 6, 8}), F16({2, 2, 6, 4}), F16({2, 2, 6, 4}), F16({2, 2, 6, 4}),
                         F16({2, 6, 8}), F16({2, 2, 6})},
                        {}, "lse float16[2,2,6] must be float32[2,2,6]", 4));
  return cases;
}
INSTANTIATE_TEST_SUITE_P(Attention, ShapeFunctionTest, ::testing::ValuesIn(AttentionCases()),
                         CaseName);

// ---- the table as a whole ---------------------------------------------------------------------

std::vector<SchemaCase> AllCases() {
  std::vector<SchemaCase> all;
  for (auto cases : {ElementwiseCases(), TensorCases(), NnCases(), LossCases(), GradientCases(),
                     AttentionCases()}) {
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

TEST(ShapeSchemaTableTest, EveryOpTypeHasAPassingAndTestedCase) {
  std::set<std::string> tested;
  for (const SchemaCase& c : AllCases()) {
    if (c.error.empty()) tested.insert(c.op);
  }
  for (const std::string& type : OpSchemaTable::Builtin().Types()) {
    EXPECT_TRUE(tested.count(type) > 0) << type << " has no happy-path case";
  }
  for (const std::string& type : tested) {
    EXPECT_NE(OpSchemaTable::Builtin().Find(type), nullptr) << type;
  }
}

TEST(ShapeSchemaTableTest, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const SchemaCase& c : AllCases()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
  }
}

TEST(ShapeSchemaTableTest, ViewCapableOpsAreTheDesignsViews) {
  std::vector<std::string> views;
  for (const std::string& type : OpSchemaTable::Builtin().Types()) {
    if (OpSchemaTable::Builtin().Find(type)->view_capable) views.push_back(type);
  }
  EXPECT_THAT(views, ::testing::UnorderedElementsAre("Reshape", "Flatten", "FlattenToVec",
                                                     "Squeeze", "Unsqueeze", "ExpandDims",
                                                     "Identity", "Expand", "Dropout"));
}

TEST(ShapeSchemaTableTest, DocsListEveryOpType) {
  std::ifstream in(testing::SourcePath("docs/ops.md"));
  ASSERT_TRUE(in.good()) << "docs/ops.md not found";
  std::stringstream text;
  text << in.rdbuf();
  for (const std::string& type : OpSchemaTable::Builtin().Types()) {
    EXPECT_THAT(text.str(), HasSubstr(absl::StrCat("`", type, "`"))) << type;
  }
}

TEST(ShapeSchemaTableTest, HalfPrecisionByteSizes) {
  // One attention score matrix of the TITAN-like encoder: 12 heads x 18001^2.
  const std::vector<int64_t> scores = {1, 12, 18001, 18001};
  EXPECT_EQ(*ByteSize(F16(scores), "s"), int64_t{7776864024});
  EXPECT_EQ(*ByteSize(BF16(scores), "s"), int64_t{7776864024});
  EXPECT_EQ(*ByteSize(F32(scores), "s"), int64_t{15553728048});

  // Cast to half precision halves the bytes.
  const OpSchema* cast = OpSchemaTable::Builtin().Find("Cast");
  ASSERT_NE(cast, nullptr);
  for (const char* to : {"float16", "bfloat16"}) {
    const std::vector<Attribute> attrs = {AttrStr("to", to)};
    const ShapeContext ctx{"Cast", "c", {F32(scores)}, 1, AttributeView(attrs)};
    auto out = cast->infer(ctx);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*ByteSize(out->front(), "y") * 2, *ByteSize(F32(scores), "x")) << to;
  }
}

// Property: on arbitrary input types and attributes, every shape function returns either
// exactly num_outputs types with defined dtypes and non-negative dims, or an InvalidArgument
// (Unimplemented for value-dependent shapes) naming the op. Never a crash.
TEST(ShapeSchemaTableTest, RandomInputsNeverCrash) {
  const DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                              DataType::kInt32,   DataType::kInt64,   DataType::kBool};
  const char* const kIntNames[] = {"axis",     "axis_w",  "group",     "stride",   "kernel",
                                   "pad",      "dilation", "to",       "dtype",    "is_test",
                                   "add_axis", "keepdims", "broadcast", "trans_b", "no_bias",
                                   "num_outputs", "ceil_mode", "global_pooling", "label_prob",
                                   "legacy_pad", "allowzero", "stash_type", "start"};
  const char* const kListNames[] = {"perm", "axes",  "shape",        "split",   "pads",
                                    "strides", "kernel_shape", "dilations", "dims",
                                    "extra_shape", "kernels"};
  const char* const kStringNames[] = {"order", "auto_pad", "to", "reduction"};
  const char* const kStrings[] = {"NCHW", "NHWC", "SAME_UPPER", "VALID", "float16", "none", "x"};
  for (const std::string& type : OpSchemaTable::Builtin().Types()) {
    const OpSchema* schema = OpSchemaTable::Builtin().Find(type);
    for (uint32_t seed = 1; seed <= 300; ++seed) {
      SCOPED_TRACE(absl::StrCat(type, " seed ", seed));
      std::mt19937 rng(seed);
      auto pick = [&rng](int lo, int hi) {
        return std::uniform_int_distribution<int>(lo, hi)(rng);
      };
      std::vector<TensorType> inputs(pick(0, 1) == 0 ? std::max(schema->min_inputs, 0)
                                                     : pick(0, 6));
      const DataType shared = kDtypes[pick(0, 5)];
      for (TensorType& t : inputs) {
        t.dtype = pick(0, 3) == 0 ? kDtypes[pick(0, 5)] : shared;
        t.dims.resize(pick(0, 5));
        for (int64_t& d : t.dims) d = pick(0, 9) == 0 ? pick(-1, 0) : pick(1, 6);
      }
      std::vector<Attribute> attrs;
      for (int k = pick(0, 4); k > 0; --k) {
        switch (pick(0, 2)) {
          case 0: attrs.push_back(AttrInt(kIntNames[pick(0, 22)], pick(-4, 16))); break;
          case 1: {
            Dims list(pick(0, 5));
            for (int64_t& v : list) v = pick(-2, 6);
            attrs.push_back(AttrInts(kListNames[pick(0, 10)], std::move(list)));
            break;
          }
          default: attrs.push_back(AttrStr(kStringNames[pick(0, 3)], kStrings[pick(0, 6)]));
        }
      }
      const int num_outputs = pick(0, 1) == 0 ? schema->min_outputs : pick(0, 6);
      const ShapeContext ctx{type, "fuzzed", inputs, num_outputs, AttributeView(attrs)};
      const absl::StatusOr<std::vector<TensorType>> result = schema->infer(ctx);
      if (result.ok()) {
        ASSERT_EQ(static_cast<int>(result->size()), num_outputs);
        for (const TensorType& t : *result) {
          EXPECT_NE(t.dtype, DataType::kUndefined);
          EXPECT_TRUE(NumElements(t.dims, "out").ok()) << TensorTypeToString(t);
        }
      } else {
        EXPECT_THAT(result.status().code(),
                    ::testing::AnyOf(absl::StatusCode::kInvalidArgument,
                                     absl::StatusCode::kUnimplemented))
            << result.status();
        EXPECT_THAT(result.status().message(), HasSubstr(absl::StrCat(type, " op 'fuzzed'")));
      }
    }
  }
}

// ---- end to end: InferShapes over text nets ---------------------------------------------------

TensorType TypeOf(const Graph& g, absl::string_view name) {
  const std::optional<ValueId> id = g.FindValue(name);
  if (!id.has_value() || !g.value(*id).type.has_value()) return TensorType{};
  return *g.value(*id).type;
}

// memonger's FC test net with its Caffe2 gradient ops, batch N bound at inference time.
constexpr char kMlpTrainingNet[] = R"pb(
  name: "mlp"
  external_input: "data"
  external_input: "label"
  external_input: "w1"
  external_input: "b1"
  external_input: "w2"
  external_input: "b2"
  value_info { name: "data" dtype: FLOAT dim { symbol: "N" } dim { size: 10 } }
  value_info { name: "label" dtype: INT32 dim { symbol: "N" } }
  value_info { name: "w1" dtype: FLOAT dim { size: 8 } dim { size: 10 } role: ROLE_PARAM }
  value_info { name: "b1" dtype: FLOAT dim { size: 8 } role: ROLE_PARAM }
  value_info { name: "w2" dtype: FLOAT dim { size: 3 } dim { size: 8 } role: ROLE_PARAM }
  value_info { name: "b2" dtype: FLOAT dim { size: 3 } role: ROLE_PARAM }
  op { name: "fc1" type: "FC" input: "data" input: "w1" input: "b1" output: "fc1" }
  op { name: "relu1" type: "Relu" input: "fc1" output: "fc1" }
  op { name: "fc2" type: "FC" input: "fc1" input: "w2" input: "b2" output: "fc2" }
  op { name: "pred" type: "Softmax" input: "fc2" output: "pred" }
  op { name: "xent" type: "LabelCrossEntropy" input: "pred" input: "label" output: "xent" }
  op { name: "loss" type: "AveragedLoss" input: "xent" output: "loss" }
  op {
    type: "ConstantFill" input: "loss" output: "loss_grad"
    arg { name: "value" f: 1.0 }
    is_gradient_op: true
  }
  op {
    type: "AveragedLossGradient" input: "xent" input: "loss_grad" output: "xent_grad"
    is_gradient_op: true
  }
  op {
    type: "LabelCrossEntropyGradient" input: "pred" input: "label" input: "xent_grad"
    output: "pred_grad" is_gradient_op: true
  }
  op {
    type: "SoftmaxGradient" input: "pred" input: "pred_grad" output: "fc2_grad"
    is_gradient_op: true
  }
  op {
    type: "FCGradient" input: "fc1" input: "w2" input: "fc2_grad"
    output: "w2_grad" output: "b2_grad" output: "fc1_grad" is_gradient_op: true
  }
  op {
    type: "ReluGradient" input: "fc1" input: "fc1_grad" output: "fc1_grad"
    is_gradient_op: true
  }
  op {
    type: "FCGradient" input: "data" input: "w1" input: "fc1_grad"
    output: "w1_grad" output: "b1_grad" is_gradient_op: true
  }
  external_output: "loss"
  loss: "loss"
)pb";

TEST(InferShapesTest, MlpWithCaffe2Gradients) {
  auto g = GraphFromText(kMlpTrainingNet);
  ASSERT_TRUE(g.ok()) << g.status();
  ShapeBindings bindings;
  ASSERT_TRUE(ParseDimBinding("N=4", bindings).ok());
  ASSERT_TRUE(InferShapes(*g, bindings).ok()) << InferShapes(*g, bindings);
  EXPECT_TRUE(g->AllTypesKnown());

  const std::vector<std::pair<const char*, TensorType>> expected = {
      {"data", F32({4, 10})},     {"label", I32({4})},       {"fc1", F32({4, 8})},
      {"fc2", F32({4, 3})},       {"pred", F32({4, 3})},     {"xent", F32({4})},
      {"loss", F32({})},          {"loss_grad", F32({})},    {"xent_grad", F32({4})},
      {"pred_grad", F32({4, 3})}, {"fc2_grad", F32({4, 3})}, {"w2_grad", F32({3, 8})},
      {"b2_grad", F32({3})},      {"fc1_grad", F32({4, 8})}, {"w1_grad", F32({8, 10})},
      {"b1_grad", F32({8})}};
  for (const auto& [name, type] : expected) {
    EXPECT_EQ(TypeOf(*g, name), type) << name;
  }
  // Every version of the in-place blobs has the same type.
  for (const char* name : {"fc1", "fc1_grad"}) {
    for (ValueId id : g->FindVersions(name)) {
      EXPECT_EQ(*g->value(id).type, TypeOf(*g, name)) << g->value(id).DisplayName();
    }
  }
}

TEST(InferShapesTest, ConvBlockTrainingFp16) {
  auto g = GraphFromText(R"pb(
    name: "conv_block"
    external_input: "x"
    external_input: "w"
    external_input: "b"
    external_input: "s"
    external_input: "bias"
    external_input: "rm"
    external_input: "riv"
    value_info { name: "x" dtype: FLOAT16 dim { size: 2 } dim { size: 3 } dim { size: 16 } dim { size: 16 } }
    value_info { name: "w" dtype: FLOAT16 dim { size: 8 } dim { size: 3 } dim { size: 3 } dim { size: 3 } }
    value_info { name: "b" dtype: FLOAT16 dim { size: 8 } }
    value_info { name: "s" dtype: FLOAT dim { size: 8 } }
    value_info { name: "bias" dtype: FLOAT dim { size: 8 } }
    value_info { name: "rm" dtype: FLOAT dim { size: 8 } }
    value_info { name: "riv" dtype: FLOAT dim { size: 8 } }
    op {
      type: "Conv" input: "x" input: "w" input: "b" output: "c"
      arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 }
    }
    op {
      type: "SpatialBN" input: "c" input: "s" input: "bias" input: "rm" input: "riv"
      output: "bn" output: "rm" output: "riv" output: "sm" output: "siv"
    }
    op { type: "Relu" input: "bn" output: "bn" }
    op {
      type: "MaxPool" input: "bn" output: "p"
      arg { name: "kernel" i: 2 } arg { name: "stride" i: 2 }
    }
    op { type: "AveragedLoss" input: "p" output: "loss" }
    op { type: "ConstantFill" input: "loss" output: "dloss" arg { name: "dtype" i: 12 } }
    op { type: "AveragedLossGradient" input: "p" input: "dloss" output: "dp" }
    op {
      type: "MaxPoolGradient" input: "bn" input: "p" input: "dp" output: "dbn"
      arg { name: "kernel" i: 2 } arg { name: "stride" i: 2 }
    }
    op { type: "ReluGradient" input: "bn" input: "dbn" output: "dbn" }
    op {
      type: "SpatialBNGradient" input: "c" input: "s" input: "dbn" input: "sm" input: "siv"
      output: "dc" output: "ds" output: "dbias"
    }
    op {
      type: "ConvGradient" input: "x" input: "w" input: "dc" output: "dw" output: "db"
      output: "dx"
      arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 }
    }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status status = InferShapes(*g, ShapeBindings{});
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<std::pair<const char*, TensorType>> expected = {
      {"c", F16({2, 8, 16, 16})},  {"bn", F16({2, 8, 16, 16})}, {"rm", F32({8})},
      {"riv", F32({8})},           {"sm", F32({8})},            {"siv", F32({8})},
      {"p", F16({2, 8, 8, 8})},    {"loss", F16({})},           {"dloss", F16({})},
      {"dp", F16({2, 8, 8, 8})},   {"dbn", F16({2, 8, 16, 16})}, {"dc", F16({2, 8, 16, 16})},
      {"ds", F32({8})},            {"dbias", F32({8})},         {"dw", F16({8, 3, 3, 3})},
      {"db", F16({8})},            {"dx", F16({2, 3, 16, 16})}};
  for (const auto& [name, type] : expected) {
    EXPECT_EQ(TypeOf(*g, name), type) << name;
  }
  EXPECT_EQ(*ByteSize(TypeOf(*g, "c"), "c"), 2 * 8 * 16 * 16 * 2);
}

TEST(InferShapesTest, AttentionBlockFp16) {
  auto g = GraphFromText(R"pb(
    name: "attention"
    external_input: "x"
    external_input: "ln_s"
    external_input: "ln_b"
    external_input: "w_qkv"
    value_info { name: "x" dtype: FLOAT16 dim { size: 1 } dim { symbol: "L" } dim { size: 64 } }
    value_info { name: "ln_s" dtype: FLOAT16 dim { size: 64 } }
    value_info { name: "ln_b" dtype: FLOAT16 dim { size: 64 } }
    value_info { name: "w_qkv" dtype: FLOAT16 dim { size: 64 } dim { size: 192 } }
    op {
      type: "LayerNormalization" input: "x" input: "ln_s" input: "ln_b"
      output: "h" output: "mean" output: "inv_std"
    }
    op { type: "MatMul" input: "h" input: "w_qkv" output: "qkv" }
    op {
      type: "Reshape" input: "qkv" output: "qkv4"
      arg { name: "shape" ints: 0 ints: 0 ints: 3 ints: 4 ints: -1 }
    }
    op {
      type: "Transpose" input: "qkv4" output: "qkv_t"
      arg { name: "perm" ints: 2 ints: 0 ints: 3 ints: 1 ints: 4 }
    }
    op {
      type: "Split" input: "qkv_t" output: "q" output: "k" output: "v"
      arg { name: "axis" i: 0 }
    }
    op { type: "Squeeze" input: "q" output: "q3" arg { name: "axes" ints: 0 } }
    op { type: "Squeeze" input: "k" output: "k3" arg { name: "axes" ints: 0 } }
    op {
      type: "Transpose" input: "k3" output: "kt"
      arg { name: "perm" ints: 0 ints: 1 ints: 3 ints: 2 }
    }
    op { type: "MatMul" input: "q3" input: "kt" output: "scores" }
    op { type: "Cast" input: "scores" output: "scores32" arg { name: "to" i: 1 } }
    op { type: "Softmax" input: "scores32" output: "attn32" arg { name: "axis" i: -1 } }
    op { type: "Cast" input: "attn32" output: "attn" arg { name: "to" s: "float16" } }
    op { type: "Gelu" input: "attn" output: "act" }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  ShapeBindings bindings;
  bindings.dims["L"] = 10;
  const absl::Status status = InferShapes(*g, bindings);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(TypeOf(*g, "h"), F16({1, 10, 64}));
  EXPECT_EQ(TypeOf(*g, "mean"), F32({1, 10, 1}));
  EXPECT_EQ(TypeOf(*g, "qkv"), F16({1, 10, 192}));
  EXPECT_EQ(TypeOf(*g, "qkv4"), F16({1, 10, 3, 4, 16}));
  EXPECT_EQ(TypeOf(*g, "qkv_t"), F16({3, 1, 4, 10, 16}));
  EXPECT_EQ(TypeOf(*g, "q3"), F16({1, 4, 10, 16}));
  EXPECT_EQ(TypeOf(*g, "kt"), F16({1, 4, 16, 10}));
  EXPECT_EQ(TypeOf(*g, "scores"), F16({1, 4, 10, 10}));
  EXPECT_EQ(TypeOf(*g, "scores32"), F32({1, 4, 10, 10}));
  EXPECT_EQ(TypeOf(*g, "attn"), F16({1, 4, 10, 10}));
  EXPECT_EQ(TypeOf(*g, "act"), F16({1, 4, 10, 10}));
  EXPECT_EQ(*ByteSize(TypeOf(*g, "scores32"), "s"), 2 * *ByteSize(TypeOf(*g, "scores"), "s"));
}

constexpr char kMysteryNet[] = R"pb(
  external_input: "x"
  value_info { name: "x" dtype: FLOAT dim { size: 2 } dim { size: 3 } }
  op { name: "mystery" type: "MysteryOp" input: "x" output: "y" }
  op { name: "after" type: "Relu" input: "y" output: "z" }
)pb";

TEST(InferShapesTest, OpWithoutSchemaNeedsDeclaredOutputs) {
  auto g = GraphFromText(kMysteryNet);
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status status = InferShapes(*g, ShapeBindings{});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(status.message(), HasSubstr("'mystery'"));
  EXPECT_THAT(status.message(), HasSubstr("MysteryOp"));
}

TEST(InferShapesTest, OpWithoutSchemaTakesDeclaredOutputs) {
  auto g = GraphFromText(absl::StrCat(
      kMysteryNet, R"pb(
        value_info { name: "y" dtype: FLOAT16 dim { size: 6 } }
      )pb"));
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status status = InferShapes(*g, ShapeBindings{});
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(TypeOf(*g, "y"), F16({6}));
  EXPECT_EQ(TypeOf(*g, "z"), F16({6}));  // inferred downstream of the declared type
}

TEST(InferShapesTest, SchemaErrorNamesTheOp) {
  auto g = GraphFromText(R"pb(
    external_input: "x"
    external_input: "w"
    external_input: "b"
    value_info { name: "x" dtype: FLOAT dim { size: 4 } dim { size: 10 } }
    value_info { name: "w" dtype: FLOAT dim { size: 8 } dim { size: 9 } }
    value_info { name: "b" dtype: FLOAT dim { size: 8 } }
    op { name: "fc_bad" type: "FC" input: "x" input: "w" input: "b" output: "y" }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status status = InferShapes(*g, ShapeBindings{});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("FC op 'fc_bad'"));
  EXPECT_THAT(status.message(), HasSubstr("K=10"));
}

TEST(InferShapesTest, ShapeFromTensorValuesIsUnimplemented) {
  // Caffe2's Reshape(data, new_shape) takes its target from a tensor's values.
  auto g = GraphFromText(R"pb(
    external_input: "x"
    external_input: "new_shape"
    value_info { name: "x" dtype: FLOAT dim { size: 4 } dim { size: 10 } }
    value_info { name: "new_shape" dtype: INT64 dim { size: 2 } }
    op { name: "r" type: "Reshape" input: "x" input: "new_shape" output: "y" output: "old" }
  )pb");
  ASSERT_TRUE(g.ok()) << g.status();
  const absl::Status status = InferShapes(*g, ShapeBindings{});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(status.message(), HasSubstr("Reshape op 'r'"));
}

// Found by fuzz/cli_args_fuzzer.cc: a --dim argument holding a newline came back verbatim in
// the usage error, which then took two lines. Every quoted part is escaped now.
TEST(BindingTest, ErrorsQuoteTheTextOnOneLine) {
  struct Case {
    const char* name;
    bool input_shape;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"not an integer", false, "N=1\n2"},
      {"no equals sign", false, "N\n"},
      {"negative", false, "a\tb=-1"},
      {"input dim not an integer", true, "x=1,\r2"},
      {"twice", false, "a\nb=1"},
      {"input twice", true, "x\n=1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ShapeBindings bindings;
    absl::Status status;
    for (int i = 0; i < 2 && status.ok(); ++i) {  // twice, for the "given twice" cases
      status = c.input_shape ? ParseInputShapeBinding(c.text, bindings)
                             : ParseDimBinding(c.text, bindings);
    }
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(status.message()).find_first_of("\n\r\t"), std::string::npos)
        << status.message();
  }
  ShapeBindings bindings;
  ASSERT_TRUE(ParseDimBinding("a\nb=1", bindings).ok());
  const absl::Status unused = CheckDimsUsed({"L"}, bindings);
  EXPECT_EQ(std::string(unused.message()).find('\n'), std::string::npos) << unused.message();
}

}  // namespace
}  // namespace memonger::graph

namespace memonger::graph {
namespace {

// ---- dtypes of graph inputs nobody declared (Caffe2 nets) ---------------------------------

Graph Net(const std::string& text) {
  absl::StatusOr<Graph> g = testing::GraphFromText(text);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

DataType InputType(const Graph& g, const std::string& name, const ShapeBindings& b = {}) {
  absl::StatusOr<DataType> t = GraphInputDtype(g, *g.FindValue(name), b, OpSchemaTable::Builtin());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.value_or(DataType::kUndefined);
}

// memonger_test.py's base net as Caffe2 writes it: no dtypes anywhere. The label's type comes
// from the ops reading it, every other input is float32.
constexpr char kLabelNet[] = R"pb(
  external_input: "data"
  external_input: "w"
  external_input: "b"
  external_input: "label"
  op { type: "FC" input: "data" input: "w" input: "b" output: "fc" }
  op { type: "Softmax" input: "fc" output: "pred" }
  op { type: "LabelCrossEntropy" input: "pred" input: "label" output: "xent" }
  op { type: "AveragedLoss" input: "xent" output: "loss" }
  op { type: "LabelCrossEntropyGradient" input: "pred" input: "label" input: "xent" output: "g" }
)pb";

TEST(GraphInputDtypeTest, UndeclaredInputsTakeTheTypeTheirReadersFix) {
  const Graph g = Net(kLabelNet);
  EXPECT_EQ(InputType(g, "label"), DataType::kInt32);
  EXPECT_EQ(InputType(g, "data"), DataType::kFloat32);
  EXPECT_EQ(InputType(g, "w"), DataType::kFloat32);
  // --input-type wins over the readers (and over a declaration).
  ShapeBindings b;
  ASSERT_TRUE(ParseInputTypeBinding("data=float16", b).ok());
  EXPECT_EQ(InputType(g, "data", b), DataType::kFloat16);
}

TEST(GraphInputDtypeTest, ShapeInferenceTypesTheLabelWithoutADeclaration) {
  Graph g = Net(kLabelNet);
  ShapeBindings b;
  for (const char* s : {"data=4,3", "w=5,3", "b=5", "label=4"}) {
    ASSERT_TRUE(ParseInputShapeBinding(s, b).ok());
  }
  // Before: every undeclared input was float32 and LabelCrossEntropy refused the label.
  const absl::Status s = InferShapes(g, b);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(g.value(*g.FindValue("label")).type->dtype, DataType::kInt32);
  EXPECT_EQ(g.value(*g.FindValue("xent")).type->dtype, DataType::kFloat32);
  // A type the readers do not take is still refused by their schemas.
  Graph wrong = Net(kLabelNet);
  ASSERT_TRUE(ParseInputTypeBinding("label=float32", b).ok());
  const absl::Status refused = InferShapes(wrong, b);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.message()), HasSubstr("label"));
}

TEST(GraphInputDtypeTest, SeveralAllowedTypesTakeTheFirstEveryReaderAllows) {
  const Graph g = Net(R"pb(
    external_input: "table"
    external_input: "idx"
    external_input: "labels"
    external_input: "logits"
    op { type: "Gather" input: "table" input: "idx" output: "rows" }
    op { type: "SoftmaxWithLoss" input: "logits" input: "labels" output: "p" output: "l" }
    op { type: "SoftmaxCrossEntropyLoss" input: "logits" input: "labels" output: "l2" }
  )pb");
  EXPECT_EQ(InputType(g, "idx"), DataType::kInt32);  // Caffe2's default first
  // int32 or int64 for SoftmaxWithLoss, int64 or int32 for the ONNX loss: int32 (the first
  // reader's preference that the second allows).
  EXPECT_EQ(InputType(g, "labels"), DataType::kInt32);
  EXPECT_EQ(InputType(g, "table"), DataType::kFloat32);
}

TEST(GraphInputDtypeTest, LabelProbabilitiesAreFloat) {
  const Graph g = Net(R"pb(
    external_input: "logits"
    external_input: "probs"
    op { type: "SoftmaxWithLoss" input: "logits" input: "probs" output: "p" output: "l"
         arg { name: "label_prob" i: 1 } }
  )pb");
  EXPECT_EQ(InputType(g, "probs"), DataType::kFloat32);
}

TEST(GraphInputDtypeTest, ReadersThatDisagreeAreNamed) {
  const Graph g = Net(R"pb(
    external_input: "pred"
    external_input: "x"
    op { name: "xent" type: "LabelCrossEntropy" input: "pred" input: "x" output: "y" }
    op { name: "mask" type: "Not" input: "x" output: "z" }
  )pb");
  absl::StatusOr<DataType> t =
      GraphInputDtype(g, *g.FindValue("x"), {}, OpSchemaTable::Builtin());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              AllOf(HasSubstr("'x'"), HasSubstr("LabelCrossEntropy op 'xent' takes int32"),
                    HasSubstr("Not op 'mask' takes bool"), HasSubstr("--input-type x=DTYPE")));
  // --input-type settles it (and then a schema refuses the wrong reader).
  ShapeBindings b;
  ASSERT_TRUE(ParseInputTypeBinding("x=int32", b).ok());
  EXPECT_EQ(InputType(g, "x", b), DataType::kInt32);
}

TEST(GraphInputDtypeTest, InputTypeBindings) {
  ShapeBindings b;
  EXPECT_TRUE(ParseInputTypeBinding("label=int32", b).ok());
  EXPECT_EQ(b.input_types.at("label"), DataType::kInt32);
  EXPECT_THAT(std::string(ParseInputTypeBinding("label=int64", b).message()),
              HasSubstr("given twice"));
  EXPECT_THAT(std::string(ParseInputTypeBinding("x=quaternion", b).message()),
              HasSubstr("malformed binding 'x=quaternion'"));
  EXPECT_THAT(std::string(ParseInputTypeBinding("=int32", b).message()),
              HasSubstr("NAME=DTYPE"));
  // A name that is not a graph input is refused by InferShapes.
  Graph g = Net(kLabelNet);
  ShapeBindings wrong;
  ASSERT_TRUE(ParseInputTypeBinding("fc=int32", wrong).ok());
  EXPECT_THAT(std::string(InferShapes(g, wrong).message()),
              HasSubstr("--input-type names 'fc', which is not a graph input"));
}

// Caffe2's Concat gradient: Split(dY, split_info) takes its sizes from the forward Concat's
// inputs (split_info is Concat's second output).
TEST(SplitInfoTest, ConcatGradientSplitTakesTheConcatInputsWidths) {
  Graph g = Net(R"pb(
    external_input: "a"
    external_input: "b"
    external_input: "dy"
    op { type: "Concat" input: "a" input: "b" output: "c" output: "c_split_info"
         arg { name: "axis" i: 1 } }
    op { type: "Split" input: "dy" input: "c_split_info" output: "a_grad" output: "b_grad"
         arg { name: "axis" i: 1 } }
  )pb");
  ShapeBindings b;
  for (const char* s : {"a=4,3", "b=4,5", "dy=4,8"}) {
    ASSERT_TRUE(ParseInputShapeBinding(s, b).ok());
  }
  const absl::Status s = InferShapes(g, b);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(g.value(*g.FindValue("a_grad")).type->dims, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(g.value(*g.FindValue("b_grad")).type->dims, (std::vector<int64_t>{4, 5}));
  // A Split whose sizes tensor comes from elsewhere still needs them declared.
  Graph other = Net(R"pb(
    external_input: "dy"
    external_input: "sizes"
    op { type: "Split" input: "dy" input: "sizes" output: "p" output: "q"
         arg { name: "axis" i: 1 } }
  )pb");
  ShapeBindings ob;
  for (const char* s : {"dy=4,8", "sizes=2"}) ASSERT_TRUE(ParseInputShapeBinding(s, ob).ok());
  EXPECT_FALSE(InferShapes(other, ob).ok());
}

}  // namespace
}  // namespace memonger::graph

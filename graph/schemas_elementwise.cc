// Elementwise ops: unary activations and copies, binary arithmetic with broadcasting,
// comparisons and logic, n-ary reductions over inputs (Sum, Max, ...), and Cast.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_schema.h"
#include "graph/schema_util.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using schema_internal::AddSchemas;
using schema_internal::Arity;
using schema_internal::BinaryElementwiseDims;
using schema_internal::Broadcast;
using schema_internal::BroadcastsTo;
using schema_internal::CheckDtypeIn;
using schema_internal::CheckFloat;
using schema_internal::CheckSameDtype;
using schema_internal::Dims;
using schema_internal::DtypeAttr;
using schema_internal::DtypeNumbering;
using schema_internal::Str;
using schema_internal::TypeList;

constexpr Arity kOne{1, 1};

// Output = input 0, any element type.
absl::StatusOr<TypeList> SameAsInput(const ShapeContext& ctx) {
  return TypeList{ctx.inputs[0]};
}

// Output = input 0, which must be floating-point (transcendental functions).
absl::StatusOr<TypeList> SameAsFloatInput(const ShapeContext& ctx) {
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", ctx.inputs[0]));
  return TypeList{ctx.inputs[0]};
}

// Add, Sub, Mul, Div: A and B of one dtype; numpy broadcasting or Caffe2's broadcast=1.
absl::StatusOr<TypeList> Arithmetic(const ShapeContext& ctx) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "A", a, "B", b));
  MG_ASSIGN_OR_RETURN(Dims dims, BinaryElementwiseDims(ctx, a, b));
  return TypeList{TensorType{a.dtype, std::move(dims)}};
}

// ONNX Pow: the exponent may have another numeric type; the result has the base's.
absl::StatusOr<TypeList> Pow(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(Dims dims, BinaryElementwiseDims(ctx, ctx.inputs[0], ctx.inputs[1]));
  return TypeList{TensorType{ctx.inputs[0].dtype, std::move(dims)}};
}

// Equal, Less, ... (ONNX) and EQ, LT, ... (Caffe2): A and B of one dtype -> bool.
absl::StatusOr<TypeList> Comparison(const ShapeContext& ctx) {
  const TensorType& a = ctx.inputs[0];
  const TensorType& b = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "A", a, "B", b));
  MG_ASSIGN_OR_RETURN(Dims dims, BinaryElementwiseDims(ctx, a, b));
  return TypeList{TensorType{DataType::kBool, std::move(dims)}};
}

// And, Or, Xor: bool x bool -> bool.
absl::StatusOr<TypeList> Logical(const ShapeContext& ctx) {
  MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "A", ctx.inputs[0], {DataType::kBool}));
  MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "B", ctx.inputs[1], {DataType::kBool}));
  MG_ASSIGN_OR_RETURN(Dims dims, BinaryElementwiseDims(ctx, ctx.inputs[0], ctx.inputs[1]));
  return TypeList{TensorType{DataType::kBool, std::move(dims)}};
}

absl::StatusOr<TypeList> Not(const ShapeContext& ctx) {
  MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "X", ctx.inputs[0], {DataType::kBool}));
  return TypeList{ctx.inputs[0]};
}

// Sum, Max, Min, Mean: n inputs of one dtype, broadcast together (Caffe2's Sum wants equal
// shapes, which broadcasting includes).
absl::StatusOr<TypeList> Variadic(const ShapeContext& ctx) {
  TensorType out = ctx.inputs[0];
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "input 0", ctx.inputs[0], absl::StrCat("input ", i),
                                      ctx.inputs[i]));
    MG_ASSIGN_OR_RETURN(out.dims, Broadcast(ctx, out.dims, ctx.inputs[i].dims));
  }
  return TypeList{out};
}

// ONNX Where(condition, X, Y): three-way broadcasting; X and Y of one dtype.
absl::StatusOr<TypeList> Where(const ShapeContext& ctx) {
  MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "condition", ctx.inputs[0], {DataType::kBool}));
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", ctx.inputs[1], "Y", ctx.inputs[2]));
  MG_ASSIGN_OR_RETURN(Dims dims, Broadcast(ctx, ctx.inputs[0].dims, ctx.inputs[1].dims));
  MG_ASSIGN_OR_RETURN(dims, Broadcast(ctx, dims, ctx.inputs[2].dims));
  return TypeList{TensorType{ctx.inputs[1].dtype, std::move(dims)}};
}

// ONNX Clip(input, [min], [max]) and Caffe2 Clip(input): bounds share the input's dtype.
absl::StatusOr<TypeList> Clip(const ShapeContext& ctx) {
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "input", ctx.inputs[0], i == 1 ? "min" : "max",
                                      ctx.inputs[i]));
  }
  return TypeList{ctx.inputs[0]};
}

// ONNX PRelu(X, slope): slope broadcasts to X (unidirectionally).
absl::StatusOr<TypeList> PRelu(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const TensorType& slope = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "slope", slope));
  if (!BroadcastsTo(slope.dims, x.dims)) {
    // Caffe2's PRelu takes a per-channel slope [C] against X [N, C, ...].
    const bool per_channel = slope.dims.size() == 1 && x.dims.size() >= 2 &&
                             (slope.dims[0] == x.dims[1] || slope.dims[0] == 1);
    if (!per_channel) {
      return ctx.Error(absl::StrCat("slope ", Str(slope), " does not broadcast to X ", Str(x)));
    }
  }
  return TypeList{x};
}

// Cast: attribute `to` as an ONNX element type number or a dtype name ("float16", "FLOAT16").
absl::StatusOr<TypeList> Cast(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(std::optional<DataType> to, DtypeAttr(ctx, "to", DtypeNumbering::kOnnx));
  if (!to.has_value()) return ctx.Error("attribute 'to' (the target element type) is missing");
  return TypeList{TensorType{*to, ctx.inputs[0].dims}};
}

// Caffe2 FloatToHalf / HalfToFloat.
ShapeFunction Convert(DataType from, DataType to) {
  return [from, to](const ShapeContext& ctx) -> absl::StatusOr<TypeList> {
    MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "X", ctx.inputs[0], {from}));
    return TypeList{TensorType{to, ctx.inputs[0].dims}};
  };
}

}  // namespace

void AddElementwiseSchemas(OpSchemaTable& table) {
  AddSchemas(table,
             {"Relu", "LeakyRelu", "Neg", "Abs", "Sign", "Floor", "Ceil", "Round", "Copy",
              "StopGradient", "CopyGPUToCPU", "CopyCPUToGPU", "Scale", "Free", "Alias",
              "IndexFreeze"},
             kOne, kOne, SameAsInput);
  AddSchemas(table, {"Identity"}, kOne, kOne, SameAsInput, /*view_capable=*/true);
  AddSchemas(table,
             {"Gelu", "Sigmoid", "Tanh", "Sqrt", "Rsqrt", "Exp", "Log", "Erf", "Reciprocal",
              "Elu", "Celu", "Selu", "Softplus", "Softsign", "HardSigmoid", "Swish", "Sin", "Cos"},
             kOne, kOne, SameAsFloatInput);
  AddSchemas(table, {"Add", "Sub", "Mul", "Div"}, {2, 2}, kOne, Arithmetic);
  AddSchemas(table, {"Pow"}, {2, 2}, kOne, Pow);
  AddSchemas(table,
             {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "EQ", "NE", "LT",
              "LE", "GT", "GE"},
             {2, 2}, kOne, Comparison);
  AddSchemas(table, {"And", "Or", "Xor"}, {2, 2}, kOne, Logical);
  AddSchemas(table, {"Not"}, kOne, kOne, Not);
  AddSchemas(table, {"Sum", "Max", "Min", "Mean"}, {1, -1}, kOne, Variadic);
  AddSchemas(table, {"Where"}, {3, 3}, kOne, Where);
  table.SetTypedInput({"And", "Or", "Xor"}, 0, {DataType::kBool});
  table.SetTypedInput({"And", "Or", "Xor"}, 1, {DataType::kBool});
  table.SetTypedInput({"Not", "Where"}, 0, {DataType::kBool});
  AddSchemas(table, {"Clip"}, {1, 3}, kOne, Clip);
  AddSchemas(table, {"PRelu"}, {2, 2}, kOne, PRelu);
  AddSchemas(table, {"Cast"}, kOne, kOne, Cast);
  AddSchemas(table, {"FloatToHalf"}, kOne, kOne,
             Convert(DataType::kFloat32, DataType::kFloat16));
  AddSchemas(table, {"HalfToFloat"}, kOne, kOne,
             Convert(DataType::kFloat16, DataType::kFloat32));
}

}  // namespace memonger::graph

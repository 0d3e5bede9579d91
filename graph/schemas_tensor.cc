// Tensor ops that move or regroup elements without arithmetic: Transpose, Reshape, Flatten,
// Concat, Split, Squeeze/Unsqueeze, Expand, Gather, Shape, reductions, and Caffe2's fill ops.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "graph/op_schema.h"
#include "graph/schema_util.h"
#include "util/checked_math.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

using schema_internal::AddSchemas;
using schema_internal::Arity;
using schema_internal::Broadcast;
using schema_internal::CheckDtypeIn;
using schema_internal::CheckRank;
using schema_internal::CheckSameDtype;
using schema_internal::Dims;
using schema_internal::DtypeAttr;
using schema_internal::DtypeNumbering;
using schema_internal::IntAttr;
using schema_internal::IntsAttr;
using schema_internal::NormalizeAxis;
using schema_internal::OptionalIntAttr;
using schema_internal::Product;
using schema_internal::Str;
using schema_internal::StringAttr;
using schema_internal::TypeList;
using schema_internal::ValueDependent;

constexpr Arity kOne{1, 1};

int64_t Rank(const TensorType& t) { return static_cast<int64_t>(t.dims.size()); }

// The first of several attribute spellings that is present (Caffe2 and ONNX name some
// attributes differently: Transpose `axes`/`perm`, Squeeze `dims`/`axes`).
absl::StatusOr<std::optional<Dims>> FirstIntsAttr(const ShapeContext& ctx,
                                                  const std::vector<absl::string_view>& names) {
  for (absl::string_view name : names) {
    MG_ASSIGN_OR_RETURN(std::optional<Dims> value, IntsAttr(ctx, name));
    if (value.has_value()) return value;
  }
  return std::optional<Dims>();
}

// Caffe2 Concat/Split: `axis` if given, else the channel dim of `order` (NCHW 1, NHWC 3).
absl::StatusOr<int64_t> Caffe2Axis(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> axis, OptionalIntAttr(ctx, "axis"));
  if (axis.has_value()) return *axis;
  MG_ASSIGN_OR_RETURN(std::optional<std::string> order, StringAttr(ctx, "order"));
  if (!order.has_value()) return 1;
  const std::string upper = absl::AsciiStrToUpper(*order);
  if (upper == "NCHW") return 1;
  if (upper == "NHWC") return 3;
  return ctx.Error(absl::StrCat("order '", *order, "' must be NCHW or NHWC"));
}

// Normalises a list of axes against `rank`; repeated axes are an error unless `dedupe`.
absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const ShapeContext& ctx, const Dims& axes,
                                                   int64_t rank, bool dedupe) {
  std::vector<int64_t> out;
  for (int64_t axis : axes) {
    MG_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis, rank, "axis"));
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      if (dedupe) continue;
      return ctx.Error(absl::StrCat("axes ", DimsToString(axes), " name axis ", a, " twice"));
    }
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<TypeList> Transpose(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const int64_t rank = Rank(x);
  MG_ASSIGN_OR_RETURN(std::optional<Dims> perm, FirstIntsAttr(ctx, {"perm", "axes"}));
  if (!perm.has_value() || perm->empty()) {
    // The default reverses the dims (ONNX and Caffe2 alike).
    TensorType y{x.dtype, Dims(x.dims.rbegin(), x.dims.rend())};
    return TypeList{y};
  }
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int64_t>(perm->size()) == rank;
  for (size_t i = 0; ok && i < perm->size(); ++i) {
    const int64_t p = (*perm)[i];
    ok = p >= 0 && p < rank && !seen[p];
    if (ok) seen[p] = true;
  }
  if (!ok) {
    return ctx.Error(absl::StrCat("perm ", DimsToString(*perm), " is not a permutation of 0..",
                                  rank - 1, " (X is ", Str(x), ")"));
  }
  TensorType y{x.dtype, Dims(rank)};
  for (int64_t i = 0; i < rank; ++i) y.dims[i] = x.dims[(*perm)[i]];
  return TypeList{y};
}

// Reshape (ONNX, allowzero=0 by default: 0 copies the input dim at that position; -1 is
// inferred) and Caffe2 Reshape (same rules; optional second output old_shape int64[rank]).
absl::StatusOr<TypeList> Reshape(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(std::optional<Dims> shape, IntsAttr(ctx, "shape"));
  if (!shape.has_value()) {
    if (ctx.inputs.size() > 1) {
      return ValueDependent(ctx,
                            "the target shape is the value of input 1, which shape inference "
                            "does not know; give a 'shape' attribute or declare the output");
    }
    return ctx.Error("attribute 'shape' is missing");
  }
  MG_ASSIGN_OR_RETURN(int64_t allowzero, IntAttr(ctx, "allowzero", 0));
  const std::string target = DimsToString(*shape);
  Dims out(shape->size());
  std::optional<size_t> inferred;
  int64_t known = 1;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t d = (*shape)[i];
    if (d == -1) {
      if (inferred.has_value()) {
        return ctx.Error(absl::StrCat("reshape to ", target, ": more than one -1"));
      }
      inferred = i;
      continue;
    }
    if (d < -1) {
      return ctx.Error(absl::StrCat("reshape to ", target, ": invalid size ", d,
                                    " at position ", i));
    }
    if (d == 0 && allowzero == 0) {
      if (i >= x.dims.size()) {
        return ctx.Error(absl::StrCat("reshape to ", target, ": the 0 at position ", i,
                                      " copies an input dim, but X ", Str(x), " has rank ",
                                      x.dims.size()));
      }
      d = x.dims[i];
    }
    out[i] = d;
    const auto product = util::CheckedMul(known, d);
    if (!product.has_value()) {
      return ctx.Error(absl::StrCat("reshape to ", target,
                                    ": more elements than fit in 64 bits"));
    }
    known = *product;
  }
  MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, x.dims));
  if (inferred.has_value()) {
    if (known == 0) {
      return ctx.Error(absl::StrCat("reshape to ", target,
                                    ": the -1 cannot be inferred next to a zero-sized dim"));
    }
    if (count % known != 0) {
      return ctx.Error(absl::StrCat("cannot reshape X ", Str(x), " (", count,
                                    " elements) to ", target, ": ", count,
                                    " is not a multiple of ", known));
    }
    out[*inferred] = count / known;
  } else if (known != count) {
    return ctx.Error(absl::StrCat("cannot reshape X ", Str(x), " (", count, " elements) to ",
                                  target, " (", known, " elements)"));
  }
  TypeList result{TensorType{x.dtype, std::move(out)}};
  if (ctx.num_outputs == 2) result.push_back(TensorType{DataType::kInt64, {Rank(x)}});
  return result;
}

// Flatten (ONNX and Caffe2): [prod(dims[:axis]), prod(dims[axis:])], axis in [-r, r].
absl::StatusOr<TypeList> Flatten(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", 1));
  MG_ASSIGN_OR_RETURN(int64_t axis,
                      NormalizeAxis(ctx, axis_attr, Rank(x), "axis", /*allow_end=*/true));
  MG_ASSIGN_OR_RETURN(int64_t outer, Product(ctx, x.dims, 0, axis));
  MG_ASSIGN_OR_RETURN(int64_t inner, Product(ctx, x.dims, axis, x.dims.size()));
  return TypeList{TensorType{x.dtype, {outer, inner}}};
}

// Caffe2 FlattenToVec: [numel].
absl::StatusOr<TypeList> FlattenToVec(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, ctx.inputs[0].dims));
  return TypeList{TensorType{ctx.inputs[0].dtype, {count}}};
}

// Concat: ONNX (one output) and Caffe2 (optional split_info int32[num_inputs]; `add_axis`
// stacks equal-shaped inputs along a new axis).
absl::StatusOr<TypeList> Concat(const ShapeContext& ctx) {
  const TensorType& first = ctx.inputs[0];
  const int64_t rank = Rank(first);
  const int64_t n = static_cast<int64_t>(ctx.inputs.size());
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, Caffe2Axis(ctx));
  MG_ASSIGN_OR_RETURN(int64_t add_axis, IntAttr(ctx, "add_axis", 0));
  TensorType y{first.dtype, {}};
  if (add_axis != 0) {
    MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank + 1, "axis"));
    for (int64_t i = 1; i < n; ++i) {
      const TensorType& t = ctx.inputs[i];
      MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "input 0", first, absl::StrCat("input ", i), t));
      if (t.dims != first.dims) {
        return ctx.Error(absl::StrCat("add_axis=1 needs equal shapes: input ", i, " ", Str(t),
                                      " differs from input 0 ", Str(first)));
      }
    }
    y.dims = first.dims;
    y.dims.insert(y.dims.begin() + axis, n);
  } else {
    MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank, "axis"));
    y.dims = first.dims;
    for (int64_t i = 1; i < n; ++i) {
      const TensorType& t = ctx.inputs[i];
      MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "input 0", first, absl::StrCat("input ", i), t));
      bool match = Rank(t) == rank;
      for (int64_t d = 0; match && d < rank; ++d) match = d == axis || t.dims[d] == first.dims[d];
      if (!match) {
        return ctx.Error(absl::StrCat("input ", i, " ", Str(t), " does not match input 0 ",
                                      Str(first), " outside axis ", axis));
      }
      const auto sum = util::CheckedAdd(y.dims[axis], t.dims[axis]);
      if (!sum.has_value()) return ctx.Error("concatenated size overflows int64");
      y.dims[axis] = *sum;
    }
  }
  TypeList result{y};
  if (ctx.num_outputs == 2) result.push_back(TensorType{DataType::kInt32, {n}});
  return result;
}

// Split: sizes from `split`, else (ONNX opset 18) `num_outputs` with a smaller last chunk,
// else an equal split that must divide the axis. Caffe2's `add_axis` drops the split axis.
absl::StatusOr<TypeList> Split(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  const int64_t n = ctx.num_outputs;
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, Caffe2Axis(ctx));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, Rank(x), "axis"));
  MG_ASSIGN_OR_RETURN(int64_t add_axis, IntAttr(ctx, "add_axis", 0));
  const int64_t size = x.dims[axis];
  MG_ASSIGN_OR_RETURN(std::optional<Dims> split, IntsAttr(ctx, "split"));
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> num_outputs, OptionalIntAttr(ctx, "num_outputs"));
  Dims sizes;
  if (split.has_value() && !split->empty()) {
    if (static_cast<int64_t>(split->size()) != n) {
      return ctx.Error(absl::StrCat("split ", DimsToString(*split), " has ", split->size(),
                                    " sizes for ", n, " outputs"));
    }
    int64_t total = 0;
    for (int64_t s : *split) {
      if (s < 0) return ctx.Error(absl::StrCat("split ", DimsToString(*split), " has size ", s));
      const auto sum = util::CheckedAdd(total, s);
      if (!sum.has_value()) return ctx.Error("split sizes overflow int64");
      total = *sum;
    }
    if (total != size) {
      return ctx.Error(absl::StrCat("split ", DimsToString(*split), " sums to ", total,
                                    " but axis ", axis, " of X ", Str(x), " has size ", size));
    }
    sizes = *split;
  } else if (ctx.inputs.size() > 1) {
    return ValueDependent(ctx,
                          "the split sizes are the value of input 1, which shape inference "
                          "does not know; give a 'split' attribute or declare the outputs");
  } else if (num_outputs.has_value()) {
    if (*num_outputs != n) {
      return ctx.Error(absl::StrCat("num_outputs ", *num_outputs, " but the op has ", n,
                                    " outputs"));
    }
    const int64_t chunk = size / n + (size % n != 0 ? 1 : 0);
    if (chunk * (n - 1) > size) {
      return ctx.Error(absl::StrCat("axis ", axis, " of size ", size, " cannot be split into ",
                                    n, " chunks of ", chunk));
    }
    sizes.assign(n, chunk);
    sizes.back() = size - chunk * (n - 1);
  } else {
    if (size % n != 0) {
      return ctx.Error(absl::StrCat("axis ", axis, " of X ", Str(x), " has size ", size,
                                    ", which does not split evenly into ", n, " outputs"));
    }
    sizes.assign(n, size / n);
  }
  TypeList result;
  for (int64_t s : sizes) {
    TensorType t = x;
    if (add_axis != 0) {
      if (s != 1) {
        return ctx.Error(absl::StrCat("add_axis=1 needs pieces of size 1 along axis ", axis,
                                      ", got ", s));
      }
      t.dims.erase(t.dims.begin() + axis);
    } else {
      t.dims[axis] = s;
    }
    result.push_back(std::move(t));
  }
  return result;
}

// Squeeze: ONNX `axes` or Caffe2 `dims`; without either, every size-1 dim goes.
absl::StatusOr<TypeList> Squeeze(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(std::optional<Dims> axes_attr, FirstIntsAttr(ctx, {"axes", "dims"}));
  if (!axes_attr.has_value() && ctx.inputs.size() > 1) {
    return ValueDependent(ctx, "the axes are the value of input 1; give an 'axes' attribute");
  }
  TensorType y{x.dtype, {}};
  if (!axes_attr.has_value() || axes_attr->empty()) {
    for (int64_t d : x.dims) {
      if (d != 1) y.dims.push_back(d);
    }
    return TypeList{y};
  }
  // Caffe2 de-duplicates the axes it squeezes; ONNX rejects repeats. Accepting them is harmless.
  MG_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                      NormalizeAxes(ctx, *axes_attr, Rank(x), /*dedupe=*/true));
  for (int64_t a : axes) {
    if (x.dims[a] != 1) {
      return ctx.Error(absl::StrCat("cannot squeeze axis ", a, " of size ", x.dims[a],
                                    " (X is ", Str(x), ")"));
    }
  }
  for (int64_t i = 0; i < Rank(x); ++i) {
    if (!std::binary_search(axes.begin(), axes.end(), i)) y.dims.push_back(x.dims[i]);
  }
  return TypeList{y};
}

// Unsqueeze (ONNX) and ExpandDims (Caffe2): axes index the *output*, which has rank r + k.
absl::StatusOr<TypeList> Unsqueeze(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(std::optional<Dims> axes_attr, FirstIntsAttr(ctx, {"axes", "dims"}));
  if (!axes_attr.has_value()) {
    if (ctx.inputs.size() > 1) {
      return ValueDependent(ctx, "the axes are the value of input 1; give an 'axes' attribute");
    }
    return ctx.Error("attribute 'axes' is missing");
  }
  const int64_t out_rank = Rank(x) + static_cast<int64_t>(axes_attr->size());
  MG_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                      NormalizeAxes(ctx, *axes_attr, out_rank, /*dedupe=*/false));
  TensorType y{x.dtype, Dims(out_rank, 1)};
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (!std::binary_search(axes.begin(), axes.end(), i)) y.dims[i] = x.dims[next++];
  }
  return TypeList{y};
}

// Expand (ONNX): X broadcast against `shape` (numpy rules, both directions).
absl::StatusOr<TypeList> Expand(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(std::optional<Dims> shape, IntsAttr(ctx, "shape"));
  if (!shape.has_value()) {
    if (ctx.inputs.size() > 1) {
      return ValueDependent(ctx,
                            "the target shape is the value of input 1; give a 'shape' "
                            "attribute or declare the output");
    }
    return ctx.Error("attribute 'shape' is missing");
  }
  for (int64_t d : *shape) {
    if (d < 0) {
      return ctx.Error(absl::StrCat("shape ", DimsToString(*shape), " has negative size ", d));
    }
  }
  MG_ASSIGN_OR_RETURN(Dims dims, Broadcast(ctx, x.dims, *shape));
  return TypeList{TensorType{x.dtype, std::move(dims)}};
}

// Caffe2 fill ops (ConstantFill, GivenTensor*Fill, XavierFill, ...): dims from `shape`, or the
// input's dims when an input is given (input_as_shape=0), then `extra_shape` appended. The
// dtype is `dtype` (Caffe2 numbering) if given, else the op's own; ConstantFill without
// `dtype` follows its `value` (an int value gives int64) as Caffe2 does.
ShapeFunction Fill(DataType default_dtype, bool dtype_from_value) {
  return [default_dtype, dtype_from_value](const ShapeContext& ctx) -> absl::StatusOr<TypeList> {
    MG_ASSIGN_OR_RETURN(std::optional<Dims> shape, IntsAttr(ctx, "shape"));
    MG_ASSIGN_OR_RETURN(std::optional<Dims> extra, IntsAttr(ctx, "extra_shape"));
    MG_ASSIGN_OR_RETURN(int64_t input_as_shape, IntAttr(ctx, "input_as_shape", 0));
    Dims dims;
    if (!ctx.inputs.empty()) {
      if (input_as_shape != 0) {
        return ValueDependent(ctx,
                              "input_as_shape=1: the output dims are the values of input 0, "
                              "which shape inference does not know; declare the output");
      }
      if (shape.has_value()) {
        return ctx.Error("give either the 'shape' attribute or an input, not both");
      }
      dims = ctx.inputs[0].dims;
    } else {
      if (input_as_shape != 0) return ctx.Error("input_as_shape=1 needs an input");
      dims = shape.value_or(Dims{});
    }
    if (extra.has_value()) dims.insert(dims.end(), extra->begin(), extra->end());
    for (int64_t d : dims) {
      if (d < 0) {
        return ctx.Error(absl::StrCat("output shape ", DimsToString(dims), " has negative size ",
                                      d));
      }
    }
    MG_ASSIGN_OR_RETURN(std::optional<DataType> dtype,
                        DtypeAttr(ctx, "dtype", DtypeNumbering::kCaffe2));
    DataType out = default_dtype;
    if (dtype.has_value()) {
      out = *dtype;
    } else if (dtype_from_value && ctx.attrs.GetInt("value").has_value()) {
      out = DataType::kInt64;
    }
    return TypeList{TensorType{out, std::move(dims)}};
  };
}

// ONNX Shape: int64[end - start] with start/end clamped to [0, rank].
absl::StatusOr<TypeList> Shape(const ShapeContext& ctx) {
  const int64_t rank = Rank(ctx.inputs[0]);
  MG_ASSIGN_OR_RETURN(int64_t start, IntAttr(ctx, "start", 0));
  MG_ASSIGN_OR_RETURN(int64_t end, IntAttr(ctx, "end", rank));
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  return TypeList{TensorType{DataType::kInt64, {std::max(int64_t{0}, clamp(end) - clamp(start))}}};
}

// Gather (ONNX and Caffe2): data[:axis] + indices.dims + data[axis+1:].
absl::StatusOr<TypeList> Gather(const ShapeContext& ctx) {
  const TensorType& data = ctx.inputs[0];
  const TensorType& indices = ctx.inputs[1];
  MG_RETURN_IF_ERROR(CheckRank(ctx, "data", data, 1, -1));
  MG_RETURN_IF_ERROR(
      CheckDtypeIn(ctx, "indices", indices, {DataType::kInt32, DataType::kInt64}));
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", 0));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, Rank(data), "axis"));
  TensorType y{data.dtype, Dims(data.dims.begin(), data.dims.begin() + axis)};
  y.dims.insert(y.dims.end(), indices.dims.begin(), indices.dims.end());
  y.dims.insert(y.dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  return TypeList{y};
}

// ReduceSum/Mean/Max/Min (ONNX and Caffe2): `axes` (all when absent), keepdims default 1.
absl::StatusOr<TypeList> Reduce(const ShapeContext& ctx) {
  const TensorType& x = ctx.inputs[0];
  MG_ASSIGN_OR_RETURN(std::optional<Dims> axes_attr, IntsAttr(ctx, "axes"));
  if (!axes_attr.has_value() && ctx.inputs.size() > 1) {
    return ValueDependent(ctx, "the axes are the value of input 1; give an 'axes' attribute");
  }
  MG_ASSIGN_OR_RETURN(int64_t keepdims, IntAttr(ctx, "keepdims", 1));
  MG_ASSIGN_OR_RETURN(int64_t noop_with_empty_axes, IntAttr(ctx, "noop_with_empty_axes", 0));
  std::vector<int64_t> axes;
  if (axes_attr.has_value() && !axes_attr->empty()) {
    MG_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, *axes_attr, Rank(x), /*dedupe=*/false));
  } else if (noop_with_empty_axes != 0) {
    return TypeList{x};
  } else {
    for (int64_t i = 0; i < Rank(x); ++i) axes.push_back(i);
  }
  TensorType y{x.dtype, {}};
  for (int64_t i = 0; i < Rank(x); ++i) {
    if (!std::binary_search(axes.begin(), axes.end(), i)) {
      y.dims.push_back(x.dims[i]);
    } else if (keepdims != 0) {
      y.dims.push_back(1);
    }
  }
  return TypeList{y};
}

}  // namespace

void AddTensorSchemas(OpSchemaTable& table) {
  AddSchemas(table, {"Transpose"}, kOne, kOne, Transpose);
  AddSchemas(table, {"Reshape"}, {1, 2}, {1, 2}, Reshape, /*view_capable=*/true);
  AddSchemas(table, {"Flatten"}, kOne, kOne, Flatten, /*view_capable=*/true);
  AddSchemas(table, {"FlattenToVec"}, kOne, kOne, FlattenToVec, /*view_capable=*/true);
  AddSchemas(table, {"Concat"}, {1, -1}, {1, 2}, Concat);
  AddSchemas(table, {"Split"}, {1, 2}, {1, -1}, Split);
  AddSchemas(table, {"Squeeze"}, {1, 2}, kOne, Squeeze, /*view_capable=*/true);
  AddSchemas(table, {"Unsqueeze", "ExpandDims"}, {1, 2}, kOne, Unsqueeze,
             /*view_capable=*/true);
  AddSchemas(table, {"Expand"}, {1, 2}, kOne, Expand, /*view_capable=*/true);
  AddSchemas(table, {"ConstantFill"}, {0, 1}, kOne,
             Fill(DataType::kFloat32, /*dtype_from_value=*/true));
  AddSchemas(table,
             {"GivenTensorFill", "XavierFill", "MSRAFill", "GaussianFill", "UniformFill"},
             {0, 1}, kOne, Fill(DataType::kFloat32, /*dtype_from_value=*/false));
  AddSchemas(table, {"GivenTensorDoubleFill"}, {0, 1}, kOne,
             Fill(DataType::kFloat64, /*dtype_from_value=*/false));
  AddSchemas(table, {"GivenTensorIntFill", "UniformIntFill"}, {0, 1}, kOne,
             Fill(DataType::kInt32, /*dtype_from_value=*/false));
  AddSchemas(table, {"GivenTensorInt64Fill"}, {0, 1}, kOne,
             Fill(DataType::kInt64, /*dtype_from_value=*/false));
  AddSchemas(table, {"GivenTensorInt16Fill"}, {0, 1}, kOne,
             Fill(DataType::kInt16, /*dtype_from_value=*/false));
  AddSchemas(table, {"GivenTensorBoolFill"}, {0, 1}, kOne,
             Fill(DataType::kBool, /*dtype_from_value=*/false));
  AddSchemas(table, {"Shape"}, kOne, kOne, Shape);
  AddSchemas(table, {"Gather"}, {2, 2}, kOne, Gather);
  table.SetTypedInput({"Gather"}, 1, {DataType::kInt32, DataType::kInt64});
  AddSchemas(table, {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}, {1, 2}, kOne,
             Reduce);
}

}  // namespace memonger::graph

#include "graph/schema_util.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/checked_math.h"
#include "util/status_macros.h"

namespace memonger::graph::schema_internal {
namespace {

std::string CountRange(Arity a) {
  if (a.min == a.max) return absl::StrCat(a.min);
  if (a.max < 0) return absl::StrCat("at least ", a.min);
  return absl::StrCat(a.min, " to ", a.max);
}

bool InRange(int n, Arity a) { return n >= a.min && (a.max < 0 || n <= a.max); }

absl::Status WrongKind(const ShapeContext& ctx, absl::string_view name, absl::string_view kind) {
  return ctx.Error(absl::StrCat("attribute '", name, "' must be ", kind));
}

// ---- Conv / pooling windows -----------------------------------------------------------------

enum class Layout { kNchw, kNhwc };

absl::StatusOr<Layout> ReadLayout(const ShapeContext& ctx) {
  MG_ASSIGN_OR_RETURN(std::optional<std::string> order, StringAttr(ctx, "order"));
  if (!order.has_value()) return Layout::kNchw;
  const std::string upper = absl::AsciiStrToUpper(*order);
  if (upper == "NCHW") return Layout::kNchw;
  if (upper == "NHWC") return Layout::kNhwc;
  return ctx.Error(absl::StrCat("order '", *order, "' must be NCHW or NHWC"));
}

// The spatial dims of a tensor laid out as [N, C, spatial...] or [N, spatial..., C].
Dims SpatialDims(const Dims& dims, Layout layout) {
  if (layout == Layout::kNchw) return Dims(dims.begin() + 2, dims.end());
  return Dims(dims.begin() + 1, dims.end() - 1);
}

// Reads a per-spatial-dim attribute given in any of the spellings Caffe2 and ONNX use: a list
// with one entry per spatial dim (ONNX `kernel_shape`, Caffe2 `kernels`), one value for every
// dim (Caffe2 `kernel`), or Caffe2's 2-D names (`kernel_h`, `kernel_w`). The first spelling
// present wins. nullopt when none is present.
absl::StatusOr<std::optional<Dims>> SpatialAttr(const ShapeContext& ctx, size_t spatial,
                                                const std::vector<absl::string_view>& list_names,
                                                absl::string_view single_name,
                                                absl::string_view h_name,
                                                absl::string_view w_name) {
  for (absl::string_view name : list_names) {
    MG_ASSIGN_OR_RETURN(std::optional<Dims> list, IntsAttr(ctx, name));
    if (!list.has_value()) continue;
    if (list->size() != spatial) {
      return ctx.Error(absl::StrCat("attribute '", name, "' ", DimsToString(*list), " has ",
                                    list->size(), " entries for ", spatial, " spatial dims"));
    }
    return list;
  }
  MG_ASSIGN_OR_RETURN(std::optional<Dims> single, IntsAttr(ctx, single_name));
  if (single.has_value()) {
    if (single->size() == 1) return std::optional<Dims>(Dims(spatial, single->front()));
    if (single->size() == spatial) return single;
    return ctx.Error(absl::StrCat("attribute '", single_name, "' ", DimsToString(*single),
                                  " has ", single->size(), " entries for ", spatial,
                                  " spatial dims"));
  }
  if (!h_name.empty() && (ctx.attrs.Has(h_name) || ctx.attrs.Has(w_name))) {
    if (spatial != 2) {
      return ctx.Error(absl::StrCat("attributes '", h_name, "'/'", w_name,
                                    "' are for 2 spatial dims, the input has ", spatial));
    }
    MG_ASSIGN_OR_RETURN(std::optional<int64_t> h, OptionalIntAttr(ctx, h_name));
    MG_ASSIGN_OR_RETURN(std::optional<int64_t> w, OptionalIntAttr(ctx, w_name));
    if (!h.has_value() || !w.has_value()) {
      return ctx.Error(absl::StrCat("attribute '", h.has_value() ? w_name : h_name,
                                    "' is missing (give both '", h_name, "' and '", w_name,
                                    "')"));
    }
    return std::optional<Dims>(Dims{*h, *w});
  }
  return std::optional<Dims>();
}

struct Window {
  Dims kernel;
  Dims strides;
  Dims dilations;
  Dims pads_begin;
  Dims pads_end;
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
};

// Everything but the kernel, which Conv takes from W and pooling from its attributes.
absl::StatusOr<Window> ReadWindow(const ShapeContext& ctx, size_t spatial) {
  Window win;
  MG_ASSIGN_OR_RETURN(std::optional<Dims> strides,
                      SpatialAttr(ctx, spatial, {"strides"}, "stride", "stride_h", "stride_w"));
  win.strides = strides.value_or(Dims(spatial, 1));
  MG_ASSIGN_OR_RETURN(std::optional<Dims> dilations,
                      SpatialAttr(ctx, spatial, {"dilations"}, "dilation", "dilation_h",
                                  "dilation_w"));
  win.dilations = dilations.value_or(Dims(spatial, 1));
  for (size_t i = 0; i < spatial; ++i) {
    if (win.strides[i] <= 0) {
      return ctx.Error(absl::StrCat("stride ", win.strides[i], " in spatial dim ", i,
                                    " must be positive"));
    }
    if (win.dilations[i] <= 0) {
      return ctx.Error(absl::StrCat("dilation ", win.dilations[i], " in spatial dim ", i,
                                    " must be positive"));
    }
  }

  // Pads: ONNX and Caffe2 `pads` are [begin_0, begin_1, ..., end_0, end_1, ...].
  win.pads_begin.assign(spatial, 0);
  win.pads_end.assign(spatial, 0);
  MG_ASSIGN_OR_RETURN(std::optional<Dims> pads, IntsAttr(ctx, "pads"));
  MG_ASSIGN_OR_RETURN(std::optional<Dims> pad, IntsAttr(ctx, "pad"));
  if (pads.has_value()) {
    if (pads->size() != 2 * spatial) {
      return ctx.Error(absl::StrCat("attribute 'pads' ", DimsToString(*pads), " has ",
                                    pads->size(), " entries; ", spatial,
                                    " spatial dims need ", 2 * spatial, " (begins, then ends)"));
    }
    for (size_t i = 0; i < spatial; ++i) {
      win.pads_begin[i] = (*pads)[i];
      win.pads_end[i] = (*pads)[spatial + i];
    }
  } else if (pad.has_value()) {
    if (pad->size() != 1) {
      return ctx.Error(absl::StrCat("attribute 'pad' must be one int, got ", DimsToString(*pad)));
    }
    win.pads_begin.assign(spatial, pad->front());
    win.pads_end.assign(spatial, pad->front());
  } else if (ctx.attrs.Has("pad_t") || ctx.attrs.Has("pad_l") || ctx.attrs.Has("pad_b") ||
             ctx.attrs.Has("pad_r")) {
    if (spatial != 2) {
      return ctx.Error(absl::StrCat(
          "attributes pad_t/pad_l/pad_b/pad_r are for 2 spatial dims, the input has ", spatial));
    }
    MG_ASSIGN_OR_RETURN(win.pads_begin[0], IntAttr(ctx, "pad_t", 0));
    MG_ASSIGN_OR_RETURN(win.pads_begin[1], IntAttr(ctx, "pad_l", 0));
    MG_ASSIGN_OR_RETURN(win.pads_end[0], IntAttr(ctx, "pad_b", 0));
    MG_ASSIGN_OR_RETURN(win.pads_end[1], IntAttr(ctx, "pad_r", 0));
  }
  for (size_t i = 0; i < spatial; ++i) {
    if (win.pads_begin[i] < 0 || win.pads_end[i] < 0) {
      return ctx.Error(absl::StrCat("negative padding ", win.pads_begin[i], "/",
                                    win.pads_end[i], " in spatial dim ", i));
    }
  }

  MG_ASSIGN_OR_RETURN(std::optional<std::string> auto_pad, StringAttr(ctx, "auto_pad"));
  if (auto_pad.has_value() && !auto_pad->empty()) win.auto_pad = absl::AsciiStrToUpper(*auto_pad);
  if (win.auto_pad != "NOTSET" && win.auto_pad != "VALID" && win.auto_pad != "SAME_UPPER" &&
      win.auto_pad != "SAME_LOWER") {
    return ctx.Error(absl::StrCat("auto_pad '", *auto_pad,
                                  "' must be NOTSET, VALID, SAME_UPPER or SAME_LOWER"));
  }
  MG_ASSIGN_OR_RETURN(int64_t ceil_mode, IntAttr(ctx, "ceil_mode", 0));
  win.ceil_mode = ceil_mode != 0;
  // Caffe2's legacy_pad: 1 VALID, 2 SAME, 3 CAFFE_LEGACY_POOLING (Caffe1's ceil rounding).
  MG_ASSIGN_OR_RETURN(int64_t legacy_pad, IntAttr(ctx, "legacy_pad", 0));
  switch (legacy_pad) {
    case 0: break;
    case 1: win.auto_pad = "VALID"; break;
    case 2: win.auto_pad = "SAME_UPPER"; break;
    case 3: win.ceil_mode = true; break;
    default:
      return ctx.Error(absl::StrCat("legacy_pad ", legacy_pad, " must be 0..3"));
  }
  return win;
}

// Output spatial dims of a window sliding over `in`.
absl::StatusOr<Dims> WindowOutput(const ShapeContext& ctx, const Dims& in, const Window& win) {
  Dims out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t k = win.kernel[i];
    const int64_t stride = win.strides[i];
    if (k <= 0) {
      return ctx.Error(absl::StrCat("kernel size ", k, " in spatial dim ", i,
                                    " must be positive"));
    }
    const auto span = util::CheckedMul(win.dilations[i], k - 1);
    if (!span.has_value() || *span == INT64_MAX) {
      return ctx.Error(absl::StrCat("dilated kernel in spatial dim ", i, " overflows"));
    }
    const int64_t dilated = *span + 1;
    if (win.auto_pad == "SAME_UPPER" || win.auto_pad == "SAME_LOWER") {
      // Padding makes out = ceil(in / stride), whatever the kernel.
      out[i] = in[i] / stride + (in[i] % stride != 0 ? 1 : 0);
      continue;
    }
    const bool valid = win.auto_pad == "VALID";
    const int64_t pad_begin = valid ? 0 : win.pads_begin[i];
    const int64_t pad_end = valid ? 0 : win.pads_end[i];
    const auto pads = util::CheckedAdd(pad_begin, pad_end);
    const auto padded = pads.has_value() ? util::CheckedAdd(in[i], *pads) : std::nullopt;
    if (!padded.has_value()) {
      return ctx.Error(absl::StrCat("padded input in spatial dim ", i, " overflows"));
    }
    if (*padded < dilated) {
      const std::string kernel_text =
          win.dilations[i] == 1
              ? absl::StrCat("kernel ", k)
              : absl::StrCat("dilated kernel ", dilated, " (kernel ", k, ", dilation ",
                             win.dilations[i], ")");
      return ctx.Error(absl::StrCat(kernel_text, " larger than padded input ", *padded,
                                    " (input ", in[i], " + pads ", pad_begin, "+", pad_end,
                                    ") in spatial dim ", i));
    }
    const int64_t room = *padded - dilated;
    int64_t steps = room / stride;
    if (win.ceil_mode && room % stride != 0) {
      ++steps;
      // The last window must start inside the input or its begin padding (PyTorch, ONNX
      // opset 19+ and Caffe1 all drop a window that would start in the end padding).
      const auto start = util::CheckedMul(steps, stride);
      if (!start.has_value() || *start >= in[i] + pad_begin) --steps;
    }
    out[i] = steps + 1;
  }
  return out;
}

}  // namespace

// ---- registration ---------------------------------------------------------------------------

OpSchema MakeSchema(absl::string_view type, Arity inputs, Arity outputs, ShapeFunction infer,
                    bool view_capable) {
  OpSchema schema;
  schema.type = std::string(type);
  schema.min_inputs = inputs.min;
  schema.max_inputs = inputs.max;
  schema.min_outputs = outputs.min;
  schema.max_outputs = outputs.max;
  schema.view_capable = view_capable;
  schema.infer = [inputs, outputs, infer = std::move(infer)](
                     const ShapeContext& ctx) -> absl::StatusOr<TypeList> {
    const int n_in = static_cast<int>(ctx.inputs.size());
    if (!InRange(n_in, inputs)) {
      return ctx.Error(absl::StrCat("takes ", CountRange(inputs), " inputs, got ", n_in));
    }
    if (!InRange(ctx.num_outputs, outputs)) {
      return ctx.Error(absl::StrCat("takes ", CountRange(outputs), " outputs, got ",
                                    ctx.num_outputs));
    }
    for (int i = 0; i < n_in; ++i) {
      const TensorType& t = ctx.inputs[i];
      if (t.dtype == DataType::kUndefined) {
        return ctx.Error(absl::StrCat("input ", i, " has no element type"));
      }
      for (int64_t d : t.dims) {
        if (d < 0) {
          return ctx.Error(absl::StrCat("input ", i, " ", Str(t), " has a negative dimension"));
        }
      }
    }
    MG_ASSIGN_OR_RETURN(TypeList result, infer(ctx));
    if (static_cast<int>(result.size()) != ctx.num_outputs) {
      return absl::InternalError(absl::StrCat(ctx.op_type, " op '", ctx.op_name,
                                              "': shape function returned ", result.size(),
                                              " types for ", ctx.num_outputs, " outputs"));
    }
    return result;
  };
  return schema;
}

void AddSchemas(OpSchemaTable& table, const std::vector<absl::string_view>& types,
                Arity inputs, Arity outputs, const ShapeFunction& infer, bool view_capable) {
  for (absl::string_view type : types) {
    table.Add(MakeSchema(type, inputs, outputs, infer, view_capable));
  }
}

absl::Status ValueDependent(const ShapeContext& ctx, absl::string_view message) {
  return absl::UnimplementedError(
      absl::StrCat(ctx.op_type, " op '", ctx.op_name, "': ", message));
}

// ---- attributes ---------------------------------------------------------------------------

absl::StatusOr<int64_t> IntAttr(const ShapeContext& ctx, absl::string_view name,
                                int64_t fallback) {
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalIntAttr(ctx, name));
  return value.value_or(fallback);
}

absl::StatusOr<std::optional<int64_t>> OptionalIntAttr(const ShapeContext& ctx,
                                                       absl::string_view name) {
  if (!ctx.attrs.Has(name)) return std::optional<int64_t>();
  std::optional<int64_t> value = ctx.attrs.GetInt(name);
  if (!value.has_value()) return WrongKind(ctx, name, "an int");
  return value;
}

absl::StatusOr<std::optional<Dims>> IntsAttr(const ShapeContext& ctx, absl::string_view name) {
  if (!ctx.attrs.Has(name)) return std::optional<Dims>();
  std::optional<Dims> value = ctx.attrs.GetInts(name);
  if (!value.has_value()) return WrongKind(ctx, name, "a list of ints");
  return value;
}

absl::StatusOr<std::optional<std::string>> StringAttr(const ShapeContext& ctx,
                                                      absl::string_view name) {
  if (!ctx.attrs.Has(name)) return std::optional<std::string>();
  std::optional<std::string> value = ctx.attrs.GetString(name);
  if (!value.has_value()) return WrongKind(ctx, name, "a string");
  return value;
}

absl::StatusOr<DataType> Caffe2DataType(const ShapeContext& ctx, int64_t number) {
  switch (number) {
    case 1: return DataType::kFloat32;
    case 2: return DataType::kInt32;
    case 3: return DataType::kUInt8;  // BYTE
    case 5: return DataType::kBool;
    case 6: return DataType::kUInt8;
    case 7: return DataType::kInt8;
    case 9: return DataType::kInt16;
    case 10: return DataType::kInt64;
    case 12: return DataType::kFloat16;
    case 13: return DataType::kFloat64;
    default: break;
  }
  absl::string_view name = "unknown";
  if (number == 0) name = "UNDEFINED";
  if (number == 4) name = "STRING";
  if (number == 8) name = "UINT16";
  return ctx.Error(absl::StrCat("Caffe2 dtype ", number, " (", name, ") is not supported"));
}

absl::StatusOr<std::optional<DataType>> DtypeAttr(const ShapeContext& ctx,
                                                  absl::string_view name,
                                                  DtypeNumbering numbering) {
  if (!ctx.attrs.Has(name)) return std::optional<DataType>();
  if (std::optional<int64_t> number = ctx.attrs.GetInt(name)) {
    if (numbering == DtypeNumbering::kCaffe2) {
      MG_ASSIGN_OR_RETURN(DataType dtype, Caffe2DataType(ctx, *number));
      return std::optional<DataType>(dtype);
    }
    if (*number < 0 || *number > 1000) {
      return ctx.Error(absl::StrCat("attribute '", name, "': ", *number,
                                    " is not an ONNX element type"));
    }
    absl::StatusOr<DataType> dtype = DataTypeFromProtoNumber(static_cast<int>(*number));
    if (!dtype.ok()) {
      return ctx.Error(absl::StrCat("attribute '", name, "': ", dtype.status().message()));
    }
    if (*dtype == DataType::kUndefined) {
      return ctx.Error(absl::StrCat("attribute '", name, "' is 0 (UNDEFINED)"));
    }
    return std::optional<DataType>(*dtype);
  }
  if (std::optional<std::string> text = ctx.attrs.GetString(name)) {
    // Caffe2 spells uint8 "BYTE"; every other Caffe2/ONNX upper-case name parses as is.
    if (absl::AsciiStrToUpper(*text) == "BYTE") return std::optional<DataType>(DataType::kUInt8);
    absl::StatusOr<DataType> dtype = ParseDataType(*text);
    if (!dtype.ok()) {
      return ctx.Error(absl::StrCat("attribute '", name, "': ", dtype.status().message()));
    }
    return std::optional<DataType>(*dtype);
  }
  return WrongKind(ctx, name, "an element type number or name");
}

// ---- axes, products, broadcasting -----------------------------------------------------------

absl::StatusOr<int64_t> NormalizeAxis(const ShapeContext& ctx, int64_t axis, int64_t rank,
                                      absl::string_view what, bool allow_end) {
  const int64_t high = allow_end ? rank : rank - 1;
  if (axis < -rank || axis > high) {
    if (high < -rank) {
      return ctx.Error(absl::StrCat(what, " ", axis, " is out of range: the input has rank ",
                                    rank, " and no axes"));
    }
    return ctx.Error(absl::StrCat(what, " ", axis, " is out of range for rank ", rank,
                                  " (valid: ", -rank, "..", high, ")"));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<int64_t> Product(const ShapeContext& ctx, const Dims& dims, size_t begin,
                                size_t end) {
  int64_t product = 1;
  for (size_t i = begin; i < end && i < dims.size(); ++i) {
    const auto next = util::CheckedMul(product, dims[i]);
    if (!next.has_value()) {
      return ctx.Error(absl::StrCat("shape ", DimsToString(dims),
                                    " has more elements than fit in 64 bits"));
    }
    product = *next;
  }
  return product;
}

absl::StatusOr<Dims> Broadcast(const ShapeContext& ctx, const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right: position i of the result is a's (i - (rank - a.size())).
    const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      return ctx.Error(absl::StrCat("inputs ", DimsToString(a), " and ", DimsToString(b),
                                    " do not broadcast (", da, " vs ", db, " at output dim ", i,
                                    ")"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool BroadcastsTo(const Dims& from, const Dims& to) {
  if (from.size() > to.size()) return false;
  const size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[offset + i]) return false;
  }
  return true;
}

// ---- input checks ----------------------------------------------------------------------------

absl::Status CheckRank(const ShapeContext& ctx, absl::string_view name, const TensorType& t,
                       int64_t min_rank, int64_t max_rank) {
  const int64_t rank = static_cast<int64_t>(t.dims.size());
  if (rank >= min_rank && (max_rank < 0 || rank <= max_rank)) return absl::OkStatus();
  std::string expected;
  if (min_rank == max_rank) {
    expected = absl::StrCat("be ", min_rank, "-D");
  } else if (max_rank < 0) {
    expected = absl::StrCat("have rank >= ", min_rank);
  } else {
    expected = absl::StrCat("have rank ", min_rank, "..", max_rank);
  }
  return ctx.Error(absl::StrCat(name, " ", Str(t), " must ", expected));
}

absl::Status CheckSameDtype(const ShapeContext& ctx, absl::string_view a_name,
                            const TensorType& a, absl::string_view b_name, const TensorType& b) {
  if (a.dtype == b.dtype) return absl::OkStatus();
  return ctx.Error(absl::StrCat("dtype mismatch: ", a_name, " is ", DataTypeName(a.dtype),
                                " but ", b_name, " is ", DataTypeName(b.dtype)));
}

absl::Status CheckSameType(const ShapeContext& ctx, absl::string_view a_name,
                           const TensorType& a, absl::string_view b_name, const TensorType& b) {
  if (a.dims != b.dims) {
    return ctx.Error(absl::StrCat(a_name, " ", Str(a), " and ", b_name, " ", Str(b),
                                  " must have the same shape"));
  }
  return CheckSameDtype(ctx, a_name, a, b_name, b);
}

absl::Status CheckFloat(const ShapeContext& ctx, absl::string_view name, const TensorType& t) {
  if (IsFloatingPoint(t.dtype)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(name, " must be floating-point, got ", DataTypeName(t.dtype)));
}

absl::Status CheckDtypeIn(const ShapeContext& ctx, absl::string_view name, const TensorType& t,
                          const std::vector<DataType>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end()) {
    return absl::OkStatus();
  }
  std::vector<absl::string_view> names;
  for (DataType d : allowed) names.push_back(DataTypeName(d));
  return ctx.Error(absl::StrCat(name, " must be ", absl::StrJoin(names, " or "), ", got ",
                                DataTypeName(t.dtype)));
}

absl::Status CheckOneElement(const ShapeContext& ctx, absl::string_view name,
                             const TensorType& t) {
  MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, t.dims));
  if (count == 1) return absl::OkStatus();
  return ctx.Error(absl::StrCat(name, " ", Str(t), " must hold exactly one element"));
}

// ---- rules shared by forward and gradient ops -----------------------------------------------

absl::StatusOr<Dims> BinaryElementwiseDims(const ShapeContext& ctx, const TensorType& a,
                                           const TensorType& b) {
  MG_ASSIGN_OR_RETURN(int64_t legacy, IntAttr(ctx, "broadcast", 0));
  if (legacy == 0) return Broadcast(ctx, a.dims, b.dims);
  const int64_t rank_a = static_cast<int64_t>(a.dims.size());
  const int64_t rank_b = static_cast<int64_t>(b.dims.size());
  if (rank_b > rank_a) {
    return ctx.Error(absl::StrCat("broadcast=1: B ", Str(b), " has more dims than A ", Str(a)));
  }
  // Caffe2: axis -1 (or absent) aligns B with A's trailing dims.
  MG_ASSIGN_OR_RETURN(int64_t axis, IntAttr(ctx, "axis", -1));
  if (axis == -1) axis = rank_a - rank_b;
  if (axis < 0 || axis + rank_b > rank_a) {
    return ctx.Error(absl::StrCat("broadcast=1: axis ", axis, " does not place B ", Str(b),
                                  " inside A ", Str(a)));
  }
  for (int64_t i = 0; i < rank_b; ++i) {
    if (b.dims[i] != 1 && b.dims[i] != a.dims[axis + i]) {
      return ctx.Error(absl::StrCat("broadcast=1: B ", Str(b), " does not match A ", Str(a),
                                    " at axis ", axis));
    }
  }
  return a.dims;
}

absl::StatusOr<FcShape> InferFc(const ShapeContext& ctx, const TensorType& x,
                                const TensorType& w, bool transposed) {
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", 1));
  MG_ASSIGN_OR_RETURN(int64_t axis_w_attr, IntAttr(ctx, "axis_w", 1));
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr,
                                                  static_cast<int64_t>(x.dims.size()),
                                                  absl::StrCat("axis (for X ", Str(x), ")")));
  MG_ASSIGN_OR_RETURN(int64_t axis_w, NormalizeAxis(ctx, axis_w_attr,
                                                    static_cast<int64_t>(w.dims.size()),
                                                    absl::StrCat("axis_w (for W ", Str(w), ")")));
  MG_ASSIGN_OR_RETURN(int64_t k, Product(ctx, x.dims, axis, x.dims.size()));
  MG_ASSIGN_OR_RETURN(int64_t w_front, Product(ctx, w.dims, 0, axis_w));
  MG_ASSIGN_OR_RETURN(int64_t w_back, Product(ctx, w.dims, axis_w, w.dims.size()));
  const int64_t n = transposed ? w_back : w_front;
  const int64_t k_w = transposed ? w_front : w_back;
  if (k != k_w) {
    return ctx.Error(absl::StrCat("X ", Str(x), " flattened at axis ", axis, " has K=", k,
                                  " but W ", Str(w), " has K=", k_w, " (W is ",
                                  transposed ? "[K, N]" : "[N, K]", ")"));
  }
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "W", w));
  FcShape out;
  out.y.assign(x.dims.begin(), x.dims.begin() + axis);
  out.y.push_back(n);
  out.n = n;
  return out;
}

absl::StatusOr<Dims> MatMulDims(const ShapeContext& ctx, const TensorType& a,
                                const TensorType& b) {
  if (a.dims.empty() || b.dims.empty()) {
    return ctx.Error(absl::StrCat("operands must have rank >= 1, got A ", Str(a), " and B ",
                                  Str(b)));
  }
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "A", a, "B", b));
  MG_ASSIGN_OR_RETURN(int64_t trans_a, IntAttr(ctx, "trans_a", 0));
  MG_ASSIGN_OR_RETURN(int64_t trans_b, IntAttr(ctx, "trans_b", 0));
  Dims da = a.dims;
  Dims db = b.dims;
  if (trans_a != 0 && da.size() >= 2) std::swap(da[da.size() - 1], da[da.size() - 2]);
  if (trans_b != 0 && db.size() >= 2) std::swap(db[db.size() - 1], db[db.size() - 2]);
  // numpy: a 1-D A is a row [1, K], a 1-D B a column [K, 1]; the added dim is dropped again.
  const bool a_vector = da.size() == 1;
  const bool b_vector = db.size() == 1;
  if (a_vector) da.insert(da.begin(), 1);
  if (b_vector) db.push_back(1);
  const int64_t k_a = da[da.size() - 1];
  const int64_t k_b = db[db.size() - 2];
  if (k_a != k_b) {
    return ctx.Error(absl::StrCat("inner dimensions differ: A ", Str(a), " has K=", k_a,
                                  " but B ", Str(b), " has K=", k_b));
  }
  const Dims batch_a(da.begin(), da.end() - 2);
  const Dims batch_b(db.begin(), db.end() - 2);
  absl::StatusOr<Dims> batch = Broadcast(ctx, batch_a, batch_b);
  if (!batch.ok()) {
    return ctx.Error(absl::StrCat("batch dims ", DimsToString(batch_a), " of A and ",
                                  DimsToString(batch_b), " of B do not broadcast"));
  }
  Dims out = *std::move(batch);
  if (!a_vector) out.push_back(da[da.size() - 2]);
  if (!b_vector) out.push_back(db[db.size() - 1]);
  return out;
}

absl::StatusOr<int64_t> ChannelAxis(const ShapeContext& ctx, const TensorType& x) {
  MG_ASSIGN_OR_RETURN(Layout layout, ReadLayout(ctx));
  if (x.dims.size() < 2) {
    return ctx.Error(absl::StrCat("X ", Str(x), " must have rank >= 2 (N, C, ...)"));
  }
  return layout == Layout::kNchw ? 1 : static_cast<int64_t>(x.dims.size()) - 1;
}

namespace {

// Conv's layout, window (kernel from W) and output maps, with every check of its inputs.
struct ConvShape {
  Layout layout = Layout::kNchw;
  Window window;
  int64_t maps = 0;
};

absl::StatusOr<ConvShape> ReadConv(const ShapeContext& ctx, const TensorType& x,
                                   const TensorType& w) {
  ConvShape conv;
  MG_ASSIGN_OR_RETURN(conv.layout, ReadLayout(ctx));
  const Layout layout = conv.layout;
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 3, 5));
  if (w.dims.size() != x.dims.size()) {
    return ctx.Error(absl::StrCat("W ", Str(w), " must have the rank of X ", Str(x)));
  }
  MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "X", x, "W", w));
  const size_t rank = x.dims.size();
  const size_t spatial = rank - 2;
  const int64_t channels = layout == Layout::kNchw ? x.dims[1] : x.dims[rank - 1];
  conv.maps = w.dims[0];
  const int64_t w_channels = layout == Layout::kNchw ? w.dims[1] : w.dims[rank - 1];
  MG_ASSIGN_OR_RETURN(int64_t group, IntAttr(ctx, "group", 1));
  if (group <= 0) return ctx.Error(absl::StrCat("group ", group, " must be positive"));
  if (channels % group != 0) {
    return ctx.Error(absl::StrCat("X ", Str(x), " has ", channels,
                                  " channels, not divisible by group ", group));
  }
  if (conv.maps % group != 0) {
    return ctx.Error(absl::StrCat("W ", Str(w), " has ", conv.maps,
                                  " output channels, not divisible by group ", group));
  }
  if (w_channels != channels / group) {
    return ctx.Error(absl::StrCat("W ", Str(w), " has ", w_channels,
                                  " input channels per group but X ", Str(x), " has ", channels,
                                  " channels in ", group, " group(s)"));
  }
  MG_ASSIGN_OR_RETURN(conv.window, ReadWindow(ctx, spatial));
  conv.window.kernel = SpatialDims(w.dims, layout);
  MG_ASSIGN_OR_RETURN(std::optional<Dims> kernel,
                      SpatialAttr(ctx, spatial, {"kernel_shape", "kernels"}, "kernel",
                                  "kernel_h", "kernel_w"));
  if (kernel.has_value() && *kernel != conv.window.kernel) {
    return ctx.Error(absl::StrCat("kernel attribute ", DimsToString(*kernel),
                                  " does not match W ", Str(w), "'s spatial dims ",
                                  DimsToString(conv.window.kernel)));
  }
  return conv;
}

// Pooling's layout and window; nullopt window for global pooling.
struct PoolShape {
  Layout layout = Layout::kNchw;
  std::optional<Window> window;
};

absl::StatusOr<PoolShape> ReadPool(const ShapeContext& ctx, const TensorType& x) {
  PoolShape pool;
  MG_ASSIGN_OR_RETURN(pool.layout, ReadLayout(ctx));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 3, -1));
  const size_t spatial = x.dims.size() - 2;
  MG_ASSIGN_OR_RETURN(int64_t global, IntAttr(ctx, "global_pooling", 0));
  if (global != 0) return pool;
  Window win;
  MG_ASSIGN_OR_RETURN(win, ReadWindow(ctx, spatial));
  MG_ASSIGN_OR_RETURN(std::optional<Dims> kernel,
                      SpatialAttr(ctx, spatial, {"kernel_shape", "kernels"}, "kernel",
                                  "kernel_h", "kernel_w"));
  if (!kernel.has_value()) {
    return ctx.Error(
        "no kernel size: give kernel_shape, kernels, kernel or kernel_h/kernel_w (or "
        "global_pooling=1)");
  }
  win.kernel = *kernel;
  pool.window = std::move(win);
  return pool;
}

// The closed form of WindowOutput per spatial dim (see WindowMap in the header).
WindowMap MapOf(Layout layout, const Window* win, size_t spatial) {
  WindowMap map;
  map.nchw = layout == Layout::kNchw;
  map.global = win == nullptr;
  if (win == nullptr) return map;
  for (size_t i = 0; i < spatial; ++i) {
    if (win->auto_pad == "SAME_UPPER" || win->auto_pad == "SAME_LOWER") {
      map.offsets.push_back(0);  // ceil(in / stride)
      map.strides.push_back(win->strides[i]);
      continue;
    }
    const bool valid = win->auto_pad == "VALID";
    const int64_t pads = valid ? 0 : win->pads_begin[i] + win->pads_end[i];
    const int64_t dilated = win->dilations[i] * (win->kernel[i] - 1) + 1;
    // floor((in + pads - dilated) / stride) + 1 = ceil((in + pads - dilated + 1) / stride).
    map.offsets.push_back(pads - dilated + 1);
    map.strides.push_back(win->strides[i]);
    map.exact = map.exact && !win->ceil_mode;
  }
  return map;
}

}  // namespace

absl::StatusOr<TensorType> InferConv(const ShapeContext& ctx, const TensorType& x,
                                     const TensorType& w) {
  MG_ASSIGN_OR_RETURN(ConvShape conv, ReadConv(ctx, x, w));
  MG_ASSIGN_OR_RETURN(Dims out_spatial,
                      WindowOutput(ctx, SpatialDims(x.dims, conv.layout), conv.window));
  TensorType y{x.dtype, {x.dims[0]}};
  if (conv.layout == Layout::kNchw) y.dims.push_back(conv.maps);
  y.dims.insert(y.dims.end(), out_spatial.begin(), out_spatial.end());
  if (conv.layout == Layout::kNhwc) y.dims.push_back(conv.maps);
  return y;
}

absl::StatusOr<TensorType> InferPool(const ShapeContext& ctx, const TensorType& x) {
  MG_ASSIGN_OR_RETURN(PoolShape pool, ReadPool(ctx, x));
  const size_t spatial = x.dims.size() - 2;
  Dims out_spatial;
  if (!pool.window.has_value()) {
    out_spatial.assign(spatial, 1);
  } else {
    MG_ASSIGN_OR_RETURN(out_spatial, WindowOutput(ctx, SpatialDims(x.dims, pool.layout), *pool.window));
  }
  TensorType y{x.dtype, {x.dims[0]}};
  if (pool.layout == Layout::kNchw) y.dims.push_back(x.dims[1]);
  y.dims.insert(y.dims.end(), out_spatial.begin(), out_spatial.end());
  if (pool.layout == Layout::kNhwc) y.dims.push_back(x.dims.back());
  return y;
}

absl::StatusOr<WindowMap> ConvWindowMap(const ShapeContext& ctx, const TensorType& x,
                                        const TensorType& w) {
  MG_ASSIGN_OR_RETURN(ConvShape conv, ReadConv(ctx, x, w));
  WindowMap map = MapOf(conv.layout, &conv.window, x.dims.size() - 2);
  map.maps = conv.maps;
  return map;
}

absl::StatusOr<WindowMap> PoolWindowMap(const ShapeContext& ctx, const TensorType& x) {
  MG_ASSIGN_OR_RETURN(PoolShape pool, ReadPool(ctx, x));
  return MapOf(pool.layout, pool.window.has_value() ? &*pool.window : nullptr,
               x.dims.size() - 2);
}

Dims StatisticsDims(const Dims& x, int64_t axis, bool keep_rank) {
  Dims out(x.begin(), x.begin() + axis);
  if (keep_rank) {
    out.resize(x.size(), 1);
  } else {
    out.push_back(1);
  }
  return out;
}

absl::StatusOr<int64_t> CheckLabelCrossEntropy(const ShapeContext& ctx, const TensorType& x,
                                               const TensorType& label) {
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 1, 2));
  const int64_t n = x.dims.size() == 2 ? x.dims[0] : 1;
  MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "label", label, {DataType::kInt32}));
  const bool ok = (label.dims.size() == 1 && label.dims[0] == n) ||
                  (label.dims.size() == 2 && label.dims[0] == n && label.dims[1] == 1);
  if (!ok) {
    return ctx.Error(absl::StrCat("label ", Str(label), " must be [", n, "] or [", n,
                                  ",1] for X ", Str(x)));
  }
  return n;
}

absl::StatusOr<int64_t> CheckCrossEntropy(const ShapeContext& ctx, const TensorType& x,
                                          const TensorType& label) {
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "X", x));
  MG_RETURN_IF_ERROR(CheckRank(ctx, "X", x, 1, 2));
  MG_RETURN_IF_ERROR(CheckSameType(ctx, "X", x, "label", label));
  return x.dims.size() == 2 ? x.dims[0] : 1;
}

absl::Status CheckSoftmaxWithLoss(const ShapeContext& ctx, const TensorType& x,
                                  const TensorType& labels, const TensorType* weights) {
  MG_RETURN_IF_ERROR(CheckFloat(ctx, "logits", x));
  MG_ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(ctx, "axis", 1));
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  MG_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, axis_attr, rank, "axis"));
  MG_ASSIGN_OR_RETURN(int64_t n, Product(ctx, x.dims, 0, axis));
  MG_ASSIGN_OR_RETURN(int64_t d, Product(ctx, x.dims, axis, x.dims.size()));
  MG_ASSIGN_OR_RETURN(int64_t label_prob, IntAttr(ctx, "label_prob", 0));
  const size_t split = static_cast<size_t>(axis);
  if (label_prob != 0) {
    MG_RETURN_IF_ERROR(CheckSameDtype(ctx, "logits", x, "labels", labels));
    bool ok = labels.dims.size() >= 2 && labels.dims.size() > split;
    if (ok) {
      MG_ASSIGN_OR_RETURN(int64_t ln, Product(ctx, labels.dims, 0, split));
      MG_ASSIGN_OR_RETURN(int64_t ld, Product(ctx, labels.dims, split, labels.dims.size()));
      ok = ln == n && ld == d;
    }
    if (!ok) {
      return ctx.Error(absl::StrCat("label_prob=1: labels ", Str(labels),
                                    " must be a distribution [", n, ",", d, "] for logits ",
                                    Str(x)));
    }
  } else {
    MG_RETURN_IF_ERROR(CheckDtypeIn(ctx, "labels", labels, {DataType::kInt32}));
    bool ok = false;
    if (labels.dims.size() == split) {
      MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, labels.dims));
      ok = count == n;
    } else if (labels.dims.size() > split) {
      MG_ASSIGN_OR_RETURN(int64_t ln, Product(ctx, labels.dims, 0, split));
      MG_ASSIGN_OR_RETURN(int64_t rest, Product(ctx, labels.dims, split, labels.dims.size()));
      ok = ln == n && rest == 1;
    }
    if (!ok) {
      return ctx.Error(absl::StrCat("labels ", Str(labels), " must be [", n, "] or [", n,
                                    ",1] (one class index per row) for logits ", Str(x)));
    }
  }
  if (weights != nullptr) {
    MG_RETURN_IF_ERROR(CheckFloat(ctx, "weights", *weights));
    MG_ASSIGN_OR_RETURN(int64_t count, Product(ctx, weights->dims));
    if (weights->dims.size() != 1 || count != n) {
      return ctx.Error(absl::StrCat("weights ", Str(*weights), " must be [", n,
                                    "] (one per row) for logits ", Str(x)));
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger::graph::schema_internal

// Layout and copy CPU kernels: ops that move elements without arithmetic, for every element
// type (they copy bytes: elements of 1, 2, 4 or 8 bytes).
//   - Reshape, Flatten, FlattenToVec, Squeeze, Unsqueeze, ExpandDims, Identity, Copy,
//     StopGradient: the output holds the input's bytes. When the plan made the output a view of
//     the input (one address) they do nothing; otherwise they copy with memmove, which is also
//     correct for overlapping ranges. Caffe2's Reshape writes its optional old_shape output.
//     Dropout in inference is such a copy (and writes its optional mask, all true).
//   - Transpose (perm / Caffe2 axes), Concat (axis, Caffe2 add_axis and split_info), Split
//     (sizes from the output types, so the `split` attribute or input need not be read), Slice
//     (ONNX opset 10+ inputs or opset 1 attributes; negative steps), Pad (constant, reflect, edge), Gather
//     (int32/int64 indices, negative indices wrap), Expand, Shape; SliceGradient (ours: dY
//     written into zeros at the elements a strided Slice read).
// Except the copies above, these kernels refuse outputs that overlap an input
// (FailedPrecondition): they read input elements after writing output elements.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/slice_bounds.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// Calls f(Tag<U>{}) with an unsigned integer type of `bytes` bytes (1, 2, 4, 8).
template <typename F>
absl::Status DispatchBytes(const KernelArgs& args, int64_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    case 8: return f(Tag<uint64_t>{});
    default:
      return KernelUnimplemented(args, absl::StrCat("elements of ", bytes, " bytes"));
  }
}

// out[multi-index] = in[base + sum(index[d] * in_strides[d])] over `dims` (out contiguous
// from out_base).
absl::Status StridedCopy(const KernelArgs& args, int64_t elem_bytes, const Dims& dims,
                         const std::byte* in, int64_t in_base, const Dims& in_strides,
                         std::byte* out, int64_t out_base, const Dims& out_strides) {
  return DispatchBytes(args, elem_bytes, [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = reinterpret_cast<const U*>(in) + in_base;
    U* dst = reinterpret_cast<U*>(out) + out_base;
    const std::array<Dims, 2> strides{out_strides, in_strides};
    ForEachStrided<2>(dims, strides,
                      [&](int64_t n, const std::array<int64_t, 2>& base,
                          const std::array<int64_t, 2>& step) {
                        U* o = dst + base[0];
                        const U* p = src + base[1];
                        if (step[0] == 1 && step[1] == 1) {
                          std::memcpy(o, p, static_cast<size_t>(n) * sizeof(U));
                          return;
                        }
                        for (int64_t i = 0; i < n; ++i) o[i * step[0]] = p[i * step[1]];
                      });
    return absl::OkStatus();
  });
}

int64_t ElemBytes(const TensorType& t) { return graph::DataTypeSize(t.dtype); }

// SliceGradient(dY) -> dX (ours, the gradient builder's for a Slice with steps): `starts` and
// `steps`, one per axis of dX, as the Slice kernel normalised them; dX is zero but where the
// slice read, which gets dY's elements.
absl::Status SliceGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& dy = *args.input_types[0];
  const TensorType& dx = *args.output_types[0];
  const int64_t rank = Rank(dx);
  MG_ASSIGN_OR_RETURN(const std::optional<Dims> starts, IntsAttr(args, "starts"));
  MG_ASSIGN_OR_RETURN(const std::optional<Dims> steps, IntsAttr(args, "steps"));
  if (dy.dtype != dx.dtype || Rank(dy) != rank || !starts.has_value() || !steps.has_value() ||
      static_cast<int64_t>(starts->size()) != rank ||
      static_cast<int64_t>(steps->size()) != rank) {
    return KernelError(args, "needs dY of dX's type and rank, and starts and steps per axis");
  }
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t s = (*starts)[d], st = (*steps)[d], n = dy.dims[d];
    if (n == 0) continue;
    const int64_t last = s + (n - 1) * st;
    if (st == 0 || s < 0 || s >= dx.dims[d] || last < 0 || last >= dx.dims[d]) {
      return KernelError(args, absl::StrCat("axis ", d, " reads outside dX"));
    }
  }
  std::memset(args.outputs[0], 0, static_cast<size_t>(ByteSizeOf(dx)));
  if (NumElements(dy.dims) == 0) return absl::OkStatus();
  const Dims own = Strides(dx.dims);
  Dims out_strides(rank);
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    out_strides[d] = own[d] * (*steps)[d];
    base += (*starts)[d] * own[d];
  }
  return StridedCopy(args, ElemBytes(dx), dy.dims, args.inputs[0], 0, Strides(dy.dims),
                     args.outputs[0], base, out_strides);
}

// ---- copies ----------------------------------------------------------------------------------

absl::Status CopyLike(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, -1, 1, 2));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (ByteSizeOf(x) != ByteSizeOf(y) || x.dtype != y.dtype) {
    return KernelError(args, absl::StrCat("the output ", graph::TensorTypeToString(y),
                                          " does not hold the input's elements ",
                                          graph::TensorTypeToString(x)));
  }
  // A view (the plan put the output at the input's address): the bytes are already there.
  if (args.outputs[0] != args.inputs[0] && ByteSizeOf(x) > 0) {
    std::memmove(args.outputs[0], args.inputs[0], static_cast<size_t>(ByteSizeOf(x)));
  }
  if (args.outputs.size() == 2) {
    // Caffe2 Reshape's old_shape: int64[rank(data)].
    const TensorType& old_shape = *args.output_types[1];
    if (old_shape.dtype != DataType::kInt64 || NumElements(old_shape.dims) != Rank(x)) {
      return KernelError(args, "old_shape must be int64[rank of data]");
    }
    for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
      MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, 1));
    }
    if (!x.dims.empty()) {
      std::memcpy(args.outputs[1], x.dims.data(), x.dims.size() * sizeof(int64_t));
    }
  }
  return absl::OkStatus();
}

// ---- Transpose -------------------------------------------------------------------------------

absl::Status Transpose(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlap(args, 0, 0));
  const TensorType& x = *args.input_types[0];
  MG_ASSIGN_OR_RETURN(const TransposeGeometry g, ResolveTranspose(args, x));
  const Dims& out_dims = g.out_dims;
  const Dims& in_strides = g.in_strides;
  if (out_dims != args.output_types[0]->dims) {
    return KernelError(args, "the output's dims do not match perm");
  }
  return StridedCopy(args, ElemBytes(x), out_dims, args.inputs[0], 0, in_strides,
                     args.outputs[0], 0, Strides(out_dims));
}

// ---- Concat / Split --------------------------------------------------------------------------

// Caffe2 Concat/Split: `axis` if given, else the channel dim of `order` (NCHW 1, NHWC 3).
absl::StatusOr<int64_t> ConcatAxisAttr(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(std::optional<int64_t> axis, OptionalIntAttr(args, "axis"));
  if (axis.has_value()) return *axis;
  MG_ASSIGN_OR_RETURN(std::optional<std::string> order, StringAttr(args, "order"));
  if (order.has_value() && (*order == "NHWC" || *order == "nhwc")) return 3;
  return 1;
}

absl::Status Concat(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, -1, 1, 2));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& y = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, ConcatAxisAttr(args));
  // The axis indexes the output's dims: with Caffe2's add_axis the inputs are stacked along a
  // new output axis (each input is one slice of it), which the same copy handles.
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(y), "axis"));
  const int64_t outer = Product(y.dims, 0, axis);
  const int64_t out_row = ByteSizeOf(y) / std::max<int64_t>(outer, 1);  // bytes per outer index
  int64_t offset = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const TensorType& t = *args.input_types[i];
    if (t.dtype != y.dtype) return KernelError(args, "every input must have the output's type");
    const int64_t chunk = outer > 0 ? ByteSizeOf(t) / outer : 0;
    if (chunk * outer != ByteSizeOf(t) || offset + chunk > out_row) {
      return KernelError(args, absl::StrCat("input ", i, " ", graph::TensorTypeToString(t),
                                            " does not fit the output ",
                                            graph::TensorTypeToString(y), " at axis ", axis));
    }
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(args.outputs[0] + o * out_row + offset, args.inputs[i] + o * chunk,
                  static_cast<size_t>(chunk));
    }
    offset += chunk;
  }
  if (offset != out_row) return KernelError(args, "the inputs do not fill the output");
  if (args.outputs.size() == 2) {
    // Caffe2's split_info: each input's size along the axis, int32.
    const TensorType& info = *args.output_types[1];
    if (info.dtype != DataType::kInt32 ||
        NumElements(info.dims) != static_cast<int64_t>(args.inputs.size())) {
      return KernelError(args, "split_info must be int32[number of inputs]");
    }
    const int64_t inner = Product(y.dims, axis + 1, y.dims.size()) * ElemBytes(y);
    int32_t* out = reinterpret_cast<int32_t*>(args.outputs[1]);
    for (size_t i = 0; i < args.inputs.size(); ++i) {
      const int64_t chunk = outer > 0 ? ByteSizeOf(*args.input_types[i]) / outer : 0;
      out[i] = static_cast<int32_t>(inner > 0 ? chunk / inner : 0);
    }
  }
  return absl::OkStatus();
}

// True when the outputs are pieces of `x` along `axis` (same dims elsewhere, or the axis
// removed as Caffe2's add_axis does).
bool SplitsAlong(const KernelArgs& args, const TensorType& x, int64_t axis) {
  if (axis < 0 || axis >= Rank(x)) return false;
  for (const TensorType* t : args.output_types) {
    Dims rest = t->dims;
    Dims xs = x.dims;
    if (rest.size() == xs.size()) rest.erase(rest.begin() + axis);
    xs.erase(xs.begin() + axis);
    if (rest != xs) return false;
  }
  return true;
}

absl::Status Split(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, -1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> axis_given, OptionalIntAttr(args, "axis"));
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> order, StringAttr(args, "order"));
  int64_t axis_attr = 0;
  if (axis_given.has_value() || order.has_value()) {
    MG_ASSIGN_OR_RETURN(axis_attr, ConcatAxisAttr(args));
  } else {
    // No axis: ONNX means 0, Caffe2 means 1 (NCHW channels). The graph does not say which
    // format the op came from, but the outputs' types do: take 1 when the outputs are pieces
    // along it, else 0.
    axis_attr = SplitsAlong(args, x, 1) ? 1 : 0;
  }
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
  const int64_t outer = Product(x.dims, 0, axis);
  const int64_t in_row = outer > 0 ? ByteSizeOf(x) / outer : 0;
  int64_t offset = 0;
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    const TensorType& t = *args.output_types[i];
    if (t.dtype != x.dtype) return KernelError(args, "every output must have the input's type");
    const int64_t chunk = outer > 0 ? ByteSizeOf(t) / outer : 0;
    if (chunk * outer != ByteSizeOf(t) || offset + chunk > in_row) {
      return KernelError(args, absl::StrCat("output ", i, " ", graph::TensorTypeToString(t),
                                            " is not a piece of the input ",
                                            graph::TensorTypeToString(x), " at axis ", axis));
    }
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(args.outputs[i] + o * chunk, args.inputs[0] + o * in_row + offset,
                  static_cast<size_t>(chunk));
    }
    offset += chunk;
  }
  if (offset != in_row) return KernelError(args, "the outputs do not cover the input");
  return absl::OkStatus();
}

// ---- Slice -----------------------------------------------------------------------------------

// ONNX Slice: per axis, start/end clamped as the spec says (negative values count from the
// end; for a negative step the range is clamped to [-1, dim - 1]).
absl::Status Slice(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 5, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const int64_t rank = Rank(x);
  Dims starts, ends, axes, steps;
  if (args.inputs.size() == 1) {
    // Opset 1: attributes.
    MG_ASSIGN_OR_RETURN(std::optional<Dims> s, IntsAttr(args, "starts"));
    MG_ASSIGN_OR_RETURN(std::optional<Dims> e, IntsAttr(args, "ends"));
    MG_ASSIGN_OR_RETURN(std::optional<Dims> a, IntsAttr(args, "axes"));
    if (!s.has_value() || !e.has_value()) return KernelError(args, "starts and ends are missing");
    starts = *s;
    ends = *e;
    if (a.has_value()) axes = *a;
  } else {
    MG_ASSIGN_OR_RETURN(starts, ReadInts(args, FindInputSlot(args, 1), "starts"));
    MG_ASSIGN_OR_RETURN(ends, ReadInts(args, FindInputSlot(args, 2), "ends"));
    if (const int in = FindInputSlot(args, 3); in >= 0) {
      MG_ASSIGN_OR_RETURN(axes, ReadInts(args, in, "axes"));
    }
    if (const int in = FindInputSlot(args, 4); in >= 0) {
      MG_ASSIGN_OR_RETURN(steps, ReadInts(args, in, "steps"));
    }
  }
  absl::StatusOr<graph::SliceBounds> bounds =
      graph::NormalizeSlice(x.dims, starts, ends, std::move(axes), std::move(steps));
  if (!bounds.ok()) return KernelError(args, bounds.status().message());
  const Dims& begin = bounds->first;
  const Dims& step = bounds->step;
  const Dims& count = bounds->count;
  if (count != args.output_types[0]->dims) {
    return KernelError(args, absl::StrCat("the slice has dims ", graph::DimsToString(count),
                                          " but the output is ",
                                          graph::TensorTypeToString(*args.output_types[0])));
  }
  if (NumElements(count) == 0) return absl::OkStatus();
  const Dims own = Strides(x.dims);
  Dims in_strides(rank);
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    in_strides[d] = own[d] * step[d];
    base += begin[d] * own[d];
  }
  return StridedCopy(args, ElemBytes(x), count, args.inputs[0], base, in_strides,
                     args.outputs[0], 0, Strides(count));
}

// ---- Pad -------------------------------------------------------------------------------------

// Pad's reflect and edge modes: every output element copies the input element its index maps
// to, dim by dim: edge clamps into [0, n), reflect mirrors about the first and last element
// without repeating them (period 2 (n - 1)). `before`: the begin pad of each dim.
absl::Status PadFromEdges(const KernelArgs& args, bool reflect, const Dims& before) {
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  const int64_t rank = Rank(x);
  if (NumElements(y.dims) == 0) return absl::OkStatus();
  for (int64_t d = 0; d < rank; ++d) {
    if (x.dims[d] == 0) {
      return KernelError(args, "reflect and edge padding need a non-empty input along every dim");
    }
  }
  // source[d][o]: the input index output index o of dim d reads.
  std::vector<Dims> source(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = x.dims[d];
    for (int64_t o = 0; o < y.dims[d]; ++o) {
      int64_t p = o - before[d];
      if (!reflect || n == 1) {
        p = std::clamp<int64_t>(p, 0, n - 1);
      } else {
        const int64_t period = 2 * (n - 1);
        p %= period;
        if (p < 0) p += period;
        if (p >= n) p = period - p;
      }
      source[d].push_back(p);
    }
  }
  const int64_t elem = ElemBytes(y);
  const Dims in_strides = Strides(x.dims);
  const int64_t inner = rank == 0 ? 1 : y.dims[rank - 1];
  const int64_t rows = NumElements(y.dims) / inner;
  Dims index(static_cast<size_t>(rank), 0);
  std::byte* out = args.outputs[0];
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0;
    for (int64_t d = 0; d + 1 < rank; ++d) base += source[d][index[d]] * in_strides[d];
    for (int64_t o = 0; o < inner; ++o) {
      const int64_t from = rank == 0 ? 0 : base + source[rank - 1][o];
      std::memcpy(out, args.inputs[0] + from * elem, static_cast<size_t>(elem));
      out += elem;
    }
    for (int64_t d = rank - 2; d >= 0; --d) {  // next row
      if (++index[d] < y.dims[d]) break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

// ONNX Pad: opset 11+ inputs (data, pads, [constant_value], [axes]) or opset 2 attributes
// (pads, value); modes constant, reflect and edge (opset 19's wrap is Unimplemented). Negative
// pads crop.
absl::Status Pad(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 4, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  const int64_t rank = Rank(x);
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> mode_attr, StringAttr(args, "mode"));
  const std::string mode = mode_attr.value_or("constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") {
    return KernelUnimplemented(args, absl::StrCat("mode '", mode, "' (constant, reflect and edge "
                                                  "are implemented)"));
  }
  Dims pads;
  Dims axes;
  std::vector<std::byte> value(static_cast<size_t>(ElemBytes(y)), std::byte{0});
  if (args.inputs.size() == 1) {
    MG_ASSIGN_OR_RETURN(std::optional<Dims> p, IntsAttr(args, "pads"));
    if (!p.has_value()) return KernelError(args, "pads are missing");
    pads = *p;
    MG_ASSIGN_OR_RETURN(const double v, FloatAttr(args, "value", 0.0));
    if (v != 0.0) {
      MG_RETURN_IF_ERROR(DispatchFloat(args, y.dtype, [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        const T t = Store<T>(static_cast<Compute<T>>(v));
        std::memcpy(value.data(), &t, sizeof(T));
        return absl::OkStatus();
      }));
    }
  } else {
    MG_ASSIGN_OR_RETURN(pads, ReadInts(args, FindInputSlot(args, 1), "pads"));
    if (const int in = FindInputSlot(args, 2); in >= 0 && NumElements(args.input_types[in]->dims) > 0) {
      if (args.input_types[in]->dtype != x.dtype) {
        return KernelError(args, "constant_value must have the data's element type");
      }
      std::memcpy(value.data(), args.inputs[in], value.size());
    }
    if (const int in = FindInputSlot(args, 3); in >= 0) {
      MG_ASSIGN_OR_RETURN(axes, ReadInts(args, in, "axes"));
    }
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const int64_t na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * na) {
    return KernelError(args, absl::StrCat("pads has ", pads.size(), " entries for ", na, " axes"));
  }
  Dims before(rank, 0), after(rank, 0);
  for (int64_t i = 0; i < na; ++i) {
    MG_ASSIGN_OR_RETURN(const int64_t a, NormalizeAxis(args, axes[i], rank, "axis"));
    before[a] = pads[i];
    after[a] = pads[i + na];
  }
  Dims out_dims(rank);
  for (int64_t d = 0; d < rank; ++d) out_dims[d] = x.dims[d] + before[d] + after[d];
  if (out_dims != y.dims || x.dtype != y.dtype) {
    return KernelError(args, absl::StrCat("padding gives ", graph::DimsToString(out_dims),
                                          " but the output is ", graph::TensorTypeToString(y)));
  }
  const int64_t elem = ElemBytes(y);
  const int64_t n_out = NumElements(y.dims);
  if (mode != "constant") return PadFromEdges(args, mode == "reflect", before);
  for (int64_t i = 0; i < n_out; ++i) std::memcpy(args.outputs[0] + i * elem, value.data(), elem);
  // The part of the input that survives, and where it lands.
  Dims region(rank);
  int64_t in_base = 0, out_base = 0;
  const Dims in_strides = Strides(x.dims);
  const Dims out_strides = Strides(y.dims);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t in_lo = std::max<int64_t>(0, -before[d]);
    const int64_t out_lo = std::max<int64_t>(0, before[d]);
    region[d] = std::max<int64_t>(0, std::min(x.dims[d] - in_lo, y.dims[d] - out_lo));
    in_base += in_lo * in_strides[d];
    out_base += out_lo * out_strides[d];
  }
  if (NumElements(region) == 0) return absl::OkStatus();
  return StridedCopy(args, elem, region, args.inputs[0], in_base, in_strides, args.outputs[0],
                     out_base, out_strides);
}

// ---- Gather, Expand, Shape -------------------------------------------------------------------

absl::Status Gather(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& data = *args.input_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", 0));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(data), "axis"));
  MG_ASSIGN_OR_RETURN(const Dims indices, ReadInts(args, 1, "indices"));
  const int64_t outer = Product(data.dims, 0, axis);
  const int64_t dim = data.dims[axis];
  const int64_t inner_bytes = Product(data.dims, axis + 1, data.dims.size()) * ElemBytes(data);
  const int64_t n = static_cast<int64_t>(indices.size());
  if (ByteSizeOf(*args.output_types[0]) != outer * n * inner_bytes ||
      args.output_types[0]->dtype != data.dtype) {
    return KernelError(args, "the output does not hold the gathered elements");
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t idx = indices[i];
      if (idx < 0) idx += dim;
      if (idx < 0 || idx >= dim) {
        return KernelError(args, absl::StrCat("index ", indices[i], " is out of range for axis ",
                                              axis, " of size ", dim));
      }
      std::memcpy(args.outputs[0] + (o * n + i) * inner_bytes,
                  args.inputs[0] + (o * dim + idx) * inner_bytes, static_cast<size_t>(inner_bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status Expand(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (x.dtype != y.dtype || !BroadcastsTo(x.dims, y.dims)) {
    return KernelError(args, "the input does not broadcast to the output");
  }
  if (args.outputs[0] == args.inputs[0] && ByteSizeOf(x) == ByteSizeOf(y)) return absl::OkStatus();
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  return StridedCopy(args, ElemBytes(x), y.dims, args.inputs[0], 0, BroadcastStrides(x.dims, y.dims),
                     args.outputs[0], 0, Strides(y.dims));
}

absl::Status Shape(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  const TensorType& x = *args.input_types[0];
  const int64_t rank = Rank(x);
  MG_ASSIGN_OR_RETURN(int64_t start, IntAttr(args, "start", 0));
  MG_ASSIGN_OR_RETURN(int64_t end, IntAttr(args, "end", rank));
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  const int64_t n = std::max<int64_t>(0, end - start);
  const TensorType& y = *args.output_types[0];
  if (y.dtype != DataType::kInt64 || NumElements(y.dims) != n) {
    return KernelError(args, absl::StrCat("the output must be int64[", n, "]"));
  }
  if (n > 0) std::memcpy(args.outputs[0], x.dims.data() + start, n * sizeof(int64_t));
  return absl::OkStatus();
}

// Size: the element count as an int64 scalar.
absl::Status Size(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  const TensorType& y = *args.output_types[0];
  if (y.dtype != DataType::kInt64 || NumElements(y.dims) != 1) {
    return KernelError(args, "the output must be one int64");
  }
  const int64_t n = NumElements(args.input_types[0]->dims);
  std::memcpy(args.outputs[0], &n, sizeof(n));
  return absl::OkStatus();
}

// Tile: output dim d is input dim d times repeats[d] (the output type says how many); element
// index i_d reads input index i_d mod dim_d.
absl::Status Tile(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (x.dtype != y.dtype || x.dims.size() != y.dims.size()) {
    return KernelError(args, "the output must have the input's type and rank");
  }
  const int64_t rank = Rank(x);
  for (int64_t d = 0; d < rank; ++d) {
    if (x.dims[d] == 0 ? y.dims[d] != 0 : y.dims[d] % x.dims[d] != 0) {
      return KernelError(args, "the output's dims are not multiples of the input's");
    }
  }
  const int64_t n = NumElements(y.dims);
  if (n == 0) return absl::OkStatus();
  const Dims in_strides = Strides(x.dims);
  const int64_t elem = ElemBytes(x);
  return DispatchBytes(args, elem, [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* in = reinterpret_cast<const U*>(args.inputs[0]);
    U* out = reinterpret_cast<U*>(args.outputs[0]);
    Dims index(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d) src += (index[d] % x.dims[d]) * in_strides[d];
      out[i] = in[src];
      for (int64_t d = rank; d-- > 0;) {
        if (++index[d] < y.dims[d]) break;
        index[d] = 0;
      }
    }
    return absl::OkStatus();
  });
}

// Trilu: keeps the upper (upper=1, default) or lower triangle of the last two dims, shifted by
// the optional scalar input k; zeroes the rest.
absl::Status Trilu(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
  const TensorType& x = *args.input_types[0];
  if (x != *args.output_types[0] || x.dims.size() < 2) {
    return KernelError(args, "X must have rank >= 2 and the output X's type");
  }
  if (args.inputs[0] != args.outputs[0]) MG_RETURN_IF_ERROR(CheckNoOverlap(args, 0, 0));
  MG_ASSIGN_OR_RETURN(const int64_t upper, IntAttr(args, "upper", 1));
  int64_t k = 0;
  if (args.inputs.size() == 2) {
    MG_ASSIGN_OR_RETURN(const Dims kv, ReadInts(args, 1, "k"));
    if (kv.size() != 1) return KernelError(args, "k must be one integer");
    k = kv[0];
  }
  const int64_t rows = x.dims[x.dims.size() - 2];
  const int64_t cols = x.dims.back();
  const int64_t mats = NumElements(x.dims) / std::max<int64_t>(rows * cols, 1);
  const int64_t elem = ElemBytes(x);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t at = ((m * rows + r) * cols + c) * elem;
        const bool keep = upper != 0 ? c - r >= k : c - r <= k;
        if (keep) {
          if (args.inputs[0] != args.outputs[0]) {
            std::memcpy(args.outputs[0] + at, args.inputs[0] + at, static_cast<size_t>(elem));
          }
        } else {
          std::memset(args.outputs[0] + at, 0, static_cast<size_t>(elem));
        }
      }
    }
  }
  return absl::OkStatus();
}

// Dropout (ONNX) in inference, or in training mode with ratio 0 (torchvision's Swin calls
// F.dropout(p=0.0) without training=False, so its export says training mode): the output is the
// data and the optional mask all true, exactly as ONNX defines both. Training mode with a
// positive ratio draws random masks: refused (Unimplemented), not run.
absl::Status Dropout(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 3, 1, 2));
  bool training = false;
  if (const int in = FindInputSlot(args, 2); in >= 0) {
    if (args.input_types[in]->dtype != DataType::kBool ||
        NumElements(args.input_types[in]->dims) != 1) {
      return KernelError(args, "training_mode must be one bool");
    }
    std::memcpy(&training, args.inputs[in], 1);
  }
  if (training) {
    double ratio = 0.5;  // ONNX's default
    if (const int in = FindInputSlot(args, 1); in >= 0) {
      if (NumElements(args.input_types[in]->dims) != 1) return KernelError(args, "ratio must be one value");
      MG_ASSIGN_OR_RETURN(FloatLoader load, LoaderFor(args, *args.input_types[in]));
      ratio = load.At(args.inputs[in], 0);
    }
    if (ratio != 0) {
      return KernelUnimplemented(args, absl::StrCat("Dropout in training mode (ratio ", ratio,
                                                    ") draws random masks; not run"));
    }
  }
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (x != y) return KernelError(args, "the output must have the data's type");
  if (args.outputs[0] != args.inputs[0] && ByteSizeOf(x) > 0) {
    std::memmove(args.outputs[0], args.inputs[0], static_cast<size_t>(ByteSizeOf(x)));
  }
  if (args.outputs.size() == 2) {
    const TensorType& mask = *args.output_types[1];
    if (mask.dtype != DataType::kBool || mask.dims != x.dims) {
      return KernelError(args, "the mask must be bool of the data's dims");
    }
    for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
      MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, 1));
    }
    std::memset(args.outputs[1], 1, static_cast<size_t>(NumElements(mask.dims)));
  }
  return absl::OkStatus();
}

// DepthToSpace (modes DCR, the default, and CRD) and SpaceToDepth with `blocksize` b, on
// [N, C, H, W]: the moves of ONNX's reshape-transpose-reshape definitions, element by element.
// depth_to_space: [N, C, H, W] -> [N, C / b^2, H b, W b]; else [N, C, H, W] -> [N, C b^2, H / b,
// W / b]. Any element type; the output must not overlap the input.
Kernel BlockKernel(bool depth_to_space) {
  return [depth_to_space](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
    const TensorType& x = *args.input_types[0];
    const TensorType& y = *args.output_types[0];
    MG_ASSIGN_OR_RETURN(const int64_t b, IntAttr(args, "blocksize", 0));
    MG_ASSIGN_OR_RETURN(const std::optional<std::string> mode_attr, StringAttr(args, "mode"));
    const std::string mode = mode_attr.value_or("DCR");
    if (mode != "DCR" && mode != "CRD") {
      return KernelError(args, absl::StrCat("mode '", mode, "' is not DCR or CRD"));
    }
    if (x.dims.size() != 4 || b <= 0 || y.dtype != x.dtype) {
      return KernelError(args, "X must be [N, C, H, W] and blocksize positive");
    }
    // (n, c, h, w) of the space side and the depth side: the depth side has C' = C b^2.
    const Dims& space = depth_to_space ? y.dims : x.dims;
    const Dims& depth = depth_to_space ? x.dims : y.dims;
    if (depth[0] != space[0] || depth[1] != space[1] * b * b || depth[2] * b != space[2] ||
        depth[3] * b != space[3]) {
      return KernelError(args, absl::StrCat("blocksize ", b, " does not map ",
                                            graph::DimsToString(x.dims), " to ",
                                            graph::DimsToString(y.dims)));
    }
    const int64_t n = space[0], c = space[1], h = depth[2], w = depth[3];
    const int64_t elem = ElemBytes(x);
    const bool crd = depth_to_space && mode == "CRD";
    for (int64_t in = 0; in < n; ++in) {
      for (int64_t ic = 0; ic < c; ++ic) {
        for (int64_t by = 0; by < b; ++by) {
          for (int64_t bx = 0; bx < b; ++bx) {
            // The depth channel holding block offset (by, bx) of space channel ic.
            const int64_t dc = crd ? (ic * b + by) * b + bx : (by * b + bx) * c + ic;
            for (int64_t ih = 0; ih < h; ++ih) {
              for (int64_t iw = 0; iw < w; ++iw) {
                const int64_t at_depth = ((in * depth[1] + dc) * h + ih) * w + iw;
                const int64_t at_space =
                    ((in * c + ic) * space[2] + ih * b + by) * space[3] + iw * b + bx;
                const int64_t from = depth_to_space ? at_depth : at_space;
                const int64_t to = depth_to_space ? at_space : at_depth;
                std::memcpy(args.outputs[0] + to * elem, args.inputs[0] + from * elem,
                            static_cast<size_t>(elem));
              }
            }
          }
        }
      }
    }
    return absl::OkStatus();
  };
}

}  // namespace

void AddCpuTensorKernels(KernelMap& kernels) {
  kernels["DepthToSpace"] = BlockKernel(/*depth_to_space=*/true);
  kernels["SpaceToDepth"] = BlockKernel(/*depth_to_space=*/false);
  kernels["Dropout"] = Dropout;
  kernels["Size"] = Size;
  kernels["Tile"] = Tile;
  kernels["Trilu"] = Trilu;
  for (const char* type : {"Reshape", "Flatten", "FlattenToVec", "Squeeze", "Unsqueeze",
                           "ExpandDims", "Identity", "Copy", "StopGradient", "Free", "Alias",
                           "IndexFreeze"}) {
    kernels[type] = CopyLike;
  }
  kernels["Transpose"] = Transpose;
  kernels["Concat"] = Concat;
  kernels["Split"] = Split;
  kernels["Slice"] = Slice;
  kernels["SliceGradient"] = SliceGradient;
  kernels["Pad"] = Pad;
  kernels["Gather"] = Gather;
  kernels["Expand"] = Expand;
  kernels["Shape"] = Shape;
}

}  // namespace memonger::alloc

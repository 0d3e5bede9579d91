// Indexing and ordering CPU kernels, as exporters write advanced indexing, in-place slice
// assignment (`x[..., idx] = v` becomes ScatterND), torch.gather/scatter, cumsum and topk:
//
//   GatherElements(data, indices; axis) -> out[i] = data[i with i[axis] = indices[i]]
//   ScatterElements(data, indices, updates; axis, reduction) -> data with
//       out[i with i[axis] = indices[i]] (op)= updates[i]
//   GatherND(data, indices [..., k]; batch_dims) -> the slices data[b..., indices[b..., :]]
//   ScatterND(data, indices [..., k], updates; reduction) -> data with those slices replaced
//       (or combined)
//   CumSum(x, axis; exclusive, reverse) -> running sums along one axis
//   TopK(X, K; axis, largest, sorted) -> Values, Indices (int64)
//   OneHot(indices, depth, values; axis) -> on at each index along a new axis, off elsewhere
//
// Indices are int32 or int64, negative ones counted from the end; one out of range is an
// InvalidArgument naming it (never a read or write outside the tensor). Reductions of the
// scatters: none (later updates win, as ONNX's reference applies them in order), add, mul, max,
// min. Gathers and scatters move elements of any type (reductions: numeric types); CumSum: numeric
// types, summed in the compute type (float32 for the half types, float64 for float64, the
// integer type itself, wrapping); TopK: numeric types, ties broken by the lower index, NaN
// ordered above every number. The scatters' output may be `data` exactly (in place); every other
// overlap between an output and an input is refused (FailedPrecondition).
//
// TopK's K is read at run time and must equal the output's planned size along `axis`: a plan
// sized for one K is never run with another.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// `index` counted from the end when negative; InvalidArgument when outside [0, dim).
absl::StatusOr<int64_t> WrapIndex(const KernelArgs& args, int64_t index, int64_t dim,
                                  int64_t axis) {
  const int64_t wrapped = index < 0 ? index + dim : index;
  if (wrapped < 0 || wrapped >= dim) {
    return KernelError(args, absl::StrCat("index ", index, " is out of range for axis ", axis,
                                          " of size ", dim));
  }
  return wrapped;
}

// The output of a scatter starts as a copy of data, unless it is data itself.
absl::Status CopyDataToOutput(const KernelArgs& args) {
  const TensorType& data = *args.input_types[0];
  const TensorType& out = *args.output_types[0];
  if (out.dtype != data.dtype || out.dims != data.dims) {
    return KernelError(args, "the output must have data's type and dims");
  }
  for (int in = 1; in < static_cast<int>(args.inputs.size()); ++in) {
    MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, 0));
  }
  if (args.outputs[0] == args.inputs[0]) return absl::OkStatus();
  MG_RETURN_IF_ERROR(CheckNoOverlap(args, 0, 0));
  std::memcpy(args.outputs[0], args.inputs[0], static_cast<size_t>(ByteSizeOf(data)));
  return absl::OkStatus();
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::StatusOr<Reduction> ReadReduction(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> r, StringAttr(args, "reduction"));
  const std::string name = r.value_or("none");
  if (name == "none") return Reduction::kNone;
  if (name == "add") return Reduction::kAdd;
  if (name == "mul") return Reduction::kMul;
  if (name == "max") return Reduction::kMax;
  if (name == "min") return Reduction::kMin;
  return KernelError(args, absl::StrCat("reduction '", name, "' is not none, add, mul, max or "
                                        "min"));
}

// Applies `count` updates at `from` to the output elements at `to`, typed by `dtype`.
absl::Status Combine(const KernelArgs& args, Reduction reduction, std::byte* to,
                     const std::byte* from, int64_t count) {
  const TensorType& data = *args.input_types[0];
  if (reduction == Reduction::kNone) {
    std::memcpy(to, from, static_cast<size_t>(count * graph::DataTypeSize(data.dtype)));
    return absl::OkStatus();
  }
  return DispatchNumeric(args, data.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* o = reinterpret_cast<T*>(to);
    const T* u = reinterpret_cast<const T*>(from);
    for (int64_t i = 0; i < count; ++i) {
      const auto a = Load(o[i]);
      const auto b = Load(u[i]);
      switch (reduction) {
        case Reduction::kAdd: o[i] = Store<T>(a + b); break;
        case Reduction::kMul: o[i] = Store<T>(a * b); break;
        case Reduction::kMax: o[i] = Store<T>(a < b ? b : a); break;
        case Reduction::kMin: o[i] = Store<T>(b < a ? b : a); break;
        case Reduction::kNone: break;
      }
    }
    return absl::OkStatus();
  });
}

// OneHot's indices (input 0), which ONNX lets be of any numeric type: floats truncate.
absl::StatusOr<Dims> ReadIndexValues(const KernelArgs& args) {
  const TensorType& t = *args.input_types[0];
  if (t.dtype == DataType::kInt32 || t.dtype == DataType::kInt64) return ReadInts(args, 0, "indices");
  Dims out(static_cast<size_t>(NumElements(t.dims)));
  MG_RETURN_IF_ERROR(DispatchNumeric(args, t.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* p = reinterpret_cast<const T*>(args.inputs[0]);
    for (size_t i = 0; i < out.size(); ++i) {
      const double v = static_cast<double>(Load(p[i]));
      // Beyond any depth (or NaN): a row of `off`, never an out-of-range conversion.
      out[i] = std::abs(v) < 9.0e15 ? static_cast<int64_t>(v) : int64_t{1} << 62;
    }
    return absl::OkStatus();
  }));
  return out;
}

// ---- GatherElements, ScatterElements ---------------------------------------------------------

// For each element of `indices` (input 1, any shape of data's rank, every dim within data's
// except along `axis`): the offset in data of the element it names, i.e. its own multi-index
// with the axis coordinate replaced by its (wrapped) value.
absl::StatusOr<std::vector<int64_t>> ElementOffsets(const KernelArgs& args, int64_t axis) {
  const TensorType& data = *args.input_types[0];
  const TensorType& idx_type = *args.input_types[1];
  const int64_t rank = Rank(data);
  MG_ASSIGN_OR_RETURN(const Dims indices, ReadInts(args, 1, "indices"));
  const Dims data_strides = Strides(data.dims);
  std::vector<int64_t> offsets(indices.size());
  Dims pos(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < indices.size(); ++i) {
    MG_ASSIGN_OR_RETURN(const int64_t at, WrapIndex(args, indices[i], data.dims[axis], axis));
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (pos[d] >= data.dims[d] && d != axis) {
        return KernelError(args, "indices reach outside data along a dim other than axis");
      }
      offset += (d == axis ? at : pos[d]) * data_strides[d];
    }
    offsets[i] = offset;
    for (int64_t d = rank - 1; d >= 0; --d) {  // next multi-index of indices
      if (++pos[d] < idx_type.dims[d]) break;
      pos[d] = 0;
    }
  }
  return offsets;
}

absl::Status GatherElements(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& data = *args.input_types[0];
  const TensorType& idx_type = *args.input_types[1];
  const TensorType& out = *args.output_types[0];
  const int64_t rank = Rank(data);
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", 0));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, rank, "axis"));
  if (Rank(idx_type) != rank || out.dims != idx_type.dims || out.dtype != data.dtype) {
    return KernelError(args, "indices must have data's rank and the output indices' dims");
  }
  MG_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, ElementOffsets(args, axis));
  const int64_t bytes = graph::DataTypeSize(data.dtype);
  for (size_t i = 0; i < offsets.size(); ++i) {
    std::memcpy(args.outputs[0] + i * bytes, args.inputs[0] + offsets[i] * bytes,
                static_cast<size_t>(bytes));
  }
  return absl::OkStatus();
}

absl::Status ScatterElements(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  const TensorType& data = *args.input_types[0];
  const TensorType& idx_type = *args.input_types[1];
  const TensorType& updates = *args.input_types[2];
  const int64_t rank = Rank(data);
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", 0));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, rank, "axis"));
  MG_ASSIGN_OR_RETURN(const Reduction reduction, ReadReduction(args));
  if (Rank(idx_type) != rank || updates.dims != idx_type.dims || updates.dtype != data.dtype) {
    return KernelError(args, "indices and updates must have one shape, of data's rank");
  }
  // Every index is checked before the output is touched: a refused scatter leaves it alone.
  MG_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, ElementOffsets(args, axis));
  MG_RETURN_IF_ERROR(CopyDataToOutput(args));
  const int64_t bytes = graph::DataTypeSize(data.dtype);
  for (size_t i = 0; i < offsets.size(); ++i) {
    MG_RETURN_IF_ERROR(Combine(args, reduction, args.outputs[0] + offsets[i] * bytes,
                               args.inputs[2] + i * bytes, 1));
  }
  return absl::OkStatus();
}

// ---- GatherND, ScatterND ---------------------------------------------------------------------

// indices [batch..., rest..., k] over data [batch..., k indexed dims, slice...]: each index
// tuple names one slice of Product(data.dims[batch + k:]) elements. `tuple` walks the tuples in
// order; slice_offset(t) is the element offset of tuple t's slice in data.
struct NdGeometry {
  int64_t batch_dims = 0;
  int64_t k = 0;
  int64_t tuples = 0;          // all tuples, over every batch
  int64_t tuples_per_batch = 0;
  int64_t slice = 0;           // elements per slice
  std::vector<int64_t> offsets;  // data element offset of each tuple's slice
};

absl::StatusOr<NdGeometry> ResolveNd(const KernelArgs& args, int64_t batch_dims) {
  const TensorType& data = *args.input_types[0];
  const TensorType& idx_type = *args.input_types[1];
  const int64_t r = Rank(data), q = Rank(idx_type);
  NdGeometry g;
  g.batch_dims = batch_dims;
  if (q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) {
    return KernelError(args, "batch_dims must be below the ranks of data and indices");
  }
  g.k = idx_type.dims[q - 1];
  if (g.k < 1 || g.k > r - batch_dims) {
    return KernelError(args, absl::StrCat("indices' last dim ", g.k, " must be in [1, ",
                                          r - batch_dims, "]"));
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (data.dims[d] != idx_type.dims[d]) {
      return KernelError(args, "data and indices must agree on the batch dims");
    }
  }
  g.slice = Product(data.dims, static_cast<size_t>(batch_dims + g.k), data.dims.size());
  g.tuples = Product(idx_type.dims, 0, static_cast<size_t>(q - 1));
  const int64_t batches = Product(data.dims, 0, static_cast<size_t>(batch_dims));
  g.tuples_per_batch = batches == 0 ? 0 : g.tuples / batches;
  MG_ASSIGN_OR_RETURN(const Dims indices, ReadInts(args, 1, "indices"));
  const Dims strides = Strides(data.dims);
  const int64_t batch_stride =
      Product(data.dims, static_cast<size_t>(batch_dims), data.dims.size());
  g.offsets.resize(static_cast<size_t>(g.tuples));
  for (int64_t t = 0; t < g.tuples; ++t) {
    int64_t offset = g.tuples_per_batch == 0 ? 0 : (t / g.tuples_per_batch) * batch_stride;
    for (int64_t j = 0; j < g.k; ++j) {
      const int64_t d = batch_dims + j;
      MG_ASSIGN_OR_RETURN(const int64_t at,
                          WrapIndex(args, indices[t * g.k + j], data.dims[d], d));
      offset += at * strides[d];
    }
    g.offsets[t] = offset;
  }
  return g;
}

absl::Status GatherND(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const int64_t batch_dims, IntAttr(args, "batch_dims", 0));
  MG_ASSIGN_OR_RETURN(const NdGeometry g, ResolveNd(args, batch_dims));
  const TensorType& data = *args.input_types[0];
  const TensorType& out = *args.output_types[0];
  if (out.dtype != data.dtype || NumElements(out.dims) != g.tuples * g.slice) {
    return KernelError(args, "the output does not hold the gathered slices");
  }
  const int64_t bytes = graph::DataTypeSize(data.dtype);
  for (int64_t t = 0; t < g.tuples; ++t) {
    std::memcpy(args.outputs[0] + t * g.slice * bytes, args.inputs[0] + g.offsets[t] * bytes,
                static_cast<size_t>(g.slice * bytes));
  }
  return absl::OkStatus();
}

absl::Status ScatterND(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  MG_ASSIGN_OR_RETURN(const Reduction reduction, ReadReduction(args));
  const TensorType& data = *args.input_types[0];
  const TensorType& updates = *args.input_types[2];
  MG_ASSIGN_OR_RETURN(const NdGeometry g, ResolveNd(args, 0));
  if (updates.dtype != data.dtype || NumElements(updates.dims) != g.tuples * g.slice) {
    return KernelError(args, "updates must hold one slice per index tuple, of data's type");
  }
  MG_RETURN_IF_ERROR(CopyDataToOutput(args));
  const int64_t bytes = graph::DataTypeSize(data.dtype);
  for (int64_t t = 0; t < g.tuples; ++t) {
    MG_RETURN_IF_ERROR(Combine(args, reduction, args.outputs[0] + g.offsets[t] * bytes,
                               args.inputs[2] + t * g.slice * bytes, g.slice));
  }
  return absl::OkStatus();
}

// ---- CumSum ------------------------------------------------------------------------------------

absl::Status CumSum(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (y.dtype != x.dtype || y.dims != x.dims) return KernelError(args, "Y must have X's type and dims");
  MG_ASSIGN_OR_RETURN(const Dims axis_value, ReadInts(args, 1, "axis"));
  if (axis_value.size() != 1) return KernelError(args, "axis must hold one integer");
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_value[0], Rank(x), "axis"));
  MG_ASSIGN_OR_RETURN(const int64_t exclusive, IntAttr(args, "exclusive", 0));
  MG_ASSIGN_OR_RETURN(const int64_t reverse, IntAttr(args, "reverse", 0));
  const int64_t outer = Product(x.dims, 0, axis);
  const int64_t n = x.dims[axis];
  const int64_t inner = Product(x.dims, axis + 1, x.dims.size());
  return DispatchNumeric(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    std::vector<C> running(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
      std::fill(running.begin(), running.end(), C(0));
      for (int64_t step = 0; step < n; ++step) {
        const int64_t i = reverse != 0 ? n - 1 - step : step;
        const T* src = in + (o * n + i) * inner;
        T* dst = out + (o * n + i) * inner;
        for (int64_t j = 0; j < inner; ++j) {
          const C v = Load(src[j]);
          if (exclusive != 0) {
            dst[j] = Store<T>(running[j]);
            running[j] = static_cast<C>(running[j] + v);
          } else {
            running[j] = static_cast<C>(running[j] + v);
            dst[j] = Store<T>(running[j]);
          }
        }
      }
    }
    return absl::OkStatus();
  });
}

// ---- TopK --------------------------------------------------------------------------------------

absl::Status TopK(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 2, 2));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& values = *args.output_types[0];
  const TensorType& indices = *args.output_types[1];
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
  MG_ASSIGN_OR_RETURN(const int64_t largest, IntAttr(args, "largest", 1));
  MG_ASSIGN_OR_RETURN(const Dims k_value, ReadInts(args, 1, "K"));
  if (k_value.size() != 1) return KernelError(args, "K must hold one integer");
  const int64_t k = k_value[0];
  const int64_t n = x.dims[axis];
  if (k < 0 || k > n) {
    return KernelError(args, absl::StrCat("K = ", k, " is outside [0, ", n, "]"));
  }
  Dims want = x.dims;
  want[axis] = k;
  if (values.dims != want || indices.dims != want || values.dtype != x.dtype ||
      indices.dtype != DataType::kInt64) {
    return KernelError(args, absl::StrCat("K = ", k, " gives outputs [", absl::StrJoin(want, ", "),
                                          "] (Values of X's type, Indices int64); the plan has [",
                                          absl::StrJoin(values.dims, ", "), "]"));
  }
  const int64_t outer = Product(x.dims, 0, axis);
  const int64_t inner = Product(x.dims, axis + 1, x.dims.size());
  return DispatchNumeric(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    T* out_values = reinterpret_cast<T*>(args.outputs[0]);
    int64_t* out_indices = reinterpret_cast<int64_t*>(args.outputs[1]);
    std::vector<C> row(static_cast<size_t>(n));
    std::vector<int64_t> order(static_cast<size_t>(n));
    // a before b: larger (smaller) first, NaN above every number, ties by the lower index.
    auto before = [&](int64_t a, int64_t b) {
      const C va = row[a], vb = row[b];
      if constexpr (std::is_floating_point_v<C>) {
        const bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return largest != 0 ? na : nb;
        }
      }
      if (va != vb) return largest != 0 ? va > vb : va < vb;
      return a < b;
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        for (int64_t i = 0; i < n; ++i) row[i] = Load(in[(o * n + i) * inner + j]);
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t i = 0; i < k; ++i) {
          const int64_t at = (o * k + i) * inner + j;
          out_values[at] = in[(o * n + order[i]) * inner + j];
          out_indices[at] = order[i];
        }
      }
    }
    return absl::OkStatus();
  });
}

// ---- OneHot --------------------------------------------------------------------------------

// OneHot(indices, depth, values [off, on]; axis = -1) -> a new axis of `depth` at `axis` holding
// `on` where the index is (negative indices count from depth's end), `off` elsewhere; an index
// outside [-depth, depth) gives a row of `off`, as ONNX says. depth is read at run time and must
// be the output's planned size along the new axis.
absl::Status OneHot(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& idx_type = *args.input_types[0];
  const TensorType& values = *args.input_types[2];
  const TensorType& out = *args.output_types[0];
  if (NumElements(values.dims) != 2 || out.dtype != values.dtype) {
    return KernelError(args, "values must hold [off, on], of the output's element type");
  }
  const int64_t out_rank = Rank(idx_type) + 1;
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, out_rank, "axis"));
  // depth: one number of any numeric type (ONNX allows floats; a float depth is truncated).
  if (NumElements(args.input_types[1]->dims) != 1) return KernelError(args, "depth must be one value");
  int64_t depth = 0;
  MG_RETURN_IF_ERROR(DispatchNumeric(args, args.input_types[1]->dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const double v = static_cast<double>(Load(*reinterpret_cast<const T*>(args.inputs[1])));
    if (!(v >= 1 && v < 9.0e15)) return KernelError(args, absl::StrCat("depth ", v, " is not positive"));
    depth = static_cast<int64_t>(v);
    return absl::OkStatus();
  }));
  Dims want = idx_type.dims;
  want.insert(want.begin() + axis, depth);
  if (out.dims != want) {
    return KernelError(args, absl::StrCat("depth ", depth, " gives ", graph::DimsToString(want),
                                          "; the plan has ", graph::DimsToString(out.dims)));
  }
  MG_ASSIGN_OR_RETURN(const Dims indices, ReadIndexValues(args));
  const int64_t outer = Product(idx_type.dims, 0, static_cast<size_t>(axis));
  const int64_t inner = Product(idx_type.dims, static_cast<size_t>(axis), idx_type.dims.size());
  const int64_t bytes = graph::DataTypeSize(out.dtype);
  const std::byte* off = args.inputs[2];
  const std::byte* on = args.inputs[2] + bytes;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t d = 0; d < depth; ++d) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = indices[o * inner + i];
        if (at < 0) at += depth;
        std::memcpy(args.outputs[0] + ((o * depth + d) * inner + i) * bytes, at == d ? on : off,
                    static_cast<size_t>(bytes));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuIndexKernels(KernelMap& kernels) {
  kernels["OneHot"] = OneHot;
  kernels["GatherElements"] = GatherElements;
  kernels["ScatterElements"] = ScatterElements;
  kernels["GatherND"] = GatherND;
  kernels["ScatterND"] = ScatterND;
  kernels["CumSum"] = CumSum;
  kernels["TopK"] = TopK;
}

}  // namespace memonger::alloc

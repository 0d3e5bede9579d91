// Helpers shared by the CPU kernels (kernels/cpu/kernels_cpu_*.cc): argument and attribute checks
// that return a Status naming the op, element-type dispatch, loads and stores through float32,
// numpy broadcasting strides, axis normalisation, reading small integer tensors (shapes, axes,
// indices), and the aliasing checks that keep in-place execution honest.
//
// Not part of the library's interface: it lives in `kernel_internal`.
//
//   absl::Status Relu(const KernelArgs& args) {
//     MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
//     return DispatchFloat(args, args.input_types[0]->dtype, [&](auto tag) {
//       using T = typename decltype(tag)::type;
//       ...
//     });
//   }
//
// Error messages start with the op type ("Softmax: axis 3 is out of range for rank 2"); the
// executor prepends the op's label and step.
#ifndef MEMONGER_KERNELS_KERNEL_UTIL_H_
#define MEMONGER_KERNELS_KERNEL_UTIL_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "graph/dtype.h"
#include "graph/tensor_type.h"
#include "kernels/float16.h"
#include "kernels/kernel.h"

namespace memonger::alloc::kernel_internal {

using Dims = std::vector<int64_t>;

// ---- element types ---------------------------------------------------------------------------

// The compute type of a storage type: float for the half types and float32, double for
// float64, the type itself for integers.
template <typename T>
struct ComputeOf {
  using type = T;
};
template <>
struct ComputeOf<Half> {
  using type = float;
};
template <>
struct ComputeOf<BFloat16> {
  using type = float;
};
template <typename T>
using Compute = typename ComputeOf<T>::type;

template <typename T>
inline Compute<T> Load(const T& v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return v.ToFloat();
  } else {
    return v;
  }
}
template <typename T>
inline T Store(Compute<T> v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T::FromFloat(v);
  } else {
    return v;
  }
}

// A value standing for a type, for generic lambdas: [&](auto tag) { using T = ...::type; }.
template <typename T>
struct Tag {
  using type = T;
};

// "Relu: element type int8 is not supported (float32, float16, bfloat16, float64)".
absl::Status UnsupportedDtype(const KernelArgs& args, graph::DataType dtype,
                              absl::string_view supported);

// Calls f(Tag<T>{}) for the floating-point storage types: float32, float16, bfloat16, float64.
template <typename F>
absl::Status DispatchFloat(const KernelArgs& args, graph::DataType dtype, F&& f) {
  switch (dtype) {
    case graph::DataType::kFloat32: return f(Tag<float>{});
    case graph::DataType::kFloat16: return f(Tag<Half>{});
    case graph::DataType::kBFloat16: return f(Tag<BFloat16>{});
    case graph::DataType::kFloat64: return f(Tag<double>{});
    default: return UnsupportedDtype(args, dtype, "float32, float16, bfloat16, float64");
  }
}

// The floating-point types plus the integers (arithmetic wraps as numpy's does).
template <typename F>
absl::Status DispatchNumeric(const KernelArgs& args, graph::DataType dtype, F&& f) {
  switch (dtype) {
    case graph::DataType::kUInt8: return f(Tag<uint8_t>{});
    case graph::DataType::kInt8: return f(Tag<int8_t>{});
    case graph::DataType::kInt16: return f(Tag<int16_t>{});
    case graph::DataType::kInt32: return f(Tag<int32_t>{});
    case graph::DataType::kInt64: return f(Tag<int64_t>{});
    case graph::DataType::kFloat32:
    case graph::DataType::kFloat16:
    case graph::DataType::kBFloat16:
    case graph::DataType::kFloat64: return DispatchFloat(args, dtype, f);
    default:
      return UnsupportedDtype(args, dtype,
                              "float32, float16, bfloat16, float64, uint8, int8, int16, int32, "
                              "int64");
  }
}

// Every element type of graph::DataType, by storage (for ops that only move elements).
template <typename F>
absl::Status DispatchAny(const KernelArgs& args, graph::DataType dtype, F&& f) {
  switch (dtype) {
    case graph::DataType::kBool: return f(Tag<bool>{});
    default: return DispatchNumeric(args, dtype, f);
  }
}

// ---- arguments and attributes ----------------------------------------------------------------

// InvalidArgument "<Type>: <message>".
absl::Status KernelError(const KernelArgs& args, absl::string_view message);
// Unimplemented "<Type>: <message>".
absl::Status KernelUnimplemented(const KernelArgs& args, absl::string_view message);

// Input and output counts within [min, max] (max -1: unbounded); the pointer and type vectors
// agree; every type is present. Kernels call this first. It does not look at the device: the
// CPU kernel table checks that (CheckHost) for every kernel, the device tables their own device.
absl::Status CheckArity(const KernelArgs& args, int min_inputs, int max_inputs, int min_outputs,
                        int max_outputs);

// Host only: the CPU kernels dereference their pointers.
absl::Status CheckHost(const KernelArgs& args);

// Attributes. A present attribute of the wrong kind is an InvalidArgument, never the default.
// FindAttr: the op's attribute of that name, whatever its kind; nullptr when absent.
const graph::Attribute* FindAttr(const KernelArgs& args, absl::string_view name);
absl::StatusOr<int64_t> IntAttr(const KernelArgs& args, absl::string_view name,
                                int64_t fallback);
absl::StatusOr<std::optional<int64_t>> OptionalIntAttr(const KernelArgs& args,
                                                       absl::string_view name);
absl::StatusOr<double> FloatAttr(const KernelArgs& args, absl::string_view name,
                                 double fallback);
absl::StatusOr<std::optional<Dims>> IntsAttr(const KernelArgs& args, absl::string_view name);
absl::StatusOr<std::optional<std::string>> StringAttr(const KernelArgs& args,
                                                      absl::string_view name);

// The positions of the op's inputs in the ONNX node (the importer drops omitted optional
// inputs and records `onnx_input_slots` when a gap precedes a present input). slots[i] is the
// node position of args.inputs[i].
std::vector<int64_t> InputSlots(const KernelArgs& args);
// Index into args.inputs of the input at ONNX node position `slot`; -1 when it was omitted.
int FindInputSlot(const KernelArgs& args, int64_t slot);
// The same for outputs (`onnx_output_slots`): slots[i] is the node position of args.outputs[i];
// FindOutputSlot is -1 when the node omitted that output.
std::vector<int64_t> OutputSlots(const KernelArgs& args);
int FindOutputSlot(const KernelArgs& args, int64_t slot);

// ---- shapes ----------------------------------------------------------------------------------

int64_t NumElements(const Dims& dims);            // REQUIRES: dims typed (no overflow)
int64_t Product(const Dims& dims, size_t begin, size_t end);
int64_t Rank(const graph::TensorType& t);

// Maps `axis` in [-rank, rank) to [0, rank) (or [-rank, rank] to [0, rank] when `allow_end`);
// InvalidArgument naming `what` otherwise.
absl::StatusOr<int64_t> NormalizeAxis(const KernelArgs& args, int64_t axis, int64_t rank,
                                      absl::string_view what, bool allow_end = false);

// Caffe2 FC's flattening (FC and FCGradient share it): X at attribute `axis` (default 1) to
// [M, K], W at `axis_w` (default 1) to [N, K], or [K, N] when `transposed` (FCTransposed).
// InvalidArgument naming the op when W's K differs from X's.
struct FcDims {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
};
absl::StatusOr<FcDims> ResolveFcDims(const KernelArgs& args, const graph::TensorType& x,
                                     const graph::TensorType& w, bool transposed);

// The geometry of a matrix product as MatMul, BatchMatMul and MatMulGradient read it (CPU and
// device kernels alike): Caffe2's axis_a/axis_b flattening when given, a 1-D A a row [1, K] and
// a 1-D B a column [K, 1] (their transposition flags then ignored), trans_a/trans_b, and numpy
// broadcasting of the batch dims. InvalidArgument naming the op when K differs or the batch
// dims do not broadcast.
struct MatMulGeometry {
  Dims a, b;                      // the operands as stored: batch dims..., rows, cols
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;    // op(A) is m x k, op(B) k x n
  Dims batch;                     // the output's batch dims
  Dims stride_a, stride_b;        // each operand's batch strides over `batch`, in matrices
  int64_t rows_a() const { return a[a.size() - 2]; }
  int64_t cols_a() const { return a[a.size() - 1]; }
  int64_t rows_b() const { return b[b.size() - 2]; }
  int64_t cols_b() const { return b[b.size() - 1]; }
};
absl::StatusOr<MatMulGeometry> ResolveMatMulGeometry(const KernelArgs& args,
                                                     const graph::TensorType& a,
                                                     const graph::TensorType& b);

// Transpose's permutation (`perm`, or Caffe2's `axes`; reversed when absent) applied to `x`: the
// output's dims and the input strides (elements) each output dim walks. InvalidArgument naming
// the op when perm is not a permutation of x's dims.
struct TransposeGeometry {
  Dims out_dims;
  Dims in_strides;
};
absl::StatusOr<TransposeGeometry> ResolveTranspose(const KernelArgs& args,
                                                   const graph::TensorType& x);

// AlibiBias(coords) -> bias (docs/ops.md): attributes heads (required, > 0), cls (default 1),
// pad (default 0); coords int64 or float32 [N, 2]; bias [1, heads, L, Lp] with L = N + cls and
// Lp = L rounded up to a multiple of pad. InvalidArgument (Unimplemented for another coords
// type) naming the op otherwise. CPU and device kernels share it.
struct AlibiGeometry {
  int64_t heads = 0, cls = 0, n = 0, l = 0, lp = 0;
};
absl::StatusOr<AlibiGeometry> ResolveAlibi(const KernelArgs& args);

// Row-major strides of `dims` (elements).
Dims Strides(const Dims& dims);
// Strides with which `out`'s multi-index reads an input of dims `in` under numpy broadcasting
// (right-aligned; 0 where the input's dim is 1 or missing). REQUIRES: `in` broadcasts to `out`.
Dims BroadcastStrides(const Dims& in, const Dims& out);
// True when `in` broadcasts to exactly `out` (numpy, one direction).
bool BroadcastsTo(const Dims& in, const Dims& out);

// The integers of a small int32 or int64 tensor (shapes, axes, indices, pads).
absl::StatusOr<Dims> ReadInts(const KernelArgs& args, int input, absl::string_view what);

// ---- aliasing --------------------------------------------------------------------------------

int64_t ByteSizeOf(const graph::TensorType& t);  // REQUIRES: typed
// True when the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool Overlaps(const std::byte* a, int64_t a_bytes, const std::byte* b, int64_t b_bytes);
// FailedPrecondition when output `out` shares any byte with input `in`: for kernels that read
// an input after writing part of the output (the plan must not alias them).
absl::Status CheckNoOverlap(const KernelArgs& args, int in, int out);
// CheckNoOverlap for every (input, output) pair.
absl::Status CheckNoOverlapAll(const KernelArgs& args);
// FailedPrecondition when two outputs share a byte (kernels with several outputs written
// independently: attention's O, workspace and lse; the gradients' dA and dB).
absl::Status CheckOutputsApart(const KernelArgs& args);


// ---- strided loops ---------------------------------------------------------------------------

// Visits every multi-index of `dims` in row-major order, for N operands that each read the
// index with their own strides (elements; 0 repeats an element, as broadcasting does). Adjacent
// dims are merged where every operand's strides allow, so the innermost run is as long as
// possible; `body(count, offsets, inner_strides)` is called once per run of the innermost
// (merged) dim with each operand's offset of the run's first element.
template <size_t N, typename Body>
void ForEachStrided(const Dims& dims, const std::array<Dims, N>& strides, Body&& body) {
  // Merge dims: d and d+1 merge when, for every operand, stride[d] == stride[d+1] * dims[d+1].
  Dims shape;
  std::array<Dims, N> st;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0) return;  // nothing to visit
    if (dims[d] == 1) continue;  // contributes nothing to any offset
    bool merge = !shape.empty();
    for (size_t k = 0; merge && k < N; ++k) {
      merge = st[k].back() == strides[k][d] * dims[d];
    }
    if (merge) {
      shape.back() *= dims[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      shape.push_back(dims[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  std::array<int64_t, N> offsets{};
  std::array<int64_t, N> inner{};
  if (shape.empty()) {  // a single element
    body(int64_t{1}, offsets, inner);
    return;
  }
  const size_t rank = shape.size();
  for (size_t k = 0; k < N; ++k) inner[k] = st[k][rank - 1];
  const int64_t count = shape[rank - 1];
  Dims index(rank, 0);
  while (true) {
    body(count, offsets, inner);
    // Advance the outer dims (all but the innermost) like an odometer.
    size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++index[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += st[k][d];
      if (index[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= st[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

}  // namespace memonger::alloc::kernel_internal

#endif  // MEMONGER_KERNELS_KERNEL_UTIL_H_

// Loss CPU kernels (Caffe2's) and their gradients:
//   LabelCrossEntropy(X [N, D] or [D], label int32 [N] or [N, 1]) -> Y [N]
//       Y[i] = -log(max(X[i, label[i]], 1e-20))       (Caffe2's kLOG_THRESHOLD keeps log finite)
//   LabelCrossEntropyGradient(X, label, dY) -> dX
//       dX[i, label[i]] = -dY[i] / max(X[i, label[i]], 1e-20), 0 elsewhere
//   AveragedLoss(X) -> loss []                        the mean of every element
//   AveragedLossGradient(X, dLoss) -> dX              dX = dLoss / count, everywhere
// A label outside [0, D) is an InvalidArgument naming it. Storage float32, float16, bfloat16,
// float64; arithmetic in the compute type (kernel_util.h), sums in element order. Outputs must
// not overlap inputs (FailedPrecondition).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

constexpr double kLogThreshold = 1e-20;

// X [N, D] (or [D]: N = 1) and label int32 with N elements; returns {N, D}.
absl::StatusOr<std::pair<int64_t, int64_t>> LabelShape(const KernelArgs& args) {
  const TensorType& x = *args.input_types[0];
  const TensorType& label = *args.input_types[1];
  if (x.dims.empty() || x.dims.size() > 2) return KernelError(args, "X must be [N, D] or [D]");
  const int64_t n = x.dims.size() == 2 ? x.dims[0] : 1;
  const int64_t d = x.dims.back();
  if (label.dtype != DataType::kInt32 || NumElements(label.dims) != n) {
    return KernelError(args, absl::StrCat("label must be int32 with ", n, " elements; got ",
                                          graph::TensorTypeToString(label)));
  }
  return std::make_pair(n, d);
}

absl::StatusOr<int32_t> LabelAt(const KernelArgs& args, int64_t i, int64_t d) {
  const int32_t l = reinterpret_cast<const int32_t*>(args.inputs[1])[i];
  if (l < 0 || l >= d) {
    return KernelError(args, absl::StrCat("label[", i, "] = ", l, " is outside [0, ", d, ")"));
  }
  return l;
}

absl::Status LabelCrossEntropy(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const auto shape, LabelShape(args));
  // Named variables, not a structured binding: the lambdas below capture them (C++17 allows no
  // capture of a binding; clang refuses it).
  const int64_t n = shape.first;
  const int64_t d = shape.second;
  const TensorType& y = *args.output_types[0];
  if (y.dtype != args.input_types[0]->dtype || NumElements(y.dims) != n) {
    return KernelError(args, absl::StrCat("Y must hold ", n, " elements of X's type"));
  }
  return DispatchFloat(args, y.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* x = reinterpret_cast<const T*>(args.inputs[0]);
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
      MG_ASSIGN_OR_RETURN(const int32_t l, LabelAt(args, i, d));
      const C p = std::max(Load(x[i * d + l]), static_cast<C>(kLogThreshold));
      out[i] = Store<T>(-std::log(p));
    }
    return absl::OkStatus();
  });
}

absl::Status LabelCrossEntropyGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const auto shape, LabelShape(args));
  // Named variables, not a structured binding: the lambdas below capture them (C++17 allows no
  // capture of a binding; clang refuses it).
  const int64_t n = shape.first;
  const int64_t d = shape.second;
  const TensorType& x = *args.input_types[0];
  const TensorType& dy = *args.input_types[2];
  if (dy.dtype != x.dtype || NumElements(dy.dims) != n || *args.output_types[0] != x) {
    return KernelError(args, "dY must hold N elements of X's type and dX have X's type");
  }
  return DispatchFloat(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* px = reinterpret_cast<const T*>(args.inputs[0]);
    const T* pdy = reinterpret_cast<const T*>(args.inputs[2]);
    T* dx = reinterpret_cast<T*>(args.outputs[0]);
    const T zero = Store<T>(C(0));
    for (int64_t i = 0; i < n * d; ++i) dx[i] = zero;
    for (int64_t i = 0; i < n; ++i) {
      MG_ASSIGN_OR_RETURN(const int32_t l, LabelAt(args, i, d));
      const C p = std::max(Load(px[i * d + l]), static_cast<C>(kLogThreshold));
      dx[i * d + l] = Store<T>(-Load(pdy[i]) / p);
    }
    return absl::OkStatus();
  });
}

absl::Status AveragedLoss(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& y = *args.output_types[0];
  if (y.dtype != x.dtype || NumElements(y.dims) != 1) {
    return KernelError(args, "the loss must be one element of X's type");
  }
  return DispatchFloat(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* px = reinterpret_cast<const T*>(args.inputs[0]);
    const int64_t count = NumElements(x.dims);
    C sum = 0;
    for (int64_t i = 0; i < count; ++i) sum += Load(px[i]);
    // The mean of nothing is 0 (Caffe2 divides by zero here).
    *reinterpret_cast<T*>(args.outputs[0]) = Store<T>(count > 0 ? sum / static_cast<C>(count) : C(0));
    return absl::OkStatus();
  });
}

absl::Status AveragedLossGradient(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
  const TensorType& x = *args.input_types[0];
  const TensorType& dloss = *args.input_types[1];
  if (dloss.dtype != x.dtype || NumElements(dloss.dims) != 1 || *args.output_types[0] != x) {
    return KernelError(args, "dLoss must be one element of X's type and dX have X's type");
  }
  return DispatchFloat(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const int64_t count = NumElements(x.dims);
    const C g = Load(*reinterpret_cast<const T*>(args.inputs[1])) / static_cast<C>(count);
    const T v = Store<T>(g);
    T* dx = reinterpret_cast<T*>(args.outputs[0]);
    for (int64_t i = 0; i < count; ++i) dx[i] = v;
    return absl::OkStatus();
  });
}

}  // namespace

void AddCpuLossKernels(KernelMap& kernels) {
  kernels["LabelCrossEntropy"] = LabelCrossEntropy;
  kernels["LabelCrossEntropyGradient"] = LabelCrossEntropyGradient;
  kernels["AveragedLoss"] = AveragedLoss;
  kernels["AveragedLossGradient"] = AveragedLossGradient;
}

}  // namespace memonger::alloc

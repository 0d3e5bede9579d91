// Device kernels, pointwise family: one thread per output element.
//   Add, Sub, Mul, Div (numpy broadcasting), Sum (n-ary, broadcasting), Relu, Gelu (erf or tanh
//   form), Sigmoid, Tanh, Cast (between float types), ConstantFill, AveragedLoss(+Gradient),
//   LabelCrossEntropy(+Gradient), ReluGradient, SigmoidGradient, TanhGradient, GeluGradient,
//   and the copy-like ops (Reshape, Flatten, Squeeze, Unsqueeze,
//   Identity: nothing when the plan made the output a view, else one device copy).
// Semantics are the CPU kernels' (kernels_cpu_elementwise.cc, kernels_cpu_backward.cc,
// kernels_cpu_loss.cc, kernels_cpu_fill.cc), computed in float32. An output may be an input
// exactly (in place): each thread reads its element's inputs before writing it.
//
// Every function is a template over the backend (device_kernels.h); not part of the library's
// interface.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_POINTWISE_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_POINTWISE_H_

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/device_kernel_util.h"

namespace memonger::alloc::device {

// ---- bodies (host and device) ----------------------------------------------------------------

enum class Arith : uint8_t { kAdd, kSub, kMul, kDiv };
enum class Unary : uint8_t { kRelu, kGeluErf, kGeluTanh, kSigmoid, kTanh };

MG_HD inline float GeluErfOf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
MG_HD inline float GeluTanhOf(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
MG_HD inline float GeluErfSlope(float x) {
  const float phi = expf(-0.5f * x * x) * 0.39894228040143267794f;
  return 0.5f * (1.0f + erff(x * 0.70710678118654752440f)) + x * phi;
}
MG_HD inline float GeluTanhSlope(float x) {
  const float c = 0.79788456080286535588f;
  const float t = tanhf(c * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
}

struct ArithBody {
  Arith op{};
  In a{}, b{};
  IndexMap map_a{}, map_b{};
  Out y{};
  MG_HD void operator()(int64_t i) const {
    const float u = a[map_a.Offset(i)];
    const float v = b[map_b.Offset(i)];
    float r = u + v;
    if (op == Arith::kSub) r = u - v;
    if (op == Arith::kMul) r = u * v;
    if (op == Arith::kDiv) r = u / v;
    y.Set(i, r);
  }
};

inline constexpr int kMaxSumInputs = 16;
struct SumBody {
  int count{};
  In x[kMaxSumInputs]{};
  IndexMap map[kMaxSumInputs]{};
  Out y{};
  MG_HD void operator()(int64_t i) const {
    float acc = x[0][map[0].Offset(i)];
    for (int k = 1; k < count; ++k) acc += x[k][map[k].Offset(i)];
    y.Set(i, acc);
  }
};

struct UnaryBody {
  Unary op{};
  In x{};
  Out y{};
  MG_HD void operator()(int64_t i) const {
    const float v = x[i];
    float r = v > 0.0f ? v : 0.0f;
    if (op == Unary::kGeluErf) r = GeluErfOf(v);
    if (op == Unary::kGeluTanh) r = GeluTanhOf(v);
    if (op == Unary::kSigmoid) r = 1.0f / (1.0f + expf(-v));
    if (op == Unary::kTanh) r = tanhf(v);
    y.Set(i, r);
  }
};

// dX = dY * f'(...): Relu, Sigmoid and Tanh read Y (their output; in `x` here), Gelu reads X.
// The CPU kernels' expressions: dY y (1 - y) and dY (1 - y^2).
struct UnaryGradientBody {
  Unary op{};
  In dy{}, x{};
  Out dx{};
  MG_HD void operator()(int64_t i) const {
    const float v = x[i];
    const float g = dy[i];
    float r = v > 0.0f ? g : 0.0f;
    if (op == Unary::kGeluErf) r = g * GeluErfSlope(v);
    if (op == Unary::kGeluTanh) r = g * GeluTanhSlope(v);
    if (op == Unary::kSigmoid) r = g * v * (1.0f - v);
    if (op == Unary::kTanh) r = g * (1.0f - v * v);
    dx.Set(i, r);
  }
};

struct CastBody {
  In x{};
  Out y{};
  MG_HD void operator()(int64_t i) const { y.Set(i, x[i]); }
};

struct FillBody {
  Out y{};
  float value{};
  MG_HD void operator()(int64_t i) const { y.Set(i, value); }
};

// One thread: the mean of every element, summed in element order (the CPU kernel's order).
struct MeanBody {
  In x{};
  int64_t count{};
  Out y{};
  MG_HD void operator()(int64_t) const {
    float sum = 0.0f;
    for (int64_t i = 0; i < count; ++i) sum += x[i];
    y.Set(0, count > 0 ? sum / static_cast<float>(count) : 0.0f);
  }
};

struct MeanGradientBody {
  In dloss{};
  int64_t count{};
  Out dx{};
  MG_HD void operator()(int64_t i) const { dx.Set(i, dloss[0] / static_cast<float>(count)); }
};

// Caffe2's LabelCrossEntropy: Y_i = -log(max(X[i, label_i], 1e-20)); labels int32, checked on
// the host before the launch.
inline constexpr float kLogThreshold = 1e-20f;
struct LabelCrossEntropyBody {
  In x;
  const int32_t* label = nullptr;
  int64_t d = 0;
  Out y;
  MG_HD void operator()(int64_t i) const {
    const float p = x[i * d + label[i]];
    y.Set(i, -logf(p > kLogThreshold ? p : kLogThreshold));
  }
};

// dX[i, label_i] = -dY_i / max(X[i, label_i], 1e-20); the rest of dX is zeroed before.
struct LabelCrossEntropyGradientBody {
  In x, dy;
  const int32_t* label = nullptr;
  int64_t d = 0;
  Out dx;
  MG_HD void operator()(int64_t i) const {
    const float p = x[i * d + label[i]];
    dx.Set(i * d + label[i], -dy[i] / (p > kLogThreshold ? p : kLogThreshold));
  }
};

// ---- kernels (host code) ---------------------------------------------------------------------

namespace pointwise_internal {
using kernel_internal::CheckArity;
using kernel_internal::KernelError;
using kernel_internal::KernelUnimplemented;
using kernel_internal::NumElements;

inline absl::StatusOr<IndexMap> BroadcastMap(const KernelArgs& args, int in, const Dims& out) {
  const Dims& dims = args.input_types[in]->dims;
  if (!kernel_internal::BroadcastsTo(dims, out)) {
    return KernelError(args, absl::StrCat("input ", in, " ", graph::DimsToString(dims),
                                          " does not broadcast to the output ",
                                          graph::DimsToString(out)));
  }
  return MakeIndexMap(args, out, kernel_internal::BroadcastStrides(dims, out));
}

inline absl::Status RefuseLegacyBroadcast(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(const int64_t legacy, kernel_internal::IntAttr(args, "broadcast", 0));
  if (legacy != 0) {
    return KernelUnimplemented(args, "Caffe2's broadcast=1 runs on the CPU kernels only");
  }
  return absl::OkStatus();
}

inline absl::StatusOr<Unary> GeluForm(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(std::optional<std::string> approximate,
                      kernel_internal::StringAttr(args, "approximate"));
  if (!approximate.has_value() || *approximate == "none") return Unary::kGeluErf;
  if (*approximate == "tanh") return Unary::kGeluTanh;
  return KernelError(args, absl::StrCat("approximate '", *approximate, "' must be 'none' or 'tanh'"));
}
}  // namespace pointwise_internal

template <class Backend>
absl::Status DeviceArith(const Backend& be, const KernelArgs& args, Arith op) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(RefuseLegacyBroadcast(args));
  const graph::TensorType& ty = *args.output_types[0];
  if (args.input_types[0]->dtype != ty.dtype || args.input_types[1]->dtype != ty.dtype) {
    return KernelError(args, "A, B and the output must have one element type");
  }
  for (int in = 0; in < 2; ++in) {
    // In place only element for element: the input must have the output's dims.
    if (args.input_types[in]->dims == ty.dims) {
      MG_RETURN_IF_ERROR(CheckSameOrApart(args, in, 0));
    } else {
      MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, in, 0));
    }
  }
  ArithBody body{op};
  MG_ASSIGN_OR_RETURN(body.a, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.b, InputAt(args, 1));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.map_a, BroadcastMap(args, 0, ty.dims));
  MG_ASSIGN_OR_RETURN(body.map_b, BroadcastMap(args, 1, ty.dims));
  return be.Launch(NumElements(ty.dims), body);
}

template <class Backend>
absl::Status DeviceSum(const Backend& be, const KernelArgs& args) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, kMaxSumInputs, 1, 1));
  const graph::TensorType& ty = *args.output_types[0];
  SumBody body{static_cast<int>(args.inputs.size())};
  for (int in = 0; in < body.count; ++in) {
    if (args.input_types[in]->dtype != ty.dtype) {
      return KernelError(args, "every input must have the output's element type");
    }
    if (args.input_types[in]->dims == ty.dims) {
      MG_RETURN_IF_ERROR(CheckSameOrApart(args, in, 0));
    } else {
      MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, in, 0));
    }
    MG_ASSIGN_OR_RETURN(body.x[in], InputAt(args, in));
    MG_ASSIGN_OR_RETURN(body.map[in], BroadcastMap(args, in, ty.dims));
  }
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  return be.Launch(NumElements(ty.dims), body);
}

template <class Backend>
absl::Status DeviceUnary(const Backend& be, const KernelArgs& args, Unary op) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  if (*args.input_types[0] != *args.output_types[0]) {
    return KernelError(args, "the output must have the input's type");
  }
  if (op == Unary::kGeluErf) {
    MG_ASSIGN_OR_RETURN(op, GeluForm(args));
  }
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, 0, 0));
  UnaryBody body{op};
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  return be.Launch(NumElements(args.output_types[0]->dims), body);
}

// ReluGradient, SigmoidGradient, TanhGradient (Y, dY) and GeluGradient(dY, X): dX may be dY
// exactly.
template <class Backend>
absl::Status DeviceUnaryGradient(const Backend& be, const KernelArgs& args, Unary op) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  const graph::TensorType& t = *args.input_types[0];
  if (*args.input_types[1] != t || *args.output_types[0] != t) {
    return KernelError(args, "inputs and output must have one type");
  }
  const bool reads_x = op == Unary::kGeluErf;  // Gelu's gradient reads X, the others Y
  const int dy = reads_x ? 0 : 1;
  if (reads_x) {
    MG_ASSIGN_OR_RETURN(op, GeluForm(args));
  }
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, dy, 0));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, 1 - dy, 0));
  UnaryGradientBody body{op};
  MG_ASSIGN_OR_RETURN(body.dy, InputAt(args, dy));
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 1 - dy));
  MG_ASSIGN_OR_RETURN(body.dx, OutputAt(args, 0));
  return be.Launch(NumElements(t.dims), body);
}

template <class Backend>
absl::Status DeviceCast(const Backend& be, const KernelArgs& args) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& y = *args.output_types[0];
  if (x.dims != y.dims) return KernelError(args, "the output must have the input's dims");
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, 0, 0));
  if (x.dtype == y.dtype) {
    if (args.inputs[0] == args.outputs[0]) return absl::OkStatus();
    return be.Copy(args.outputs[0], args.inputs[0], kernel_internal::ByteSizeOf(x));
  }
  // A float16 <-> bfloat16 cast may run in place: each thread converts its own element.
  CastBody body;
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  return be.Launch(NumElements(x.dims), body);
}

template <class Backend>
absl::Status DeviceConstantFill(const Backend& be, const KernelArgs& args) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 0, 1, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  MG_ASSIGN_OR_RETURN(const double value, kernel_internal::FloatAttr(args, "value", 0.0));
  FillBody body;
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  body.value = static_cast<float>(value);
  return be.Launch(NumElements(args.output_types[0]->dims), body);
}

template <class Backend>
absl::Status DeviceAveragedLoss(const Backend& be, const KernelArgs& args) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& y = *args.output_types[0];
  if (y.dtype != x.dtype || NumElements(y.dims) != 1) {
    return KernelError(args, "the loss must be one element of X's type");
  }
  MeanBody body;
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  body.count = NumElements(x.dims);
  return be.Launch(1, body);
}

template <class Backend>
absl::Status DeviceAveragedLossGradient(const Backend& be, const KernelArgs& args) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& dloss = *args.input_types[1];
  if (dloss.dtype != x.dtype || NumElements(dloss.dims) != 1 || *args.output_types[0] != x) {
    return KernelError(args, "dLoss must be one element of X's type and dX have X's type");
  }
  MeanGradientBody body;
  MG_ASSIGN_OR_RETURN(body.dloss, InputAt(args, 1));
  MG_ASSIGN_OR_RETURN(body.dx, OutputAt(args, 0));
  body.count = NumElements(x.dims);
  return be.Launch(body.count, body);
}

// LabelCrossEntropy(X [N, D] or [D], label int32 [N]) -> Y [N]; with `gradient`,
// LabelCrossEntropyGradient(X, label, dY) -> dX. A label outside [0, D) is an InvalidArgument
// naming it (the labels are copied to the host and checked before anything runs).
template <class Backend>
absl::Status DeviceLabelCrossEntropy(const Backend& be, const KernelArgs& args, bool gradient) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, gradient ? 3 : 2, gradient ? 3 : 2, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& label = *args.input_types[1];
  if (x.dims.empty() || x.dims.size() > 2) return KernelError(args, "X must be [N, D] or [D]");
  const int64_t n = x.dims.size() == 2 ? x.dims[0] : 1;
  const int64_t d = x.dims.back();
  if (label.dtype != graph::DataType::kInt32 || NumElements(label.dims) != n) {
    return KernelError(args, absl::StrCat("label must be int32 with ", n, " elements; got ",
                                          graph::TensorTypeToString(label)));
  }
  std::vector<int32_t> labels(static_cast<size_t>(n));
  MG_RETURN_IF_ERROR(be.ToHost(labels.data(), args.inputs[1], n * int64_t{sizeof(int32_t)}));
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= d) {
      return KernelError(args, absl::StrCat("label[", i, "] = ", labels[i], " is outside [0, ", d, ")"));
    }
  }
  MG_ASSIGN_OR_RETURN(const In in_x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(const Out out, OutputAt(args, 0));
  const auto* label_data = reinterpret_cast<const int32_t*>(args.inputs[1]);
  if (!gradient) {
    if (out.type != in_x.type || NumElements(args.output_types[0]->dims) != n) {
      return KernelError(args, absl::StrCat("Y must hold ", n, " elements of X's type"));
    }
    return be.Launch(n, LabelCrossEntropyBody{in_x, label_data, d, out});
  }
  const graph::TensorType& dy = *args.input_types[2];
  if (dy.dtype != x.dtype || NumElements(dy.dims) != n || *args.output_types[0] != x) {
    return KernelError(args, "dY must hold N elements of X's type and dX have X's type");
  }
  MG_RETURN_IF_ERROR(be.Zero2D(out.data, 0, kernel_internal::ByteSizeOf(x), 1));
  MG_ASSIGN_OR_RETURN(const In in_dy, InputAt(args, 2));
  return be.Launch(n, LabelCrossEntropyGradientBody{in_x, in_dy, label_data, d, out});
}

// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output holds the input's bytes (shape
// inference fixed its dims; an ONNX shape input is not read).
template <class Backend>
absl::Status DeviceCopyLike(const Backend& be, const KernelArgs& args) {
  using namespace pointwise_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
  const int64_t bytes = kernel_internal::ByteSizeOf(*args.input_types[0]);
  if (bytes != kernel_internal::ByteSizeOf(*args.output_types[0]) ||
      args.input_types[0]->dtype != args.output_types[0]->dtype) {
    return KernelError(args, "the output must hold the input's elements");
  }
  if (args.inputs[0] == args.outputs[0]) return absl::OkStatus();  // a view
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, 0, 0));
  return be.Copy(args.outputs[0], args.inputs[0], bytes);
}

template <class Backend>
void AddDevicePointwiseKernels(absl::flat_hash_map<std::string, Kernel>& kernels,
                               std::shared_ptr<const Backend> be) {
  const std::pair<const char*, Arith> arith[] = {
      {"Add", Arith::kAdd}, {"Sub", Arith::kSub}, {"Mul", Arith::kMul}, {"Div", Arith::kDiv}};
  for (const auto& [name, op] : arith) {
    kernels[name] = [be, op = op](const KernelArgs& a) { return DeviceArith(*be, a, op); };
  }
  const std::pair<const char*, Unary> unary[] = {{"Relu", Unary::kRelu},
                                                 {"Gelu", Unary::kGeluErf},
                                                 {"Sigmoid", Unary::kSigmoid},
                                                 {"Tanh", Unary::kTanh}};
  for (const auto& [name, op] : unary) {
    kernels[name] = [be, op = op](const KernelArgs& a) { return DeviceUnary(*be, a, op); };
  }
  kernels["ReluGradient"] = [be](const KernelArgs& a) {
    return DeviceUnaryGradient(*be, a, Unary::kRelu);
  };
  kernels["SigmoidGradient"] = [be](const KernelArgs& a) {
    return DeviceUnaryGradient(*be, a, Unary::kSigmoid);
  };
  kernels["TanhGradient"] = [be](const KernelArgs& a) {
    return DeviceUnaryGradient(*be, a, Unary::kTanh);
  };
  kernels["GeluGradient"] = [be](const KernelArgs& a) {
    return DeviceUnaryGradient(*be, a, Unary::kGeluErf);
  };
  kernels["Sum"] = [be](const KernelArgs& a) { return DeviceSum(*be, a); };
  kernels["Cast"] = [be](const KernelArgs& a) { return DeviceCast(*be, a); };
  kernels["ConstantFill"] = [be](const KernelArgs& a) { return DeviceConstantFill(*be, a); };
  kernels["AveragedLoss"] = [be](const KernelArgs& a) { return DeviceAveragedLoss(*be, a); };
  kernels["AveragedLossGradient"] = [be](const KernelArgs& a) {
    return DeviceAveragedLossGradient(*be, a);
  };
  kernels["LabelCrossEntropy"] = [be](const KernelArgs& a) {
    return DeviceLabelCrossEntropy(*be, a, /*gradient=*/false);
  };
  kernels["LabelCrossEntropyGradient"] = [be](const KernelArgs& a) {
    return DeviceLabelCrossEntropy(*be, a, /*gradient=*/true);
  };
  for (const char* name : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}) {
    kernels[name] = [be](const KernelArgs& a) { return DeviceCopyLike(*be, a); };
  }
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_POINTWISE_H_

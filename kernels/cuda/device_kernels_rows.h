// Device kernels, row family: one thread per row (or per output element of a reduction), which
// walks its row serially in float32. Deterministic (no atomics: every sum has one owner and a
// fixed order) and simple; a row of n elements costs one thread n steps, which is what "simple
// kernels" buys here (docs/kernels.md, "CUDA").
//   Softmax (one axis, the CPU kernel's rule for all -inf rows), SoftmaxGradient,
//   LayerNormalization (ONNX, optional Mean/InvStdDev outputs), LayerNormalizationGradient,
//   ReduceSum (axes attribute or input, keepdims, noop_with_empty_axes).
// Semantics are the CPU kernels' (kernels_cpu_nn.cc, kernels_cpu_backward.cc,
// kernels_cpu_reduce.cc). Y may be X exactly for Softmax and LayerNormalization, dX may be dY
// for SoftmaxGradient: a thread reads its row before it writes it.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_ROWS_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_ROWS_H_

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/device_kernel_util.h"

namespace memonger::alloc::device {

// ---- bodies ----------------------------------------------------------------------------------

// Rows of `n` elements `inner` apart: row r = (o, i) starts at o * n * inner + i.
struct RowGeometry {
  int64_t n = 0;
  int64_t inner = 1;
  MG_HD int64_t Start(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

struct SoftmaxBody {
  RowGeometry rows{};
  In x{};
  Out y{};
  MG_HD void operator()(int64_t r) const {
    const int64_t base = rows.Start(r);
    float max = -INFINITY;
    for (int64_t j = 0; j < rows.n; ++j) {
      const float v = x[base + j * rows.inner];
      max = v > max ? v : max;
    }
    if (max == -INFINITY || max == INFINITY) max = 0.0f;  // the CPU kernel's rule for -inf rows
    float sum = 0.0f;
    for (int64_t j = 0; j < rows.n; ++j) sum += expf(x[base + j * rows.inner] - max);
    const float scale = 1.0f / sum;
    for (int64_t j = 0; j < rows.n; ++j) {
      const int64_t at = base + j * rows.inner;
      y.Set(at, expf(x[at] - max) * scale);
    }
  }
};

struct SoftmaxGradientBody {
  RowGeometry rows{};
  In y{}, dy{};
  Out dx{};
  MG_HD void operator()(int64_t r) const {
    const int64_t base = rows.Start(r);
    float dot = 0.0f;
    for (int64_t j = 0; j < rows.n; ++j) {
      const int64_t at = base + j * rows.inner;
      dot += y[at] * dy[at];
    }
    for (int64_t j = 0; j < rows.n; ++j) {
      const int64_t at = base + j * rows.inner;
      dx.Set(at, y[at] * (dy[at] - dot));
    }
  }
};

// Contiguous rows of n; scale and bias read through maps over the normalised elements.
struct LayerNormBody {
  int64_t n{};
  float epsilon{};
  In x{}, scale{}, bias{};
  bool has_bias{};
  IndexMap scale_map{}, bias_map{};
  Out y{}, mean{}, inv_std{};
  bool has_mean{}, has_inv_std{};
  MG_HD void operator()(int64_t r) const {
    const int64_t base = r * n;
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) sum += x[base + j];
    const float m = n > 0 ? sum / static_cast<float>(n) : 0.0f;
    float sq = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float c = x[base + j] - m;
      sq += c * c;
    }
    const float var = n > 0 ? sq / static_cast<float>(n) : 0.0f;
    const float inv = 1.0f / sqrtf(var + epsilon);
    for (int64_t j = 0; j < n; ++j) {
      const float b = has_bias ? bias[bias_map.Offset(j)] : 0.0f;
      y.Set(base + j, (x[base + j] - m) * inv * scale[scale_map.Offset(j)] + b);
    }
    if (has_mean) mean.Set(r, m);
    if (has_inv_std) inv_std.Set(r, inv);
  }
};

// dX per row: with xhat = (x - mean) inv and g = dY scale,
//   dX = inv (g - mean(g) - xhat mean(g xhat)).
struct LayerNormGradientBody {
  int64_t n{};
  In dy{}, x{}, scale{}, mean{}, inv_std{};
  IndexMap scale_map{};
  Out dx{};
  MG_HD void operator()(int64_t r) const {
    const int64_t base = r * n;
    const float m = mean[r];
    const float inv = inv_std[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (x[base + j] - m) * inv;
      const float g = dy[base + j] * scale[scale_map.Offset(j)];
      sum_g += g;
      sum_gx += g * xhat;
    }
    const float mean_g = sum_g / static_cast<float>(n);
    const float mean_gx = sum_gx / static_cast<float>(n);
    for (int64_t j = 0; j < n; ++j) {
      const float xhat = (x[base + j] - m) * inv;
      const float g = dy[base + j] * scale[scale_map.Offset(j)];
      dx.Set(base + j, inv * (g - mean_g - xhat * mean_gx));
    }
  }
};

// Per normalised element j, over all rows in order: dscale_full[j] = sum dY xhat, dbias_full[j]
// = sum dY (float32 accumulators, reduced onto Scale's dims afterwards).
struct LayerNormParamGradientBody {
  int64_t rows{}, n{};
  In dy{}, x{}, mean{}, inv_std{};
  float* dscale_full{};
  float* dbias_full{};
  MG_HD void operator()(int64_t j) const {
    float ds = 0.0f, db = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * n + j];
      ds += g * (x[r * n + j] - mean[r]) * inv_std[r];
      db += g;
    }
    dscale_full[j] = ds;
    dbias_full[j] = db;
  }
};

// Scale element s receives every j whose map offset is s (a broadcast Scale); j in order.
struct ReduceOntoParamBody {
  int64_t n{};
  const float* full{};
  IndexMap map{};
  Out param{};
  MG_HD void operator()(int64_t s) const {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      if (map.Offset(j) == s) acc += full[j];
    }
    param.Set(s, acc);
  }
};

// One thread per output element: it visits the `count` input elements that reduce into it
// (kept: the output's index; reduced: an index map over the reduced dims), in row-major order.
struct ReduceSumBody {
  IndexMap kept{};     // output flat index -> input offset of the element's first term
  IndexMap reduced{};  // term index -> offset from that first term
  int64_t count{};
  In x{};
  Out y{};
  MG_HD void operator()(int64_t i) const {
    const int64_t base = kept.Offset(i);
    float acc = 0.0f;
    for (int64_t t = 0; t < count; ++t) acc += x[base + reduced.Offset(t)];
    y.Set(i, acc);
  }
};

// ---- kernels ---------------------------------------------------------------------------------

namespace rows_internal {
using kernel_internal::CheckArity;
using kernel_internal::KernelError;
using kernel_internal::NumElements;
using kernel_internal::Product;

inline absl::StatusOr<RowGeometry> AxisRows(const KernelArgs& args, const graph::TensorType& x,
                                            int64_t* count) {
  if (x.dims.empty()) return KernelError(args, "the input must have rank >= 1");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, kernel_internal::IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, kernel_internal::NormalizeAxis(
                                              args, axis_attr, kernel_internal::Rank(x), "axis"));
  RowGeometry rows;
  rows.n = x.dims[axis];
  rows.inner = Product(x.dims, axis + 1, x.dims.size());
  *count = Product(x.dims, 0, axis) * rows.inner;
  return rows;
}

// A map from the normalised elements to a parameter that broadcasts to them.
inline absl::StatusOr<IndexMap> ParamMap(const KernelArgs& args, int in, const Dims& normalized) {
  const Dims& dims = args.input_types[in]->dims;
  if (!kernel_internal::BroadcastsTo(dims, normalized)) {
    return KernelError(args, absl::StrCat("parameter ", graph::DimsToString(dims),
                                          " does not broadcast to ",
                                          graph::DimsToString(normalized)));
  }
  return MakeIndexMap(args, normalized, kernel_internal::BroadcastStrides(dims, normalized));
}
}  // namespace rows_internal

template <class Backend>
absl::Status DeviceSoftmax(const Backend& be, const KernelArgs& args) {
  using namespace rows_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  const graph::TensorType& x = *args.input_types[0];
  if (x != *args.output_types[0]) return KernelError(args, "the output must have X's type");
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, 0, 0));
  int64_t count = 0;
  SoftmaxBody body;
  MG_ASSIGN_OR_RETURN(body.rows, AxisRows(args, x, &count));
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  return be.Launch(count, body);
}

template <class Backend>
absl::Status DeviceSoftmaxGradient(const Backend& be, const KernelArgs& args) {
  using namespace rows_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 2, 1, 1));
  const graph::TensorType& y = *args.input_types[0];
  if (*args.input_types[1] != y || *args.output_types[0] != y) {
    return KernelError(args, "Y, dY and dX must have one type");
  }
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, 0, 0));
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, 1, 0));
  int64_t count = 0;
  SoftmaxGradientBody body;
  MG_ASSIGN_OR_RETURN(body.rows, AxisRows(args, y, &count));
  MG_ASSIGN_OR_RETURN(body.y, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.dy, InputAt(args, 1));
  MG_ASSIGN_OR_RETURN(body.dx, OutputAt(args, 0));
  return be.Launch(count, body);
}

// ONNX LayerNormalization(X, Scale, [B]) -> Y, [Mean], [InvStdDev].
template <class Backend>
absl::Status DeviceLayerNormalization(const Backend& be, const KernelArgs& args) {
  using namespace rows_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 3, 1, 3));
  const graph::TensorType& x = *args.input_types[0];
  if (x != *args.output_types[0]) return KernelError(args, "Y must have X's type");
  if (x.dims.empty()) return KernelError(args, "X must have rank >= 1");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, kernel_internal::IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, kernel_internal::NormalizeAxis(
                                              args, axis_attr, kernel_internal::Rank(x), "axis"));
  MG_ASSIGN_OR_RETURN(const double epsilon, kernel_internal::FloatAttr(args, "epsilon", 1e-5));
  const int64_t rows = Product(x.dims, 0, axis);
  const Dims normalized(x.dims.begin() + axis, x.dims.end());
  MG_RETURN_IF_ERROR(CheckSameOrApart(args, 0, 0));
  for (int in = 1; in < static_cast<int>(args.inputs.size()); ++in) {
    MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, in, 0));
  }
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
      MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, in, out));
    }
  }
  LayerNormBody body{};
  body.n = Product(x.dims, axis, x.dims.size());
  body.epsilon = static_cast<float>(epsilon);
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  for (int in = 1; in < static_cast<int>(args.inputs.size()); ++in) {
    if (args.input_types[in]->dtype != x.dtype) {
      return KernelError(args, "Scale and B must have X's element type");
    }
  }
  MG_ASSIGN_OR_RETURN(body.scale, InputAt(args, 1));
  MG_ASSIGN_OR_RETURN(body.scale_map, ParamMap(args, 1, normalized));
  body.has_bias = args.inputs.size() == 3;
  if (body.has_bias) {
    MG_ASSIGN_OR_RETURN(body.bias, InputAt(args, 2));
    MG_ASSIGN_OR_RETURN(body.bias_map, ParamMap(args, 2, normalized));
  }
  // Omitted optional outputs: the importer records the kept outputs' positions.
  MG_ASSIGN_OR_RETURN(const std::optional<Dims> slots,
                      kernel_internal::IntsAttr(args, "onnx_output_slots"));
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    const int64_t slot =
        slots.has_value() && slots->size() == args.outputs.size() ? (*slots)[out] : out;
    if (NumElements(args.output_types[out]->dims) != rows) {
      return KernelError(args, absl::StrCat("output ", out, " must hold one value per row (",
                                            rows, ")"));
    }
    MG_ASSIGN_OR_RETURN(const Out stat, OutputAt(args, out));
    if (slot == 1) {
      body.mean = stat;
      body.has_mean = true;
    } else {
      body.inv_std = stat;
      body.has_inv_std = true;
    }
  }
  return be.Launch(rows, body);
}

// LayerNormalizationGradient(dY, X, Scale, Mean, InvStdDev) -> dX, dScale, [dB].
template <class Backend>
absl::Status DeviceLayerNormalizationGradient(const Backend& be, const KernelArgs& args) {
  using namespace rows_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 5, 5, 2, 3));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const graph::TensorType& x = *args.input_types[1];
  const graph::TensorType& ts = *args.input_types[2];
  if (*args.input_types[0] != x || *args.output_types[0] != x) {
    return KernelError(args, "dY and dX must have X's type");
  }
  if (x.dims.empty()) return KernelError(args, "X must have rank >= 1");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, kernel_internal::IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, kernel_internal::NormalizeAxis(
                                              args, axis_attr, kernel_internal::Rank(x), "axis"));
  const int64_t rows = Product(x.dims, 0, axis);
  const int64_t n = Product(x.dims, axis, x.dims.size());
  const Dims normalized(x.dims.begin() + axis, x.dims.end());
  for (int in : {3, 4}) {
    if (NumElements(args.input_types[in]->dims) != rows) {
      return KernelError(args, "Mean and InvStdDev must hold one value per row");
    }
  }
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    if (*args.output_types[out] != ts) {
      return KernelError(args, "dScale and dB must have Scale's type");
    }
  }
  LayerNormGradientBody dx_body{n};
  MG_ASSIGN_OR_RETURN(dx_body.dy, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(dx_body.x, InputAt(args, 1));
  MG_ASSIGN_OR_RETURN(dx_body.scale, InputAt(args, 2));
  MG_ASSIGN_OR_RETURN(dx_body.mean, InputAt(args, 3));
  MG_ASSIGN_OR_RETURN(dx_body.inv_std, InputAt(args, 4));
  MG_ASSIGN_OR_RETURN(dx_body.scale_map, ParamMap(args, 2, normalized));
  MG_ASSIGN_OR_RETURN(dx_body.dx, OutputAt(args, 0));
  if (n > 0) MG_RETURN_IF_ERROR(be.Launch(rows, dx_body));

  // Parameter gradients: per normalised element in float32, then onto Scale's dims.
  MG_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch,
                      be.Scratch(2 * std::max<int64_t>(n, 1) * int64_t{sizeof(float)}));
  LayerNormParamGradientBody param_body{rows, n, dx_body.dy, dx_body.x, dx_body.mean,
                                        dx_body.inv_std};
  param_body.dscale_full = static_cast<float*>(scratch.get());
  param_body.dbias_full = param_body.dscale_full + std::max<int64_t>(n, 1);
  MG_RETURN_IF_ERROR(be.Launch(n, param_body));
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    ReduceOntoParamBody reduce{n, out == 1 ? param_body.dscale_full : param_body.dbias_full,
                               dx_body.scale_map};
    MG_ASSIGN_OR_RETURN(reduce.param, OutputAt(args, out));
    MG_RETURN_IF_ERROR(be.Launch(NumElements(ts.dims), reduce));
  }
  return absl::OkStatus();
}

// ReduceSum(X, [axes]) -> Y. Axes from the attribute (Caffe2, ONNX < 13) or the int64 input
// (ONNX >= 13; copied to the host); keepdims (default 1); noop_with_empty_axes (default 0: no
// axes reduces everything).
template <class Backend>
absl::Status DeviceReduceSum(const Backend& be, const KernelArgs& args) {
  using namespace rows_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& y = *args.output_types[0];
  if (x.dtype != y.dtype) return KernelError(args, "the output must have X's element type");
  MG_ASSIGN_OR_RETURN(std::optional<Dims> axes, kernel_internal::IntsAttr(args, "axes"));
  if (args.inputs.size() == 2) {
    const graph::TensorType& ta = *args.input_types[1];
    if (ta.dtype != graph::DataType::kInt64) return KernelError(args, "axes must be int64");
    Dims from_input(static_cast<size_t>(NumElements(ta.dims)));
    MG_RETURN_IF_ERROR(be.ToHost(from_input.data(), args.inputs[1],
                                 static_cast<int64_t>(from_input.size() * sizeof(int64_t))));
    axes = std::move(from_input);
  }
  MG_ASSIGN_OR_RETURN(const int64_t noop, kernel_internal::IntAttr(args, "noop_with_empty_axes", 0));
  const int64_t rank = kernel_internal::Rank(x);
  std::vector<bool> reduce(static_cast<size_t>(rank), false);
  if (!axes.has_value() || axes->empty()) {
    if (noop != 0) {
      if (args.inputs[0] == args.outputs[0]) return absl::OkStatus();
      return be.Copy(args.outputs[0], args.inputs[0], kernel_internal::ByteSizeOf(x));
    }
    std::fill(reduce.begin(), reduce.end(), true);
  } else {
    for (int64_t a : *axes) {
      MG_ASSIGN_OR_RETURN(const int64_t axis, kernel_internal::NormalizeAxis(args, a, rank, "axis"));
      reduce[axis] = true;
    }
  }
  const Dims strides = kernel_internal::Strides(x.dims);
  Dims kept_dims, kept_strides, reduced_dims, reduced_strides;
  for (int64_t d = 0; d < rank; ++d) {
    (reduce[d] ? reduced_dims : kept_dims).push_back(x.dims[d]);
    (reduce[d] ? reduced_strides : kept_strides).push_back(strides[d]);
  }
  const int64_t out_count = NumElements(kept_dims);
  if (NumElements(y.dims) != out_count) {
    return KernelError(args, absl::StrCat("the output ", graph::TensorTypeToString(y),
                                          " does not hold the reduction's ", out_count,
                                          " elements"));
  }
  ReduceSumBody body;
  MG_ASSIGN_OR_RETURN(body.kept, MakeIndexMap(args, kept_dims, kept_strides));
  MG_ASSIGN_OR_RETURN(body.reduced, MakeIndexMap(args, reduced_dims, reduced_strides));
  body.count = NumElements(reduced_dims);
  MG_ASSIGN_OR_RETURN(body.x, InputAt(args, 0));
  MG_ASSIGN_OR_RETURN(body.y, OutputAt(args, 0));
  return be.Launch(out_count, body);
}

template <class Backend>
void AddDeviceRowKernels(absl::flat_hash_map<std::string, Kernel>& kernels,
                         std::shared_ptr<const Backend> be) {
  kernels["Softmax"] = [be](const KernelArgs& a) { return DeviceSoftmax(*be, a); };
  kernels["SoftmaxGradient"] = [be](const KernelArgs& a) { return DeviceSoftmaxGradient(*be, a); };
  kernels["LayerNormalization"] = [be](const KernelArgs& a) {
    return DeviceLayerNormalization(*be, a);
  };
  kernels["LayerNormalizationGradient"] = [be](const KernelArgs& a) {
    return DeviceLayerNormalizationGradient(*be, a);
  };
  kernels["ReduceSum"] = [be](const KernelArgs& a) { return DeviceReduceSum(*be, a); };
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_ROWS_H_

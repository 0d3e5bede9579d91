// Row-wise normalisation CPU kernels: Softmax, LogSoftmax (one axis), LayerNormalization
// (ONNX: normalised over the dims from `axis`, optional Mean/InvStdDev outputs) and Caffe2's
// LayerNorm (Y, mean, std); InstanceNormalization (per image and channel).
//
// Each row is read into a float32 (float64 for float64 data) buffer before any of it is
// written, so Y may share its memory exactly with X (in place). Other overlaps are refused.
//
// Softmax's axis: when the attribute is absent it is -1 (ONNX opset >= 13). ONNX before opset 13
// and Caffe2 default to 1 and flatten the input into [prod(dims[:axis]), prod(dims[axis:])];
// the graph does not record the opset, so such nets must give the axis (for 2-D inputs the two
// readings agree), and with an explicit axis we normalise over that one axis (opset 13).
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::DataType;
using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

// Output `out` may equal input `in` (row buffers make that safe) but not partly overlap it.
absl::Status CheckRowAlias(const KernelArgs& args, int in, int out) {
  if (args.inputs[in] == args.outputs[out] &&
      ByteSizeOf(*args.input_types[in]) == ByteSizeOf(*args.output_types[out])) {
    return absl::OkStatus();
  }
  return CheckNoOverlap(args, in, out);
}

Kernel SoftmaxKernel(bool log) {
  return [log](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
    const TensorType& x = *args.input_types[0];
    if (x != *args.output_types[0]) return KernelError(args, "the output must have X's type");
    MG_RETURN_IF_ERROR(CheckRowAlias(args, 0, 0));
    MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", -1));
    if (x.dims.empty()) return KernelError(args, "X must have rank >= 1");
    MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
    const int64_t outer = Product(x.dims, 0, axis);
    const int64_t n = x.dims[axis];
    const int64_t inner = Product(x.dims, axis + 1, x.dims.size());
    return DispatchFloat(args, x.dtype, [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      using C = Compute<T>;
      const T* in = reinterpret_cast<const T*>(args.inputs[0]);
      T* out = reinterpret_cast<T*>(args.outputs[0]);
      std::vector<C> row(static_cast<size_t>(n));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * n * inner + i;
          C max = -std::numeric_limits<C>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            row[j] = Load(in[base + j * inner]);
            max = row[j] > max ? row[j] : max;
          }
          // A row of -inf (everything masked) would give exp(nan): keep max finite.
          if (std::isinf(max)) max = 0;
          C sum = 0;
          for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - max);
          if (log) {
            const C log_sum = std::log(sum);
            for (int64_t j = 0; j < n; ++j) out[base + j * inner] = Store<T>(row[j] - max - log_sum);
          } else {
            const C scale = C(1) / sum;
            for (int64_t j = 0; j < n; ++j) {
              out[base + j * inner] = Store<T>(std::exp(row[j] - max) * scale);
            }
          }
        }
      }
      return absl::OkStatus();
    });
  };
}

// Stores one float statistic into a float tensor of any floating type.
template <typename S>
void StoreStat(std::byte* base, int64_t i, double v) {
  reinterpret_cast<S*>(base)[i] = Store<S>(static_cast<Compute<S>>(v));
}
using StoreStatFn = void (*)(std::byte*, int64_t, double);
StoreStatFn StoreStatFor(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return StoreStat<float>;
    case DataType::kFloat16: return StoreStat<Half>;
    case DataType::kBFloat16: return StoreStat<BFloat16>;
    case DataType::kFloat64: return StoreStat<double>;
    default: return nullptr;
  }
}

// Shared by ONNX LayerNormalization and Caffe2 LayerNorm: rows of `n` elements, optional
// affine parameters (read with `param_strides` over the normalised dims), and per-row
// statistics written through `mean_out` / `stat_out` (inverse std or std).
struct NormSpec {
  int64_t rows = 0;
  int64_t n = 0;
  double epsilon = 1e-5;
  Dims normalized;           // dims being normalised (for parameter broadcasting)
  int scale_input = -1;      // -1: none
  int bias_input = -1;
  int mean_output = -1;
  int stat_output = -1;
  bool stat_is_std = false;  // Caffe2: std; ONNX: 1 / std
};

absl::Status RunNorm(const KernelArgs& args, const NormSpec& spec) {
  const TensorType& x = *args.input_types[0];
  MG_RETURN_IF_ERROR(CheckRowAlias(args, 0, 0));
  for (int in = 1; in < static_cast<int>(args.inputs.size()); ++in) {
    MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, 0));
  }
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    for (int in = 0; in < static_cast<int>(args.inputs.size()); ++in) {
      MG_RETURN_IF_ERROR(CheckNoOverlap(args, in, out));
    }
  }
  StoreStatFn store_mean = nullptr;
  StoreStatFn store_stat = nullptr;
  if (spec.mean_output >= 0) {
    store_mean = StoreStatFor(args.output_types[spec.mean_output]->dtype);
    if (store_mean == nullptr) return KernelError(args, "Mean must be floating-point");
  }
  if (spec.stat_output >= 0) {
    store_stat = StoreStatFor(args.output_types[spec.stat_output]->dtype);
    if (store_stat == nullptr) return KernelError(args, "the deviation output must be floating-point");
  }
  Dims scale_strides, bias_strides;
  for (int which : {spec.scale_input, spec.bias_input}) {
    if (which < 0) continue;
    const TensorType& p = *args.input_types[which];
    if (p.dtype != x.dtype || !BroadcastsTo(p.dims, spec.normalized)) {
      return KernelError(args, absl::StrCat("parameter ", graph::TensorTypeToString(p),
                                            " must have X's element type and broadcast to ",
                                            graph::DimsToString(spec.normalized)));
    }
    (which == spec.scale_input ? scale_strides : bias_strides) =
        BroadcastStrides(p.dims, spec.normalized);
  }
  return DispatchFloat(args, x.dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T* in = reinterpret_cast<const T*>(args.inputs[0]);
    T* out = reinterpret_cast<T*>(args.outputs[0]);
    // Parameters expanded to the normalised dims once (they broadcast to them).
    auto expand = [&](int which, const Dims& strides, C fallback) {
      std::vector<C> values(static_cast<size_t>(spec.n), fallback);
      if (which < 0) return values;
      const T* p = reinterpret_cast<const T*>(args.inputs[which]);
      const Dims own = Strides(spec.normalized);
      for (int64_t j = 0; j < spec.n; ++j) {
        int64_t offset = 0;
        int64_t rest = j;
        for (size_t d = 0; d < own.size(); ++d) {
          offset += (rest / own[d]) * strides[d];
          rest %= own[d];
        }
        values[j] = Load(p[offset]);
      }
      return values;
    };
    const std::vector<C> scale = expand(spec.scale_input, scale_strides, C(1));
    const std::vector<C> bias = expand(spec.bias_input, bias_strides, C(0));
    std::vector<C> row(static_cast<size_t>(spec.n));
    for (int64_t r = 0; r < spec.rows; ++r) {
      const T* xr = in + r * spec.n;
      C sum = 0;
      for (int64_t j = 0; j < spec.n; ++j) {
        row[j] = Load(xr[j]);
        sum += row[j];
      }
      const C mean = spec.n > 0 ? sum / static_cast<C>(spec.n) : C(0);
      C sq = 0;
      for (int64_t j = 0; j < spec.n; ++j) sq += (row[j] - mean) * (row[j] - mean);
      const C var = spec.n > 0 ? sq / static_cast<C>(spec.n) : C(0);
      const C std_dev = std::sqrt(var + static_cast<C>(spec.epsilon));
      const C inv = C(1) / std_dev;
      T* yr = out + r * spec.n;
      for (int64_t j = 0; j < spec.n; ++j) yr[j] = Store<T>((row[j] - mean) * inv * scale[j] + bias[j]);
      if (store_mean != nullptr) store_mean(args.outputs[spec.mean_output], r, mean);
      if (store_stat != nullptr) {
        store_stat(args.outputs[spec.stat_output], r, spec.stat_is_std ? std_dev : inv);
      }
    }
    return absl::OkStatus();
  });
}

// ONNX LayerNormalization(X, Scale, [B]) -> Y, [Mean], [InvStdDev].
absl::Status LayerNormalization(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 2, 3, 1, 3));
  const TensorType& x = *args.input_types[0];
  if (x != *args.output_types[0]) return KernelError(args, "Y must have X's type");
  if (x.dims.empty()) return KernelError(args, "X must have rank >= 1");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", -1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
  NormSpec spec;
  MG_ASSIGN_OR_RETURN(spec.epsilon, FloatAttr(args, "epsilon", 1e-5));
  spec.rows = Product(x.dims, 0, axis);
  spec.n = Product(x.dims, axis, x.dims.size());
  spec.normalized.assign(x.dims.begin() + axis, x.dims.end());
  spec.scale_input = 1;
  spec.bias_input = args.inputs.size() > 2 ? 2 : -1;
  // Omitted optional outputs: the importer records the kept outputs' positions.
  MG_ASSIGN_OR_RETURN(const std::optional<Dims> slots, IntsAttr(args, "onnx_output_slots"));
  for (int out = 1; out < static_cast<int>(args.outputs.size()); ++out) {
    const int64_t slot = slots.has_value() && slots->size() == args.outputs.size() ? (*slots)[out] : out;
    if (NumElements(args.output_types[out]->dims) != spec.rows) {
      return KernelError(args, absl::StrCat("output ", out, " must hold one value per row (",
                                            spec.rows, ")"));
    }
    (slot == 1 ? spec.mean_output : spec.stat_output) = out;
  }
  return RunNorm(args, spec);
}

// Caffe2 LayerNorm(X, [gamma, beta]) -> Y, mean, std over X flattened at `axis` (default 1).
absl::Status Caffe2LayerNorm(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 3, 3, 3));
  const TensorType& x = *args.input_types[0];
  if (x != *args.output_types[0]) return KernelError(args, "Y must have X's type");
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, IntAttr(args, "axis", 1));
  MG_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(args, axis_attr, Rank(x), "axis"));
  NormSpec spec;
  MG_ASSIGN_OR_RETURN(spec.epsilon, FloatAttr(args, "epsilon", 1e-5));
  spec.rows = Product(x.dims, 0, axis);
  spec.n = Product(x.dims, axis, x.dims.size());
  spec.normalized = {spec.n};
  if (args.inputs.size() == 2) return KernelError(args, "gamma needs beta");
  if (args.inputs.size() == 3) {
    for (int in : {1, 2}) {
      if (NumElements(args.input_types[in]->dims) != spec.n) {
        return KernelError(args, "gamma and beta must hold one value per normalised element");
      }
    }
    spec.scale_input = 1;
    spec.bias_input = 2;
  }
  for (int out : {1, 2}) {
    if (NumElements(args.output_types[out]->dims) != spec.rows) {
      return KernelError(args, absl::StrCat("output ", out, " must hold one value per row (",
                                            spec.rows, ")"));
    }
  }
  spec.mean_output = 1;
  spec.stat_output = 2;
  spec.stat_is_std = true;
  // gamma/beta are flat [n]: read them as such.
  return RunNorm(args, spec);
}

// InstanceNormalization(X [N, C, spatial...], scale [C], B [C]) -> Y: each (image, channel)
// plane normalised by its own mean and biased variance, then scaled and shifted per channel:
// y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c] (epsilon default 1e-5). Each plane is
// read into a float32 buffer first and its statistics summed in float64, so Y may be X exactly.
absl::Status InstanceNormalization(const KernelArgs& args) {
  MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
  const TensorType& x = *args.input_types[0];
  if (x.dims.size() < 3) return KernelError(args, "X must have rank 3 or more [N, C, ...]");
  const int64_t n = x.dims[0], c = x.dims[1];
  const int64_t plane = Product(x.dims, 2, x.dims.size());
  for (int i = 1; i <= 2; ++i) {
    if (args.input_types[i]->dims != Dims{c}) {
      return KernelError(args, absl::StrCat(i == 1 ? "scale" : "B", " must have dims [", c,
                                            "]"));
    }
  }
  if (args.output_types[0]->dims != x.dims) return KernelError(args, "Y must have X's dims");
  MG_RETURN_IF_ERROR(CheckRowAlias(args, 0, 0));
  MG_RETURN_IF_ERROR(CheckNoOverlap(args, 1, 0));
  MG_RETURN_IF_ERROR(CheckNoOverlap(args, 2, 0));
  MG_ASSIGN_OR_RETURN(const double epsilon, FloatAttr(args, "epsilon", 1e-5));
  MG_ASSIGN_OR_RETURN(FloatLoader load_x, LoaderFor(args, x));
  MG_ASSIGN_OR_RETURN(FloatLoader load_scale, LoaderFor(args, *args.input_types[1]));
  MG_ASSIGN_OR_RETURN(FloatLoader load_b, LoaderFor(args, *args.input_types[2]));
  MG_ASSIGN_OR_RETURN(FloatStorer store_y, StorerFor(args, *args.output_types[0]));
  const std::vector<float> scale = load_scale.Run(args.inputs[1], 0, c);
  const std::vector<float> shift = load_b.Run(args.inputs[2], 0, c);
  std::vector<float> values(static_cast<size_t>(plane));
  for (int64_t p = 0; p < n * c; ++p) {
    if (plane == 0) break;
    load_x.run(args.inputs[0], p * plane, plane, values.data());
    double sum = 0;
    for (float v : values) sum += v;
    const double mean = sum / static_cast<double>(plane);
    double squares = 0;
    for (float v : values) squares += (v - mean) * (v - mean);
    const double var = squares / static_cast<double>(plane);
    const double inv_std = 1.0 / std::sqrt(var + epsilon);
    const int64_t ch = p % c;
    for (float& v : values) {
      v = static_cast<float>(scale[ch] * ((v - mean) * inv_std) + shift[ch]);
    }
    store_y.run(args.outputs[0], p * plane, plane, values.data());
  }
  return absl::OkStatus();
}

}  // namespace

void AddCpuNnKernels(KernelMap& kernels) {
  kernels["InstanceNormalization"] = InstanceNormalization;
  kernels["Softmax"] = SoftmaxKernel(/*log=*/false);
  kernels["LogSoftmax"] = SoftmaxKernel(/*log=*/true);
  kernels["LayerNormalization"] = LayerNormalization;
  kernels["LayerNorm"] = Caffe2LayerNorm;
}

}  // namespace memonger::alloc

// Pooling CPU kernels (NCHW, 1 to 3 spatial dims; kernel_window.h reads the attributes):
//   MaxPool(X) -> Y            the maximum of the window's elements inside X (padding never
//                              wins); ONNX's optional indices output is Unimplemented
//   AveragePool(X) -> Y        the mean of the window's elements inside X; count_include_pad=1
//                              (ONNX) divides by the kernel size instead
//   MaxPoolGradient(X, Y, dY) -> dX      dY goes to the first element of the window (in
//                              row-major order) equal to Y; Caffe2 gives it to every element
//                              equal to Y, which double-counts ties: one argmax is the
//                              gradient of the forward op, so we route to one
//   AveragePoolGradient(X, Y, dY) -> dX  dY / count to each element the forward averaged
//   GlobalAveragePool(X) -> Y, GlobalMaxPool(X) -> Y   X [N, C, d1, ...] to Y [N, C, 1, ...]: the
//                              mean (summed in float64, rounded once) or the maximum of each
//                              plane; a plane of no elements is refused
// Storage float32, float16, bfloat16, float64; comparisons and sums in float32 (float64 for
// float64 through float32 loads: the pooling kernels use the shared float32 views). Windows
// are visited in order; the gradients accumulate per input plane in float32 and are rounded
// once. Outputs must not overlap inputs (FailedPrecondition).
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_float_io.h"
#include "kernels/cpu/kernel_window.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

using graph::TensorType;
using namespace kernel_internal;  // NOLINT: the helpers of every kernel file

enum class PoolKind { kMax, kAverage };

// Calls visit(p, offsets) for each output position p of a plane with the in-bounds input
// offsets of its window (row-major window order).
template <typename Visit>
void ForEachWindow(const WindowGeometry& w, Visit&& visit) {
  std::vector<int64_t> offsets;
  offsets.reserve(static_cast<size_t>(w.kernel_size()));
  int64_t p = 0;
  for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
    for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
      for (int64_t o2 = 0; o2 < w.out[2]; ++o2, ++p) {
        offsets.clear();
        for (int64_t k0 = 0; k0 < w.kernel[0]; ++k0) {
          const int64_t i0 = o0 * w.stride[0] - w.pad[0] + k0 * w.dilation[0];
          if (i0 < 0 || i0 >= w.in[0]) continue;
          for (int64_t k1 = 0; k1 < w.kernel[1]; ++k1) {
            const int64_t i1 = o1 * w.stride[1] - w.pad[1] + k1 * w.dilation[1];
            if (i1 < 0 || i1 >= w.in[1]) continue;
            for (int64_t k2 = 0; k2 < w.kernel[2]; ++k2) {
              const int64_t i2 = o2 * w.stride[2] - w.pad[2] + k2 * w.dilation[2];
              if (i2 < 0 || i2 >= w.in[2]) continue;
              offsets.push_back((i0 * w.in[1] + i1) * w.in[2] + i2);
            }
          }
        }
        visit(p, offsets);
      }
    }
  }
}

absl::StatusOr<bool> IncludePad(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(const int64_t v, IntAttr(args, "count_include_pad", 0));
  return v != 0;
}

Kernel PoolKernel(PoolKind kind) {
  return [kind](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 2));
    if (args.outputs.size() == 2) {
      return KernelUnimplemented(args, "the indices output of MaxPool is not implemented");
    }
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
    const TensorType& x = *args.input_types[0];
    const TensorType& y = *args.output_types[0];
    if (y.dtype != x.dtype) return KernelError(args, "Y must have X's element type");
    MG_ASSIGN_OR_RETURN(const WindowGeometry w, ReadWindowGeometry(args, x, std::nullopt, y.dims));
    if (y.dims[1] != w.channels) return KernelError(args, "Y must have X's channels");
    MG_ASSIGN_OR_RETURN(const bool include_pad, IncludePad(args));
    MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
    MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, y));
    std::vector<float> out(static_cast<size_t>(w.out_size()));
    for (int64_t plane = 0; plane < w.batch * w.channels; ++plane) {
      const std::vector<float> in = load.Run(args.inputs[0], plane * w.in_size(), w.in_size());
      ForEachWindow(w, [&](int64_t p, const std::vector<int64_t>& offsets) {
        if (kind == PoolKind::kMax) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t o : offsets) m = in[o] > m ? in[o] : m;
          out[p] = m;
        } else {
          float sum = 0.0f;
          for (int64_t o : offsets) sum += in[o];
          const int64_t count = include_pad ? w.kernel_size() : static_cast<int64_t>(offsets.size());
          out[p] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
        }
      });
      store.run(args.outputs[0], plane * w.out_size(), w.out_size(), out.data());
    }
    return absl::OkStatus();
  };
}

Kernel PoolGradientKernel(PoolKind kind) {
  return [kind](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 3, 3, 1, 1));
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
    const TensorType& x = *args.input_types[0];
    const TensorType& y = *args.input_types[1];
    if (*args.input_types[2] != y || y.dtype != x.dtype || *args.output_types[0] != x) {
      return KernelError(args, "Y and dY must have one type, X's element type; dX X's type");
    }
    MG_ASSIGN_OR_RETURN(const WindowGeometry w, ReadWindowGeometry(args, x, std::nullopt, y.dims));
    if (y.dims[1] != w.channels) return KernelError(args, "Y must have X's channels");
    MG_ASSIGN_OR_RETURN(const bool include_pad, IncludePad(args));
    MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
    MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, x));
    std::vector<float> dx(static_cast<size_t>(w.in_size()));
    for (int64_t plane = 0; plane < w.batch * w.channels; ++plane) {
      const std::vector<float> dy = load.Run(args.inputs[2], plane * w.out_size(), w.out_size());
      std::vector<float> in, yv;
      if (kind == PoolKind::kMax) {
        in = load.Run(args.inputs[0], plane * w.in_size(), w.in_size());
        yv = load.Run(args.inputs[1], plane * w.out_size(), w.out_size());
      }
      std::fill(dx.begin(), dx.end(), 0.0f);
      ForEachWindow(w, [&](int64_t p, const std::vector<int64_t>& offsets) {
        if (kind == PoolKind::kMax) {
          for (int64_t o : offsets) {
            if (in[o] == yv[p]) {
              dx[o] += dy[p];
              break;
            }
          }
        } else {
          const int64_t count = include_pad ? w.kernel_size() : static_cast<int64_t>(offsets.size());
          if (count == 0) return;
          const float g = dy[p] / static_cast<float>(count);
          for (int64_t o : offsets) dx[o] += g;
        }
      });
      store.run(args.outputs[0], plane * w.in_size(), w.in_size(), dx.data());
    }
    return absl::OkStatus();
  };
}

Kernel GlobalPoolKernel(PoolKind kind) {
  return [kind](const KernelArgs& args) -> absl::Status {
    MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
    MG_RETURN_IF_ERROR(CheckNoOverlapAll(args));
    const TensorType& x = *args.input_types[0];
    const TensorType& y = *args.output_types[0];
    if (x.dims.size() < 2 || y.dtype != x.dtype || y.dims.size() != x.dims.size() ||
        y.dims[0] != x.dims[0] || y.dims[1] != x.dims[1]) {
      return KernelError(args, "X must be [N, C, ...] and Y [N, C, 1, ...] of X's element type");
    }
    int64_t plane = 1;
    for (size_t d = 2; d < x.dims.size(); ++d) {
      if (y.dims[d] != 1) return KernelError(args, "Y's spatial dims must be 1");
      plane *= x.dims[d];
    }
    const int64_t planes = x.dims[0] * x.dims[1];
    if (plane == 0 && planes > 0) return KernelError(args, "X has planes of no elements");
    MG_ASSIGN_OR_RETURN(const FloatLoader load, LoaderFor(args, x));
    MG_ASSIGN_OR_RETURN(const FloatStorer store, StorerFor(args, y));
    std::vector<float> out(static_cast<size_t>(planes));
    for (int64_t p = 0; p < planes; ++p) {
      const std::vector<float> in = load.Run(args.inputs[0], p * plane, plane);
      if (kind == PoolKind::kMax) {
        out[p] = *std::max_element(in.begin(), in.end());
      } else {
        double sum = 0;
        for (float v : in) sum += v;
        out[p] = static_cast<float>(sum / static_cast<double>(plane));
      }
    }
    if (planes > 0) store.run(args.outputs[0], 0, planes, out.data());
    return absl::OkStatus();
  };
}

}  // namespace

void AddCpuPoolKernels(KernelMap& kernels) {
  kernels["GlobalAveragePool"] = GlobalPoolKernel(PoolKind::kAverage);
  kernels["GlobalMaxPool"] = GlobalPoolKernel(PoolKind::kMax);
  for (const char* type : {"MaxPool", "MaxPool1D", "MaxPool2D", "MaxPool3D"}) {
    kernels[type] = PoolKernel(PoolKind::kMax);
  }
  for (const char* type : {"AveragePool", "AveragePool1D", "AveragePool2D", "AveragePool3D"}) {
    kernels[type] = PoolKernel(PoolKind::kAverage);
  }
  for (const char* type : {"MaxPoolGradient", "MaxPool1DGradient", "MaxPool2DGradient",
                           "MaxPool3DGradient"}) {
    kernels[type] = PoolGradientKernel(PoolKind::kMax);
  }
  for (const char* type : {"AveragePoolGradient", "AveragePool1DGradient",
                           "AveragePool2DGradient", "AveragePool3DGradient"}) {
    kernels[type] = PoolGradientKernel(PoolKind::kAverage);
  }
}

}  // namespace memonger::alloc

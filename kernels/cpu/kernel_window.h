// The geometry of a sliding window (Conv, MaxPool, AveragePool and their gradients) for the CPU
// kernels: the attributes in every spelling graph/schema_util.cc accepts (ONNX kernel_shape,
// strides, dilations, pads, auto_pad, ceil_mode; Caffe2 kernel(s), stride(s), pad(s),
// kernel_h/_w, stride_h/_w, pad_t/_l/_b/_r, legacy_pad, global_pooling), resolved to per-dim
// begin pads, and checked against the output dims that shape inference gave the op.
//
//   MG_ASSIGN_OR_RETURN(WindowGeometry g, ReadWindowGeometry(args, x, w_kernel, y.dims));
//   for each output position o and kernel tap t: input position o * stride - pad + t * dilation
//
// NCHW only (order NHWC is Unimplemented), 1 to 3 spatial dims. Spatial vectors are widened to
// three dims with leading 1s so kernels loop over (d, h, w) for every rank.
// Not part of the library's interface (kernel_internal).
#ifndef MEMONGER_KERNELS_CPU_KERNEL_WINDOW_H_
#define MEMONGER_KERNELS_CPU_KERNEL_WINDOW_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "graph/tensor_type.h"
#include "kernels/kernel_util.h"

namespace memonger::alloc::kernel_internal {

struct WindowGeometry {
  int64_t batch = 0;
  int64_t channels = 0;
  // Three entries each, outermost first; unused leading dims are 1 (size, kernel, stride,
  // dilation) and 0 (pad).
  std::array<int64_t, 3> in{1, 1, 1};
  std::array<int64_t, 3> out{1, 1, 1};
  std::array<int64_t, 3> kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1};
  std::array<int64_t, 3> dilation{1, 1, 1};
  std::array<int64_t, 3> pad{0, 0, 0};  // begin pads (end pads only shape the output)

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// `x`: the op's input [N, C, spatial...]. `kernel`: Conv passes W's spatial dims (a kernel
// attribute must then agree); pooling passes nullopt and the kernel comes from the attributes
// (or is the whole input with global_pooling=1). `y_dims`: the output's dims [N, C', out...],
// which must be what the attributes give (else InvalidArgument).
absl::StatusOr<WindowGeometry> ReadWindowGeometry(const KernelArgs& args,
                                                  const graph::TensorType& x,
                                                  const std::optional<Dims>& kernel,
                                                  const Dims& y_dims);

}  // namespace memonger::alloc::kernel_internal

#endif  // MEMONGER_KERNELS_CPU_KERNEL_WINDOW_H_

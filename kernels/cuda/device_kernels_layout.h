// Device kernels, layout family: ops that move elements without arithmetic.
//   Transpose (perm, default reversed), Expand (numpy broadcast to the inferred dims): one thread
//   per output element, elements of 1, 2, 4 or 8 bytes;
//   Concat / Split (axis; ONNX default 0, Caffe2's `order`): one strided 2-D copy per input or
//   output (cudaMemcpy2D on the GPU); piece sizes come from the inferred types;
//   PadLastDim (multiple): a 2-D copy of the rows and a 2-D zero fill of the padding.
// Semantics are the CPU kernels' (kernels_cpu_tensor.cc, kernels_cpu_attention_bias.cc), except
// that Concat's Caffe2 split_info output and Split without an axis on Caffe2 nets run on the
// CPU kernels only (Unimplemented here). Outputs must not overlap inputs.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_LAYOUT_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_LAYOUT_H_

#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/device_kernel_util.h"

namespace memonger::alloc::device {

// y[i] = x[map.Offset(i)], elements of `width` bytes (1, 2, 4 or 8).
struct GatherBody {
  const void* x{};
  void* y{};
  int width{};
  IndexMap map{};
  MG_HD void operator()(int64_t i) const {
    const int64_t from = map.Offset(i);
    switch (width) {
      case 1: static_cast<uint8_t*>(y)[i] = static_cast<const uint8_t*>(x)[from]; break;
      case 2: static_cast<uint16_t*>(y)[i] = static_cast<const uint16_t*>(x)[from]; break;
      case 4: static_cast<uint32_t*>(y)[i] = static_cast<const uint32_t*>(x)[from]; break;
      default: static_cast<uint64_t*>(y)[i] = static_cast<const uint64_t*>(x)[from]; break;
    }
  }
};

namespace layout_internal {
using kernel_internal::CheckArity;
using kernel_internal::KernelError;
using kernel_internal::KernelUnimplemented;
using kernel_internal::NumElements;
using kernel_internal::Product;

// Bytes per row of `t` split at `axis` into outer x row.
inline int64_t RowBytes(const graph::TensorType& t, int64_t outer) {
  return outer > 0 ? kernel_internal::ByteSizeOf(t) / outer : 0;
}

// ONNX's axis, or Caffe2's `order` (NCHW: 1, NHWC: 3).
inline absl::StatusOr<int64_t> AxisAttr(const KernelArgs& args) {
  MG_ASSIGN_OR_RETURN(const std::optional<int64_t> axis, kernel_internal::OptionalIntAttr(args, "axis"));
  if (axis.has_value()) return *axis;
  MG_ASSIGN_OR_RETURN(const std::optional<std::string> order,
                      kernel_internal::StringAttr(args, "order"));
  if (order.has_value()) return (*order == "NHWC" || *order == "nhwc") ? 3 : 1;
  return KernelUnimplemented(args, "without an axis attribute (ONNX's default 0 or Caffe2's 1 "
                                   "is ambiguous here) the op runs on the CPU kernels only");
}
}  // namespace layout_internal

template <class Backend>
absl::Status DeviceTranspose(const Backend& be, const KernelArgs& args) {
  using namespace layout_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlap(args, 0, 0));
  const graph::TensorType& x = *args.input_types[0];
  MG_ASSIGN_OR_RETURN(const kernel_internal::TransposeGeometry g,
                      kernel_internal::ResolveTranspose(args, x));
  const Dims& out_dims = g.out_dims;
  const Dims& in_strides = g.in_strides;
  if (out_dims != args.output_types[0]->dims || args.output_types[0]->dtype != x.dtype) {
    return KernelError(args, "the output's type does not match perm");
  }
  const int width = static_cast<int>(graph::DataTypeSize(x.dtype));
  if (width != 1 && width != 2 && width != 4 && width != 8) {
    return KernelUnimplemented(args, "elements of 1, 2, 4 or 8 bytes only");
  }
  GatherBody body{args.inputs[0], args.outputs[0], width};
  MG_ASSIGN_OR_RETURN(body.map, MakeIndexMap(args, out_dims, in_strides));
  return be.Launch(NumElements(out_dims), body);
}

// Expand(X, shape) -> Y: X broadcast (numpy) to Y's inferred dims; the shape input is not read.
template <class Backend>
absl::Status DeviceExpand(const Backend& be, const KernelArgs& args) {
  using namespace layout_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& y = *args.output_types[0];
  if (x.dtype != y.dtype || !kernel_internal::BroadcastsTo(x.dims, y.dims)) {
    return KernelError(args, absl::StrCat(graph::TensorTypeToString(x), " does not broadcast to ",
                                          graph::TensorTypeToString(y)));
  }
  const int width = static_cast<int>(graph::DataTypeSize(x.dtype));
  if (width != 1 && width != 2 && width != 4 && width != 8) {
    return KernelUnimplemented(args, "elements of 1, 2, 4 or 8 bytes only");
  }
  GatherBody body{args.inputs[0], args.outputs[0], width};
  MG_ASSIGN_OR_RETURN(body.map,
                      MakeIndexMap(args, y.dims, kernel_internal::BroadcastStrides(x.dims, y.dims)));
  return be.Launch(NumElements(y.dims), body);
}

template <class Backend>
absl::Status DeviceConcat(const Backend& be, const KernelArgs& args) {
  using namespace layout_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, -1, 1, 2));
  if (args.outputs.size() == 2) {
    return KernelUnimplemented(args, "Caffe2's split_info output runs on the CPU kernels only");
  }
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& y = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, AxisAttr(args));
  MG_ASSIGN_OR_RETURN(const int64_t axis, kernel_internal::NormalizeAxis(
                                              args, axis_attr, kernel_internal::Rank(y), "axis"));
  const int64_t outer = Product(y.dims, 0, axis);
  const int64_t out_row = RowBytes(y, outer);
  int64_t offset = 0;
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const graph::TensorType& t = *args.input_types[i];
    if (t.dtype != y.dtype) return KernelError(args, "every input must have the output's type");
    const int64_t chunk = RowBytes(t, outer);
    if (chunk * outer != kernel_internal::ByteSizeOf(t) || offset + chunk > out_row) {
      return KernelError(args, absl::StrCat("input ", i, " ", graph::TensorTypeToString(t),
                                            " does not fit the output ",
                                            graph::TensorTypeToString(y), " at axis ", axis));
    }
    if (chunk > 0 && outer > 0) {
      MG_RETURN_IF_ERROR(be.Copy2D(args.outputs[0] + offset, out_row, args.inputs[i], chunk,
                                   chunk, outer));
    }
    offset += chunk;
  }
  if (offset != out_row) return KernelError(args, "the inputs do not fill the output");
  return absl::OkStatus();
}

template <class Backend>
absl::Status DeviceSplit(const Backend& be, const KernelArgs& args) {
  using namespace layout_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 2, 1, -1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  MG_RETURN_IF_ERROR(CheckOutputsApart(args));
  const graph::TensorType& x = *args.input_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t axis_attr, AxisAttr(args));
  MG_ASSIGN_OR_RETURN(const int64_t axis, kernel_internal::NormalizeAxis(
                                              args, axis_attr, kernel_internal::Rank(x), "axis"));
  const int64_t outer = Product(x.dims, 0, axis);
  const int64_t in_row = RowBytes(x, outer);
  int64_t offset = 0;
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    const graph::TensorType& t = *args.output_types[i];
    if (t.dtype != x.dtype) return KernelError(args, "every output must have the input's type");
    const int64_t chunk = RowBytes(t, outer);
    if (chunk * outer != kernel_internal::ByteSizeOf(t) || offset + chunk > in_row) {
      return KernelError(args, absl::StrCat("output ", i, " ", graph::TensorTypeToString(t),
                                            " is not a piece of the input ",
                                            graph::TensorTypeToString(x), " at axis ", axis));
    }
    if (chunk > 0 && outer > 0) {
      MG_RETURN_IF_ERROR(be.Copy2D(args.outputs[i], chunk, args.inputs[0] + offset, in_row,
                                   chunk, outer));
    }
    offset += chunk;
  }
  if (offset != in_row) return KernelError(args, "the outputs do not cover the input");
  return absl::OkStatus();
}

template <class Backend>
absl::Status DevicePadLastDim(const Backend& be, const KernelArgs& args) {
  using namespace layout_internal;  // NOLINT
  MG_RETURN_IF_ERROR(CheckArity(args, 1, 1, 1, 1));
  MG_RETURN_IF_ERROR(kernel_internal::CheckNoOverlapAll(args));
  const graph::TensorType& x = *args.input_types[0];
  const graph::TensorType& y = *args.output_types[0];
  MG_ASSIGN_OR_RETURN(const int64_t multiple, kernel_internal::IntAttr(args, "multiple", 0));
  if (multiple < 1) return KernelError(args, absl::StrCat("multiple ", multiple, " must be at least 1"));
  if (x.dims.empty()) return KernelError(args, "X must have rank >= 1");
  graph::TensorType expected = x;
  expected.dims.back() = (x.dims.back() + multiple - 1) / multiple * multiple;
  if (y != expected) {
    return KernelError(args, absl::StrCat("Y must be ", graph::TensorTypeToString(expected),
                                          "; got ", graph::TensorTypeToString(y)));
  }
  const int64_t elem = graph::DataTypeSize(x.dtype);
  const int64_t in_row = x.dims.back() * elem;
  const int64_t out_row = y.dims.back() * elem;
  const int64_t rows = Product(x.dims, 0, x.dims.size() - 1);
  if (rows == 0 || out_row == 0) return absl::OkStatus();
  if (in_row > 0) {
    MG_RETURN_IF_ERROR(be.Copy2D(args.outputs[0], out_row, args.inputs[0], in_row, in_row, rows));
  }
  if (out_row > in_row) {
    // All-zero bytes are +0 in every element type.
    MG_RETURN_IF_ERROR(be.Zero2D(args.outputs[0] + in_row, out_row, out_row - in_row, rows));
  }
  return absl::OkStatus();
}

template <class Backend>
void AddDeviceLayoutKernels(absl::flat_hash_map<std::string, Kernel>& kernels,
                            std::shared_ptr<const Backend> be) {
  kernels["Transpose"] = [be](const KernelArgs& a) { return DeviceTranspose(*be, a); };
  kernels["Expand"] = [be](const KernelArgs& a) { return DeviceExpand(*be, a); };
  kernels["Concat"] = [be](const KernelArgs& a) { return DeviceConcat(*be, a); };
  kernels["Split"] = [be](const KernelArgs& a) { return DeviceSplit(*be, a); };
  kernels["PadLastDim"] = [be](const KernelArgs& a) { return DevicePadLastDim(*be, a); };
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_LAYOUT_H_

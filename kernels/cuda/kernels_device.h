// kernels/cuda/: the device kernels, written once (device_kernels*.h) for a CUDA backend
// (kernels_cuda.cu, built with CUDA) and a host backend (kernels_device_host.cc, always built).
// This header is the entry point.
//
// The device kernels as kernel tables (kernels/cuda/device_kernels.h has the op list and design):
//
//   MG_ASSIGN_OR_RETURN(alloc::KernelTable kernels, alloc::MakeCudaKernelTable());
//   MG_RETURN_IF_ERROR(executor.Run(kernels));   // an executor over a Device::kCuda arena
//
// Ops covered: Add, Sub, Mul, Div, Sum, Relu, Gelu, Sigmoid, Tanh, Cast (float types),
// ConstantFill, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose, Expand, Concat, Split,
// PadLastDim, Softmax, LayerNormalization, ReduceSum, MatMul, BatchMatMul, FC, FCTransposed,
// AlibiBias, AddAttentionBias, EfficientAttention, AveragedLoss, LabelCrossEntropy, and the
// gradients ReluGradient, SigmoidGradient, TanhGradient, GeluGradient, SoftmaxGradient, LayerNormalizationGradient,
// MatMulGradient, FCGradient, FCTransposedGradient, EfficientAttentionGradient,
// AveragedLossGradient, LabelCrossEntropyGradient: every op of the `attention` workload (both
// attention kernels, every dtype and bias option, inference and training) and of the `mlp` and
// `random` workloads. Storage float32, float16, bfloat16 (float32 arithmetic); any other op or type is
// Unimplemented naming it.
#ifndef MEMONGER_KERNELS_CUDA_KERNELS_DEVICE_H_
#define MEMONGER_KERNELS_CUDA_KERNELS_DEVICE_H_

#include "absl/status/statusor.h"
#include "kernels/kernel.h"

namespace memonger::alloc {

// The device kernels on the current CUDA device (cuBLAS for matrix products). Synchronous: each
// kernel returns after its work finished, so an error names the op that caused it.
// FailedPrecondition when the build has no CUDA, or no usable device or cuBLAS handle.
absl::StatusOr<KernelTable> MakeCudaKernelTable();

// The same kernels' code run on the host (Device::kHost memory): each launch is a loop over
// its indices and matrix products a plain column-major GEMM with cuBLAS's semantics. Slow; for
// tests, which compare it with the CPU kernels where no GPU exists.
KernelTable MakeDeviceKernelTableOnHost();

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_CUDA_KERNELS_DEVICE_H_

// kernels/cuda/: the device kernels, written once (device_kernels*.h) for a CUDA backend
// (kernels_cuda.cu, built with CUDA) and a host backend (kernels_device_host.cc, always built).
// This header is the entry point.
//
// The device kernels as kernel tables (kernels/cuda/device_kernels.h has the op list and design):
//
//   alloc::CudaKernelOptions options;
//   options.scratch_bytes = alloc::DeviceScratchBytes(graph);
//   MG_ASSIGN_OR_RETURN(alloc::CudaKernels kernels, alloc::MakeCudaKernels(options));
//   MG_RETURN_IF_ERROR(executor.Run(kernels.table));  // an executor over a Device::kCuda arena
//   MG_RETURN_IF_ERROR(kernels.synchronize());        // the one wait, after the last step
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

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "kernels/kernel.h"

namespace memonger::alloc {

// How the CUDA kernels run. Every byte they use besides the arena comes from one cudaMalloc made
// when the kernels are made, before the first step: the kernel scratch (a ScratchPool of
// `scratch_bytes`) and cuBLAS's workspace. Launches, GEMMs, copies and fills go to one stream
// and nothing waits for the device inside a step, except the ops whose kernels read device data
// on the host (LabelCrossEntropy's label check, ReduceSum's axes input: KernelTable's capture
// checks, which allocator/graphable.h reports).
struct CudaKernelOptions {
  void* stream = nullptr;  // a cudaStream_t; null: a stream of the kernels' own (blocking)
  int64_t scratch_bytes = int64_t{64} << 20;  // DeviceScratchBytes(graph) is what a net needs
  int64_t cublas_workspace_bytes = int64_t{4} << 20;
  // Wait for the device after every call, so that an asynchronous fault names its op: for
  // debugging, at the cost of one host round trip per launch.
  bool synchronize_each_op = false;
};

struct CudaKernels {
  KernelTable table;
  // Waits for the stream and reports the first asynchronous error: the run's one
  // synchronisation, after the last step.
  std::function<absl::Status()> synchronize;
};

// FailedPrecondition when the build has no CUDA, or no usable device or cuBLAS handle;
// ResourceExhausted when the scratch and workspace block does not fit.
absl::StatusOr<CudaKernels> MakeCudaKernels(const CudaKernelOptions& options);

// The device kernels on the current CUDA device with the default options and
// synchronize_each_op: each kernel returns after its work finished, so an error names the op.
absl::StatusOr<KernelTable> MakeCudaKernelTable();

// The scratch the device kernels ask for while running `graph`: the largest request of any op.
int64_t DeviceScratchBytes(const graph::Graph& graph);

// The same kernels' code run on the host (Device::kHost memory): each launch is a loop over
// its indices and matrix products a plain column-major GEMM with cuBLAS's semantics. Slow; for
// tests, which compare it with the CPU kernels where no GPU exists. Scratch comes from the heap
// as asked; the second form takes it from a block of `scratch_bytes`, as the CUDA kernels do,
// so that a test proves DeviceScratchBytes large enough.
KernelTable MakeDeviceKernelTableOnHost();
KernelTable MakeDeviceKernelTableOnHost(int64_t scratch_bytes);

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_CUDA_KERNELS_DEVICE_H_

// The device kernels: one implementation of the ops of the attention, MLP-style and transformer
// nets (forward and backward), written once and compiled for two backends:
//   - CudaBackend (kernels_cuda.cu): bodies launched as CUDA kernels, matrix products through
//     cuBLAS; `optimize-net --execute cuda` and MakeCudaKernelTable() (kernels_device.h);
//   - HostBackend (kernels_device_host.cc): the same bodies in a loop on the host and a
//     reference column-major GEMM with cuBLAS's semantics; MakeDeviceKernelTableOnHost(), which
//     the tests compare with the CPU kernels where no GPU exists.
//
// A backend provides (all return a Status; pointers are on the backend's device):
//   Device device() const;
//   template <class Body> absl::Status Launch(int64_t n, const Body& body) const;
//       runs body(i) for every i in [0, n), in any order and in parallel (bodies never depend
//       on another index's result within one launch); launches run one after another.
//   absl::Status Gemm(const device::GemmBatch& gemm) const;             // device_types.h
//   absl::Status Copy2D(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
//                       int64_t width, int64_t rows) const;   // bytes; regions must not overlap
//   absl::Status Copy(void* dst, const void* src, int64_t bytes) const;
//   absl::Status Zero2D(void* dst, int64_t pitch, int64_t width, int64_t rows) const;
//   absl::Status ToHost(void* host_dst, const void* src, int64_t bytes) const;
//   absl::StatusOr<std::shared_ptr<void>> Scratch(int64_t bytes) const;
//       temporary device memory outside the arena, freed with its last reference (used by the
//       float32 accumulators of MatMulGradient and LayerNormalizationGradient).
//
// Kernels check their arguments on the host exactly as the CPU kernels do (a Status naming the
// op, never a crash) before anything is launched; see the family headers for each op.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "kernels/cuda/device_kernels_attention.h"
#include "kernels/cuda/device_kernels_layout.h"
#include "kernels/cuda/device_kernels_matmul.h"
#include "kernels/cuda/device_kernels_pointwise.h"
#include "kernels/cuda/device_kernels_rows.h"
#include "kernels/kernel.h"

namespace memonger::alloc::device {

// Every device kernel, each holding a reference to `backend`; each checks that its op's values
// are on the backend's device and aligned to their element size.
template <class Backend>
KernelTable MakeDeviceKernelTable(std::shared_ptr<const Backend> backend) {
  absl::flat_hash_map<std::string, Kernel> kernels;
  AddDevicePointwiseKernels(kernels, backend);
  AddDeviceRowKernels(kernels, backend);
  AddDeviceLayoutKernels(kernels, backend);
  AddDeviceMatMulKernels(kernels, backend);
  AddDeviceAttentionKernels(kernels, backend);
  const Device device = backend->device();
  for (auto& [type, kernel] : kernels) {
    kernel = [device, inner = std::move(kernel)](const KernelArgs& args) -> absl::Status {
      MG_RETURN_IF_ERROR(CheckDevice(args, device));
      MG_RETURN_IF_ERROR(kernel_internal::CheckArity(args, 0, -1, 0, -1));
      MG_RETURN_IF_ERROR(CheckElementAlignment(args));
      return inner(args);
    };
  }
  // The kernels that copy device data to the host (Backend::ToHost) wait for the device there:
  // no CUDA graph can hold them.
  auto labels = [](const graph::Graph&, const graph::Op&) {
    return std::string("reads its labels on the host to check their range (a synchronisation)");
  };
  return KernelTable(std::move(kernels))
      .WithCaptureCheck("LabelCrossEntropy", labels)
      .WithCaptureCheck("LabelCrossEntropyGradient", labels)
      .WithCaptureCheck("ReduceSum", [](const graph::Graph&, const graph::Op& op) {
        return op.inputs.size() == 2
                   ? std::string("reads its axes input on the host (a synchronisation)")
                   : std::string();
      });
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNELS_H_

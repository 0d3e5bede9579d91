// The CUDA side of Arena (built only when CMake finds a CUDA compiler): cudaMalloc on the
// current device after a device check and a cudaMemGetInfo size check.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "allocator/arena.h"

namespace memonger::alloc::internal {
namespace {

std::string CudaErrorText(cudaError_t error) {
  return absl::StrCat(cudaGetErrorName(error), ": ", cudaGetErrorString(error));
}

}  // namespace

absl::StatusOr<void*> CudaAllocate(int64_t bytes) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later calls
    return absl::FailedPreconditionError(
        absl::StrCat("no usable CUDA device (cudaGetDeviceCount: ", CudaErrorText(error), ")"));
  }
  if (count == 0) {
    return absl::FailedPreconditionError("no usable CUDA device (cudaGetDeviceCount: 0 devices)");
  }
  int device = 0;
  error = cudaGetDevice(&device);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (error == cudaSuccess) error = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "CUDA device ", device, " is not usable (cudaMemGetInfo: ", CudaErrorText(error), ")"));
  }
  if (static_cast<uint64_t>(bytes) > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "arena of ", bytes, " bytes does not fit on CUDA device ", device, ": needed ", bytes,
        " bytes, available ", free_bytes, " bytes free of ", total_bytes));
  }
  void* p = nullptr;
  error = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "arena of ", bytes, " bytes does not fit on CUDA device ", device, ": needed ", bytes,
        " bytes, available ", free_bytes, " bytes free of ", total_bytes, " (cudaMalloc: ",
        CudaErrorText(error), ")"));
  }
  if (error != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "cudaMalloc of ", bytes, " bytes on CUDA device ", device, " failed: ",
        CudaErrorText(error)));
  }
  return p;
}

void CudaFree(void* allocation) {
  // Nothing to report to: the arena is going away. A failure here means the context is
  // already torn down (process exit), when the driver releases the memory itself.
  cudaFree(allocation);
}

absl::Status CudaCopy(void* dst, const void* src, int64_t bytes, bool to_device) {
  const cudaError_t error = cudaMemcpy(dst, src, static_cast<size_t>(bytes),
                                       to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  return absl::InternalError(absl::StrCat("cudaMemcpy of ", bytes, " bytes ",
                                          to_device ? "to" : "from", " the device failed: ",
                                          CudaErrorText(error)));
}

}  // namespace memonger::alloc::internal

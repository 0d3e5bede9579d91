// The CUDA versions of the verify fill and check (built only when CMake finds a CUDA compiler).
// One thread per 8-byte word (grid-stride); unaligned or partial words are written and read
// byte by byte, so any device pointer works. The check reports the first mismatching byte with
// an atomicMin. Both run on the current device and synchronize before returning.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/verify_kernels.h"

namespace memonger::alloc::internal {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;
constexpr unsigned long long kNoMismatch = std::numeric_limits<unsigned long long>::max();

__global__ void FillKernel(unsigned char* data, int64_t bytes, uint64_t key) {
  const int64_t words = (bytes + 7) / 8;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t start = 8 * i;
    const int64_t count = bytes - start < 8 ? bytes - start : 8;
    const uint64_t w = PatternWord(key, static_cast<uint64_t>(i));
    if (count == 8 && (reinterpret_cast<uintptr_t>(data + start) & 7) == 0) {
      *reinterpret_cast<uint64_t*>(data + start) = w;
    } else {
      for (int64_t b = 0; b < count; ++b) {
        data[start + b] = static_cast<unsigned char>(w >> (8 * b));
      }
    }
  }
}

__global__ void CheckKernel(const unsigned char* data, int64_t bytes, uint64_t key,
                            unsigned long long* first_mismatch) {
  const int64_t words = (bytes + 7) / 8;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t start = 8 * i;
    const int64_t count = bytes - start < 8 ? bytes - start : 8;
    const uint64_t w = PatternWord(key, static_cast<uint64_t>(i));
    if (count == 8 && (reinterpret_cast<uintptr_t>(data + start) & 7) == 0 &&
        *reinterpret_cast<const uint64_t*>(data + start) == w) {
      continue;
    }
    for (int64_t b = 0; b < count; ++b) {
      if (data[start + b] != static_cast<unsigned char>(w >> (8 * b))) {
        atomicMin(first_mismatch, static_cast<unsigned long long>(start + b));
        break;
      }
    }
  }
}

int Blocks(int64_t bytes) {
  const int64_t words = (bytes + 7) / 8;
  return static_cast<int>(std::min<int64_t>((words + kThreads - 1) / kThreads, kMaxBlocks));
}

absl::Status CudaError(absl::string_view what, cudaError_t error) {
  cudaGetLastError();  // clear a non-sticky error so later calls start clean
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", cudaGetErrorName(error), ": ",
                                                    cudaGetErrorString(error)));
}

}  // namespace

absl::Status CudaFillPattern(std::byte* data, int64_t bytes, uint64_t key) {
  if (bytes <= 0) return absl::OkStatus();
  FillKernel<<<Blocks(bytes), kThreads>>>(reinterpret_cast<unsigned char*>(data), bytes, key);
  cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) error = cudaDeviceSynchronize();
  if (error != cudaSuccess) return CudaError("verify fill kernel", error);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CudaFindPatternMismatch(const std::byte* data, int64_t bytes,
                                                uint64_t key) {
  if (bytes <= 0) return -1;
  unsigned long long* result = nullptr;
  cudaError_t error = cudaMalloc(&result, sizeof(*result));
  if (error != cudaSuccess) return CudaError("verify check: cudaMalloc", error);
  unsigned long long host = kNoMismatch;
  error = cudaMemcpy(result, &host, sizeof(host), cudaMemcpyHostToDevice);
  if (error == cudaSuccess) {
    CheckKernel<<<Blocks(bytes), kThreads>>>(reinterpret_cast<const unsigned char*>(data), bytes,
                                             key, result);
    error = cudaGetLastError();
  }
  if (error == cudaSuccess) {
    error = cudaMemcpy(&host, result, sizeof(host), cudaMemcpyDeviceToHost);
  }
  cudaFree(result);
  if (error != cudaSuccess) return CudaError("verify check kernel", error);
  return host == kNoMismatch ? int64_t{-1} : static_cast<int64_t>(host);
}

}  // namespace memonger::alloc::internal

// cuBLAS, opened when the CUDA kernels are first made rather than when the program starts.
//
//   MG_ASSIGN_OR_RETURN(const CublasLibrary* cublas, OpenCublas());
//   cublas->create(&handle);
//
// Linking libcublas (and through it libcublasLt, several hundred MB of code) made every run of
// optimize-net map and relocate it before main, --version included: about 200 MB resident for
// nothing. The library is now loaded with dlopen on the first CUDA path (--execute cuda), once
// per process; the few entry points the kernels call are looked up by name. The table is
// immutable once loaded.
//
// Built only with CUDA (MEMONGER_HAVE_CUDA); needs the cuBLAS headers for the types.
#ifndef MEMONGER_KERNELS_CUDA_CUBLAS_LIBRARY_H_
#define MEMONGER_KERNELS_CUDA_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace memonger::alloc {

// The C entry point (cublas_api.h also declares a C++ overload with a cudaDataType compute type).
using CublasGemmStridedBatchedEx = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
    cudaDataType, int, long long, const void*, cudaDataType, int, long long,  // NOLINT
    const void*, void*, cudaDataType, int, long long, int, cublasComputeType_t,  // NOLINT
    cublasGemmAlgo_t);

struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  CublasGemmStridedBatchedEx gemm_strided_batched_ex = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The library, loaded on the first call (thread-safe); FailedPrecondition naming the library
// and dlerror() when it cannot be opened or lacks an entry point. Looks for
// libcublas.so.<major of the headers> on the loader's path, then in the CUDA toolkit the build
// found.
absl::StatusOr<const CublasLibrary*> OpenCublas();

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_CUDA_CUBLAS_LIBRARY_H_

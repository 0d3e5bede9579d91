// CudaBackend: the device kernels (device_kernels.h) on the current CUDA device. Bodies run as
// one grid-stride kernel per launch (256 threads a block); matrix products go to cuBLAS
// (cublasGemmStridedBatchedEx, float32 compute, the default algorithm); copies and fills are
// cudaMemcpy2DAsync / cudaMemset2DAsync. Everything goes to one stream (the caller's, or one of
// the backend's own, created blocking so that it orders after copies on the legacy default
// stream), and nothing inside a step waits for the device: launch errors are read with
// cudaGetLastError, asynchronous faults surface at Synchronize (after the last step) unless
// synchronize_each_op asks for a wait after every call. The scratch pool and cuBLAS's workspace
// share one cudaMalloc made when the backend is created; cuBLAS is bound to the stream and the
// workspace, so it allocates nothing either. ToHost (the label check, ReduceSum's axes) is the
// one wait inside a step; those ops are the capture boundaries (KernelTable capture checks).
//
// Built only when CMake finds a CUDA compiler; tested only where a device exists
// (tests/kernels/cuda/device_kernels_test.cc and cuda_run_test.cc skip otherwise).
// HostBackend (kernels_device_host.cc) runs the same bodies and the same GEMM argument mapping
// on the host.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/kernels_device.h"

namespace memonger::alloc {
namespace {

using device::FloatType;
using device::GemmBatch;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

template <class Body>
__global__ void LaunchBody(int64_t n, Body body) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    body(i);
  }
}

absl::Status CudaStatus(absl::string_view what, cudaError_t error) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // clear a non-sticky error so later calls start clean
  // A sticky error (an illegal or misaligned address, a failed launch) survives the clearing:
  // the context is gone, and every later CUDA call in this process fails too.
  const bool sticky = cudaDeviceSynchronize() != cudaSuccess;
  return absl::InternalError(absl::StrCat(
      what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error),
      sticky ? " (the CUDA context is unusable from here on; restart the process)" : ""));
}

absl::Status CublasStatus(const CublasLibrary& cublas, absl::string_view what,
                          cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS status ", static_cast<int>(status), " (",
                                          cublas.status_string(status), ")"));
}

cudaDataType CudaType(FloatType type) {
  switch (type) {
    case FloatType::kFloat16: return CUDA_R_16F;
    case FloatType::kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

class CudaBackend {
 public:
  // FailedPrecondition without a usable device or cuBLAS; ResourceExhausted when the scratch and
  // workspace block does not fit.
  static absl::StatusOr<std::shared_ptr<CudaBackend>> Create(const CudaKernelOptions& options) {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
      cudaGetLastError();
      return absl::FailedPreconditionError(absl::StrCat(
          "no usable CUDA device (cudaGetDeviceCount: ",
          error == cudaSuccess ? "0 devices" : cudaGetErrorString(error), ")"));
    }
    if (options.scratch_bytes < 0 || options.cublas_workspace_bytes < 0) {
      return absl::InvalidArgumentError("CUDA kernels: negative scratch or workspace size");
    }
    std::shared_ptr<CudaBackend> backend(new CudaBackend(options));
    if (options.stream == nullptr) {
      MG_RETURN_IF_ERROR(CudaStatus("cudaStreamCreate", cudaStreamCreate(&backend->stream_)));
      backend->own_stream_ = true;
    } else {
      backend->stream_ = static_cast<cudaStream_t>(options.stream);
    }
    // One block: the scratch pool, then cuBLAS's workspace (256-byte aligned).
    const int64_t scratch = (options.scratch_bytes + 255) / 256 * 256;
    const int64_t total = std::max<int64_t>(scratch + options.cublas_workspace_bytes, 1);
    error = cudaMalloc(&backend->block_, static_cast<size_t>(total));
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "the CUDA kernels' scratch and cuBLAS workspace (", total,
          " bytes) do not fit on the device"));
    }
    MG_RETURN_IF_ERROR(CudaStatus("cudaMalloc (kernel scratch and cuBLAS workspace)", error));
    backend->pool_.emplace(static_cast<std::byte*>(backend->block_), options.scratch_bytes);
    MG_ASSIGN_OR_RETURN(backend->cublas_, OpenCublas());
    const CublasLibrary& cublas = *backend->cublas_;
    const cublasStatus_t status = cublas.create(&backend->handle_);
    if (status != CUBLAS_STATUS_SUCCESS) {
      backend->handle_ = nullptr;
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create a cuBLAS handle: ", cublas.status_string(status)));
    }
    MG_RETURN_IF_ERROR(CublasStatus(cublas, "cublasSetStream",
                                    cublas.set_stream(backend->handle_, backend->stream_)));
    if (options.cublas_workspace_bytes > 0) {
      MG_RETURN_IF_ERROR(CublasStatus(
          cublas, "cublasSetWorkspace",
          cublas.set_workspace(backend->handle_, static_cast<std::byte*>(backend->block_) + scratch,
                             static_cast<size_t>(options.cublas_workspace_bytes))));
    }
    return backend;
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend() {
    if (handle_ != nullptr) cublas_->destroy(handle_);
    if (block_ != nullptr) cudaFree(block_);
    if (own_stream_) cudaStreamDestroy(stream_);
  }

  Device device() const { return Device::kCuda; }

  template <class Body>
  absl::Status Launch(int64_t n, const Body& body) const {
    if (n <= 0) return absl::OkStatus();
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
    LaunchBody<<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(n, body);
    MG_RETURN_IF_ERROR(CudaStatus("kernel launch", cudaGetLastError()));
    return Settle("kernel");
  }

  absl::Status Gemm(const GemmBatch& g) const {
    if (g.a_type != g.b_type) {
      return absl::UnimplementedError("cuBLAS GEMM: the two operands have different types");
    }
    if (!FitsInt(g.m) || !FitsInt(g.n) || !FitsInt(g.k) || !FitsInt(g.lda) || !FitsInt(g.ldb) ||
        !FitsInt(g.ldc) || !FitsInt(g.batch)) {
      return absl::UnimplementedError(absl::StrCat(
          "cuBLAS GEMM: a dimension does not fit in int (m ", g.m, ", n ", g.n, ", k ", g.k, ")"));
    }
    if (g.m == 0 || g.n == 0 || g.batch == 0) return absl::OkStatus();
    const float alpha = g.alpha;
    const float beta = g.beta;
    MG_RETURN_IF_ERROR(CublasStatus(
        *cublas_, absl::StrCat("cublasGemmStridedBatchedEx(", g.trans_a ? "T" : "N", g.trans_b ? "T" : "N",
                     ", m ", g.m, ", n ", g.n, ", k ", g.k, ", lda ", g.lda, ", ldb ", g.ldb,
                     ", ldc ", g.ldc, ", batch ", g.batch, ", types ", static_cast<int>(g.a_type),
                     "/", static_cast<int>(g.c_type), ")"),
        cublas_->gemm_strided_batched_ex(
            handle_, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), &alpha, g.a,
            CudaType(g.a_type), static_cast<int>(g.lda), g.stride_a, g.b, CudaType(g.b_type),
            static_cast<int>(g.ldb), g.stride_b, &beta, g.c, CudaType(g.c_type),
            static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch), CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT)));
    return Settle("GEMM");
  }

  absl::Status Copy2D(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                      int64_t width, int64_t rows) const {
    if (width <= 0 || rows <= 0) return absl::OkStatus();
    if (rows == 1) return Copy(dst, src, width);
    MG_RETURN_IF_ERROR(CudaStatus(
        "cudaMemcpy2DAsync",
        cudaMemcpy2DAsync(dst, static_cast<size_t>(dst_pitch), src,
                          static_cast<size_t>(src_pitch), static_cast<size_t>(width),
                          static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream_)));
    return Settle("cudaMemcpy2DAsync");
  }
  absl::Status Copy(void* dst, const void* src, int64_t bytes) const {
    if (bytes <= 0) return absl::OkStatus();
    MG_RETURN_IF_ERROR(CudaStatus("cudaMemcpyAsync",
                                  cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                                                  cudaMemcpyDeviceToDevice, stream_)));
    return Settle("cudaMemcpyAsync");
  }
  absl::Status Zero2D(void* dst, int64_t pitch, int64_t width, int64_t rows) const {
    if (width <= 0 || rows <= 0) return absl::OkStatus();
    cudaError_t error =
        rows == 1 ? cudaMemsetAsync(dst, 0, static_cast<size_t>(width), stream_)
                  : cudaMemset2DAsync(dst, static_cast<size_t>(pitch), 0,
                                      static_cast<size_t>(width), static_cast<size_t>(rows),
                                      stream_);
    MG_RETURN_IF_ERROR(CudaStatus("cudaMemsetAsync", error));
    return Settle("cudaMemsetAsync");
  }
  // The one wait inside a step: the host needs the bytes now.
  absl::Status ToHost(void* host_dst, const void* src, int64_t bytes) const {
    if (bytes <= 0) return absl::OkStatus();
    MG_RETURN_IF_ERROR(CudaStatus("cudaMemcpyAsync to the host",
                                  cudaMemcpyAsync(host_dst, src, static_cast<size_t>(bytes),
                                                  cudaMemcpyDeviceToHost, stream_)));
    return CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }
  absl::StatusOr<std::shared_ptr<void>> Scratch(int64_t bytes) const { return pool_->Take(bytes); }

  // Waits for everything sent to the stream.
  absl::Status Synchronize() const {
    return CudaStatus("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

 private:
  explicit CudaBackend(const CudaKernelOptions& options) : options_(options) {}

  // With synchronize_each_op, waits so that a fault names the call that caused it.
  absl::Status Settle(absl::string_view what) const {
    if (!options_.synchronize_each_op) return absl::OkStatus();
    return CudaStatus(what, cudaStreamSynchronize(stream_));
  }

  CudaKernelOptions options_;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  void* block_ = nullptr;
  std::optional<device::ScratchPool> pool_;
  const CublasLibrary* cublas_ = nullptr;  // set before handle_
  cublasHandle_t handle_ = nullptr;
};

}  // namespace

absl::StatusOr<CudaKernels> MakeCudaKernels(const CudaKernelOptions& options) {
  MG_ASSIGN_OR_RETURN(std::shared_ptr<CudaBackend> backend, CudaBackend::Create(options));
  CudaKernels kernels;
  kernels.table = device::MakeDeviceKernelTable(std::shared_ptr<const CudaBackend>(backend));
  kernels.synchronize = [backend]() { return backend->Synchronize(); };
  return kernels;
}

absl::StatusOr<KernelTable> MakeCudaKernelTable() {
  CudaKernelOptions options;
  options.synchronize_each_op = true;
  MG_ASSIGN_OR_RETURN(CudaKernels kernels, MakeCudaKernels(options));
  return std::move(kernels.table);
}

}  // namespace memonger::alloc

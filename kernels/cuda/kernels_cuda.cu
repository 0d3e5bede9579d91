// CudaBackend: the device kernels (device_kernels.h) on the current CUDA device. Bodies run as
// one grid-stride kernel per launch (256 threads a block); matrix products go to cuBLAS
// (cublasGemmStridedBatchedEx, float32 compute, the default algorithm); copies and fills are
// cudaMemcpy2D / cudaMemset2D. Everything runs on the legacy default stream and each call
// synchronizes before it returns, so an asynchronous fault is reported by the op that caused
// it (the executor prepends the op's label), at the cost of one host round trip per launch.
//
// Built only when CMake finds a CUDA compiler; tested only where a device exists
// (tests/kernels/cuda/device_kernels_test.cc skips otherwise). HostBackend (kernels_device_host.cc) runs the
// same bodies and the same GEMM argument mapping on the host.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <memory>

#include "absl/strings/str_cat.h"
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

absl::Status CublasStatus(absl::string_view what, cublasStatus_t status) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": cuBLAS status ", static_cast<int>(status), " (",
                                          cublasGetStatusString(status), ")"));
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
  // FailedPrecondition without a usable device or cuBLAS.
  static absl::StatusOr<std::shared_ptr<const CudaBackend>> Create() {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess || count == 0) {
      cudaGetLastError();
      return absl::FailedPreconditionError(absl::StrCat(
          "no usable CUDA device (cudaGetDeviceCount: ",
          error == cudaSuccess ? "0 devices" : cudaGetErrorString(error), ")"));
    }
    cublasHandle_t handle = nullptr;
    const cublasStatus_t status = cublasCreate(&handle);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create a cuBLAS handle: ", cublasGetStatusString(status)));
    }
    return std::shared_ptr<const CudaBackend>(new CudaBackend(handle));
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  ~CudaBackend() { cublasDestroy(handle_); }

  Device device() const { return Device::kCuda; }

  template <class Body>
  absl::Status Launch(int64_t n, const Body& body) const {
    if (n <= 0) return absl::OkStatus();
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
    LaunchBody<<<static_cast<unsigned>(blocks), kThreads>>>(n, body);
    MG_RETURN_IF_ERROR(CudaStatus("kernel launch", cudaGetLastError()));
    return CudaStatus("kernel", cudaDeviceSynchronize());
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
        absl::StrCat("cublasGemmStridedBatchedEx(", g.trans_a ? "T" : "N", g.trans_b ? "T" : "N",
                     ", m ", g.m, ", n ", g.n, ", k ", g.k, ", lda ", g.lda, ", ldb ", g.ldb,
                     ", ldc ", g.ldc, ", batch ", g.batch, ", types ", static_cast<int>(g.a_type),
                     "/", static_cast<int>(g.c_type), ")"),
        cublasGemmStridedBatchedEx(
            handle_, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), &alpha, g.a,
            CudaType(g.a_type), static_cast<int>(g.lda), g.stride_a, g.b, CudaType(g.b_type),
            static_cast<int>(g.ldb), g.stride_b, &beta, g.c, CudaType(g.c_type),
            static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch), CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT)));
    return CudaStatus("GEMM", cudaDeviceSynchronize());
  }

  absl::Status Copy2D(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                      int64_t width, int64_t rows) const {
    if (width <= 0 || rows <= 0) return absl::OkStatus();
    if (rows == 1) return Copy(dst, src, width);
    MG_RETURN_IF_ERROR(CudaStatus(
        "cudaMemcpy2D", cudaMemcpy2D(dst, static_cast<size_t>(dst_pitch), src,
                                     static_cast<size_t>(src_pitch), static_cast<size_t>(width),
                                     static_cast<size_t>(rows), cudaMemcpyDeviceToDevice)));
    return CudaStatus("cudaMemcpy2D", cudaDeviceSynchronize());
  }
  absl::Status Copy(void* dst, const void* src, int64_t bytes) const {
    if (bytes <= 0) return absl::OkStatus();
    MG_RETURN_IF_ERROR(CudaStatus(
        "cudaMemcpy", cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice)));
    return CudaStatus("cudaMemcpy", cudaDeviceSynchronize());
  }
  absl::Status Zero2D(void* dst, int64_t pitch, int64_t width, int64_t rows) const {
    if (width <= 0 || rows <= 0) return absl::OkStatus();
    cudaError_t error = rows == 1
                            ? cudaMemset(dst, 0, static_cast<size_t>(width))
                            : cudaMemset2D(dst, static_cast<size_t>(pitch), 0,
                                           static_cast<size_t>(width), static_cast<size_t>(rows));
    MG_RETURN_IF_ERROR(CudaStatus("cudaMemset", error));
    return CudaStatus("cudaMemset", cudaDeviceSynchronize());
  }
  absl::Status ToHost(void* host_dst, const void* src, int64_t bytes) const {
    if (bytes <= 0) return absl::OkStatus();
    return CudaStatus("cudaMemcpy to the host",
                      cudaMemcpy(host_dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost));
  }
  absl::StatusOr<std::shared_ptr<void>> Scratch(int64_t bytes) const {
    void* p = nullptr;
    const cudaError_t error = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return absl::ResourceExhaustedError(absl::StrCat(
          "kernel scratch of ", bytes, " bytes does not fit on the CUDA device"));
    }
    MG_RETURN_IF_ERROR(CudaStatus("cudaMalloc (kernel scratch)", error));
    return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  }

 private:
  explicit CudaBackend(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_;
};

}  // namespace

absl::StatusOr<KernelTable> MakeCudaKernelTable() {
  MG_ASSIGN_OR_RETURN(std::shared_ptr<const CudaBackend> backend, CudaBackend::Create());
  return device::MakeDeviceKernelTable(std::move(backend));
}

}  // namespace memonger::alloc

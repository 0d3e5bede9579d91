// HostBackend: the device kernels' bodies run on the host (device_kernels.h), so that the tests
// exercise the CUDA path's arithmetic, indexing and cuBLAS argument mapping without a GPU.
// Launch is a loop (in reverse index order); Gemm implements cublasGemmStridedBatchedEx's column-major
// definition literally (float32 sums over k in ascending order; C is not read when beta is 0).
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/cuda/device_kernels.h"
#include "kernels/cuda/kernels_device.h"

namespace memonger::alloc {
namespace {

using device::GemmBatch;
using device::LoadFloat;
using device::StoreFloat;

class HostBackend {
 public:
  // scratch_bytes < 0: scratch from the heap as asked; else from one block of that size.
  explicit HostBackend(int64_t scratch_bytes) {
    if (scratch_bytes >= 0) {
      block_.resize(static_cast<size_t>(scratch_bytes));
      pool_.emplace(block_.data(), scratch_bytes);
    }
  }
  HostBackend(const HostBackend&) = delete;
  HostBackend& operator=(const HostBackend&) = delete;

  Device device() const { return Device::kHost; }

  // In reverse index order: a body that read what a lower index wrote in the same launch (a
  // race on the GPU) would see stale data here and fail the tests.
  template <class Body>
  absl::Status Launch(int64_t n, const Body& body) const {
    for (int64_t i = n; i-- > 0;) body(i);
    return absl::OkStatus();
  }

  // Refuses what cublasGemmStridedBatchedEx would refuse (or what our kernels must never ask):
  // leading dims below the stored rows, operands of two types, sizes beyond int, a C repeated
  // within one batched call.
  absl::Status Gemm(const GemmBatch& g) const {
    const int64_t rows_a = g.trans_a ? g.k : g.m;
    const int64_t rows_b = g.trans_b ? g.n : g.k;
    if (g.lda < std::max<int64_t>(1, rows_a) || g.ldb < std::max<int64_t>(1, rows_b) ||
        g.ldc < std::max<int64_t>(1, g.m) || g.a_type != g.b_type ||
        (g.batch > 1 && g.stride_c == 0) || g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX ||
        g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) {
      return absl::InternalError(absl::StrCat(
          "GEMM arguments cuBLAS would refuse: m ", g.m, ", n ", g.n, ", k ", g.k, ", lda ", g.lda,
          ", ldb ", g.ldb, ", ldc ", g.ldc, ", batch ", g.batch, ", stride_c ", g.stride_c));
    }
    for (int64_t b = 0; b < g.batch; ++b) {
      const auto* a = static_cast<const std::byte*>(g.a) + b * g.stride_a * device::FloatTypeSize(g.a_type);
      const auto* bm = static_cast<const std::byte*>(g.b) + b * g.stride_b * device::FloatTypeSize(g.b_type);
      auto* c = static_cast<std::byte*>(g.c) + b * g.stride_c * device::FloatTypeSize(g.c_type);
      for (int64_t j = 0; j < g.n; ++j) {
        for (int64_t i = 0; i < g.m; ++i) {
          float acc = 0.0f;
          for (int64_t l = 0; l < g.k; ++l) {
            // op(A)(i, l) and op(B)(l, j), column-major with leading dims lda, ldb.
            const float x = LoadFloat(a, g.a_type, g.trans_a ? l + i * g.lda : i + l * g.lda);
            const float y = LoadFloat(bm, g.b_type, g.trans_b ? j + l * g.ldb : l + j * g.ldb);
            acc += x * y;
          }
          const int64_t at = i + j * g.ldc;
          float v = g.alpha * acc;
          if (g.beta != 0.0f) v += g.beta * LoadFloat(c, g.c_type, at);
          StoreFloat(c, g.c_type, at, v);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Copy2D(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch,
                      int64_t width, int64_t rows) const {
    if (rows > 1 && (dst_pitch < width || src_pitch < width)) {
      return absl::InternalError("cudaMemcpy2D would refuse a pitch below the width");
    }
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(static_cast<std::byte*>(dst) + r * dst_pitch,
                  static_cast<const std::byte*>(src) + r * src_pitch, static_cast<size_t>(width));
    }
    return absl::OkStatus();
  }
  absl::Status Copy(void* dst, const void* src, int64_t bytes) const {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  absl::Status Zero2D(void* dst, int64_t pitch, int64_t width, int64_t rows) const {
    if (rows > 1 && pitch < width) {
      return absl::InternalError("cudaMemset2D would refuse a pitch below the width");
    }
    for (int64_t r = 0; r < rows; ++r) {
      std::memset(static_cast<std::byte*>(dst) + r * pitch, 0, static_cast<size_t>(width));
    }
    return absl::OkStatus();
  }
  absl::Status ToHost(void* host_dst, const void* src, int64_t bytes) const {
    return Copy(host_dst, src, bytes);
  }
  absl::StatusOr<std::shared_ptr<void>> Scratch(int64_t bytes) const {
    if (pool_.has_value()) return pool_->Take(bytes);
    auto buffer = std::make_shared<std::vector<std::byte>>(
        static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    return std::shared_ptr<void>(buffer, buffer->data());
  }

 private:
  std::vector<std::byte> block_;
  std::optional<device::ScratchPool> pool_;
};

}  // namespace

KernelTable MakeDeviceKernelTableOnHost() {
  return device::MakeDeviceKernelTable(std::make_shared<const HostBackend>(-1));
}

KernelTable MakeDeviceKernelTableOnHost(int64_t scratch_bytes) {
  return device::MakeDeviceKernelTable(
      std::make_shared<const HostBackend>(std::max<int64_t>(scratch_bytes, 0)));
}

}  // namespace memonger::alloc

#ifndef MEMONGER_HAVE_CUDA
namespace memonger::alloc {
absl::StatusOr<CudaKernels> MakeCudaKernels(const CudaKernelOptions&) {
  return absl::FailedPreconditionError(
      "the CUDA kernels are not available: memonger was built without CUDA (no CUDA compiler "
      "found at configure time)");
}

absl::StatusOr<KernelTable> MakeCudaKernelTable() {
  MG_ASSIGN_OR_RETURN(CudaKernels kernels, MakeCudaKernels(CudaKernelOptions{}));
  return std::move(kernels.table);
}
}  // namespace memonger::alloc
#endif

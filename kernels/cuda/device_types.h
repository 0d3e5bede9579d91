// The vocabulary of the device kernels (kernels/cuda/device_kernels.h): what a kernel body sees on
// the device, and what it asks of the backend that runs it.
//
// A body is a small copyable struct with `MG_HD void operator()(int64_t i) const`; a backend runs
// it for every i in [0, n): the CUDA backend as a grid-stride kernel, one thread per index
// (kernels/cuda/kernels_cuda.cu), the host backend as a loop (kernels/cuda/kernels_device_host.cc), so
// that the tests check the bodies' arithmetic and indexing where no GPU exists. Bodies hold
// only device pointers and scalars, and compute in float32 whatever the storage type.
//
// Element types are chosen at run time (FloatType), not by templates: one body serves float32,
// float16 and bfloat16, and the branch is the same for every thread of a launch.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_TYPES_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_TYPES_H_

#include <cstdint>

#include "kernels/float16.h"
#include "kernels/host_device.h"

namespace memonger::alloc::device {

// The most dims an index map carries after merging (kernel_util's rank limit is higher, but no
// op of the attention nets needs more than 6).
inline constexpr int kMaxRank = 8;

enum class FloatType : uint8_t { kFloat32, kFloat16, kBFloat16 };

MG_HD inline int64_t FloatTypeSize(FloatType type) { return type == FloatType::kFloat32 ? 4 : 2; }

MG_HD inline float LoadFloat(const void* data, FloatType type, int64_t i) {
  switch (type) {
    case FloatType::kFloat16: return HalfBitsToFloat(static_cast<const uint16_t*>(data)[i]);
    case FloatType::kBFloat16: return BFloat16BitsToFloat(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

// Rounds once (to nearest even) into the storage type.
MG_HD inline void StoreFloat(void* data, FloatType type, int64_t i, float v) {
  switch (type) {
    case FloatType::kFloat16: static_cast<uint16_t*>(data)[i] = FloatToHalfBits(v); break;
    case FloatType::kBFloat16: static_cast<uint16_t*>(data)[i] = FloatToBFloat16Bits(v); break;
    default: static_cast<float*>(data)[i] = v; break;
  }
}

// A tensor read as float32.
struct In {
  const void* data = nullptr;
  FloatType type = FloatType::kFloat32;
  MG_HD float operator[](int64_t i) const { return LoadFloat(data, type, i); }
};

// A tensor written from float32 (and read back, for accumulators in the storage type).
struct Out {
  void* data = nullptr;
  FloatType type = FloatType::kFloat32;
  MG_HD float Get(int64_t i) const { return LoadFloat(data, type, i); }
  MG_HD void Set(int64_t i, float v) const { StoreFloat(data, type, i, v); }
};

// Maps the flat index of an element of a tensor of `dims` (row-major) to an offset read with
// `strides` (elements; 0 repeats, as broadcasting does). Built on the host by MakeIndexMap,
// which merges dims so that `rank` stays small.
struct IndexMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  MG_HD int64_t Offset(int64_t i) const {
    int64_t offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (i % dims[d]) * strides[d];
      i /= dims[d];
    }
    return offset;
  }
};

// One strided batch of matrix products in cuBLAS's column-major terms (cublasGemmStridedBatchedEx
// with float32 compute):
//   C_b = alpha * op(A_b) op(B_b) + beta * C_b,   b = 0 .. batch - 1,
// op(A_b) m x k, op(B_b) k x n, C_b m x n, X_b = X + b * stride_x (elements; 0 repeats),
// element (r, c) of a stored matrix at r + c * ld. C's beta term reads C in its own type (float32
// accumulators or the output's storage type). The row-major kernels map onto it in
// device_kernels_matmul.h.
struct GemmBatch {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const void* a = nullptr;
  FloatType a_type = FloatType::kFloat32;
  int64_t lda = 1, stride_a = 0;
  const void* b = nullptr;
  FloatType b_type = FloatType::kFloat32;
  int64_t ldb = 1, stride_b = 0;
  float beta = 0.0f;
  void* c = nullptr;
  FloatType c_type = FloatType::kFloat32;
  int64_t ldc = 1, stride_c = 0;
  int64_t batch = 1;
};

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_TYPES_H_

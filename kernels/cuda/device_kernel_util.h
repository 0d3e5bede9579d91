// Host-side helpers of the device kernels (kernels/cuda/device_kernels.h): element types, index
// maps and the argument checks that run before a body is launched. Host code only (it reads
// KernelArgs' types and attributes, never the tensors); compiled by g++ and by nvcc.
//
// Not part of the library's interface.
#ifndef MEMONGER_KERNELS_CUDA_DEVICE_KERNEL_UTIL_H_
#define MEMONGER_KERNELS_CUDA_DEVICE_KERNEL_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/device_types.h"
#include "kernels/kernel.h"
#include "kernels/kernel_util.h"
#include "util/status_macros.h"

namespace memonger::alloc::device {

using kernel_internal::Dims;

// Kernel scratch from one block fixed before the first step, so that no kernel allocates while
// a net runs (nothing a CUDA graph could not capture). A request takes the next bytes (offsets
// aligned to 256); releasing the last live request gives its bytes back, and with them every
// earlier request already released (kernels hold scratch for one call, nested). A request that
// does not fit is ResourceExhausted with both sizes, never a fresh allocation.
class ScratchPool {
 public:
  ScratchPool(std::byte* base, int64_t bytes)
      : base_(base), size_(bytes), state_(std::make_shared<State>()) {}

  absl::StatusOr<std::shared_ptr<void>> Take(int64_t bytes) const {
    State& s = *state_;
    const int64_t offset = (s.top + 255) / 256 * 256;
    if (bytes < 0 || offset > size_ || bytes > size_ - offset) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "kernel scratch of ", bytes, " bytes does not fit the ", size_, "-byte scratch block ",
          "(", s.top, " bytes in use); the block is sized before the first step: "
          "DeviceScratchBytes(graph) gives what a net needs"));
    }
    s.live.push_back({s.top, offset + bytes, true});
    s.top = offset + bytes;
    const size_t index = s.live.size() - 1;
    std::shared_ptr<State> state = state_;
    return std::shared_ptr<void>(base_ + offset, [state, index](void*) {
      state->live[index].in_use = false;
      while (!state->live.empty() && !state->live.back().in_use) {
        state->top = state->live.back().previous_top;
        state->live.pop_back();
      }
    });
  }
  int64_t size() const { return size_; }

 private:
  struct Request {
    int64_t previous_top;
    int64_t end;
    bool in_use;
  };
  struct State {
    int64_t top = 0;
    std::vector<Request> live;
  };
  std::byte* base_;
  int64_t size_;
  std::shared_ptr<State> state_;
};

// float32, float16 or bfloat16; Unimplemented naming the op otherwise.
inline absl::StatusOr<FloatType> FloatTypeOf(const KernelArgs& args, const graph::TensorType& t) {
  switch (t.dtype) {
    case graph::DataType::kFloat32: return FloatType::kFloat32;
    case graph::DataType::kFloat16: return FloatType::kFloat16;
    case graph::DataType::kBFloat16: return FloatType::kBFloat16;
    default:
      return kernel_internal::UnsupportedDtype(
          args, t.dtype, "the device kernels store float32, float16, bfloat16");
  }
}

inline absl::StatusOr<In> InputAt(const KernelArgs& args, int i) {
  MG_ASSIGN_OR_RETURN(const FloatType type, FloatTypeOf(args, *args.input_types[i]));
  return In{args.inputs[i], type};
}
inline absl::StatusOr<Out> OutputAt(const KernelArgs& args, int i) {
  MG_ASSIGN_OR_RETURN(const FloatType type, FloatTypeOf(args, *args.output_types[i]));
  return Out{args.outputs[i], type};
}

// An IndexMap over `dims` reading with `strides` (as many). Dims of size 1 are dropped and
// neighbours merge where the strides allow, so a rank-6 broadcast usually becomes rank 2 or 3;
// InvalidArgument naming the op when more than kMaxRank dims remain.
inline absl::StatusOr<IndexMap> MakeIndexMap(const KernelArgs& args, const Dims& dims,
                                             const Dims& strides) {
  IndexMap map;
  int64_t merged_dims[64];
  int64_t merged_strides[64];
  int rank = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (rank > 0 && merged_strides[rank - 1] == strides[d] * dims[d]) {
      merged_dims[rank - 1] *= dims[d];
      merged_strides[rank - 1] = strides[d];
      continue;
    }
    if (rank == 64) break;
    merged_dims[rank] = dims[d];
    merged_strides[rank] = strides[d];
    ++rank;
  }
  if (rank > kMaxRank) {
    return kernel_internal::KernelUnimplemented(
        args, absl::StrCat("the device kernels index at most ", kMaxRank,
                           " dims after merging; this operand needs ", rank));
  }
  map.rank = rank;
  for (int d = 0; d < rank; ++d) {
    map.dims[d] = merged_dims[d];
    map.strides[d] = merged_strides[d];
  }
  return map;
}

// The identity map of a contiguous tensor of `n` elements.
inline IndexMap ContiguousMap(int64_t n) {
  IndexMap map;
  if (n > 1) {
    map.rank = 1;
    map.dims[0] = n;
    map.strides[0] = 1;
  }
  return map;
}

// InvalidArgument unless the kernel's pointers are on `device` (a table is made for one device).
inline absl::Status CheckDevice(const KernelArgs& args, Device device) {
  if (args.device != device) {
    return kernel_internal::KernelError(
        args, absl::StrCat("the kernel runs on ", DeviceName(device), " memory, the op's values are on ",
                           DeviceName(args.device)));
  }
  return absl::OkStatus();
}

// Output `out` may be input `in` exactly (same address and size: an element-by-element write in
// place) or not overlap it at all; FailedPrecondition otherwise.
inline absl::Status CheckSameOrApart(const KernelArgs& args, int in, int out) {
  const int64_t in_bytes = kernel_internal::ByteSizeOf(*args.input_types[in]);
  const int64_t out_bytes = kernel_internal::ByteSizeOf(*args.output_types[out]);
  if (args.inputs[in] == args.outputs[out] && in_bytes == out_bytes) return absl::OkStatus();
  return kernel_internal::CheckNoOverlap(args, in, out);
}

using kernel_internal::CheckOutputsApart;

// Device bodies load and store through typed pointers, and a misaligned load on a GPU is a
// sticky fault that ends the CUDA context: every value must sit at a multiple of its element
// size. InvalidArgument naming the value otherwise (a plan made with a small --alignment).
inline absl::Status CheckElementAlignment(const KernelArgs& args) {
  auto check = [&](const void* p, const graph::TensorType& t, const char* what,
                   size_t i) -> absl::Status {
    const int64_t size = graph::DataTypeSize(t.dtype);
    if (size > 1 && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(size) != 0) {
      return kernel_internal::KernelError(
          args, absl::StrCat(what, " ", i, " (", graph::TensorTypeToString(t),
                             ") is not aligned to its ", size,
                             "-byte elements; the device kernels need a plan made with "
                             "--alignment 16 or more"));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    MG_RETURN_IF_ERROR(check(args.inputs[i], *args.input_types[i], "input", i));
  }
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    MG_RETURN_IF_ERROR(check(args.outputs[i], *args.output_types[i], "output", i));
  }
  return absl::OkStatus();
}

}  // namespace memonger::alloc::device

#endif  // MEMONGER_KERNELS_CUDA_DEVICE_KERNEL_UTIL_H_

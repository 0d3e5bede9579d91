// Arena: the one block of memory a plan's offsets point into. A plan says "value v lives at
// offset o"; the arena gives the base, and `base() + o` is v's memory for its lifetime.
//
// One allocation per arena, on the host (always) or on the current CUDA device (when built with
// CUDA). The base is aligned to max(256, alignment) and never moves while the arena lives, so
// the addresses a plan yields are stable (the property CUDA-graph capture needs). Move-only.
//
//   MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(graph, options));
//   MG_ASSIGN_OR_RETURN(alloc::Arena arena,
//                       alloc::Arena::Create(alloc::Device::kHost, plan.arena_bytes));
//   std::byte* x = arena.base() + plan.offset_of_value[x_id];
//
// Errors (no exception crosses the API):
//   InvalidArgument    negative size, or an alignment that is not a power of two;
//   ResourceExhausted  more bytes than the device has available (the message names both);
//   FailedPrecondition CUDA: no device, a driver older than the runtime, or a build without CUDA
//                      (the message carries the CUDA error text).
#ifndef MEMONGER_ALLOCATOR_ARENA_H_
#define MEMONGER_ALLOCATOR_ARENA_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/device.h"

namespace memonger::alloc {

// The smallest base alignment of every arena (RMM's and cudaMalloc's 256 bytes).
inline constexpr int64_t kMinArenaAlignment = 256;

// True when this library was built with CUDA (Arena::Create(kCuda, ...) can then succeed).
bool BuiltWithCuda();

class Arena {
 public:
  // One block of `bytes` (>= 0) on `device`, its base aligned to max(256, alignment).
  // `alignment` must be a power of two. A zero-byte arena is allowed; its base is still a valid,
  // aligned, non-null pointer (nothing may be accessed through it).
  static absl::StatusOr<Arena> Create(Device device, int64_t bytes,
                                      int64_t alignment = kMinArenaAlignment);

  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // Fixed for the arena's life (moving the arena moves ownership, not the memory).
  // On kCuda this is a device pointer: the host must not dereference it.
  std::byte* base() const { return base_; }
  int64_t size() const { return size_; }  // the bytes asked for
  Device device() const { return device_; }
  int64_t alignment() const { return alignment_; }  // the base's alignment: max(256, asked)

 private:
  Arena(Device device, void* allocation, std::byte* base, int64_t size, int64_t alignment)
      : device_(device), allocation_(allocation), base_(base), size_(size),
        alignment_(alignment) {}
  void Release();

  Device device_ = Device::kHost;
  void* allocation_ = nullptr;  // what the allocator returned (freed on destruction)
  std::byte* base_ = nullptr;   // allocation_ aligned up
  int64_t size_ = 0;
  int64_t alignment_ = kMinArenaAlignment;
};

// Copies `bytes` between host memory and memory on `device` (memcpy for kHost; cudaMemcpy, which
// waits for earlier device work, for kCuda). FailedPrecondition for kCuda in a build without
// CUDA; Internal with the CUDA error text when the copy fails.
absl::Status CopyToDevice(Device device, std::byte* dst, const void* host_src, int64_t bytes);
absl::Status CopyToHost(Device device, void* host_dst, const std::byte* src, int64_t bytes);

// Bytes of host memory this process may still allocate: MemAvailable of /proc/meminfo (else
// the available physical pages), lowered by a cgroup v2 memory limit when one is set. The
// number is a snapshot for the size check and its message, not a reservation.
int64_t AvailableHostBytes();

namespace internal {
// The CUDA side (arena_cuda.cu), linked only when built with CUDA. Allocates `bytes` on the
// current device: FailedPrecondition (CUDA error text) without a usable device,
// ResourceExhausted naming needed and free bytes when it does not fit.
absl::StatusOr<void*> CudaAllocate(int64_t bytes);
void CudaFree(void* allocation);
// cudaMemcpy host -> device (to_device) or device -> host.
absl::Status CudaCopy(void* dst, const void* src, int64_t bytes, bool to_device);
}  // namespace internal

}  // namespace memonger::alloc

#endif  // MEMONGER_ALLOCATOR_ARENA_H_

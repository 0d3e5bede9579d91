// Verify kernels: the fill and check that let the executor run any net without real kernels and
// still prove that no value was overwritten while live.
//
// Every value gets a pattern: word i (8 bytes) of value `key` is PatternWord(key, i), a
// splitmix64 hash of (key, i); a trailing partial word holds the first bytes of its word. A
// producer fills its outputs; every reader checks every byte of its inputs. Because the pattern
// depends on the value and on the position, any overwrite by another value (or a shifted copy of
// the same one) changes some byte and is found. The key of a value is its ValueId + 1: a value
// is one version of a blob, so (name, version) determine it.
//
//   alloc::FillPattern(Device::kHost, p, 100, /*key=*/7);
//   absl::StatusOr<int64_t> bad = alloc::FindPatternMismatch(Device::kHost, p, 100, 7);
//   // *bad == -1: every byte holds the pattern; else the first byte that does not
//
// Pointers may have any alignment. Host versions always; CUDA versions (device pointers) when
// built with CUDA, else FailedPrecondition.
#ifndef MEMONGER_KERNELS_VERIFY_KERNELS_H_
#define MEMONGER_KERNELS_VERIFY_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/device.h"

#if defined(__CUDACC__)
#define MG_HOST_DEVICE __host__ __device__
#else
#define MG_HOST_DEVICE
#endif

namespace memonger::alloc {

// Word `word` of the pattern of `key` (splitmix64's finalizer over a mix of both).
MG_HOST_DEVICE inline uint64_t PatternWord(uint64_t key, uint64_t word) {
  uint64_t z = key * 0x9E3779B97F4A7C15ull + word * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Byte `index` of the pattern of `key` (little-endian within a word, as x86 and CUDA store it).
MG_HOST_DEVICE inline unsigned char PatternByte(uint64_t key, uint64_t index) {
  return static_cast<unsigned char>(PatternWord(key, index / 8) >> (8 * (index % 8)));
}

// Host memory.
void FillPatternHost(std::byte* data, int64_t bytes, uint64_t key);
// The first byte of [data, data + bytes) not holding the pattern of `key`, or -1.
int64_t FindPatternMismatchHost(const std::byte* data, int64_t bytes, uint64_t key);

// Memory of `device` (a device pointer for kCuda). FailedPrecondition for kCuda in a build
// without CUDA; the CUDA error text when a launch fails.
absl::Status FillPattern(Device device, std::byte* data, int64_t bytes, uint64_t key);
absl::StatusOr<int64_t> FindPatternMismatch(Device device, const std::byte* data, int64_t bytes,
                                            uint64_t key);

namespace internal {
// verify_kernels_cuda.cu, linked only when built with CUDA.
absl::Status CudaFillPattern(std::byte* data, int64_t bytes, uint64_t key);
absl::StatusOr<int64_t> CudaFindPatternMismatch(const std::byte* data, int64_t bytes,
                                                uint64_t key);
}  // namespace internal

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_VERIFY_KERNELS_H_

#include "kernels/verify_kernels.h"

#include <cstring>

#include "util/check.h"

namespace memonger::alloc {
namespace {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kLittleEndian = true;
#else
constexpr bool kLittleEndian = false;
#endif

}  // namespace

void FillPatternHost(std::byte* data, int64_t bytes, uint64_t key) {
  MG_CHECK(bytes >= 0);
  const int64_t words = bytes / 8;
  if (kLittleEndian) {
    for (int64_t i = 0; i < words; ++i) {
      const uint64_t w = PatternWord(key, static_cast<uint64_t>(i));
      std::memcpy(data + 8 * i, &w, 8);
    }
  } else {
    for (int64_t i = 0; i < 8 * words; ++i) {
      data[i] = static_cast<std::byte>(PatternByte(key, static_cast<uint64_t>(i)));
    }
  }
  for (int64_t i = 8 * words; i < bytes; ++i) {
    data[i] = static_cast<std::byte>(PatternByte(key, static_cast<uint64_t>(i)));
  }
}

int64_t FindPatternMismatchHost(const std::byte* data, int64_t bytes, uint64_t key) {
  MG_CHECK(bytes >= 0);
  const int64_t words = kLittleEndian ? bytes / 8 : 0;
  for (int64_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, data + 8 * i, 8);
    if (w != PatternWord(key, static_cast<uint64_t>(i))) {
      for (int64_t b = 8 * i; b < 8 * i + 8; ++b) {
        if (data[b] != static_cast<std::byte>(PatternByte(key, static_cast<uint64_t>(b)))) {
          return b;
        }
      }
      MG_CHECK(false && "a mismatching word without a mismatching byte");
    }
  }
  for (int64_t b = 8 * words; b < bytes; ++b) {
    if (data[b] != static_cast<std::byte>(PatternByte(key, static_cast<uint64_t>(b)))) return b;
  }
  return -1;
}

absl::Status FillPattern(Device device, std::byte* data, int64_t bytes, uint64_t key) {
  if (bytes == 0) return absl::OkStatus();
  switch (device) {
    case Device::kHost:
      FillPatternHost(data, bytes, key);
      return absl::OkStatus();
    case Device::kCuda:
#ifdef MEMONGER_HAVE_CUDA
      return internal::CudaFillPattern(data, bytes, key);
#else
      return absl::FailedPreconditionError("verify fill on CUDA: memonger was built without CUDA");
#endif
  }
  return absl::InvalidArgumentError("unknown device");
}

absl::StatusOr<int64_t> FindPatternMismatch(Device device, const std::byte* data, int64_t bytes,
                                            uint64_t key) {
  if (bytes == 0) return -1;
  switch (device) {
    case Device::kHost:
      return FindPatternMismatchHost(data, bytes, key);
    case Device::kCuda:
#ifdef MEMONGER_HAVE_CUDA
      return internal::CudaFindPatternMismatch(data, bytes, key);
#else
      return absl::FailedPreconditionError(
          "verify check on CUDA: memonger was built without CUDA");
#endif
  }
  return absl::InvalidArgumentError("unknown device");
}

}  // namespace memonger::alloc

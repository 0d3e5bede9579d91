#include "allocator/arena.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "util/bytes.h"
#include "util/check.h"
#include "util/checked_math.h"
#include "util/status_macros.h"

namespace memonger::alloc {
namespace {

constexpr int64_t kUnknown = std::numeric_limits<int64_t>::max();

// "MemAvailable:   21102732 kB" -> bytes; kUnknown when absent.
int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest(line);
    if (!absl::ConsumePrefix(&rest, "MemAvailable:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    const bool kib = absl::ConsumeSuffix(&rest, "kB");
    int64_t n = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &n) || n < 0) return kUnknown;
    if (!kib) return n;
    const auto bytes = util::CheckedMul(n, 1024);
    return bytes ? *bytes : kUnknown;
  }
  return kUnknown;
}

// One integer from a cgroup file ("max" or a missing file: kUnknown).
int64_t ReadCgroupNumber(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return kUnknown;
  int64_t n = 0;
  return absl::SimpleAtoi(text, &n) && n >= 0 ? n : kUnknown;
}

absl::Status CheckAlignment(int64_t alignment) {
  if (alignment < 1 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("arena alignment ", alignment, " is not a power of two >= 1"));
  }
  return absl::OkStatus();
}

absl::Status TooBig(absl::string_view where, int64_t needed, int64_t available,
                    absl::string_view source) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "arena of ", needed, " bytes (", util::FormatBytes(needed), ") does not fit ", where,
      ": needed ", needed, " bytes, available ", available, " bytes (",
      util::FormatBytes(available), ", ", source, ")"));
}

}  // namespace

bool BuiltWithCuda() {
#ifdef MEMONGER_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int64_t AvailableHostBytes() {
  int64_t available = MemAvailableBytes();
  if (available == kUnknown) {
    const long pages = sysconf(_SC_AVPHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_size > 0) {
      const auto bytes = util::CheckedMul(pages, page_size);
      if (bytes) available = *bytes;
    }
  }
  const int64_t limit = ReadCgroupNumber("/sys/fs/cgroup/memory.max");
  if (limit != kUnknown) {
    const int64_t current = ReadCgroupNumber("/sys/fs/cgroup/memory.current");
    const int64_t left = current == kUnknown ? limit : std::max<int64_t>(limit - current, 0);
    available = std::min(available, left);
  }
  return available;
}

absl::StatusOr<Arena> Arena::Create(Device device, int64_t bytes, int64_t alignment) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("arena size ", bytes, " bytes is negative"));
  }
  MG_RETURN_IF_ERROR(CheckAlignment(alignment));
  alignment = std::max(alignment, kMinArenaAlignment);
  // At least one aligned unit, so that base() is a real pointer even for zero bytes.
  const auto rounded = util::CheckedAlignUp(std::max<int64_t>(bytes, 1), alignment);

  switch (device) {
    case Device::kHost: {
      const int64_t available = AvailableHostBytes();
      if (!rounded || bytes > available) {
        return TooBig("in host memory", bytes, available, "MemAvailable and cgroup limit");
      }
      void* p = std::aligned_alloc(static_cast<size_t>(alignment), static_cast<size_t>(*rounded));
      if (p == nullptr) {
        return TooBig("in host memory (aligned_alloc failed)", bytes, available,
                      "MemAvailable and cgroup limit");
      }
      return Arena(device, p, static_cast<std::byte*>(p), bytes, alignment);
    }
    case Device::kCuda: {
#ifdef MEMONGER_HAVE_CUDA
      // cudaMalloc aligns to 256 bytes; a larger alignment takes the slack from one extra unit.
      const int64_t slack = alignment > kMinArenaAlignment ? alignment : 0;
      const auto padded = rounded ? util::CheckedAdd(*rounded, slack) : std::nullopt;
      if (!padded) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "arena of ", bytes, " bytes does not fit on the CUDA device: needed ", bytes,
            " bytes, more than any device holds"));
      }
      MG_ASSIGN_OR_RETURN(void* p, internal::CudaAllocate(*padded));
      const uintptr_t address = reinterpret_cast<uintptr_t>(p);
      const uintptr_t mask = static_cast<uintptr_t>(alignment) - 1;
      std::byte* base = reinterpret_cast<std::byte*>((address + mask) & ~mask);
      return Arena(device, p, base, bytes, alignment);
#else
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot create a CUDA arena of ", bytes,
          " bytes: memonger was built without CUDA (no CUDA compiler found at configure time)"));
#endif
    }
  }
  return absl::InvalidArgumentError("unknown arena device");
}

Arena::Arena(Arena&& other) noexcept
    : device_(other.device_),
      allocation_(std::exchange(other.allocation_, nullptr)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      alignment_(other.alignment_) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = other.device_;
    allocation_ = std::exchange(other.allocation_, nullptr);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    alignment_ = other.alignment_;
  }
  return *this;
}

Arena::~Arena() { Release(); }

void Arena::Release() {
  if (allocation_ == nullptr) return;
  switch (device_) {
    case Device::kHost:
      std::free(allocation_);
      break;
    case Device::kCuda:
#ifdef MEMONGER_HAVE_CUDA
      internal::CudaFree(allocation_);
#else
      MG_CHECK(false && "a CUDA arena in a build without CUDA");
#endif
      break;
  }
  allocation_ = nullptr;
  base_ = nullptr;
  size_ = 0;
}

namespace {
absl::Status Copy(Device device, void* dst, const void* src, int64_t bytes, bool to_device) {
  if (bytes <= 0) return absl::OkStatus();
  switch (device) {
    case Device::kHost:
      std::memcpy(dst, src, static_cast<size_t>(bytes));
      return absl::OkStatus();
    case Device::kCuda:
#ifdef MEMONGER_HAVE_CUDA
      return internal::CudaCopy(dst, src, bytes, to_device);
#else
      (void)to_device;
      return absl::FailedPreconditionError(
          "cannot copy to or from CUDA memory: memonger was built without CUDA");
#endif
  }
  return absl::InvalidArgumentError("unknown device");
}
}  // namespace

absl::Status CopyToDevice(Device device, std::byte* dst, const void* host_src, int64_t bytes) {
  return Copy(device, dst, host_src, bytes, /*to_device=*/true);
}

absl::Status CopyToHost(Device device, void* host_dst, const std::byte* src, int64_t bytes) {
  return Copy(device, host_dst, src, bytes, /*to_device=*/false);
}

}  // namespace memonger::alloc

// Device: where a block of memory lives and where a kernel runs. Shared by the kernels (which
// check that an op's values sit on their device) and the arenas (allocator/arena.h) that hand
// out that memory.
//
//   alloc::Device device = alloc::Device::kCuda;
//   absl::StrCat("running on ", alloc::DeviceName(device));  // "running on cuda"
#ifndef MEMONGER_KERNELS_DEVICE_H_
#define MEMONGER_KERNELS_DEVICE_H_

#include "absl/strings/string_view.h"

namespace memonger::alloc {

enum class Device { kHost, kCuda };
absl::string_view DeviceName(Device device);  // "host", "cuda"

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_DEVICE_H_

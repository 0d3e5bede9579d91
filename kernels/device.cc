#include "kernels/device.h"

namespace memonger::alloc {

absl::string_view DeviceName(Device device) {
  switch (device) {
    case Device::kHost: return "host";
    case Device::kCuda: return "cuda";
  }
  return "host";
}

}  // namespace memonger::alloc

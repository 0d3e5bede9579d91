#include "kernels/kernel.h"

#include <string>
#include <utility>

namespace memonger::alloc {

const Kernel* KernelTable::Find(absl::string_view op_type) const {
  const auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

KernelTable KernelTable::With(absl::string_view op_type, Kernel kernel) && {
  kernels_[std::string(op_type)] = std::move(kernel);
  return std::move(*this);
}

}  // namespace memonger::alloc

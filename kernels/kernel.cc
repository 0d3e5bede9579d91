#include "kernels/kernel.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace memonger::alloc {

const Kernel* KernelTable::Find(absl::string_view op_type) const {
  const auto it = kernels_.find(op_type);
  return it == kernels_.end() ? nullptr : &it->second;
}

KernelTable KernelTable::With(absl::string_view op_type, Kernel kernel) && {
  kernels_[std::string(op_type)] = std::move(kernel);
  return std::move(*this);
}

KernelTable KernelTable::WithCaptureCheck(absl::string_view op_type, CaptureCheck check) && {
  capture_checks_[std::string(op_type)] = std::move(check);
  return std::move(*this);
}

std::string KernelTable::CaptureBlocker(const graph::Graph& graph, const graph::Op& op) const {
  if (Find(op.type) == nullptr) return absl::StrCat("no kernel for op type '", op.type, "'");
  const auto it = capture_checks_.find(op.type);
  return it == capture_checks_.end() ? std::string() : it->second(graph, op);
}

}  // namespace memonger::alloc

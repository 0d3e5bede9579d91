// Runs a function on a thread with a stack of a given size, for deep recursions.
//
//   MG_RETURN_IF_ERROR(util::RunWithStack(64 << 20, [&] { result = Search(problem); }));
//
// The exact offset search recurses once per placed item; with thousands of items that needs
// more stack than a caller's thread may have (8 MiB for a Linux main thread, often less for
// worker threads). The pages of the stack are reserved, not touched: only the depth reached
// costs memory.
#ifndef MEMONGER_UTIL_DEEP_STACK_H_
#define MEMONGER_UTIL_DEEP_STACK_H_

#include <cstddef>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace memonger::util {

// Calls `fn` on a new thread whose stack is at least `stack_bytes` and waits for it to return.
// ResourceExhausted when the thread cannot be created (fn is then not called).
absl::Status RunWithStack(size_t stack_bytes, absl::FunctionRef<void()> fn);

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_DEEP_STACK_H_

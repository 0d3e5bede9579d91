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

// Calls fn(0) on the calling thread and fn(1), ..., fn(threads - 1) each on a new thread whose
// stack is at least `stack_bytes`, and waits for all of them. A thread that cannot be created is
// skipped, so fn must be a worker loop that takes its work from a queue shared with the others
// (util/ordered_race.h): they then do its share. The calling thread's own stack must be as
// large as the work needs (call from inside RunWithStack when it is deep).
void RunOnThreads(int threads, size_t stack_bytes, absl::FunctionRef<void(int worker)> fn);

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_DEEP_STACK_H_

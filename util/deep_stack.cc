#include "util/deep_stack.h"

#include <pthread.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace memonger::util {
namespace {

void* Trampoline(void* arg) {
  (*static_cast<absl::FunctionRef<void()>*>(arg))();
  return nullptr;
}

}  // namespace

absl::Status RunWithStack(size_t stack_bytes, absl::FunctionRef<void()> fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) {
    return absl::ResourceExhaustedError("cannot initialise thread attributes");
  }
  const size_t min_bytes = static_cast<size_t>(PTHREAD_STACK_MIN);
  const size_t bytes = stack_bytes < min_bytes ? min_bytes : stack_bytes;
  int error = pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  if (error == 0) error = pthread_create(&thread, &attr, Trampoline, &fn);
  pthread_attr_destroy(&attr);
  if (error != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot start a thread with a ", bytes,
                                                     "-byte stack: ", std::strerror(error)));
  }
  pthread_join(thread, nullptr);
  return absl::OkStatus();
}

}  // namespace memonger::util

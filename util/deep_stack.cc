#include "util/deep_stack.h"

#include <pthread.h>

#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memonger::util {
namespace {

void* Trampoline(void* arg) {
  (*static_cast<absl::FunctionRef<void()>*>(arg))();
  return nullptr;
}

// Starts `fn` on a new thread with a stack of at least `stack_bytes`; the pthread error or 0.
int Start(size_t stack_bytes, absl::FunctionRef<void()>* fn, pthread_t* thread) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return -1;
  const size_t min_bytes = static_cast<size_t>(PTHREAD_STACK_MIN);
  const size_t bytes = stack_bytes < min_bytes ? min_bytes : stack_bytes;
  int error = pthread_attr_setstacksize(&attr, bytes);
  if (error == 0) error = pthread_create(thread, &attr, Trampoline, fn);
  pthread_attr_destroy(&attr);
  return error;
}

}  // namespace

absl::Status RunWithStack(size_t stack_bytes, absl::FunctionRef<void()> fn) {
  pthread_t thread;
  const int error = Start(stack_bytes, &fn, &thread);
  if (error != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start a thread with a ", stack_bytes, "-byte stack: ",
                     error < 0 ? "no thread attributes" : std::strerror(error)));
  }
  pthread_join(thread, nullptr);
  return absl::OkStatus();
}

void RunOnThreads(int threads, size_t stack_bytes, absl::FunctionRef<void(int worker)> fn) {
  // One callable per worker, alive until every thread is joined.
  std::vector<std::function<void()>> bodies;
  for (int w = 1; w < threads; ++w) bodies.emplace_back([fn, w] { fn(w); });
  std::vector<absl::FunctionRef<void()>> refs(bodies.begin(), bodies.end());
  std::vector<pthread_t> started;
  started.reserve(refs.size());
  for (absl::FunctionRef<void()>& ref : refs) {
    pthread_t thread;
    if (Start(stack_bytes, &ref, &thread) == 0) started.push_back(thread);
  }
  fn(0);
  for (pthread_t thread : started) pthread_join(thread, nullptr);
}

}  // namespace memonger::util

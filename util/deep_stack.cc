#include "util/deep_stack.h"

#include <pthread.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace memonger::util {
namespace {

// Starts body(arg) on a new thread with a stack of at least `stack_bytes`; the pthread error,
// -1 when no thread attributes could be had, or 0.
int Start(size_t stack_bytes, void* (*body)(void*), void* arg, pthread_t* thread) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return -1;
  const size_t min_bytes = static_cast<size_t>(PTHREAD_STACK_MIN);
  const size_t bytes = stack_bytes < min_bytes ? min_bytes : stack_bytes;
  int error = pthread_attr_setstacksize(&attr, bytes);
  if (error == 0) error = pthread_create(thread, &attr, body, arg);
  pthread_attr_destroy(&attr);
  return error;
}

void* CallOnce(void* arg) {
  (*static_cast<absl::FunctionRef<void()>*>(arg))();
  return nullptr;
}

// One worker of RunOnThreads: the shared function and this worker's index.
struct Worker {
  absl::FunctionRef<void(int)> fn;
  int index;
};

void* CallWorker(void* arg) {
  const Worker& worker = *static_cast<const Worker*>(arg);
  worker.fn(worker.index);
  return nullptr;
}

}  // namespace

absl::Status RunWithStack(size_t stack_bytes, absl::FunctionRef<void()> fn) {
  pthread_t thread;
  const int error = Start(stack_bytes, CallOnce, &fn, &thread);
  if (error != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start a thread with a ", stack_bytes, "-byte stack: ",
                     error < 0 ? "no thread attributes" : std::strerror(error)));
  }
  pthread_join(thread, nullptr);
  return absl::OkStatus();
}

void RunOnThreads(int threads, size_t stack_bytes, absl::FunctionRef<void(int worker)> fn) {
  std::vector<Worker> workers;  // sized once: the threads hold pointers into it
  workers.reserve(threads > 1 ? static_cast<size_t>(threads - 1) : 0);
  for (int w = 1; w < threads; ++w) workers.push_back(Worker{fn, w});
  std::vector<pthread_t> started;
  started.reserve(workers.size());
  for (Worker& worker : workers) {
    pthread_t thread;
    if (Start(stack_bytes, CallWorker, &worker, &thread) == 0) started.push_back(thread);
  }
  fn(0);
  for (pthread_t thread : started) pthread_join(thread, nullptr);
}

}  // namespace memonger::util

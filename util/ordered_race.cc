#include "util/ordered_race.h"

#include <algorithm>
#include <atomic>

#include "util/check.h"
#include "util/deep_stack.h"

namespace memonger::util {

int RaceInOrder(int threads, size_t stack_bytes, int max_tasks,
                absl::FunctionRef<TaskEnd(int task, const RaceStop& stop)> task) {
  MG_CHECK(threads >= 1 && max_tasks >= 0);
  std::atomic<int> first_end{max_tasks};
  if (threads == 1 || max_tasks <= 1) {
    for (int k = 0; k < max_tasks; ++k) {
      if (task(k, RaceStop(first_end, k)) != TaskEnd::kUndecided) return k;
    }
    return max_tasks;
  }
  std::atomic<int> next{0};
  auto worker = [&](int) {
    for (;;) {
      const int k = next.fetch_add(1, std::memory_order_relaxed);
      // Tasks are taken in index order, so once one is past the end every later one is too.
      if (k >= max_tasks || k > first_end.load(std::memory_order_relaxed)) return;
      if (task(k, RaceStop(first_end, k)) == TaskEnd::kUndecided) continue;
      int seen = first_end.load(std::memory_order_relaxed);
      while (k < seen && !first_end.compare_exchange_weak(seen, k, std::memory_order_relaxed)) {
      }
    }
  };
  RunOnThreads(std::min(threads, max_tasks), stack_bytes, worker);
  // Joining the threads ordered every task's writes before this read and the caller's.
  return first_end.load(std::memory_order_relaxed);
}

}  // namespace memonger::util

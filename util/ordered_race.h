// Runs numbered tasks 0, 1, 2, ... on several threads and returns what one thread running them in
// order would: the index of the first task that ends the race. The searches use it to try their
// orders and restarts side by side while answering exactly as they would on one thread.
//
//   std::vector<Outcome> outcomes(kOrders);
//   const int first = util::RaceInOrder(threads, stack_bytes, kOrders,
//       [&](int task, const util::RaceStop& stop) {
//         outcomes[task] = SearchWithOrder(task, stop);  // polls stop() now and then
//         return outcomes[task] == kDecided ? util::TaskEnd::kDecisive : util::TaskEnd::kUndecided;
//       });
//   // first < kOrders: outcomes[first] is the answer of the serial loop; else none decided.
//
// A task returns kUndecided (go on), kDecisive (the race is won: its answer stands) or kNoMore (no
// task from this one on is worth running, e.g. a deadline has passed). The race ends at the
// lowest index whose task returned kDecisive or kNoMore; that index is returned (max_tasks when
// none did). Each worker takes the lowest task not yet taken, while that index is below the
// lowest end seen so far. A running task whose index is above an end is abandoned: its stop()
// turns true, it should return soon, and whatever it returns is ignored.
//
// Determinism: where a task's return depends only on its index (a node limit, not a clock,
// bounds it), the returned index is the one the serial loop returns for every thread count, so
// the answer kept from that task is too. Every task below the returned index runs to its end.
//
// Cost: at most `threads` tasks at once; with one thread, or at most one task, the tasks run in
// order on the calling thread. Otherwise each call starts min(threads, max_tasks) - 1 threads
// (so a caller racing many tiny tasks should race them serially). The calling thread is worker
// 0: its stack must be at least `stack_bytes`.
#ifndef MEMONGER_UTIL_ORDERED_RACE_H_
#define MEMONGER_UTIL_ORDERED_RACE_H_

#include <atomic>
#include <cstddef>

#include "absl/functional/function_ref.h"

namespace memonger::util {

enum class TaskEnd { kUndecided, kDecisive, kNoMore };

// What a running task polls: true once a task with a lower index has ended the race.
class RaceStop {
 public:
  RaceStop(const std::atomic<int>& first_end, int task) : first_end_(first_end), task_(task) {}
  bool operator()() const { return first_end_.load(std::memory_order_relaxed) < task_; }

 private:
  const std::atomic<int>& first_end_;
  const int task_;
};

// REQUIRES: threads >= 1, max_tasks >= 0.
int RaceInOrder(int threads, size_t stack_bytes, int max_tasks,
                absl::FunctionRef<TaskEnd(int task, const RaceStop& stop)> task);

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_ORDERED_RACE_H_

// Threads for the CPU kernels: body(w) for w in [0, workers), on workers - 1 new threads and the
// caller's. A kernel splits only whole pieces of its output over the workers and computes each
// piece as it would on one thread, so its results never depend on the count (KernelArgs::threads).
//
//   RunOnWorkers(workers, [&](int w) { for (int64_t i = w; i < pieces; i += workers) ...; });
//
// Starting a thread costs tens of microseconds: kernels call this only for work that is much
// larger (kMinParallelWork multiply-adds or element updates).
#ifndef MEMONGER_KERNELS_CPU_KERNEL_THREADS_H_
#define MEMONGER_KERNELS_CPU_KERNEL_THREADS_H_

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace memonger::alloc::kernel_internal {

// Below this much work (multiply-adds) one thread does it all: about what a thread's start
// costs.
inline constexpr double kMinParallelWork = 4.0 * 1024 * 1024;

// Workers for `work` operations split into `pieces` independent pieces, `threads` allowed.
inline int WorkersFor(int threads, double work, int64_t pieces) {
  if (threads <= 1 || work < kMinParallelWork || pieces <= 1) return 1;
  return static_cast<int>(std::min<int64_t>(threads, pieces));
}

template <typename Body>
void RunOnWorkers(int workers, Body body) {
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(std::max(workers - 1, 0)));
  for (int w = 1; w < workers; ++w) pool.emplace_back(body, w);
  body(0);
  for (std::thread& t : pool) t.join();
}

}  // namespace memonger::alloc::kernel_internal

#endif  // MEMONGER_KERNELS_CPU_KERNEL_THREADS_H_

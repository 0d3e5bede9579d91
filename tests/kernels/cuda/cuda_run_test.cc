// A net on a real GPU allocates nothing and waits for nothing inside its steps: the arena, the
// executor's static block and the kernels' scratch-and-workspace block are allocated before the
// first step, every launch goes to one stream, and the run's only wait is the one after the last
// step. The CUDA runtime's cudaMalloc, cudaFree, cudaDeviceSynchronize and cudaStreamSynchronize
// are wrapped at link time (-Wl,--wrap, tests/CMakeLists.txt) and counted while the steps run;
// cudaMemGetInfo before and after catches what cuBLAS or the driver might allocate on its own.
//
// Needs a GPU: skips with a message where none is present (and in a build without CUDA).
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>

#include "allocator/arena.h"
#include "allocator/executor.h"
#include "gtest/gtest.h"
#include "kernels/cuda/kernels_device.h"
#include "memonger/planner.h"
#include "workloads/workloads.h"

#ifdef MEMONGER_HAVE_CUDA
#include <cuda_runtime_api.h>

namespace {
// Test-only counters of the wrapped runtime calls (the test runs one thread).
int mallocs = 0;
int frees = 0;
int device_syncs = 0;
int stream_syncs = 0;
}  // namespace

extern "C" {
cudaError_t __real_cudaMalloc(void** pointer, size_t bytes);
cudaError_t __real_cudaFree(void* pointer);
cudaError_t __real_cudaDeviceSynchronize();
cudaError_t __real_cudaStreamSynchronize(cudaStream_t stream);

cudaError_t __wrap_cudaMalloc(void** pointer, size_t bytes) {
  ++mallocs;
  return __real_cudaMalloc(pointer, bytes);
}
cudaError_t __wrap_cudaFree(void* pointer) {
  ++frees;
  return __real_cudaFree(pointer);
}
cudaError_t __wrap_cudaDeviceSynchronize() {
  ++device_syncs;
  return __real_cudaDeviceSynchronize();
}
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t stream) {
  ++stream_syncs;
  return __real_cudaStreamSynchronize(stream);
}
}
#endif

namespace memonger::alloc {
namespace {

TEST(CudaRunTest, NoAllocationAndOneSynchronisation) {
#ifndef MEMONGER_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA: nothing to run on a GPU";
#else
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no CUDA device here: the allocation and synchronisation counts need a GPU";
  }
  for (const char* spec : {"attention:n=64,depth=2,mode=training",
                           "attention:n=64,depth=2,kernel=efficient,mode=training",
                           "random:ops=80,seed=3,width=16,mode=training"}) {
    SCOPED_TRACE(spec);
    absl::StatusOr<graph::WorkloadSpec> parsed = graph::ParseWorkloadSpec(spec);
    ASSERT_TRUE(parsed.ok());
    absl::StatusOr<graph::Graph> g = graph::BuildWorkload(*parsed);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<Plan> plan = PlanMemory(*g, PlanOptions{});
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<Arena> arena = Arena::Create(Device::kCuda, plan->arena_bytes, plan->alignment);
    ASSERT_TRUE(arena.ok()) << arena.status();
    CudaKernelOptions options;
    options.scratch_bytes = DeviceScratchBytes(*g);
    absl::StatusOr<CudaKernels> kernels = MakeCudaKernels(options);
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    absl::StatusOr<Executor> executor = Executor::Create(*g, *plan, *arena);
    ASSERT_TRUE(executor.ok()) << executor.status();
    // Inputs and weights are whatever the memory holds: the counts do not depend on the values.
    // Two runs: the first as a user's first step, the second as every later one (what a CUDA
    // graph would replay). Neither may call cudaMalloc, cudaFree or wait inside the steps. The
    // device's free memory must not move in the second run; in the first it drops by the code
    // the driver and cuBLAS load at a kernel's first launch (measured on an H200 with CUDA 13:
    // 2 MiB with the default lazy module loading, 29-46 MiB with CUDA_MODULE_LOADING=EAGER,
    // where cuBLAS's kernels load too), which no cudaMalloc of ours causes: it is printed.
    for (int run_index = 0; run_index < 2; ++run_index) {
      SCOPED_TRACE(run_index == 0 ? "first run" : "second run");
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      size_t free_before = 0, free_after = 0, total = 0;
      ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
      mallocs = frees = device_syncs = stream_syncs = 0;
      const absl::Status run = executor->Run(kernels->table);
      const int steps_mallocs = mallocs, steps_frees = frees, steps_device_syncs = device_syncs,
                steps_stream_syncs = stream_syncs;
      ASSERT_TRUE(run.ok()) << run;
      ASSERT_TRUE(kernels->synchronize().ok());
      ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
      EXPECT_EQ(steps_mallocs, 0);
      EXPECT_EQ(steps_frees, 0);
      EXPECT_EQ(steps_device_syncs, 0);
      EXPECT_EQ(steps_stream_syncs, 0);  // no op here reads device data on the host
      EXPECT_EQ(stream_syncs, 1);        // the one wait, after the last step
      if (run_index == 0) {
        std::cout << spec << ": the first run's steps took "
                  << static_cast<int64_t>(free_before) - static_cast<int64_t>(free_after)
                  << " bytes of device memory (kernel code loaded at first launch)\n";
      } else {
        EXPECT_EQ(free_after, free_before) << "something allocated device memory in the steps";
      }
    }
  }
#endif
}

}  // namespace
}  // namespace memonger::alloc

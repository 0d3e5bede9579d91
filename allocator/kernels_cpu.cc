#include "allocator/kernels_cpu.h"

#include <utility>

namespace memonger::alloc {

KernelTable MakeCpuKernelTable() {
  KernelMap kernels;
  AddCpuElementwiseKernels(kernels);
  AddCpuMatMulKernels(kernels);
  AddCpuNnKernels(kernels);
  AddCpuTensorKernels(kernels);
  AddCpuReduceKernels(kernels);
  AddCpuAttentionKernels(kernels);
  return KernelTable(std::move(kernels));
}

}  // namespace memonger::alloc

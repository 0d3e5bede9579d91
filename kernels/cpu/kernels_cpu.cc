#include "kernels/cpu/kernels_cpu.h"

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
  AddCpuAttentionBiasKernels(kernels);
  AddCpuAttentionBackwardKernels(kernels);
  AddCpuBackwardKernels(kernels);
  AddCpuBatchNormKernels(kernels);
  AddCpuConvKernels(kernels);
  AddCpuFillKernels(kernels);
  AddCpuLossKernels(kernels);
  AddCpuPoolKernels(kernels);
  return KernelTable(std::move(kernels));
}

}  // namespace memonger::alloc

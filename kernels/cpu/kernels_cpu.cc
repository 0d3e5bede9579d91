#include "kernels/cpu/kernels_cpu.h"

#include <utility>

#include "kernels/kernel_util.h"
#include "util/status_macros.h"

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
  AddCpuSoftmaxCrossEntropyKernels(kernels);
  AddCpuPoolKernels(kernels);
  AddCpuResizeKernels(kernels);
  AddCpuIndexKernels(kernels);
  AddCpuSelectKernels(kernels);
  AddCpuRnnKernels(kernels);
  AddCpuRnnGradientKernels(kernels);
  AddCpuEinsumKernels(kernels);
  // The CPU kernels dereference their pointers: on any other device's memory they refuse to run.
  // (Checked here, once per table, rather than in CheckArity, which the device kernels share.)
  for (auto& [type, kernel] : kernels) {
    kernel = [inner = std::move(kernel)](const KernelArgs& args) -> absl::Status {
      if (args.op != nullptr) MG_RETURN_IF_ERROR(kernel_internal::CheckHost(args));
      return inner(args);
    };
  }
  return KernelTable(std::move(kernels));
}

}  // namespace memonger::alloc

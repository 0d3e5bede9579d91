// kernels/cpu/: the CPU kernels, one file per op family, and their matrix product. This
// header is the entry point.
//
// CPU kernels: the KernelTable that lets Executor::Run compute a planned net on the host, in
// the arena the plan laid out.
//
//   MG_ASSIGN_OR_RETURN(alloc::Executor executor, alloc::Executor::Create(graph, plan, arena));
//   // write graph inputs and params at executor.ValueAddress(v) ...
//   MG_RETURN_IF_ERROR(executor.Run(alloc::MakeCpuKernelTable()));
//
// What runs (docs/kernels.md has the details):
//   - storage float32, float16, bfloat16 (and float64 where cheap); arithmetic in float32 for
//     the half types (float64 for float64); integer and bool tensors where an op moves or
//     indexes them (Shape, Gather, Cast, Concat, ...);
//   - elementwise (kernels_cpu_elementwise.cc), matrix products (kernels_cpu_matmul.cc over
//     gemm_cpu.h), Softmax and LayerNormalization (kernels_cpu_nn.cc), layout and copy ops
//     (kernels_cpu_tensor.cc), reductions (kernels_cpu_reduce.cc), and our attention ops
//     AlibiBias and EfficientAttention (kernels_cpu_attention.cc);
//   - for training: AddAttentionBias, PadLastDim, ConstantFill, Conv, SpatialBN and ONNX
//     BatchNormalization, pooling, the Caffe2 losses, and a backward kernel for every gradient
//     op the gradient builder emits (FlashAttention-style EfficientAttentionGradient included).
//
// Kernels read attributes with ONNX's names and semantics (Caffe2's where the op is Caffe2's),
// take every shape from KernelArgs' types (already inferred), and never abort: a bad or
// unsupported combination is a Status naming the op type (Unimplemented for what is not
// supported). In place: an output may share memory with an input exactly (the same address,
// as Caffe2's `Add(S, bias) -> S` or a view); elementwise kernels compute element by element so
// that this is correct; kernels that cannot compute in place detect any overlap between an
// input and an output and return FailedPrecondition instead of computing garbage. Copy-like
// ops (Reshape, Flatten, Squeeze, Unsqueeze, Identity) do nothing when the plan made the output
// a view of the input (one address).
//
// Deterministic: the same inputs give the same bytes for any KernelArgs::threads (only the
// matrix products of Conv and MatMul use threads, splitting whole output tiles) and wherever
// the plan puts the values (no result depends on an address or an alignment).
#ifndef MEMONGER_KERNELS_CPU_KERNELS_CPU_H_
#define MEMONGER_KERNELS_CPU_KERNELS_CPU_H_

#include <string>

#include "absl/container/flat_hash_map.h"
#include "kernels/kernel.h"

namespace memonger::alloc {

// Every CPU kernel (op type -> kernel), a new table per call.
KernelTable MakeCpuKernelTable();

// The families, each adding its op types to `kernels` (one file each).
using KernelMap = absl::flat_hash_map<std::string, Kernel>;
void AddCpuElementwiseKernels(KernelMap& kernels);  // kernels_cpu_elementwise.cc
void AddCpuMatMulKernels(KernelMap& kernels);       // kernels_cpu_matmul.cc
void AddCpuNnKernels(KernelMap& kernels);           // kernels_cpu_nn.cc
void AddCpuTensorKernels(KernelMap& kernels);       // kernels_cpu_tensor.cc
void AddCpuReduceKernels(KernelMap& kernels);       // kernels_cpu_reduce.cc
void AddCpuAttentionKernels(KernelMap& kernels);    // kernels_cpu_attention.cc
// Training: the forward ops of the generated training nets and the gradient ops that
// graph/gradient_builder.h emits (docs/kernels.md, "Training").
void AddCpuAttentionBiasKernels(KernelMap& kernels);      // kernels_cpu_attention_bias.cc
void AddCpuAttentionBackwardKernels(KernelMap& kernels);  // kernels_cpu_attention_backward.cc
void AddCpuBackwardKernels(KernelMap& kernels);           // kernels_cpu_backward.cc
void AddCpuBatchNormKernels(KernelMap& kernels);          // kernels_cpu_batchnorm.cc
void AddCpuConvKernels(KernelMap& kernels);               // kernels_cpu_conv.cc
void AddCpuFillKernels(KernelMap& kernels);               // kernels_cpu_fill.cc
void AddCpuLossKernels(KernelMap& kernels);               // kernels_cpu_loss.cc
void AddCpuSoftmaxCrossEntropyKernels(KernelMap& kernels);  // kernels_cpu_softmax_xent.cc
void AddCpuPoolKernels(KernelMap& kernels);               // kernels_cpu_pool.cc
void AddCpuResizeKernels(KernelMap& kernels);             // kernels_cpu_resize.cc
// What exporters emit beyond those (docs/kernels.md, "Op types").
void AddCpuIndexKernels(KernelMap& kernels);          // kernels_cpu_index.cc
void AddCpuSelectKernels(KernelMap& kernels);         // kernels_cpu_select.cc
void AddCpuRnnKernels(KernelMap& kernels);            // kernels_cpu_rnn.cc
void AddCpuRnnGradientKernels(KernelMap& kernels);    // kernels_cpu_rnn_backward.cc
void AddCpuEinsumKernels(KernelMap& kernels);         // kernels_cpu_einsum.cc

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_CPU_KERNELS_CPU_H_

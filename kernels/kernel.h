// The kernels' layer: the arithmetic of the ops, apart from where their memory comes from.
// A kernel is a function of one op's input and output addresses (KernelArgs); a KernelTable maps
// op types to kernels and is handed to whoever runs a net (allocator/executor.h). The tables
// themselves live below this folder: kernels/cpu/kernels_cpu.h (always) and
// kernels/cuda/kernels_device.h (the device kernels: CUDA when built with it, and a host backend
// that runs the same bodies). Beside them: fp16/bf16 conversions (float16.h), the verify
// kernels' fill-and-check patterns (verify_kernels.h) and tensor data I/O (npy.h,
// onnx_tensor_data.h, value_fill.h).
//
//   absl::Status MyRelu(const alloc::KernelArgs& args) { ... args.inputs[0] ... }
//   alloc::KernelTable kernels({{"Relu", MyRelu}});
//   const alloc::Kernel* relu = kernels.Find("Relu");  // nullptr for an unknown op type
#ifndef MEMONGER_KERNELS_KERNEL_H_
#define MEMONGER_KERNELS_KERNEL_H_

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "kernels/device.h"
#include "kernels/kernel_scratch.h"

namespace memonger::alloc {

// What a kernel gets for one op. Pointers are on `device` (device pointers for kCuda) and are
// valid only during the call. Values of role workspace are among the outputs, as the net
// declares them. A zero-byte value still has a (non-dereferenceable) pointer.
struct KernelArgs {
  const graph::Op* op = nullptr;
  Device device = Device::kHost;
  std::vector<const std::byte*> inputs;             // op->inputs order (repeats repeated)
  std::vector<const graph::TensorType*> input_types;
  std::vector<std::byte*> outputs;                  // op->outputs order
  std::vector<const graph::TensorType*> output_types;
  // Threads the kernel may use. A kernel's results never depend on it (the CPU kernels split
  // only whole output tiles of their matrix products, kernels/cpu/gemm_cpu.h).
  int threads = 1;
  // For ops whose output size depends on the data (NonZero, NonMaxSuppression): non-null when
  // the output types are upper bounds (graph::DataDependentSize). The kernel then writes each
  // output in the layout of the dims it computed, within the planned bytes, and sets
  // (*measured_dims)[k] to them. Null: the output types are exact, and a kernel finding other
  // sizes is an error.
  std::vector<std::vector<int64_t>>* measured_dims = nullptr;
  // Scratch the CPU kernels keep between ops (kernel_scratch.h), with room for `threads`
  // workers; null: each call allocates its own.
  KernelScratch* scratch = nullptr;
};
using Kernel = std::function<absl::Status(const KernelArgs&)>;

// Why an op's kernel cannot run inside a captured CUDA graph, decided from the op and its types
// alone: it reads device data on the host (a synchronisation and a host-side decision), say.
// "" when it can.
using CaptureCheck = std::function<std::string(const graph::Graph&, const graph::Op&)>;

// Op type -> kernel. Built once by the caller, immutable afterwards (no global registry).
class KernelTable {
 public:
  KernelTable() = default;
  explicit KernelTable(absl::flat_hash_map<std::string, Kernel> kernels)
      : kernels_(std::move(kernels)) {}
  // nullptr when the table has no kernel for `op_type`.
  const Kernel* Find(absl::string_view op_type) const;
  // This table with `op_type`'s kernel replaced (or added): how a wrapper such as the float16
  // census (fp16_census.h) decorates one kernel of an otherwise unchanged table.
  KernelTable With(absl::string_view op_type, Kernel kernel) &&;
  int size() const { return static_cast<int>(kernels_.size()); }

  // This table with a capture check for `op_type` (see CaptureCheck).
  KernelTable WithCaptureCheck(absl::string_view op_type, CaptureCheck check) &&;
  // Why `op` cannot be captured in a CUDA graph with this table's kernels: no kernel for its
  // type, or its capture check's reason; "" when it can.
  std::string CaptureBlocker(const graph::Graph& graph, const graph::Op& op) const;

 private:
  absl::flat_hash_map<std::string, Kernel> kernels_;
  absl::flat_hash_map<std::string, CaptureCheck> capture_checks_;
};

}  // namespace memonger::alloc

#endif  // MEMONGER_KERNELS_KERNEL_H_

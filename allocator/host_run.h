// Runs a planned net for real: one arena of the plan's size, every input and static value filled
// deterministically, the kernels through Executor::Run, and the graph outputs handed back and/or
// written as .npy files. RunOnHost uses the CPU kernels (kernels/cpu/kernels_cpu.h) on the host: `optimize-net
// --execute host`. RunNet takes the device and the kernel table: the CUDA kernels in a CUDA arena
// (kernels/cuda/kernels_device.h) are `optimize-net --execute cuda`; values are filled on the host and copied
// to the device, and the outputs copied back.
//
//   alloc::HostRunOptions options;
//   options.data = user_inputs;          // e.g. ReadTensorFiles("inputs/") (run_data.h)
//   options.outputs_dir = "out";         // out/<output name>.npy
//   MG_ASSIGN_OR_RETURN(alloc::HostRunReport report, alloc::RunOnHost(graph, plan, options));
//
// Where the values without a producer (graph inputs, params, constants) come from, first match:
//   1. HostRunOptions::data, by value name (the caller's tensors, e.g. the user's inputs);
//   2. the model's own data, carried by the graph (Graph::static_data: an ONNX model's
//      initializers, Constant nodes and folded values, loaded with LoadOptions::keep_data);
//   3. the seeded generator (value_fill.h): uniform [-1, 1) per value name for floats, 0 for
//      integers. Graph inputs the caller gives no data are seeded. A static value (param,
//      constant) of a model whose format carries data (the graph has static_data) but that
//      lacks its own is an error naming it, unless seed_missing: a model never runs on made-up
//      weights without the caller asking. NetDef files (.pb, .pbtxt) carry no tensor data at
//      all, so their params are seeded, and the report says so.
// Data whose type differs from the value's is an InvalidArgument naming the value.
//
// Deterministic: the kernels are single-threaded and their results do not depend on addresses,
// so the same model, options and seed give the same output bytes under every valid plan.
#ifndef MEMONGER_ALLOCATOR_HOST_RUN_H_
#define MEMONGER_ALLOCATOR_HOST_RUN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "graph/graph.h"
#include "kernels/fp16_census.h"
#include "kernels/onnx_tensor_data.h"
#include "memonger/plan.h"

namespace memonger::alloc {

struct HostRunOptions {
  uint64_t seed = 0;        // mixed into every seeded value's name hash
  // Seed a static value the model holds no data for (see above) instead of refusing to run.
  bool seed_missing = false;
  absl::flat_hash_map<std::string, TensorData> data;  // by value name; wins over the model
  std::string outputs_dir;  // non-empty: every graph output is written there as .npy
  bool keep_outputs = true; // copy the outputs into the report
  // Non-null: every Cast to float16 is counted there (fp16_census.h). Caller-owned, built
  // for the same graph.
  Fp16Census* fp16_census = nullptr;
  // Threads the host kernels may use (KernelArgs::threads): the outputs are the same bytes for
  // any count.
  int threads = 1;
  // For a net with data-dependent sizes (graph::DataDependentSizes): how the run retypes it as
  // it measures them (Executor::RunMeasuring); the outputs then have the sizes measured. Null:
  // such a net is refused.
  Executor::Retype retype;
};

struct HostRunOutput {
  std::string name;
  graph::TensorType type;
  std::string bytes;  // when keep_outputs
  std::string file;   // when outputs_dir is set
};

struct HostRunReport {
  int from_caller = 0;  // values filled from HostRunOptions::data
  int from_model = 0;   // from the model file's data
  int seeded = 0;       // from the seeded generator
  std::vector<std::string> seeded_statics;  // params/constants seeded for lack of data
  std::vector<HostRunOutput> outputs;       // the graph outputs, in order, each once
  double kernel_seconds = 0;                // time spent in the kernels (Executor::Run)
  int retypes = 0;            // how often a run with data-dependent sizes retyped the net
  double retype_seconds = 0;  // and the time that took (HostRunOptions::retype)
};

// Errors: those of Arena::Create, Executor::Create, Executor::Run (an op without a kernel is
// Unimplemented naming it; a kernel's error names the op), data of the wrong type, files that
// cannot be written.
absl::StatusOr<HostRunReport> RunOnHost(const graph::Graph& graph, const Plan& plan,
                                        const HostRunOptions& options);

// Where RunNet runs: the arena's device and the kernels for it (kernels made for that device).
struct NetRunTarget {
  Device device = Device::kHost;
  const KernelTable* kernels = nullptr;  // null: the CPU kernels (kHost only)
  // Called after the last step, before the outputs are read: the CUDA kernels' one wait for
  // the device (CudaKernels::synchronize). Null: nothing to wait for.
  std::function<absl::Status()> finish;
  // Non-null: run in this arena (on `device`, at least the plan's arena_bytes) instead of
  // allocating one; a symbolic plan's runner keeps one arena for every binding.
  Arena* arena = nullptr;
};

// RunOnHost on `target`. The float16 census reads host memory: InvalidArgument when it is asked
// for on another device. Errors as RunOnHost, plus those of the device copies.
absl::StatusOr<HostRunReport> RunNet(const graph::Graph& graph, const Plan& plan,
                                     const HostRunOptions& options, const NetRunTarget& target);

}  // namespace memonger::alloc

#endif  // MEMONGER_ALLOCATOR_HOST_RUN_H_

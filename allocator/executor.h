// allocator/: memory for a plan and running a net in it: the arenas (arena.h), this executor,
// and RunNet (host_run.h), which fills inputs and reads outputs back. Kernels come from
// kernels/.
//
// Executor: runs a planned net in one arena. It walks the plan's schedule and hands each op the
// addresses of its inputs and outputs (arena base + the value's offset) and calls the op's
// kernel. Verify mode needs no kernels: it proves, on real memory, that the plan never lets one
// value overwrite another while it is live.
//
//   MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(graph, options));
//   MG_ASSIGN_OR_RETURN(alloc::Arena arena,
//                       alloc::Arena::Create(alloc::Device::kHost, plan.arena_bytes));
//   MG_ASSIGN_OR_RETURN(alloc::Executor executor, alloc::Executor::Create(graph, plan, arena));
//   MG_RETURN_IF_ERROR(executor.RunVerify());             // no kernels needed
//   // or, with real kernels:
//   alloc::KernelTable kernels({{"Relu", MyRelu}, {"FC", MyFc}});
//   MG_RETURN_IF_ERROR(executor.Run(kernels));
//
// Verify mode, step by step:
//   1. every value without a producer (graph inputs, params) gets its pattern
//      (kernels/verify_kernels.h: a hash of (value, word index));
//   2. at each step, the op checks every byte of each input against the input's pattern, then
//      fills each output with the output's own pattern, then checks its inputs again (an op's
//      outputs must not overlap its own inputs, except the bytes it overwrites in place);
//   3. after the last step, every graph output is checked, and every graph input the caller
//      owns (all of them, unless the plan recycles inputs).
//   An output that takes the bytes of an input dying at its op (in-place reuse,
//   LivenessOptions::in_place) overwrites that input's pattern there; any later read of the
//   input would find the output's pattern instead and fail.
//   An in-place output writes its own pattern over the value it overwrites (the schedule runs
//   every reader of the old version first). A view output (LivenessOptions::views) writes nothing: it reads
//   as its input's pattern. A mismatch is DataLoss naming the clobbered value, the op that found
//   it, and the op (and value) that wrote over it, with byte ranges.
//
// Static values (params, constants) that the plan leaves out of the arena get memory of their
// own: one more allocation on the arena's device, owned by the executor, one block per alias
// class. In verify mode they are filled and checked like every other value.
//
// The executor walks the schedule serially, whatever the plan's execution model; every value
// is placed in the one arena, whatever device its op names.
#ifndef MEMONGER_ALLOCATOR_EXECUTOR_H_
#define MEMONGER_ALLOCATOR_EXECUTOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "allocator/arena.h"
#include "graph/control_regions.h"
#include "graph/graph.h"
#include "kernels/kernel.h"
#include "memonger/plan.h"

namespace memonger::alloc {

class Executor {
 public:
  // Checks that `plan` belongs to `graph` (same values and ops, a valid schedule, every value
  // typed, planned exactly the values liveness plans, alias classes at one offset) and that it
  // fits `arena`; allocates the static values' memory. It does not run VerifyPlan: verify mode
  // is the check of a plan on real memory.
  //   FailedPrecondition: a value without a type (run shape inference first);
  //   InvalidArgument: a plan for another graph, an invalid schedule, an offset outside the
  //                    arena, alias-class members at different offsets;
  //   ResourceExhausted: the arena is smaller than plan.arena_bytes, or no memory for statics.
  // REQUIRES: `graph` and `arena` outlive the executor (the plan is copied).
  static absl::StatusOr<Executor> Create(const graph::Graph& graph, const Plan& plan,
                                         Arena& arena);

  // Verify mode (see the file comment). OK, or DataLoss naming the clobbered value and the op
  // that wrote over it; FailedPrecondition when the device's verify kernels cannot run.
  absl::Status RunVerify();

  // Runs the net with real kernels, each allowed `threads` threads (KernelArgs::threads).
  // Unimplemented, naming every op type without a kernel (checked before anything runs); a
  // kernel's error is returned with the op's label and step prepended. Graph inputs and static values are whatever the
  // caller wrote at ValueAddress() before the call.
  absl::Status Run(const KernelTable& kernels, int threads = 1);

  // The net typed with the sizes a run has measured so far (value name -> dims) for its
  // data-dependent outputs, the others still at their bounds (graph/onnx/onnx_import.h,
  // OnnxImportOptions::measured_sizes): the same ops and names as the planned net.
  using Retype = std::function<absl::StatusOr<graph::Graph>(
      const absl::flat_hash_map<std::string, std::vector<int64_t>>& measured)>;

  // Runs a net with data-dependent sizes (graph::DataDependentSizes) in the plan made at their
  // upper bounds, on the host. In schedule order, an op runs once everything it reads is
  // computed and final (not derived from a bound, Graph::SizedFromBound), its types taken from
  // the current typing; a data-dependent op measures its outputs (KernelArgs::measured_dims).
  // When nothing more can run, `retype` types the net with the sizes measured so far: every
  // value must then fit the bytes the plan gave it, and constants folded from a bound (a
  // TopK's k) are rewritten from the new typing's data. A constant only the new typing has (the
  // empty result of an If's other branch: `if boxes.numel() == 0`) gets memory of its own.
  // Returns the last typing, whose types are the outputs' real ones.
  //   ResourceExhausted: a value larger at the measured sizes than the plan holds;
  //   FailedPrecondition: the measured sizes take the net another way (an If's other branch)
  //                       with activations the plan does not hold;
  //   else as Run.
  absl::StatusOr<graph::Graph> RunMeasuring(const KernelTable& kernels, int threads,
                                            const Retype& retype);

  // Control-flow regions (graph/control_regions.h): Run takes an If's branch the condition
  // names and runs a Loop's body as often as its trip count and condition say, the markers'
  // copies made by the executor itself (host memory only). RunVerify runs both branches, and
  // every Loop's body twice, the second time after writing what the jump back writes: a plan
  // that holds that holds every run. Create refuses a schedule that breaks a region up.
  const std::vector<graph::ControlRegion>& control_regions() const { return regions_; }

  // Where value `id` lives: base + offset for values in the arena, else its static memory.
  std::byte* ValueAddress(graph::ValueId id) const;
  bool InArena(graph::ValueId id) const { return offset_of_value_[id] != kNoOffset; }
  Device device() const { return arena_->device(); }
  // Bytes of the executor's own allocation for static values (aligned per alias class).
  int64_t static_bytes() const { return static_arena_.size(); }

 private:
  // One write of a value's pattern (verify mode), kept to name the writer of a clobber.
  struct Write {
    int step = -1;               // -1: before the first step
    graph::OpId op = graph::kNone;
    graph::ValueId value = graph::kNone;
  };

  Executor(const graph::Graph& graph, Arena& arena, Arena static_arena)
      : graph_(&graph), arena_(&arena), static_arena_(std::move(static_arena)) {}

  int64_t Bytes(graph::ValueId id) const { return bytes_[id]; }
  // The kernel of every step, or Unimplemented naming every op type without one.
  absl::StatusOr<std::vector<const Kernel*>> KernelsOfSteps(const KernelTable& kernels) const;
  // Checks `typing` (a retyped net) against the plan, as RunMeasuring says, and gives each of
  // its values an address (`address[v]`) and the planned net's id (`id_of[v]`; kNone for a
  // constant the plan does not hold, which gets memory of its own in `extras`, filled).
  absl::Status CheckTyping(const graph::Graph& typing, std::vector<graph::ValueId>& id_of,
                           std::vector<std::byte*>& address, std::vector<Arena>& extras) const;
  // Whether an output of `op` takes exactly the bytes of its input `in` where graph/in_place.h
  // allows it (in-place reuse of a dying input): verify mode expects `in` overwritten there.
  bool TakesBytesOf(const graph::Op& op, graph::ValueId in) const;
  absl::Status Fill(graph::ValueId id, int step, graph::OpId op, std::vector<Write>& log);
  // `context` completes "... when <context>".
  absl::Status Check(graph::ValueId id, const std::vector<Write>& log,
                     const std::string& context) const;

  // Runs the control-flow marker at `step` (Run): its copies, and the step to go on at.
  // `skipped[r]`: region r's Loop is jumping to its end without an iteration.
  absl::StatusOr<size_t> RunMarker(size_t step, std::vector<bool>& skipped,
                                   std::vector<std::byte>& staging);

  const graph::Graph* graph_;
  Arena* arena_;
  std::vector<graph::ControlRegion> regions_;
  std::vector<int> region_at_step_;  // the region whose marker runs at a step; -1: none
  std::vector<int> step_of_op_;      // set when the net has regions
  Arena static_arena_;
  std::vector<graph::OpId> schedule_;        // schedule_[step]
  std::vector<int64_t> offset_of_value_;     // kNoOffset: not in the arena
  std::vector<int64_t> static_offset_;       // offset in static_arena_ (values not in the arena)
  std::vector<int64_t> bytes_;
  std::vector<graph::ValueId> alias_root_;   // liveness's alias classes, every value apart
  bool recycle_inputs_ = false;              // the plan may reuse graph inputs' memory
  std::vector<bool> view_output_;            // aliases its op's input 0 as a view (writes nothing)
  std::vector<uint64_t> key_;                // pattern key (a view output: its input's key)
};

}  // namespace memonger::alloc

#endif  // MEMONGER_ALLOCATOR_EXECUTOR_H_

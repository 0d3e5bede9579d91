// Helpers for the training tests (gradient checks, bit-identical training runs): run a planned
// net with the CPU kernels as often as needed, with chosen or seeded inputs, and capture each
// value right after the op that produced it ran.
//
//   MG_ASSIGN_OR_RETURN(auto runner, TrainingRunner::Create(graph, plan, {loss_id, grad_id}));
//   MG_RETURN_IF_ERROR(runner->Run({{"x", {0.5, -1.0, ...}}}, /*seed=*/7));
//   double loss = runner->Doubles(loss_id)[0];
//
// Why capture at production: a value's memory may be reused by the plan as soon as its last
// reader ran (parameter gradients, which nothing reads inside the net, included), so reading
// the arena after the run would show whatever replaced it. Captured right after its producer,
// every value is seen exactly as the net computed it, under any plan.
#ifndef MEMONGER_TESTS_TRAINING_SUPPORT_H_
#define MEMONGER_TESTS_TRAINING_SUPPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "allocator/arena.h"
#include "allocator/executor.h"
#include "graph/graph.h"
#include "memonger/plan.h"

namespace memonger::testing {

// Values by name, converted to the value's element type when written.
using ValueData = absl::flat_hash_map<std::string, std::vector<double>>;

class TrainingRunner {
 public:
  // `watch`: values whose bytes are kept after each Run (a hash of every value is kept always).
  static absl::StatusOr<std::unique_ptr<TrainingRunner>> Create(
      const graph::Graph& graph, const Plan& plan, std::vector<graph::ValueId> watch);

  // Fills every value without a producer (from `data` by name, else the graph's static data,
  // else alloc::FillSeeded with `seed`), runs every op with the CPU kernels, captures.
  absl::Status Run(const ValueData& data, uint64_t seed);

  // The bytes of a watched value after the last Run (as produced, or as filled).
  const std::string& Bytes(graph::ValueId id) const { return bytes_[id]; }
  std::vector<double> Doubles(graph::ValueId id) const;
  // FNV-1a of every value's bytes after the last Run (as produced, or as filled).
  const std::vector<uint64_t>& hashes() const { return hashes_; }

 private:
  TrainingRunner(const graph::Graph& graph, alloc::Arena arena)
      : graph_(&graph), arena_(std::move(arena)) {}

  const graph::Graph* graph_;
  alloc::Arena arena_;
  std::unique_ptr<alloc::Executor> executor_;
  std::vector<bool> watched_;
  std::vector<std::string> bytes_;
  std::vector<uint64_t> hashes_;
  alloc::KernelTable kernels_;
};

}  // namespace memonger::testing

#endif  // MEMONGER_TESTS_TRAINING_SUPPORT_H_

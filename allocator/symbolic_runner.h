// SymbolicRunner: runs a symbolic plan (memonger/symbolic/symbolic_plan.h) at any binding of its
// box in one arena, allocated once. The arena is SymbolicPlan::MaxArena: inside a piece the
// arena never decreases as a symbol grows, so each piece's largest is at its high corner, and
// the largest of those holds every binding (across pieces the arena may drop: their orders
// differ). Each call binds the plan at the call's binding (O(values), no planning) and runs
// the net typed there with RunNet in that arena.
//
//   MG_ASSIGN_OR_RETURN(alloc::SymbolicRunner runner,
//                       alloc::SymbolicRunner::Create(std::move(plan), alloc::Device::kHost));
//   for (int64_t n : lengths) {
//     MG_ASSIGN_OR_RETURN(graph::Graph g, NetAt(n));  // the net typed at n
//     MG_ASSIGN_OR_RETURN(auto report, runner.Run(g, {{"n", n}}, options, target));
//   }
#ifndef MEMONGER_ALLOCATOR_SYMBOLIC_RUNNER_H_
#define MEMONGER_ALLOCATOR_SYMBOLIC_RUNNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "allocator/arena.h"
#include "allocator/host_run.h"
#include "graph/graph.h"
#include "memonger/plan.h"
#include "memonger/symbolic/symbolic_plan.h"

namespace memonger::alloc {

class SymbolicRunner {
 public:
  // Allocates the arena on `device`. Errors: those of MaxArena and Arena::Create.
  static absl::StatusOr<SymbolicRunner> Create(SymbolicPlan plan, Device device);

  // The plan bound at `dims`, checked against `graph` (the net typed at `dims`): every planned
  // value fits its buffer, the arena holds the plan. InvalidArgument outside the box or for a
  // net that is not the one planned.
  absl::StatusOr<Plan> Bind(const graph::Graph& graph, const graph::SymbolBindings& dims) const;

  // Bind, then RunNet in the runner's arena (target.device must be the arena's; target.arena
  // is set by the runner).
  absl::StatusOr<HostRunReport> Run(const graph::Graph& graph, const graph::SymbolBindings& dims,
                                    const HostRunOptions& options, NetRunTarget target);

  Arena& arena() { return arena_; }
  const SymbolicPlan& plan() const { return plan_; }

 private:
  SymbolicRunner(SymbolicPlan plan, Arena arena)
      : plan_(std::move(plan)), arena_(std::move(arena)) {}

  SymbolicPlan plan_;
  Arena arena_;
};

}  // namespace memonger::alloc

#endif  // MEMONGER_ALLOCATOR_SYMBOLIC_RUNNER_H_

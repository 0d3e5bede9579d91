#include "allocator/symbolic_runner.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace memonger::alloc {

absl::StatusOr<SymbolicRunner> SymbolicRunner::Create(SymbolicPlan plan, Device device) {
  MG_ASSIGN_OR_RETURN(const int64_t most, plan.MaxArena());
  MG_ASSIGN_OR_RETURN(Arena arena, Arena::Create(device, most,
                                                 std::max<int64_t>(plan.base.alignment, 1)));
  return SymbolicRunner(std::move(plan), std::move(arena));
}

absl::StatusOr<Plan> SymbolicRunner::Bind(const graph::Graph& graph,
                                          const graph::SymbolBindings& dims) const {
  MG_ASSIGN_OR_RETURN(Plan plan, plan_.Bind(dims));
  if (plan.buffer_of_value.size() != static_cast<size_t>(graph.num_values())) {
    return absl::InvalidArgumentError("the net is not the one the symbolic plan was made for");
  }
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    const int32_t b = plan.buffer_of_value[id];
    if (b < 0) continue;
    const graph::Value& v = graph.value(id);
    if (!v.type.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat("value '", v.DisplayName(), "' has no type"));
    }
    MG_ASSIGN_OR_RETURN(int64_t bytes, graph::ByteSize(*v.type, v.DisplayName()));
    if (bytes > plan.buffers[b].size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", v.DisplayName(), "' has ", bytes, " bytes in the net but ",
          plan.buffers[b].size, " in the plan bound there: the net is not the one planned"));
    }
  }
  if (plan.arena_bytes > arena_.size()) {
    return absl::InternalError(absl::StrCat("the plan bound there needs ", plan.arena_bytes,
                                            " bytes, more than the arena's ", arena_.size()));
  }
  return plan;
}

absl::StatusOr<HostRunReport> SymbolicRunner::Run(const graph::Graph& graph,
                                                  const graph::SymbolBindings& dims,
                                                  const HostRunOptions& options,
                                                  NetRunTarget target) {
  MG_ASSIGN_OR_RETURN(Plan plan, Bind(graph, dims));
  target.arena = &arena_;
  return RunNet(graph, plan, options, target);
}

}  // namespace memonger::alloc

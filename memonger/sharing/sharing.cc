#include "memonger/sharing/sharing.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "util/check.h"
#include "util/checked_math.h"

namespace memonger {
namespace {

int64_t AlignUp(int64_t bytes, int64_t alignment) {
  const auto aligned = util::CheckedAlignUp(bytes, alignment);
  MG_CHECK(aligned.has_value());
  return *aligned;
}

}  // namespace

std::vector<SharingItem> SharingItems(const graph::Graph& graph, const Liveness& liveness,
                                      int64_t alignment) {
  std::vector<SharingItem> items;
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    if (!liveness.planned[id] || liveness.alias_root[id] != id) continue;
    SharingItem item;
    item.root = id;
    item.lifetime = liveness.lifetime[id];
    item.bytes = AlignUp(liveness.class_bytes[id], alignment);
    item.device = liveness.device[id];
    items.push_back(item);
  }
  return items;
}

std::vector<bool> StaticClasses(const graph::Graph& graph, const Liveness& liveness) {
  std::vector<bool> is_static(graph.num_values(), false);
  auto mark = [&](graph::ValueId v) {
    const graph::ValueId root = liveness.alias_root[v];
    is_static[root == graph::kNone ? v : root] = true;
  };
  if (!liveness.options.recycle_inputs) {
    for (graph::ValueId v : graph.inputs()) mark(v);
  }
  for (graph::ValueId v : graph.outputs()) mark(v);
  for (const auto& [param, grad] : graph.param_grads()) mark(grad);
  for (const std::string& name : liveness.options.static_names) {
    if (std::optional<graph::ValueId> latest = graph.FindValue(name)) mark(*latest);
  }
  return is_static;
}

void BuildSharingPlan(const graph::Graph& graph, const Liveness& liveness,
                      const SharingGroups& groups, Plan& plan) {
  const int n = graph.num_values();
  MG_CHECK(static_cast<int>(plan.buffer_of_value.size()) == n);
  std::vector<bool> placed(n, false);
  plan.buffers.clear();
  std::fill(plan.buffer_of_value.begin(), plan.buffer_of_value.end(), -1);
  int64_t end = 0;
  for (const std::vector<graph::ValueId>& group : groups) {
    if (group.empty()) continue;
    PlanBuffer buffer;
    buffer.device = liveness.device[group.front()];
    // The buffer starts at a multiple of the plan's alignment and of every member's own.
    int64_t alignment = plan.alignment;
    for (graph::ValueId root : group) {
      MG_CHECK(root >= 0 && root < n);
      MG_CHECK(liveness.planned[root] && liveness.alias_root[root] == root);
      MG_CHECK(!placed[root]);  // every class in exactly one group
      placed[root] = true;
      buffer.size = std::max(buffer.size, AlignUp(liveness.class_bytes[root], plan.alignment));
      for (graph::ValueId m : liveness.members[root]) {
        if (graph.value(m).alignment > 0) {
          alignment = std::lcm(alignment, graph.value(m).alignment);
        }
      }
    }
    buffer.offset = AlignUp(end, alignment);
    const auto buffer_end = util::CheckedAdd(buffer.offset, buffer.size);
    MG_CHECK(buffer_end.has_value());
    end = *buffer_end;
    const int32_t index = static_cast<int32_t>(plan.buffers.size());
    plan.buffers.push_back(buffer);
    for (graph::ValueId root : group) {
      for (graph::ValueId m : liveness.members[root]) plan.buffer_of_value[m] = index;
    }
  }
  for (graph::ValueId id = 0; id < n; ++id) {
    MG_CHECK(placed[id] || !liveness.planned[id] || liveness.alias_root[id] != id);
  }
  FinishPlan(plan);
}

}  // namespace memonger

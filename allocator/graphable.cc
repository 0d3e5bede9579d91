#include "allocator/graphable.h"

#include <string>
#include <utility>

namespace memonger::alloc {

GraphableSections FindGraphableSections(const graph::Graph& graph, const Plan& plan,
                                        const KernelTable& device_kernels) {
  GraphableSections result;
  int first = -1;  // the open section's first step
  for (int step = 0; step < static_cast<int>(plan.steps.size()); ++step) {
    const graph::Op& op = graph.op(plan.steps[step].op);
    std::string reason = device_kernels.CaptureBlocker(graph, op);
    if (reason.empty()) {
      if (first < 0) first = step;
      continue;
    }
    if (first >= 0) result.sections.push_back({first, step - 1});
    first = -1;
    result.boundaries.push_back({step, std::move(reason)});
  }
  if (first >= 0) result.sections.push_back({first, static_cast<int>(plan.steps.size()) - 1});
  return result;
}

}  // namespace memonger::alloc

#include "tests/offset_support.h"

#include <utility>

#include "memonger/schedule.h"

namespace memonger::testing {

absl::StatusOr<Plan> PlanWithOffsetStrategy(const graph::Graph& g, const PlanOptions& options,
                                            OffsetStrategy strategy, Liveness* liveness_out) {
  absl::StatusOr<Schedule> schedule = MakeSchedule(g, options.order);
  if (!schedule.ok()) return schedule.status();
  LivenessOptions liveness_options;
  liveness_options.plan_static = options.plan_static;
  liveness_options.views = options.views;
  absl::StatusOr<Liveness> liveness = ComputeLiveness(g, *schedule, liveness_options);
  if (!liveness.ok()) return liveness.status();
  Plan plan;
  plan.execution = options.execution;
  InitPlan(g, *liveness, options.alignment, plan);
  absl::Status placed = PlaceOffsets(g, *liveness, options, strategy, plan);
  if (!placed.ok()) return placed;
  if (liveness_out != nullptr) *liveness_out = *std::move(liveness);
  return plan;
}

OffsetItem Item(int first, int last, int64_t bytes, int64_t alignment) {
  OffsetItem item;
  item.first_step = first;
  item.last_step = last;
  item.bytes = bytes;
  item.alignment = alignment;
  return item;
}

}  // namespace memonger::testing

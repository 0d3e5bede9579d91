#include "tests/offset_support.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "memonger/schedule.h"

namespace memonger::testing {

absl::StatusOr<Plan> PlanWithOffsetStrategy(const graph::Graph& g, const PlanOptions& options,
                                            OffsetStrategy strategy, Liveness* liveness_out) {
  absl::StatusOr<Schedule> schedule = MakeSchedule(g, options.order);
  if (!schedule.ok()) return schedule.status();
  LivenessOptions liveness_options;
  liveness_options.plan_static = options.liveness.plan_static;
  liveness_options.views = options.liveness.views;
  absl::StatusOr<Liveness> liveness = ComputeLiveness(g, *schedule, liveness_options);
  if (!liveness.ok()) return liveness.status();
  Plan plan;
  plan.execution = options.execution;
  InitPlan(g, *liveness, options.alignment, plan);
  OffsetSolveOptions solve;
  solve.time_limit_seconds = options.time_limit_seconds;
  solve.threads = options.threads;
  solve.exact_progress = options.exact_progress;
  absl::Status placed = PlaceOffsets(g, *liveness, strategy, solve, plan);
  if (!placed.ok()) return placed;
  if (liveness_out != nullptr) *liveness_out = *std::move(liveness);
  return plan;
}

namespace {

bool ShareAStep(const OffsetItem& a, const OffsetItem& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

void EnumerateGrid(const OffsetProblem& problem, int k, int64_t height,
                   std::vector<int64_t>& offsets, int64_t& best) {
  const int n = static_cast<int>(problem.items.size());
  if (height >= best) return;
  if (k == n) {
    best = height;
    return;
  }
  const OffsetItem& item = problem.items[k];
  for (int64_t offset = 0; offset + item.bytes < best; offset += item.alignment) {
    bool free = true;
    for (int j = 0; j < k && free; ++j) {
      const OffsetItem& other = problem.items[j];
      free = !ShareAStep(item, other) || item.bytes == 0 || other.bytes == 0 ||
             offset + item.bytes <= offsets[j] || offsets[j] + other.bytes <= offset;
    }
    if (!free) continue;
    offsets[k] = offset;
    EnumerateGrid(problem, k + 1, std::max(height, offset + item.bytes), offsets, best);
  }
}

}  // namespace

int64_t OptimumByGrid(const OffsetProblem& problem) {
  std::vector<int64_t> offsets(problem.items.size(), 0);
  int64_t best = 1;
  for (const OffsetItem& item : problem.items) best += item.bytes + item.alignment;
  EnumerateGrid(problem, 0, 0, offsets, best);
  return best;
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

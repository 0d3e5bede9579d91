#include "memonger/plan.h"

#include <algorithm>

#include "graph/gradient_builder.h"
#include "graph/in_place.h"
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

void InitPlan(const graph::Graph& graph, const Liveness& liveness, int64_t alignment, Plan& plan,
              int top_values, bool copy_lifetimes) {
  MG_CHECK(alignment >= 1);
  const int n = graph.num_values();
  plan.order = liveness.schedule.order;
  plan.alignment = alignment;
  plan.liveness = liveness.options;

  const std::vector<int64_t> live_bytes = LiveBytesPerStep(liveness, alignment);
  plan.steps.assign(liveness.num_steps, PlanStep{});
  plan.lower_bound_bytes = 0;
  plan.peak_step = 0;
  for (int step = 0; step < liveness.num_steps; ++step) {
    plan.steps[step].op = liveness.schedule.ops[step];
    plan.steps[step].live_bytes = live_bytes[step];
    if (live_bytes[step] > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = live_bytes[step];
      plan.peak_step = step;
    }
  }

  plan.buffer_of_value.assign(n, -1);
  plan.offset_of_value.assign(n, kNoOffset);
  if (copy_lifetimes) {
    plan.lifetime = liveness.lifetime;
  } else {
    plan.lifetime.clear();
  }
  plan.buffers.clear();
  plan.arena_bytes = 0;
  plan.proven_optimal = false;

  plan.naive_bytes = 0;
  plan.static_bytes = 0;
  std::vector<graph::ValueId> at_peak;
  for (graph::ValueId id = 0; id < n; ++id) {
    if (!liveness.planned[id]) {
      if (graph::OwnsStaticStorage(graph.value(id))) {
        const auto sum = util::CheckedAdd(plan.static_bytes, liveness.bytes[id]);
        MG_CHECK(sum.has_value());
        plan.static_bytes = *sum;
      }
      continue;
    }
    if (liveness.alias_root[id] != id) continue;
    const auto sum = util::CheckedAdd(plan.naive_bytes, AlignUp(liveness.class_bytes[id], alignment));
    MG_CHECK(sum.has_value());
    plan.naive_bytes = *sum;
    const Lifetime& l = liveness.lifetime[id];
    if (liveness.num_steps > 0 && l.first_step <= plan.peak_step &&
        plan.peak_step <= l.last_step) {
      at_peak.push_back(id);
    }
  }
  plan.trainable_bytes = 0;
  for (const graph::ValueId id : graph::TrainableParams(graph)) {
    const auto sum = util::CheckedAdd(plan.trainable_bytes, liveness.bytes[id]);
    MG_CHECK(sum.has_value());
    plan.trainable_bytes = *sum;
  }
  // Naive means no sharing at all: an output that took a dying input's bytes counts apart.
  for (const auto& [input, output] : liveness.in_place_pairs) {
    const auto sum = util::CheckedAdd(
        plan.naive_bytes, AlignUp(liveness.class_bytes[liveness.alias_root[output]], alignment));
    MG_CHECK(sum.has_value());
    plan.naive_bytes = *sum;
  }
  std::sort(at_peak.begin(), at_peak.end(), [&](graph::ValueId a, graph::ValueId b) {
    const int64_t ba = liveness.class_bytes[a];
    const int64_t bb = liveness.class_bytes[b];
    return ba != bb ? ba > bb : a < b;
  });
  if (static_cast<int>(at_peak.size()) > top_values) at_peak.resize(std::max(top_values, 0));
  plan.peak_values = std::move(at_peak);
}

void FinishPlan(Plan& plan) {
  int64_t extent = 0;
  for (const PlanBuffer& b : plan.buffers) extent = std::max(extent, b.offset + b.size);
  plan.arena_bytes = AlignUp(extent, plan.alignment);
  plan.offset_of_value.resize(plan.buffer_of_value.size(), kNoOffset);
  for (size_t v = 0; v < plan.buffer_of_value.size(); ++v) {
    const int32_t b = plan.buffer_of_value[v];
    MG_CHECK(b < static_cast<int32_t>(plan.buffers.size()));
    plan.offset_of_value[v] = b < 0 ? kNoOffset : plan.buffers[b].offset;
  }
}

Schedule ScheduleOfPlan(const Plan& plan) {
  Schedule schedule;
  schedule.order = plan.order;
  schedule.ops.reserve(plan.steps.size());
  for (const PlanStep& step : plan.steps) schedule.ops.push_back(step.op);
  return schedule;
}

absl::StatusOr<Liveness> LivenessOfPlan(const graph::Graph& graph, const Plan& plan,
                                        PlanLifetimes lifetimes) {
  LivenessOptions options = plan.liveness;
  options.names_need_order = plan.execution == ExecutionModel::kParallel;
  if (lifetimes == PlanLifetimes::kPerVersion) {
    options.blob_per_name = false;
    options.in_place = false;
  }
  return ComputeLiveness(graph, ScheduleOfPlan(plan), options);
}

int64_t SumOfBufferSizes(const Plan& plan) {
  int64_t sum = 0;
  for (const PlanBuffer& b : plan.buffers) sum += b.size;
  return sum;
}

bool ViewKeptInInputMemory(const graph::Graph& graph, const Plan& plan, const graph::Op& op) {
  if (!plan.liveness.views || !op.view || op.inputs.empty() || op.outputs.empty()) return false;
  const graph::ValueId in = op.inputs[0];
  const graph::ValueId out = op.outputs[0];
  if (graph.value(out).inplace_of != graph::kNone) return false;
  const auto planned = [&](graph::ValueId v) {
    return static_cast<size_t>(v) < plan.buffer_of_value.size() && plan.buffer_of_value[v] >= 0;
  };
  return planned(in) && planned(out) && plan.buffer_of_value[in] == plan.buffer_of_value[out] &&
         plan.lifetime[in].first_step == plan.lifetime[out].first_step &&
         plan.lifetime[in].last_step == plan.lifetime[out].last_step;
}

graph::ValueId InPlaceInputTaken(const graph::Graph& graph, const Plan& plan, const graph::Op& op,
                                 int output) {
  if (!plan.liveness.in_place || output < 0 || output >= static_cast<int>(op.outputs.size())) {
    return graph::kNone;
  }
  const graph::ValueId out = op.outputs[output];
  const auto planned = [&](graph::ValueId v) {
    return static_cast<size_t>(v) < plan.buffer_of_value.size() && plan.buffer_of_value[v] >= 0;
  };
  if (!planned(out) || graph.value(out).inplace_of != graph::kNone) return graph::kNone;
  for (int slot = 0; slot < static_cast<int>(op.inputs.size()); ++slot) {
    const graph::ValueId in = op.inputs[slot];
    if (in == out || !planned(in) || !graph::MayWriteOverInput(op, output, slot)) continue;
    if (plan.buffer_of_value[in] == plan.buffer_of_value[out] &&
        plan.lifetime[in].first_step == plan.lifetime[out].first_step &&
        plan.lifetime[in].last_step == plan.lifetime[out].last_step) {
      return in;
    }
  }
  return graph::kNone;
}

std::vector<graph::ValueId> InPlaceRootsOfPlan(const graph::Graph& graph, const Plan& plan) {
  std::vector<graph::ValueId> roots = graph.InPlaceRoots();
  if (!plan.liveness.in_place) return roots;
  // In step order, so that a value's root is final before the values written over it are met.
  for (const PlanStep& step : plan.steps) {
    const graph::Op& op = graph.op(step.op);
    for (int k = 0; k < static_cast<int>(op.outputs.size()); ++k) {
      if (const graph::ValueId taken = InPlaceInputTaken(graph, plan, op, k);
          taken != graph::kNone) {
        roots[op.outputs[k]] = roots[taken];
      }
    }
    for (graph::ValueId out : op.outputs) roots[out] = roots[roots[out]];
  }
  return roots;
}

}  // namespace memonger

#include "report/plan_report.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "report/memory_estimate.h"
#include "util/bytes.h"

namespace memonger {
namespace {

using graph::kNone;
using graph::ValueId;

int64_t ValueBytes(const graph::Value& v) {
  if (!v.type.has_value()) return 0;
  auto bytes = graph::ByteSize(*v.type, v.name);
  return bytes.ok() ? *bytes : 0;
}

bool Planned(const Plan& plan, ValueId v) { return plan.buffer_of_value[v] >= 0; }

}  // namespace

int SharedBufferCount(const graph::Graph& graph, const Plan& plan) {
  // A buffer is shared when a second in-place root shows up in it: one root remembered per
  // buffer is enough (a set per buffer was a million hash sets on a million-value graph).
  std::vector<ValueId> first_root(plan.buffers.size(), graph::kNone);
  std::vector<bool> shared(plan.buffers.size(), false);
  const std::vector<ValueId> root = graph.InPlaceRoots();
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    if (!Planned(plan, v)) continue;
    const int32_t b = plan.buffer_of_value[v];
    if (first_root[b] == graph::kNone) {
      first_root[b] = root[v];
    } else if (first_root[b] != root[v]) {
      shared[b] = true;
    }
  }
  return static_cast<int>(std::count(shared.begin(), shared.end(), true));
}

namespace {

// What each value's memory is an alias of (its class's oldest member, itself where none): an
// in-place output the value it overwrites, an output that took a dying input's bytes
// (plan.liveness.in_place) that input, and under plan.liveness.views a view's output its input
// where the plan merged the two (the same buffer over the same lifetime: the liveness joins a
// view only where that is safe, and two values apart never share both). A consumer of the
// JSON plan that knew only the in-place aliases saw a view and its input overlap while live.
std::vector<ValueId> AliasRoots(const graph::Graph& graph, const Plan& plan) {
  std::vector<ValueId> roots = InPlaceRootsOfPlan(graph, plan);
  if (!plan.liveness.views) return roots;
  // In step order, so that a value's root is final before the values aliasing it are met.
  for (const PlanStep& step : plan.steps) {
    const graph::Op& op = graph.op(step.op);
    if (ViewKeptInInputMemory(graph, plan, op)) roots[op.outputs[0]] = roots[op.inputs[0]];
    for (ValueId out : op.outputs) {
      roots[out] = roots[roots[out]];  // an in-place write on a view's output
    }
  }
  return roots;
}

}  // namespace

std::string PlanToJson(const graph::Graph& graph, const Plan& plan, Optimizer optimizer) {
  using Json = nlohmann::ordered_json;
  Json j;
  j["schema"] = kPlanSchema;
  j["model"] = plan.model;
  j["planner"] = plan.planner;
  j["order"] = std::string(OrderName(plan.order));
  j["execution"] = std::string(ExecutionName(plan.execution));
  j["alignment"] = plan.alignment;
  j["arena_bytes"] = plan.arena_bytes;
  j["lower_bound_bytes"] = plan.lower_bound_bytes;
  j["naive_bytes"] = plan.naive_bytes;
  j["static_bytes"] = plan.static_bytes;
  const DeviceBytes device = DeviceBytesOf(plan, optimizer);
  j["device_bytes"] = device.total();
  j["trainable_bytes"] = plan.trainable_bytes;
  j["param_gradient_bytes"] = ParamGradientBytes(graph);
  j["optimizer"] = std::string(OptimizerName(optimizer));
  j["optimizer_state_bytes"] = device.optimizer_state;
  j["planning_seconds"] = plan.planning_seconds;
  j["proven_optimal"] = plan.proven_optimal;
  j["plan_static"] = plan.liveness.plan_static;
  j["views"] = plan.liveness.views;
  j["in_place"] = plan.liveness.in_place;
  j["recycle_inputs"] = plan.liveness.recycle_inputs;
  if (plan.liveness.blob_per_name) j["blob_per_name"] = true;
  if (!plan.liveness.static_names.empty()) j["static"] = plan.liveness.static_names;
  j["ops"] = graph.num_ops();
  j["buffers"] = plan.buffers.size();
  j["shared_buffers"] = SharedBufferCount(graph, plan);
  if (absl::StartsWith(plan.planner, "memonger-")) {
    if (const std::optional<MemongerAccount> account = AccountPlan(graph, plan)) {
      Json by_type = Json::object();
      for (const auto& [type, b] : account->estimate.bytes_by_op_type) by_type[type] = b;
      j["memonger"] = {{"baseline_bytes", account->statistics.baseline_bytes},
                       {"optimized_bytes", account->statistics.optimized_bytes},
                       {"allocated_bytes", account->estimate.total_bytes},
                       {"high_water_bytes", account->estimate.high_water_bytes},
                       {"high_water_with_free_bytes", account->high_water_with_free},
                       {"bytes_by_op_type", by_type}};
    }
  }
  if (plan.graphable.has_value()) {
    Json sections = Json::array();
    for (const auto& [first, last] : plan.graphable->sections) sections.push_back({first, last});
    Json boundaries = Json::array();
    for (const GraphableSections::Boundary& b : plan.graphable->boundaries) {
      boundaries.push_back({{"step", b.step},
                            {"op", graph.op(plan.steps[b.step].op).name},
                            {"type", graph.op(plan.steps[b.step].op).type},
                            {"reason", b.reason}});
    }
    j["graphable"] = {{"sections", sections}, {"boundaries", boundaries}};
  }
  if (plan.recompute.has_value()) {
    const RecomputeSummary& r = *plan.recompute;
    j["recompute"] = {{"method", r.method},
                      {"ops", r.ops},
                      {"candidates", r.candidates},
                      {"original_lower_bound_bytes", r.original_lower_bound_bytes},
                      {"extra_flops", r.extra_flops},
                      {"forward_flops", r.forward_flops},
                      {"proven_optimal", r.proven_optimal}};
  }
  if (plan.order_search.has_value()) {
    const OrderSearch& search = *plan.order_search;
    Json tried = Json::object();
    for (const auto& [name, peak] : search.tried) tried[name] = peak;
    j["order_search"] = {{"given_lower_bound_bytes", search.given_lower_bound_bytes},
                         {"method", search.method},
                         {"proven_optimal", search.proven_optimal},
                         {"seconds", search.seconds},
                         {"tried", tried}};
  }
  Json peak;
  peak["step"] = plan.peak_step;
  peak["live_bytes"] = plan.steps.empty() ? 0 : plan.steps[plan.peak_step].live_bytes;
  Json top = Json::array();
  for (ValueId v : plan.peak_values) top.push_back(graph.value(v).DisplayName());
  peak["top_values"] = top;
  j["peak"] = peak;
  Json steps = Json::array();
  for (const PlanStep& s : plan.steps) {
    steps.push_back({{"op", graph.op(s.op).name},
                     {"op_index", s.op},
                     {"type", graph.op(s.op).type},
                     {"live_bytes", s.live_bytes}});
  }
  j["steps"] = steps;
  Json values = Json::array();
  const std::vector<ValueId> roots = AliasRoots(graph, plan);
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const graph::Value& value = graph.value(v);
    Json item;
    item["name"] = value.DisplayName();
    item["dtype"] = value.type ? std::string(graph::DataTypeName(value.type->dtype)) : "undefined";
    item["shape"] = value.type ? value.type->dims : std::vector<int64_t>{};
    item["bytes"] = ValueBytes(value);
    item["role"] = std::string(graph::RoleName(value.role));
    if (Planned(plan, v)) {
      item["offset"] = plan.offset_of_value[v];
      item["first_step"] = plan.lifetime[v].first_step;
      item["last_step"] = plan.lifetime[v].last_step;
      item["buffer"] = plan.buffer_of_value[v];
    } else {
      item["offset"] = nullptr;
      item["first_step"] = nullptr;
      item["last_step"] = nullptr;
      item["buffer"] = nullptr;
    }
    const ValueId root = roots[v];
    item["alias_of"] = root == v ? Json(nullptr) : Json(graph.value(root).DisplayName());
    values.push_back(std::move(item));
  }
  j["values"] = values;
  return j.dump(1) + "\n";
}

int64_t ParamGradientBytes(const graph::Graph& graph) {
  std::vector<bool> counted(graph.num_values(), false);
  int64_t bytes = 0;
  for (const auto& [param, grad] : graph.param_grads()) {
    if (counted[grad]) continue;
    counted[grad] = true;
    const absl::StatusOr<int64_t> b = graph::ValueByteSize(graph.value(grad));
    if (b.ok()) bytes += *b;  // a planned value: liveness has bounded its bytes already
  }
  return bytes;
}

std::string PlanToText(const graph::Graph& graph, const Plan& plan, Optimizer optimizer) {
  std::string out;
  auto bytes = [](int64_t b) { return absl::StrFormat("%s (%d)", util::FormatBytes(b), b); };
  absl::StrAppendFormat(&out, "model            %s\n", plan.model);
  absl::StrAppendFormat(&out, "ops              %d\n", graph.num_ops());
  absl::StrAppendFormat(&out, "values           %d\n", graph.num_values());
  absl::StrAppendFormat(&out, "static bytes     %s  params and constants, not in the arena\n",
                        bytes(plan.static_bytes));
  absl::StrAppendFormat(&out, "naive bytes      %s  no sharing\n", bytes(plan.naive_bytes));
  absl::StrAppendFormat(&out, "lower bound      %s  most live bytes at one step\n",
                        bytes(plan.lower_bound_bytes));
  absl::StrAppendFormat(&out, "arena bytes      %s\n", bytes(plan.arena_bytes));
  if (const int64_t grads = ParamGradientBytes(graph); grads > 0) {
    absl::StrAppendFormat(&out, "param gradients  %s  of the arena: the trainable params' gradients\n",
                          bytes(grads));
  }
  const DeviceBytes device = DeviceBytesOf(plan, optimizer);
  if (optimizer != Optimizer::kNone) {
    absl::StrAppendFormat(&out, "optimizer state  %s  %s: %d tensor%s per trainable param (%s)\n",
                          bytes(device.optimizer_state), OptimizerName(optimizer),
                          OptimizerStateCopies(optimizer),
                          OptimizerStateCopies(optimizer) == 1 ? "" : "s",
                          util::FormatBytes(plan.trainable_bytes));
  }
  absl::StrAppendFormat(&out, "device bytes     %s  %s: what --budget holds against\n",
                        bytes(device.total()), DeviceBytesToText(device));
  if (plan.lower_bound_bytes > 0) {
    absl::StrAppendFormat(&out, "arena / lower    %.3f\n",
                          static_cast<double>(plan.arena_bytes) /
                              static_cast<double>(plan.lower_bound_bytes));
  }
  if (plan.naive_bytes > 0) {
    absl::StrAppendFormat(&out, "arena / naive    %.3f\n",
                          static_cast<double>(plan.arena_bytes) /
                              static_cast<double>(plan.naive_bytes));
  }
  if (absl::StartsWith(plan.planner, "memonger-")) {
    // Caffe2's own accounting of the same sharing (unaligned bytes, by name).
    if (const std::optional<MemongerAccount> account = AccountPlan(graph, plan)) {
      absl::StrAppendFormat(&out,
                            "memonger stats   baseline %s, optimized %s (compute_statistics)\n",
                            bytes(account->statistics.baseline_bytes),
                            bytes(account->statistics.optimized_bytes));
      absl::StrAppendFormat(
          &out, "memonger est.    high water %s, %s with Free ops (estimate_memory_usage)\n",
          bytes(account->estimate.high_water_bytes), bytes(account->high_water_with_free));
    }
  }
  absl::StrAppendFormat(&out, "planner          %s (order %s, %s execution, alignment %d)%s\n",
                        plan.planner, OrderName(plan.order), ExecutionName(plan.execution),
                        plan.alignment,
                        plan.proven_optimal ? ", proven optimal" : ", not proven optimal");
  if (plan.order_search.has_value()) {
    const OrderSearch& search = *plan.order_search;
    const double ratio = plan.lower_bound_bytes > 0
                             ? static_cast<double>(search.given_lower_bound_bytes) /
                                   static_cast<double>(plan.lower_bound_bytes)
                             : 1.0;
    absl::StrAppendFormat(&out,
                          "order search     lower bound %s with the given order, %s here "
                          "(%.3fx lower; %s, %s, %.3f s)\n",
                          util::FormatBytes(search.given_lower_bound_bytes),
                          util::FormatBytes(plan.lower_bound_bytes), ratio, search.method,
                          search.proven_optimal ? "proven lowest" : "not proven lowest",
                          search.seconds);
  }
  if (plan.recompute.has_value()) {
    const RecomputeSummary& r = *plan.recompute;
    const double percent = r.forward_flops > 0 ? 100.0 * static_cast<double>(r.extra_flops) /
                                                     static_cast<double>(r.forward_flops)
                                               : 0.0;
    absl::StrAppendFormat(&out,
                          "recompute        %d of %d forward ops rerun (%s%s): +%d FLOPs, %.1f%% "
                          "of the forward pass; lower bound %s without\n",
                          r.ops, r.candidates, r.method,
                          r.proven_optimal ? ", fewest FLOPs proven" : "", r.extra_flops, percent,
                          util::FormatBytes(r.original_lower_bound_bytes));
  }
  if (plan.graphable.has_value()) {
    const GraphableSections& g = *plan.graphable;
    int covered = 0, longest = 0, longest_first = 0;
    for (const auto& [first, last] : g.sections) {
      covered += last - first + 1;
      if (last - first + 1 > longest) {
        longest = last - first + 1;
        longest_first = first;
      }
    }
    const std::string longest_text =
        g.sections.empty() ? ""
                           : absl::StrFormat(" (longest: steps %d-%d)", longest_first,
                                             longest_first + longest - 1);
    absl::StrAppendFormat(&out,
                          "cuda graphs      %d section(s) cover %d of %d steps%s; %d step(s) "
                          "between\n",
                          g.sections.size(), covered, plan.steps.size(), longest_text,
                          g.boundaries.size());
    constexpr size_t kShown = 3;
    for (size_t i = 0; i < g.boundaries.size() && i < kShown; ++i) {
      const graph::Op& op = graph.op(plan.steps[g.boundaries[i].step].op);
      absl::StrAppendFormat(&out, "  step %d, %s '%s': %s\n", g.boundaries[i].step, op.type,
                            op.name, g.boundaries[i].reason);
    }
    if (g.boundaries.size() > kShown) {
      absl::StrAppendFormat(&out, "  ... %d more (--format json lists them)\n",
                            g.boundaries.size() - kShown);
    }
  }
  absl::StrAppendFormat(&out, "planning time    %.3f s\n", plan.planning_seconds);
  absl::StrAppendFormat(&out, "buffers          %d (%d shared by several values)\n",
                        plan.buffers.size(), SharedBufferCount(graph, plan));
  if (!plan.steps.empty()) {
    const PlanStep& peak = plan.steps[plan.peak_step];
    absl::StrAppendFormat(&out, "peak             step %d, %s '%s': %s live\n", plan.peak_step,
                          graph.op(peak.op).type, graph.op(peak.op).name,
                          util::FormatBytes(peak.live_bytes));
    for (ValueId v : plan.peak_values) {
      const graph::Value& value = graph.value(v);
      absl::StrAppendFormat(&out, "  %12s  %-10s %-28s %s\n", util::FormatBytes(ValueBytes(value)),
                            graph::RoleName(value.role),
                            value.type ? graph::TensorTypeToString(*value.type) : "?",
                            value.DisplayName());
    }
  }
  return out;
}

}  // namespace memonger

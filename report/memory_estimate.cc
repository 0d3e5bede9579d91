#include "report/memory_estimate.h"

#include <algorithm>
#include <set>
#include <vector>

#include "graph/tensor_type.h"
#include "report/net_free.h"
#include "report/net_rewrite.h"

namespace memonger {

MemongerStatistics ComputeStatistics(const graph::Graph& graph, const Plan& plan) {
  MemongerStatistics stats;
  std::vector<int64_t> largest(plan.buffers.size(), 0);
  // The baseline counts each blob once: a name (its largest version) when the plan has one
  // blob per name, as Caffe2's workspace held it; else each value not written in place.
  std::map<std::string, int64_t> by_name;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    const int32_t b = plan.buffer_of_value[v];
    if (b < 0 || !graph.value(v).type.has_value()) continue;
    const int64_t bytes = graph::ByteSize(*graph.value(v).type, "").value_or(0);
    if (plan.blob_per_name) {
      int64_t& named = by_name[graph.value(v).name];
      named = std::max(named, bytes);
    } else if (graph.value(v).inplace_of == graph::kNone) {
      stats.baseline_bytes += bytes;
    }
    largest[b] = std::max(largest[b], bytes);
  }
  for (const auto& [name, bytes] : by_name) stats.baseline_bytes += bytes;
  for (int64_t bytes : largest) stats.optimized_bytes += bytes;
  return stats;
}

MemoryEstimate EstimateMemoryUsage(const proto::NetDef& net,
                                   const std::map<std::string, int64_t>& blob_bytes) {
  MemoryEstimate estimate;
  std::set<std::string> allocated;
  int64_t current = 0;
  auto bytes_of = [&](const std::string& name) {
    auto it = blob_bytes.find(name);
    return it == blob_bytes.end() ? int64_t{0} : it->second;
  };
  for (const proto::OperatorDef& op : net.op()) {
    if (op.type() == "Free" || op.type() == "Alias") {
      for (const std::string& out : op.output()) {
        if (allocated.erase(out) > 0) current -= bytes_of(out);
      }
      continue;
    }
    for (const std::string& out : op.output()) {
      if (!allocated.insert(out).second) continue;
      const int64_t bytes = bytes_of(out);
      current += bytes;
      estimate.total_bytes += bytes;
      estimate.bytes_by_op_type[op.type()] += bytes;
    }
    estimate.high_water_bytes = std::max(estimate.high_water_bytes, current);
  }
  return estimate;
}

std::optional<MemongerAccount> AccountPlan(const graph::Graph& graph, const Plan& plan) {
  absl::StatusOr<RewrittenNet> rewritten = RewriteNet(graph, plan);
  if (!rewritten.ok()) return std::nullopt;
  std::map<std::string, int64_t> bytes;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (!graph.value(v).type.has_value()) continue;
    int64_t& b = bytes[rewritten->value_names[v]];
    b = std::max(b, graph::ByteSize(*graph.value(v).type, "").value_or(0));
  }
  MemongerAccount account;
  account.statistics = ComputeStatistics(graph, plan);
  account.estimate = EstimateMemoryUsage(rewritten->net, bytes);
  account.high_water_with_free =
      EstimateMemoryUsage(InsertFrees(rewritten->net, std::set<std::string>(
                                                          plan.static_names.begin(),
                                                          plan.static_names.end())),
                          bytes)
          .high_water_bytes;
  return account;
}

}  // namespace memonger

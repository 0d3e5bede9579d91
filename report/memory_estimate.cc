#include "report/memory_estimate.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
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
    if (plan.liveness.blob_per_name) {
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

namespace {

// EstimateMemoryUsage over name-level ops, with the bytes of a name from `bytes_of` and, when
// `frees_after` is given, a Free of each of its names right after each op.
template <typename BytesOf>
MemoryEstimate Estimate(const std::vector<BlobOp>& ops, const BytesOf& bytes_of,
                        const std::vector<std::vector<absl::string_view>>* frees_after) {
  MemoryEstimate estimate;
  absl::flat_hash_set<absl::string_view> allocated;
  int64_t current = 0;
  auto release = [&](absl::string_view name) {
    if (allocated.erase(name) > 0) current -= bytes_of(name);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const BlobOp& op = ops[i];
    if (op.type == "Free" || op.type == "Alias") {
      for (absl::string_view out : op.outputs) release(out);
      continue;
    }
    for (absl::string_view out : op.outputs) {
      if (!allocated.insert(out).second) continue;
      const int64_t bytes = bytes_of(out);
      current += bytes;
      estimate.total_bytes += bytes;
      estimate.bytes_by_op_type[std::string(op.type)] += bytes;
    }
    estimate.high_water_bytes = std::max(estimate.high_water_bytes, current);
    if (frees_after != nullptr) {
      for (absl::string_view name : (*frees_after)[i]) release(name);
    }
  }
  return estimate;
}

}  // namespace

MemoryEstimate EstimateMemoryUsage(const proto::NetDef& net,
                                   const std::map<std::string, int64_t>& blob_bytes) {
  return Estimate(
      BlobOpsOf(net),
      [&](absl::string_view name) {
        auto it = blob_bytes.find(std::string(name));
        return it == blob_bytes.end() ? int64_t{0} : it->second;
      },
      nullptr);
}

std::optional<MemongerAccount> AccountPlan(const graph::Graph& graph, const Plan& plan) {
  // The rewritten net's ops as names (RewriteNet's, in the plan's step order), without writing
  // the net out: a hundred-thousand-op net spent most of its report copying protobufs.
  absl::StatusOr<RewrittenNames> rewritten = RewriteNames(graph, plan);
  if (!rewritten.ok()) return std::nullopt;
  const std::vector<std::string>& names = rewritten->value_names;
  std::vector<BlobOp> ops;
  ops.reserve(plan.steps.size());
  for (const PlanStep& step : plan.steps) {
    const graph::Op& op = graph.op(step.op);
    BlobOp& blob_op = ops.emplace_back();
    blob_op.type = op.type;
    for (graph::ValueId in : op.inputs) blob_op.inputs.push_back(names[in]);
    for (graph::ValueId out : op.outputs) blob_op.outputs.push_back(names[out]);
  }
  absl::flat_hash_map<absl::string_view, int64_t> bytes;  // views of `names`
  bytes.reserve(graph.num_values());
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (!graph.value(v).type.has_value()) continue;
    int64_t& b = bytes[names[v]];
    b = std::max(b, graph::ByteSize(*graph.value(v).type, "").value_or(0));
  }
  auto bytes_of = [&](absl::string_view name) {
    auto it = bytes.find(name);
    return it == bytes.end() ? int64_t{0} : it->second;
  };
  std::vector<absl::string_view> external_outputs;
  for (graph::ValueId id : graph.outputs()) external_outputs.push_back(names[id]);
  const std::vector<std::vector<absl::string_view>> frees_after = FreesAfter(
      ops, external_outputs,
      std::set<std::string>(plan.liveness.static_names.begin(), plan.liveness.static_names.end()));
  MemongerAccount account;
  account.statistics = ComputeStatistics(graph, plan);
  account.estimate = Estimate(ops, bytes_of, nullptr);
  account.high_water_with_free = Estimate(ops, bytes_of, &frees_after).high_water_bytes;
  return account;
}

}  // namespace memonger

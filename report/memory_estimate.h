// Caffe2 memonger's two accounting functions, for a plan and its rewritten net:
//
// - ComputeStatistics (memonger.compute_statistics): baseline = the sum of every blob's bytes
//   (a name once, at its largest version, for a plan with one blob per name),
//   optimized = the sum over shared blobs (buffers) of their largest member. Unaligned bytes, as
//   Caffe2 measured them in a workspace; here from the graph's types, so no run is needed.
// - EstimateMemoryUsage (memonger.estimate_memory_usage): walks a net's ops in order as a
//   name-based runtime would allocate: an op's output is allocated at its first write with its
//   blob's bytes, a `Free` (or `Alias`) op releases its output; the result is the total
//   allocated, the high-water mark and the bytes allocated by each op type. Run on the
//   rewritten net, it is what Caffe2 would allocate for the plan's sharing (and, with
//   --insert-free, with a caching allocator).
//
// Both O(ops + edges + values).
#ifndef MEMONGER_REPORT_MEMORY_ESTIMATE_H_
#define MEMONGER_REPORT_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "graph/graph.h"
#include "memonger/plan.h"
#include "proto/memonger.pb.h"

namespace memonger {

struct MemongerStatistics {
  int64_t baseline_bytes = 0;
  int64_t optimized_bytes = 0;
};
MemongerStatistics ComputeStatistics(const graph::Graph& graph, const Plan& plan);

struct MemoryEstimate {
  int64_t total_bytes = 0;
  int64_t high_water_bytes = 0;
  std::map<std::string, int64_t> bytes_by_op_type;
};
// `blob_bytes`: the bytes of each name of `net` (a name missing counts 0, as Caffe2's unknown
// shapes did).
MemoryEstimate EstimateMemoryUsage(const proto::NetDef& net,
                                   const std::map<std::string, int64_t>& blob_bytes);

// Both, for a plan: statistics, and the estimate on its rewritten net (RewriteNet) without and
// with the Free ops of --insert-free. nullopt when the net cannot be rewritten.
struct MemongerAccount {
  MemongerStatistics statistics;
  MemoryEstimate estimate;             // the rewritten net
  int64_t high_water_with_free = 0;    // the rewritten net with Free ops (InsertFrees)
};
std::optional<MemongerAccount> AccountPlan(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_REPORT_MEMORY_ESTIMATE_H_

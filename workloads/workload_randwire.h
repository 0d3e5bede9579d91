// The randwire workload: randomly wired networks (Xie et al. 2019, "Exploring Randomly Wired
// Neural Networks"), the irregular nets whose execution order decides their peak memory
// (Serenity, MLSys 2020, measured its 1.68x on them). Real, typed ops with CPU kernels and
// gradient rules: it plans, runs with --execute host and trains.
//
//   optimize-net --workload randwire:nodes=32,k=4,p=75,stages=3 --order memory-aware
//
// Keys (defaults): nodes (32 per stage), k (4: each node's ring neighbours, even), p (75:
// percent of ring edges rewired), stages (3), seed (1), batch (8), width (64: stage s has
// width * 2^s features), dtype (fp32 | fp16 | bf16), mode (inference | training).
//
// Each stage is a Watts-Strogatz graph: nodes on a ring, each joined to its k/2 next
// neighbours; every such edge (i, i + j) is rewired, with chance p%, to a node chosen uniformly
// among those that are neither i nor already joined to i (kept when there is none). Edges point
// from the lower index to the higher, so the graph is a DAG in index order. A node sums its
// inputs (Sum, when it has more than one; the stage input for a node without any), then
// Relu, then FC to the stage width. The nodes nothing reads are summed into the stage output;
// an FC to the next width joins two stages. The head is loss = AveragedLoss(output), declared
// as the loss. The ops are listed in index order, which is one valid order among many.
//
// Deterministic: util::SplitMix64 seeded with `seed`. Complexity O(stages x nodes x k x (k +
// log nodes)).
#ifndef MEMONGER_WORKLOADS_WORKLOAD_RANDWIRE_H_
#define MEMONGER_WORKLOADS_WORKLOAD_RANDWIRE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "graph/dtype.h"
#include "graph/graph.h"
#include "workloads/workload_spec.h"

namespace memonger::graph {

struct RandWireWorkload {
  int64_t nodes = 32;
  int64_t k = 4;
  int64_t p = 75;
  int64_t stages = 3;
  uint64_t seed = 1;
  int64_t batch = 8;
  int64_t width = 64;
  DataType dtype = DataType::kFloat32;
  bool training = false;
};

// InvalidArgument for an unknown key or a value out of range (k odd, k >= nodes, or more than
// 2^19 edges a stage: nodes * k / 2).
absl::StatusOr<RandWireWorkload> ParseRandWireWorkload(const WorkloadSpec& spec);

absl::StatusOr<Graph> BuildRandWireGraph(const RandWireWorkload& workload);

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOAD_RANDWIRE_H_

// The guillotine workload: planning problems whose optimum is known by construction. A
// rectangle of `steps` x `height` units (time x address) is cut, guillotine fashion, into
// `records` pieces; each piece is one buffer (its steps, its units x `unit` bytes). The pieces
// tile the rectangle, so at every step exactly `height` units are live: the lower bound (the
// most bytes live at one step) is height x unit, and the cutting itself is a placement that
// reaches it. An optimal planner must find an arena of exactly that size, on instances where
// greedy placement leaves holes (MiniMalloc's hard traces are of this kind).
//
//   optimize-net --workload guillotine:records=240,seed=1
//   GuillotineInstance g = MakeGuillotineInstance(w);  // records with their offsets, optimum
//
// Keys (defaults): records (240), seed (1), steps (1000), height (1000: units of address),
// unit (256: bytes per unit of address).
//
// Algorithm. Start with the whole rectangle; while there are fewer than `records` pieces, take
// a piece that can still be cut (at least 2 steps or 2 units): the largest by area (ties: the
// earliest made) on even draws, a uniformly random one on odd draws, so that the pieces mix
// sizes as real traces do; cut it across time or across addresses (a random direction among
// those with room) at a uniformly random position. Deterministic: one util::SplitMix64 seeded
// with `seed`, integer arithmetic only. O(records log records).
#ifndef MEMONGER_WORKLOADS_WORKLOAD_GUILLOTINE_H_
#define MEMONGER_WORKLOADS_WORKLOAD_GUILLOTINE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/records.h"
#include "workloads/workload_spec.h"

namespace memonger::graph {

struct GuillotineWorkload {
  int64_t records = 240;
  uint64_t seed = 1;
  int64_t steps = 1000;
  int64_t height = 1000;  // units
  int64_t unit = 256;     // bytes per unit
};

// InvalidArgument for unknown keys or values out of range: records in [1, util::kMaxValues] and
// at most steps x height (each piece is at least one step by one unit); steps and height in
// [1, 2^30]; unit a power of two in [1, 2^20]; seed >= 0.
absl::StatusOr<GuillotineWorkload> ParseGuillotineWorkload(const WorkloadSpec& spec);

struct GuillotineInstance {
  std::vector<UsageRecord> records;  // "g<k>"; `offset` holds the construction's offset
  int64_t optimum = 0;               // height x unit: the lower bound, reached by the offsets
};
// REQUIRES: `workload` passed ParseGuillotineWorkload's checks.
GuillotineInstance MakeGuillotineInstance(const GuillotineWorkload& workload);

// The instance as a typed graph (GraphFromRecords, InferShapes): plan it with the given order.
absl::StatusOr<Graph> BuildGuillotineGraph(const GuillotineWorkload& workload);

}  // namespace memonger::graph

#endif  // MEMONGER_WORKLOADS_WORKLOAD_GUILLOTINE_H_

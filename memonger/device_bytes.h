// Device bytes: the one figure every budget is held against (`--budget` on one plan, `--fit`,
// what-if tables, range summaries, and the arena recomputation aims at), so that one question
// gets one answer wherever it is asked:
//
//   device bytes = arena + static + optimizer state
//
//   arena            every planned value: inputs, activations, gradients (a training net's
//                    parameter gradients are among its outputs, so they are in the arena)
//   static           params and constants kept outside the arena (the weights)
//   optimizer state  only when asked (--optimizer): per trainable param, momentum keeps one
//                    tensor of its size and Adam two (the first and second moments); plain SGD
//                    none. Counted in the param's own dtype: a mixed-precision optimizer that
//                    keeps float32 moments of float16 weights holds more than this.
//
// Cures (the memory-aware order, recomputation) change only the arena, so what the arena may
// use of a budget is the budget less the rest (ArenaShare), known before planning
// (OutsideArenaBytes).
#ifndef MEMONGER_MEMONGER_DEVICE_BYTES_H_
#define MEMONGER_MEMONGER_DEVICE_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"

namespace memonger {

enum class Optimizer : uint8_t { kNone, kSgd, kMomentum, kAdam };

// "sgd", "momentum", "adam" (and "none"); InvalidArgument naming them for anything else.
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name);
absl::string_view OptimizerName(Optimizer optimizer);
// Tensors of each trainable param's size the optimizer keeps: 0, 0, 1, 2.
int OptimizerStateCopies(Optimizer optimizer);

struct DeviceBytes {
  int64_t arena = 0;
  int64_t static_bytes = 0;
  int64_t optimizer_state = 0;
  int64_t total() const { return arena + static_bytes + optimizer_state; }
  int64_t outside_arena() const { return static_bytes + optimizer_state; }
};

// `trainable_bytes` times the optimizer's copies (no overflow: a plan's bytes stay under 2^60).
int64_t OptimizerStateBytes(int64_t trainable_bytes, Optimizer optimizer);

DeviceBytes DeviceBytesOf(const Plan& plan, Optimizer optimizer);

// The parts, for people: "arena 1.20 GiB + params and constants 97.5 MiB + optimizer state
// 195 MiB" (the optimizer's part only where it holds any).
std::string DeviceBytesToText(const DeviceBytes& bytes);

// Static bytes and optimizer state of `graph` as a plan with `liveness` options would count
// them, without planning: what the arena leaves free of a budget. O(values).
absl::StatusOr<int64_t> OutsideArenaBytes(const graph::Graph& graph,
                                          const LivenessOptions& liveness, Optimizer optimizer);

// The part of `budget` the arena may use: budget - outside, at least 0; a budget < 0 (none)
// stays < 0.
int64_t ArenaShare(int64_t budget, int64_t outside_arena);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_DEVICE_BYTES_H_

#include "memonger/device_bytes.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "util/bytes.h"
#include "util/checked_math.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name) {
  if (name == "none") return Optimizer::kNone;
  if (name == "sgd") return Optimizer::kSgd;
  if (name == "momentum") return Optimizer::kMomentum;
  if (name == "adam") return Optimizer::kAdam;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "' (sgd, momentum, adam)"));
}

absl::string_view OptimizerName(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kNone: return "none";
    case Optimizer::kSgd: return "sgd";
    case Optimizer::kMomentum: return "momentum";
    case Optimizer::kAdam: return "adam";
  }
  return "none";
}

int OptimizerStateCopies(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kMomentum: return 1;
    case Optimizer::kAdam: return 2;
    case Optimizer::kNone:
    case Optimizer::kSgd: return 0;
  }
  return 0;
}

int64_t OptimizerStateBytes(int64_t trainable_bytes, Optimizer optimizer) {
  return trainable_bytes * OptimizerStateCopies(optimizer);
}

DeviceBytes DeviceBytesOf(const Plan& plan, Optimizer optimizer) {
  DeviceBytes bytes;
  bytes.arena = plan.arena_bytes;
  bytes.static_bytes = plan.static_bytes;
  bytes.optimizer_state = OptimizerStateBytes(plan.trainable_bytes, optimizer);
  return bytes;
}

namespace {

absl::Status AddBytes(int64_t& sum, int64_t bytes) {
  const std::optional<int64_t> next = util::CheckedAdd(sum, bytes);
  if (!next.has_value() || *next > util::kMaxTotalBytes) {
    return absl::InvalidArgumentError(
        "the params and constants need more than 2^60 bytes (1 EiB): no device holds them");
  }
  sum = *next;
  return absl::OkStatus();
}

}  // namespace

std::string DeviceBytesToText(const DeviceBytes& bytes) {
  std::string text = absl::StrCat("arena ", util::FormatBytes(bytes.arena),
                                  " + params and constants ", util::FormatBytes(bytes.static_bytes));
  if (bytes.optimizer_state > 0) {
    absl::StrAppend(&text, " + optimizer state ", util::FormatBytes(bytes.optimizer_state));
  }
  return text;
}

absl::StatusOr<int64_t> OutsideArenaBytes(const graph::Graph& graph,
                                          const LivenessOptions& liveness, Optimizer optimizer) {
  int64_t outside = 0;
  if (!liveness.plan_static) {
    for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
      const graph::Value& v = graph.value(id);
      if (!graph::OwnsStaticStorage(v)) continue;
      MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ValueByteSize(v));
      MG_RETURN_IF_ERROR(AddBytes(outside, bytes));
    }
  }
  int64_t trainable = 0;
  for (const graph::ValueId id : graph::TrainableParams(graph)) {
    MG_ASSIGN_OR_RETURN(const int64_t bytes, graph::ValueByteSize(graph.value(id)));
    MG_RETURN_IF_ERROR(AddBytes(trainable, bytes));
  }
  // Two copies of at most 2^60 and 2^60 more stay inside int64.
  return outside + OptimizerStateBytes(trainable, optimizer);
}

int64_t ArenaShare(int64_t budget, int64_t outside_arena) {
  if (budget < 0) return budget;
  return std::max<int64_t>(budget - outside_arena, 0);
}

}  // namespace memonger

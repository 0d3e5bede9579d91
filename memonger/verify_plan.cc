#include "memonger/verify_plan.h"

#include <algorithm>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/in_place.h"
#include "memonger/enforced_inplace.h"
#include "memonger/liveness.h"
#include "memonger/schedule.h"
#include "util/status_macros.h"

namespace memonger {
namespace {

using graph::Graph;
using graph::kNone;
using graph::OpId;
using graph::ValueId;

// One alias class as placed by the plan: bytes [offset, end), alive from `first_step` to its
// lifetime's last step. 24 bytes: there is one per class of a plan, millions on a big graph.
struct Placed {
  int64_t offset = 0;
  int64_t end = 0;
  ValueId root = kNone;
  int first_step = 0;
};

std::string LifetimeText(const Lifetime& l) {
  return absl::StrCat("[", l.first_step, ",", l.last_step, "]");
}

std::string Describe(const Graph& graph, const Liveness& live, const Placed& p) {
  return absl::StrCat("'", graph.value(p.root).DisplayName(), "' (lifetime ",
                      LifetimeText(live.lifetime[p.root]), ", bytes [", p.offset, ", ", p.end,
                      "))");
}

bool IsPowerOfTwo(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

absl::Status CheckShapes(const Graph& graph, const Plan& plan) {
  const size_t n = static_cast<size_t>(graph.num_values());
  if (plan.buffer_of_value.size() != n || plan.offset_of_value.size() != n ||
      plan.lifetime.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan covers ", plan.buffer_of_value.size(), " buffers, ",
        plan.offset_of_value.size(), " offsets and ", plan.lifetime.size(),
        " lifetimes, but the net has ", n, " values"));
  }
  if (static_cast<int>(plan.steps.size()) != graph.num_ops()) {
    return absl::InvalidArgumentError(absl::StrCat("the plan has ", plan.steps.size(),
                                                   " steps, but the net has ", graph.num_ops(),
                                                   " ops"));
  }
  if (!IsPowerOfTwo(plan.alignment)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan's alignment ", plan.alignment, " is not a power of two"));
  }
  return absl::OkStatus();
}

// Buffers, offsets, alignment, sizes, devices and alias classes, value by value.
// `named`: the lifetimes the plan states (per name with LivenessOptions::blob_per_name, else `live`'s).
absl::Status CheckPlacement(const Graph& graph, const Plan& plan, const Liveness& live,
                            const Liveness& named) {
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlanBuffer& buffer = plan.buffers[b];
    if (buffer.offset < 0 || buffer.size < 0 || buffer.offset > plan.arena_bytes - buffer.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "buffer ", b, " at bytes [", buffer.offset, ", ", buffer.offset + buffer.size,
          ") does not lie inside the arena of ", plan.arena_bytes, " bytes"));
    }
  }
  std::vector<ValueId> first_in_buffer(plan.buffers.size(), kNone);
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    const graph::Value& v = graph.value(id);
    const int32_t b = plan.buffer_of_value[id];
    const int64_t offset = plan.offset_of_value[id];
    if (!live.planned[id]) {
      if (b != -1 || offset != kNoOffset) {
        return absl::InvalidArgumentError(absl::StrCat(
            "static value '", v.DisplayName(), "' has a place in the arena (buffer ", b,
            ", offset ", offset, "), but the plan does not place static values"));
      }
      continue;
    }
    if (b < 0 || b >= static_cast<int32_t>(plan.buffers.size())) {
      return absl::InvalidArgumentError(absl::StrCat("value '", v.DisplayName(),
                                                     "' has no buffer (buffer index ", b, ")"));
    }
    const PlanBuffer& buffer = plan.buffers[b];
    if (offset != buffer.offset) {
      return absl::InvalidArgumentError(absl::StrCat("value '", v.DisplayName(), "' has offset ",
                                                     offset, " but its buffer ", b,
                                                     " starts at ", buffer.offset));
    }
    if (offset % plan.alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat("value '", v.DisplayName(), "' at offset ",
                                                     offset, " is not aligned to the plan's ",
                                                     plan.alignment, " bytes"));
    }
    if (v.alignment > 0 && offset % v.alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat("value '", v.DisplayName(), "' at offset ",
                                                     offset, " is not aligned to the ",
                                                     v.alignment, " bytes it requires"));
    }
    if (live.bytes[id] > buffer.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", v.DisplayName(), "' has ", live.bytes[id], " bytes, but its buffer ", b,
          " at bytes [", buffer.offset, ", ", buffer.offset + buffer.size, ") holds only ",
          buffer.size));
    }
    const ValueId first = first_in_buffer[b];
    if (first == kNone) {
      first_in_buffer[b] = id;
      if (live.device[id] != buffer.device) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value '", v.DisplayName(), "' lives on ", graph::DeviceToString(live.device[id]),
            ", but its buffer ", b, " is on ", graph::DeviceToString(buffer.device)));
      }
    } else if (live.device[id] != live.device[first]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "values '", graph.value(first).DisplayName(), "' (",
          graph::DeviceToString(live.device[first]), ") and '", v.DisplayName(), "' (",
          graph::DeviceToString(live.device[id]), ") share buffer ", b,
          " although they live on different devices"));
    }
    const ValueId root = live.alias_root[id];
    if (plan.offset_of_value[root] != offset || plan.buffer_of_value[root] != b) {
      return absl::InvalidArgumentError(absl::StrCat(
          "values '", graph.value(root).DisplayName(), "' (offset ", plan.offset_of_value[root],
          ") and '", v.DisplayName(), "' (offset ", offset,
          ") must share their bytes (in place or a view) but the plan separates them"));
    }
    const Lifetime& expected = named.lifetime[id];
    const Lifetime& given = plan.lifetime[id];
    if (expected.first_step != given.first_step || expected.last_step != given.last_step) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan gives value '", v.DisplayName(), "' the lifetime ", LifetimeText(given),
          ", but its schedule gives ", LifetimeText(expected)));
    }
  }
  return absl::OkStatus();
}

// Whether class `p`, starting at its step, may sit on the bytes of class `q`, live there:
// in-place reuse of a dying input (LivenessOptions::in_place), checked here on its own terms
// from graph/in_place.h's table. p holds an output of the op at that step, at whose step p
// starts; q holds one of the op's inputs in a slot the table lets that output write over, with
// the same dims and element size; q dies at that step, holds nothing read after the net
// (`pinned_class`), is not read beside that input nor written by another output of the op,
// and the two occupy exactly the same bytes.
bool IsInPlaceHandoff(const Graph& graph, const Plan& plan, const Liveness& live,
                      const std::vector<bool>& pinned_class, const Placed& q, const Placed& p) {
  if (!plan.liveness.in_place || plan.execution != ExecutionModel::kSerial) return false;
  if (q.offset != p.offset || q.end != p.end) return false;
  const int step = p.first_step;
  if (live.lifetime[q.root].last_step != step || pinned_class[q.root]) return false;
  const OpId op_id = graph.value(p.root).producer;
  if (op_id == kNone || plan.steps[step].op != op_id) return false;
  const graph::Op& op = graph.op(op_id);
  const int outputs = static_cast<int>(op.outputs.size());
  for (int k = 0; k < outputs; ++k) {
    if (live.alias_root[op.outputs[k]] != p.root) continue;
    const graph::Value& out = graph.value(op.outputs[k]);
    for (int slot = 0; slot < static_cast<int>(op.inputs.size()); ++slot) {
      const ValueId in = op.inputs[slot];
      if (live.alias_root[in] != q.root || !graph::MayWriteOverInput(op, k, slot)) continue;
      const graph::Value& input = graph.value(in);
      if (!input.type.has_value() || !out.type.has_value() ||
          !graph::InPlaceTypesMatch(*input.type, *out.type)) {
        continue;
      }
      // The same value at another slot counts only where the table allows that slot too.
      bool read_beside = false;
      for (int j = 0; j < static_cast<int>(op.inputs.size()); ++j) {
        if (j == slot || live.alias_root[op.inputs[j]] != q.root) continue;
        if (op.inputs[j] != in || !graph::MayWriteOverInput(op, k, j)) read_beside = true;
      }
      bool written_beside = false;
      for (int j = 0; j < outputs; ++j) {
        if (j != k && live.alias_root[op.outputs[j]] == q.root) written_beside = true;
      }
      if (!read_beside && !written_beside) return true;
    }
  }
  return false;
}

// Classes holding a value read after the net: graph outputs, declared parameter gradients,
// graph inputs the caller owns, --static names (liveness keeps them to the last step), and
// params and constants (the next run reads them, wherever they are placed).
std::vector<bool> PinnedClasses(const Graph& graph, const Plan& plan, const Liveness& live) {
  std::vector<bool> pinned(graph.num_values(), false);
  auto pin = [&](ValueId id) { pinned[live.alias_root[id]] = true; };
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    if (graph::IsStatic(graph.value(id).role)) pin(id);
  }
  for (ValueId id : graph.outputs()) pin(id);
  for (const auto& [param, grad] : graph.param_grads()) pin(grad);
  if (!plan.liveness.recycle_inputs) {
    for (ValueId id : graph.inputs()) pin(id);
  }
  for (const std::string& name : plan.liveness.static_names) {
    if (const std::optional<ValueId> id = graph.FindValue(name)) pin(*id);
  }
  return pinned;
}

// Serial rule: classes overlapping in bytes never live at the same step, except an output
// taking the exact bytes of an input dying at its op (IsInPlaceHandoff). A sweep over time keeps
// the live classes' byte ranges in a map; they are pairwise disjoint while the plan is valid, so
// a new class can only collide with its neighbours there. O(n log n).
absl::Status CheckSerial(const Graph& graph, const Plan& plan, const Liveness& live,
                         const std::vector<bool>& pinned_class,
                         const std::vector<Placed>& by_start) {
  std::map<int64_t, int> live_ranges;  // offset -> index into by_start
  using Ending = std::pair<int, int>;  // (last step, index)
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> endings;
  for (int i = 0; i < static_cast<int>(by_start.size()); ++i) {
    const Placed& p = by_start[i];
    while (!endings.empty() && endings.top().first < p.first_step) {
      // A class handed its bytes on in place has left the map already.
      const auto ended = live_ranges.find(by_start[endings.top().second].offset);
      if (ended != live_ranges.end() && ended->second == endings.top().second) {
        live_ranges.erase(ended);
      }
      endings.pop();
    }
    auto next = live_ranges.lower_bound(p.offset);
    int other = -1;
    if (next != live_ranges.end() && by_start[next->second].offset < p.end) {
      other = next->second;
    } else if (next != live_ranges.begin() && by_start[std::prev(next)->second].end > p.offset) {
      other = std::prev(next)->second;
    }
    if (other >= 0 && IsInPlaceHandoff(graph, plan, live, pinned_class, by_start[other], p)) {
      live_ranges.erase(by_start[other].offset);
      other = -1;
    }
    if (other >= 0) {
      const Placed& q = by_start[other];
      return absl::InvalidArgumentError(absl::StrCat(
          "values ", Describe(graph, live, q), " and ", Describe(graph, live, p),
          " overlap in memory while both are live (at step ", p.first_step, ")"));
    }
    live_ranges.emplace(p.offset, i);
    endings.emplace(live.lifetime[p.root].last_step, i);
  }
  return absl::OkStatus();
}

// Parallel rule: when class B reuses bytes of class A (A earlier in the schedule), every op that
// reads a member of A (or writes one) happens-before the op that writes B's first member. Only
// the latest earlier occupant of each byte needs checking: happens-before is transitive and a
// class's first writer precedes all its other ops. The latest occupant of every byte is kept as
// painted segments [start, end) -> index.
absl::Status CheckParallel(const Graph& graph, const Liveness& live,
                           const std::vector<Placed>& by_start) {
  HappensBefore hb(graph);
  // The readers of every member, and the writers of members nobody reads (a writer precedes
  // its readers, so the others need no check).
  auto last_ops = [&](ValueId root) {
    std::vector<OpId> ops;
    for (ValueId m : live.members[root]) {
      const graph::Value& v = graph.value(m);
      const absl::Span<const OpId> readers = graph.consumers(m);
      if (readers.empty() && v.producer != kNone) ops.push_back(v.producer);
      ops.insert(ops.end(), readers.begin(), readers.end());
    }
    std::sort(ops.begin(), ops.end());
    ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
    return ops;
  };
  struct Segment {
    int64_t end;
    int index;
  };
  std::map<int64_t, Segment> painted;  // start -> segment
  for (int i = 0; i < static_cast<int>(by_start.size()); ++i) {
    const Placed& p = by_start[i];
    // Segments overlapping [p.offset, p.end).
    auto it = painted.upper_bound(p.offset);
    if (it != painted.begin() && std::prev(it)->second.end > p.offset) --it;
    std::vector<int> earlier;
    for (auto s = it; s != painted.end() && s->first < p.end; ++s) {
      earlier.push_back(s->second.index);
    }
    std::sort(earlier.begin(), earlier.end());
    earlier.erase(std::unique(earlier.begin(), earlier.end()), earlier.end());
    const OpId writer = graph.value(p.root).producer;
    for (int e : earlier) {
      const Placed& q = by_start[e];
      for (OpId op : last_ops(q.root)) {
        if (writer != kNone && hb.Before(op, writer)) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            "values ", Describe(graph, live, q), " and ", Describe(graph, live, p),
            " share memory, but in parallel execution ", graph.op(op).Label(), ", which uses '",
            graph.value(q.root).DisplayName(), "', need not finish before ",
            writer == kNone ? std::string("the net starts")
                            : graph.op(writer).Label() + " writes '" +
                                  graph.value(p.root).DisplayName() + "'"));
      }
    }
    // Repaint [p.offset, p.end) with p, keeping the parts of cut segments outside it.
    std::vector<std::pair<int64_t, Segment>> keep;
    auto s = it;
    while (s != painted.end() && s->first < p.end) {
      if (s->first < p.offset) keep.push_back({s->first, Segment{p.offset, s->second.index}});
      if (s->second.end > p.end) keep.push_back({p.end, Segment{s->second.end, s->second.index}});
      s = painted.erase(s);
    }
    for (const auto& [start, segment] : keep) painted.emplace(start, segment);
    painted.emplace(p.offset, Segment{p.end, i});
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyPlan(const Graph& graph, const Plan& plan) {
  MG_RETURN_IF_ERROR(CheckShapes(graph, plan));
  MG_RETURN_IF_ERROR(CheckEnforcedInPlace(graph));
  if (absl::Status s = CheckSchedule(graph, ScheduleOfPlan(plan).ops); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the plan's schedule is invalid: ", s.message()));
  }
  // Versions of a name placed together (blob_per_name) are checked as the values they are: each
  // with its own lifetime, so two versions live at once in one buffer are caught.
  MG_ASSIGN_OR_RETURN(Liveness live, LivenessOfPlan(graph, plan, PlanLifetimes::kPerVersion));
  if (plan.liveness.blob_per_name || plan.liveness.in_place) {
    MG_ASSIGN_OR_RETURN(Liveness named, LivenessOfPlan(graph, plan));
    MG_RETURN_IF_ERROR(CheckPlacement(graph, plan, live, named));
  } else {
    MG_RETURN_IF_ERROR(CheckPlacement(graph, plan, live, live));
  }
  // What the overlap checks below do not read is released before their array of classes is
  // made: on a 4M-op graph that array and the whole liveness were the run's peak together.
  live.schedule = Schedule();
  std::vector<int64_t>().swap(live.bytes);
  std::vector<graph::Device>().swap(live.device);
  if (plan.execution != ExecutionModel::kParallel) live.members = ClassMembers();

  auto placed = [&](ValueId id) {
    return live.planned[id] && live.alias_root[id] == id && live.class_bytes[id] > 0;
  };
  std::vector<Placed> by_start;
  // Sized exactly: grown by doubling, it was the largest thing a million-value run allocated.
  size_t count = 0;
  for (ValueId id = 0; id < graph.num_values(); ++id) count += placed(id) ? 1 : 0;
  by_start.reserve(count);
  for (ValueId id = 0; id < graph.num_values(); ++id) {
    if (!placed(id)) continue;
    const int64_t offset = plan.offset_of_value[id];
    if (offset > plan.arena_bytes - live.class_bytes[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value '", graph.value(id).DisplayName(), "' at bytes [", offset, ", ",
          offset + live.class_bytes[id], ") extends past the arena of ", plan.arena_bytes,
          " bytes"));
    }
    by_start.push_back(
        Placed{offset, offset + live.class_bytes[id], id, live.lifetime[id].first_step});
  }
  std::sort(by_start.begin(), by_start.end(), [](const Placed& a, const Placed& b) {
    if (a.first_step != b.first_step) return a.first_step < b.first_step;
    return a.offset != b.offset ? a.offset < b.offset : a.root < b.root;
  });
  MG_RETURN_IF_ERROR(CheckSerial(graph, plan, live, PinnedClasses(graph, plan, live), by_start));
  if (plan.execution == ExecutionModel::kParallel) {
    MG_RETURN_IF_ERROR(CheckParallel(graph, live, by_start));
  }
  return absl::OkStatus();
}

}  // namespace memonger

#include "graph/control_regions.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/dtype.h"
#include "graph/tensor_type.h"
#include "util/status_macros.h"

namespace memonger::graph {
namespace {

bool IsMarker(const Op& op, absl::string_view type) {
  return op.type == type && absl::string_view(op.domain.str()) == kControlDomain;
}

absl::Status Bad(const Op& op, const std::string& problem) {
  return absl::InvalidArgumentError(
      absl::StrCat(op.Label(), " (a control-flow marker): ", problem));
}

std::string TypeText(const Value& v) {
  return v.type ? TensorTypeToString(*v.type) : std::string("untyped");
}

// One element of `dtype`.
absl::Status CheckScalar(const Graph& g, const Op& op, ValueId id, DataType dtype,
                         const char* what) {
  const Value& v = g.value(id);
  int64_t elements = 1;
  if (v.type) {
    for (int64_t d : v.type->dims) elements *= d;
  }
  if (!v.type || v.type->dtype != dtype || elements != 1) {
    return Bad(op, absl::StrCat("its ", what, " '", v.DisplayName(), "' is ", TypeText(v),
                                ", not one ", DataTypeName(dtype)));
  }
  return absl::OkStatus();
}

absl::Status CheckSameType(const Graph& g, const Op& op, ValueId a, ValueId b) {
  const Value& va = g.value(a);
  const Value& vb = g.value(b);
  if (!va.type || !vb.type || *va.type != *vb.type) {
    return Bad(op, absl::StrCat("'", va.DisplayName(), "' (", TypeText(va), ") and '",
                                vb.DisplayName(), "' (", TypeText(vb),
                                ") must have one type: the executor copies one into the other"));
  }
  return absl::OkStatus();
}

bool Flag(const Op& op, const char* name) { return op.attributes().GetInt(name, 0) != 0; }

absl::Status CheckIf(const Graph& g, ControlRegion& r) {
  const Op& then = g.op(r.begin);
  const Op& end = g.op(r.end);
  if (then.inputs.size() != 1 || !then.outputs.empty()) {
    return Bad(then, "it reads one condition and writes nothing");
  }
  if (!g.op(r.middle).inputs.empty() || !g.op(r.middle).outputs.empty()) {
    return Bad(g.op(r.middle), "it reads and writes nothing");
  }
  const size_t n = end.outputs.size();
  if (end.inputs.size() != 1 + 2 * n) {
    return Bad(end, absl::StrCat("it reads the condition and both branches' outputs: ", 1 + 2 * n,
                                 " inputs for ", n, " outputs, not ", end.inputs.size()));
  }
  if (end.inputs[0] != then.inputs[0]) return Bad(end, "it reads another condition than IfThen");
  MG_RETURN_IF_ERROR(CheckScalar(g, then, then.inputs[0], DataType::kBool, "condition"));
  for (size_t k = 0; k < n; ++k) {
    MG_RETURN_IF_ERROR(CheckSameType(g, end, end.inputs[1 + k], end.outputs[k]));
    MG_RETURN_IF_ERROR(CheckSameType(g, end, end.inputs[1 + n + k], end.outputs[k]));
  }
  r.carried = static_cast<int>(n);
  return absl::OkStatus();
}

absl::Status CheckLoop(const Graph& g, ControlRegion& r) {
  const Op& begin = g.op(r.begin);
  const Op& end = g.op(r.end);
  r.has_trip_count = Flag(begin, "has_trip_count");
  r.has_condition = Flag(begin, "has_condition");
  if (Flag(end, "has_trip_count") != r.has_trip_count ||
      Flag(end, "has_condition") != r.has_condition) {
    return Bad(end, "its has_trip_count and has_condition differ from its LoopBegin's");
  }
  const size_t given = (r.has_trip_count ? 1 : 0) + (r.has_condition ? 1 : 0);
  if (begin.outputs.size() < 2 || begin.inputs.size() != given + begin.outputs.size() - 2) {
    return Bad(begin, "it reads [trip count], [condition] and the initial carried values, and "
                      "writes the iteration number, the condition and one value per carried one");
  }
  const size_t n = begin.outputs.size() - 2;
  const size_t m = r.has_trip_count ? 1 : 0;
  // [M], iter, cond_in, in_1..n, cond_out, out_1..n, outer...
  if (end.outputs.size() != n || end.inputs.size() < m + 3 + 2 * n) {
    return Bad(end, absl::StrCat("it must read [trip count], the iteration number, the "
                                 "condition, the ", n, " carried values in and out and the "
                                 "body's condition, and write the ", n, " final values"));
  }
  if (r.has_trip_count) {
    MG_RETURN_IF_ERROR(CheckScalar(g, begin, begin.inputs[0], DataType::kInt64, "trip count"));
    if (end.inputs[0] != begin.inputs[0]) return Bad(end, "it reads another trip count");
  }
  if (r.has_condition) {
    MG_RETURN_IF_ERROR(CheckScalar(g, begin, begin.inputs[m], DataType::kBool, "condition"));
  }
  MG_RETURN_IF_ERROR(CheckScalar(g, begin, begin.outputs[0], DataType::kInt64, "iteration number"));
  MG_RETURN_IF_ERROR(CheckScalar(g, begin, begin.outputs[1], DataType::kBool, "condition"));
  MG_RETURN_IF_ERROR(CheckScalar(g, end, end.inputs[m + 2 + n], DataType::kBool,
                                 "body's condition"));
  for (size_t k = 0; k < n + 2; ++k) {
    if (end.inputs[m + k] != begin.outputs[k]) {
      return Bad(end, absl::StrCat("its input ", m + k, " must be its LoopBegin's output ", k));
    }
  }
  for (size_t k = 0; k < n; ++k) {
    MG_RETURN_IF_ERROR(CheckSameType(g, begin, begin.inputs[given + k], begin.outputs[2 + k]));
    MG_RETURN_IF_ERROR(CheckSameType(g, end, end.inputs[m + 3 + n + k], begin.outputs[2 + k]));
    MG_RETURN_IF_ERROR(CheckSameType(g, end, end.inputs[m + 3 + n + k], end.outputs[k]));
  }
  r.carried = static_cast<int>(n);
  return absl::OkStatus();
}

}  // namespace

bool IsControlMarker(const Op& op) {
  if (absl::string_view(op.domain.str()) != kControlDomain) return false;
  for (absl::string_view type : {kIfThen, kIfElse, kIfEnd, kLoopBegin, kLoopEnd}) {
    if (op.type == type) return true;
  }
  return false;
}

bool HasControlRegions(const Graph& graph) {
  for (const Op& op : graph.ops()) {
    if (IsControlMarker(op)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<ControlRegion>> FindControlRegions(const Graph& graph) {
  std::vector<ControlRegion> regions;
  std::vector<ControlRegion> open;
  for (OpId id = 0; id < graph.num_ops(); ++id) {
    const Op& op = graph.op(id);
    if (absl::string_view(op.domain.str()) != kControlDomain) continue;
    if (IsMarker(op, kIfThen) || IsMarker(op, kLoopBegin)) {
      ControlRegion r;
      r.kind = IsMarker(op, kIfThen) ? ControlRegion::Kind::kIf : ControlRegion::Kind::kLoop;
      r.begin = id;
      open.push_back(r);
      continue;
    }
    const bool is_else = IsMarker(op, kIfElse);
    const bool ends_if = IsMarker(op, kIfEnd);
    const bool ends_loop = IsMarker(op, kLoopEnd);
    if (!is_else && !ends_if && !ends_loop) {
      return Bad(op, absl::StrCat("no such marker in domain '", kControlDomain, "'"));
    }
    const bool wants_if = is_else || ends_if;
    if (open.empty() || (open.back().kind == ControlRegion::Kind::kIf) != wants_if ||
        (is_else && open.back().middle != kNone) ||
        (ends_if && open.back().middle == kNone)) {
      return Bad(op, "it does not close the region open before it (markers unmatched or crossed)");
    }
    if (is_else) {
      open.back().middle = id;
      continue;
    }
    ControlRegion r = open.back();
    open.pop_back();
    r.end = id;
    MG_RETURN_IF_ERROR(r.kind == ControlRegion::Kind::kIf ? CheckIf(graph, r) : CheckLoop(graph, r));
    regions.push_back(r);
  }
  if (!open.empty()) return Bad(graph.op(open.back().begin), "its region is never closed");
  return regions;
}

absl::Status CheckRegionSchedule(const Graph& graph, const std::vector<ControlRegion>& regions,
                                 const std::vector<OpId>& schedule) {
  std::vector<int> step_of(graph.num_ops(), -1);
  for (size_t s = 0; s < schedule.size(); ++s) step_of[schedule[s]] = static_cast<int>(s);
  for (const ControlRegion& r : regions) {
    for (OpId id = r.begin; id <= r.end; ++id) {
      if (step_of[id] >= 0 && step_of[id] == step_of[r.begin] + (id - r.begin)) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          graph.op(id).Label(), " is not where its control-flow region (", graph.op(r.begin).Label(),
          " to ", graph.op(r.end).Label(), ") has it: the schedule must run a region's ops at "
          "consecutive steps in program order"));
    }
  }
  return absl::OkStatus();
}

absl::Status RefuseControlRegions(const Graph& graph, absl::string_view what) {
  for (const Op& op : graph.ops()) {
    if (!IsControlMarker(op)) continue;
    return absl::UnimplementedError(absl::StrCat(
        what, " is not built for nets with control flow decided at run time (", op.Label(),
        " begins or ends an If or Loop whose condition or trip count depends on tensor values)"));
  }
  return absl::OkStatus();
}

}  // namespace memonger::graph

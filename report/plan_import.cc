#include "report/plan_import.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/dtype.h"
#include "memonger/liveness.h"
#include "memonger/schedule.h"
#include "report/plan_json_frame.h"
#include "report/plan_report.h"
#include "util/checked_math.h"
#include "util/csv.h"
#include "util/json.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

using Json = nlohmann::json;

absl::StatusOr<int64_t> IntField(const Json& object, const char* field, const std::string& where) {
  auto it = object.find(field);
  if (it == object.end()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing \"", field, "\""));
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", field, "\" is too large"));
  }
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", field, "\" must be an integer, not ",
                     util::Quote(it->dump())));
  }
  return it->get<int64_t>();
}

absl::StatusOr<std::string> StringField(const Json& object, const char* field,
                                        const std::string& where) {
  auto it = object.find(field);
  if (it == object.end() || !it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", field, "\" must be present and a string"));
  }
  return it->get<std::string>();
}

// The element type and shape a value's entry states ("dtype", "shape"; either may be left
// out), checked against the model's as its bytes are: an entry edited to another type of the
// same size (float32[2,8] for int32[16]) describes another model, and the file is refused
// naming both.
absl::Status CheckStatedType(const Json& item, const graph::Value& value,
                             const std::string& where) {
  const std::string model_dtype =
      value.type ? std::string(graph::DataTypeName(value.type->dtype)) : "undefined";
  const std::vector<int64_t> model_dims = value.type ? value.type->dims : std::vector<int64_t>{};
  std::string stated_dtype = model_dtype;
  std::vector<int64_t> stated_dims = model_dims;
  if (auto d = item.find("dtype"); d != item.end() && !d->is_null()) {
    if (!d->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"dtype\" must be a string"));
    }
    stated_dtype = d->get<std::string>();
  }
  if (auto s = item.find("shape"); s != item.end() && !s->is_null()) {
    if (!s->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"shape\" must be an array"));
    }
    stated_dims.clear();
    for (const Json& dim : *s) {
      if (!dim.is_number_integer() ||
          (dim.is_number_unsigned() && dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"shape\" must hold integers, not ", util::Quote(dim.dump())));
      }
      stated_dims.push_back(dim.get<int64_t>());
    }
  }
  if (stated_dtype == model_dtype && stated_dims == model_dims) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      where, ": '", util::Quote(value.DisplayName()), "' is ", util::Quote(stated_dtype), "[",
      absl::StrJoin(stated_dims, ","), "] in the plan but ", model_dtype, "[",
      absl::StrJoin(model_dims, ","), "] in the model: the plan is for another model or other dims"));
}

bool BoolField(const Json& object, const char* field) {
  auto it = object.find(field);
  return it != object.end() && it->is_boolean() && it->get<bool>();
}

absl::StatusOr<Json> ParsePlanDocument(absl::string_view text, const std::string& source_name,
                                       absl::string_view schema, absl::string_view what) {
  absl::StatusOr<Json> parsed = util::ParseJson(text, util::kMaxNestingDepth);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", parsed.status().message()));
  }
  Json doc = *std::move(parsed);
  // "schema" of another JSON type is not a plan either (json::value would throw on it: the
  // plan_json fuzzer's finding, tests/fuzz_regressions/plan_json/schema_not_a_string.json).
  if (!doc.is_object() || !doc.contains("schema") || !doc["schema"].is_string() ||
      doc["schema"].get<std::string>() != schema) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": not ", what,
                                                   " (expected \"schema\": \"", schema, "\")"));
  }
  return doc;
}

absl::StatusOr<PlanFrame> PlanFrameFromJson(const graph::Graph& graph, const nlohmann::json& doc,
                                            const std::string& source_name) {
  PlanFrame frame;
  Plan& plan = frame.plan;
  MG_ASSIGN_OR_RETURN(plan.alignment, IntField(doc, "alignment", source_name));
  MG_RETURN_IF_ERROR(util::CheckAlignment(plan.alignment, absl::StrCat(source_name, ": alignment")));
  MG_ASSIGN_OR_RETURN(plan.planner, StringField(doc, "planner", source_name));
  MG_ASSIGN_OR_RETURN(const std::string order, StringField(doc, "order", source_name));
  MG_ASSIGN_OR_RETURN(const std::string execution, StringField(doc, "execution", source_name));
  MG_ASSIGN_OR_RETURN(const OrderKind order_kind, ParseOrder(order));
  MG_ASSIGN_OR_RETURN(plan.execution, ParseExecution(execution));
  if (doc.contains("model") && doc["model"].is_string()) plan.model = doc["model"];

  // The schedule.
  if (!doc.contains("steps") || !doc["steps"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": \"steps\" must be an array"));
  }
  absl::flat_hash_map<std::string, graph::OpId> op_by_name;
  absl::flat_hash_map<std::string, int> op_name_count;
  for (graph::OpId i = 0; i < graph.num_ops(); ++i) {
    op_by_name[graph.op(i).name] = i;
    ++op_name_count[graph.op(i).name];
  }
  plan.order = order_kind;
  const Json& steps = doc["steps"];
  for (size_t s = 0; s < steps.size(); ++s) {
    const std::string where = absl::StrCat(source_name, ": step ", s);
    if (!steps[s].is_object()) return absl::InvalidArgumentError(where + ": not an object");
    MG_ASSIGN_OR_RETURN(const std::string name, StringField(steps[s], "op", where));
    graph::OpId op = graph::kNone;
    if (steps[s].contains("op_index")) {
      MG_ASSIGN_OR_RETURN(const int64_t index, IntField(steps[s], "op_index", where));
      if (index < 0 || index >= graph.num_ops() || graph.op(index).name != name) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": op #", index, " '", name, "' is not an op of this model"));
      }
      op = static_cast<graph::OpId>(index);
    } else {
      auto it = op_by_name.find(name);
      if (it == op_by_name.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": the model has no op '", name, "'"));
      }
      if (op_name_count[name] > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": the model has several ops named '", name, "' and the step has no op_index"));
      }
      op = it->second;
    }
    plan.steps.push_back(PlanStep{op});
  }
  MG_RETURN_IF_ERROR(CheckSchedule(graph, ScheduleOfPlan(plan).ops));

  LivenessOptions& liveness_options = plan.liveness;
  liveness_options.plan_static = BoolField(doc, "plan_static");
  liveness_options.views = BoolField(doc, "views");
  liveness_options.in_place = BoolField(doc, "in_place");
  liveness_options.recycle_inputs = BoolField(doc, "recycle_inputs");
  liveness_options.blob_per_name = BoolField(doc, "blob_per_name");
  if (auto it = doc.find("static"); it != doc.end()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": \"static\" must be a list of value names"));
    }
    for (const Json& name : *it) {
      if (!name.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source_name, ": \"static\" must be a list of value names"));
      }
      liveness_options.static_names.push_back(name.get<std::string>());
    }
  }
  MG_ASSIGN_OR_RETURN(frame.liveness, LivenessOfPlan(graph, plan));
  const Liveness& liveness = frame.liveness;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (!liveness.planned[v]) continue;
    if (!util::CheckedAlignUp(liveness.class_bytes[liveness.alias_root[v]], plan.alignment)) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": '", graph.value(v).DisplayName(), "' is too large to align"));
    }
  }
  const std::string model = plan.model;
  const std::string planner = plan.planner;
  const ExecutionModel execution_model = plan.execution;
  InitPlan(graph, liveness, plan.alignment, plan);
  plan.model = model;
  plan.planner = planner;
  plan.execution = execution_model;

  return frame;
}

absl::StatusOr<Plan> PlanFromJson(const graph::Graph& graph, const std::string& text,
                                  const std::string& source_name) {
  MG_ASSIGN_OR_RETURN(const Json doc, ParsePlanDocument(text, source_name, kPlanSchema, "a plan"));
  MG_ASSIGN_OR_RETURN(PlanFrame frame, PlanFrameFromJson(graph, doc, source_name));
  Plan plan = std::move(frame.plan);
  const Liveness& liveness = frame.liveness;

  // Values and buffers.
  if (!doc.contains("values") || !doc["values"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": \"values\" must be an array"));
  }
  absl::flat_hash_map<std::string, graph::ValueId> value_by_name;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    value_by_name[graph.value(v).DisplayName()] = v;
  }
  std::vector<bool> seen(graph.num_values(), false);
  std::map<int64_t, int64_t> buffer_offset;  // file buffer id -> offset
  std::map<int64_t, std::vector<graph::ValueId>> buffer_members;
  const Json& values = doc["values"];
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string where = absl::StrCat(source_name, ": value ", i);
    if (!values[i].is_object()) return absl::InvalidArgumentError(where + ": not an object");
    MG_ASSIGN_OR_RETURN(const std::string name, StringField(values[i], "name", where));
    auto it = value_by_name.find(name);
    if (it == value_by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the model has no value '", name, "'"));
    }
    const graph::ValueId v = it->second;
    if (seen[v]) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", name, "' appears twice"));
    }
    seen[v] = true;
    // Sizes the file states are checked against the model's, never trusted: a plan made for
    // another binding of the dims would place values that do not fit their buffers.
    if (auto b = values[i].find("bytes"); b != values[i].end() && !b->is_null()) {
      MG_ASSIGN_OR_RETURN(const int64_t bytes, IntField(values[i], "bytes", where));
      if (bytes != liveness.bytes[v]) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", util::Quote(name), "' has ", bytes, " bytes in the plan but ",
            liveness.bytes[v], " in the model (", graph::TensorTypeToString(*graph.value(v).type),
            "): the plan is for another model or other dims"));
      }
    }
    MG_RETURN_IF_ERROR(CheckStatedType(values[i], graph.value(v), where));
    const bool has_offset = values[i].contains("offset") && !values[i]["offset"].is_null();
    if (!liveness.planned[v]) {
      if (has_offset) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", name, "' is static and not planned, but the file gives it an offset"));
      }
      continue;
    }
    if (!has_offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", name, "' needs an offset (it is placed in the arena)"));
    }
    MG_ASSIGN_OR_RETURN(const int64_t offset, IntField(values[i], "offset", where));
    MG_ASSIGN_OR_RETURN(const int64_t buffer, IntField(values[i], "buffer", where));
    if (offset < 0 || buffer < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": '", name, "' has a negative offset or buffer"));
    }
    auto [b, fresh] = buffer_offset.emplace(buffer, offset);
    if (!fresh && b->second != offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": '", name, "' is in buffer ", buffer, " at offset ", offset,
          ", but another member of that buffer is at offset ", b->second));
    }
    buffer_members[buffer].push_back(v);
  }
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (liveness.planned[v] && !seen[v]) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": the plan does not place '", graph.value(v).DisplayName(), "'"));
    }
  }
  for (const auto& [id, members] : buffer_members) {
    PlanBuffer buffer;
    buffer.offset = buffer_offset[id];
    buffer.device = liveness.device[members.front()];
    for (graph::ValueId v : members) {
      const int64_t bytes =
          *util::CheckedAlignUp(liveness.class_bytes[liveness.alias_root[v]], plan.alignment);
      buffer.size = std::max(buffer.size, bytes);
      plan.buffer_of_value[v] = static_cast<int32_t>(plan.buffers.size());
    }
    // No valid plan needs an arena beyond all values side by side (at most 2^60 bytes,
    // util::kMaxTotalBytes); refusing past it keeps the arena's aligned end in int64.
    const std::optional<int64_t> end = util::CheckedAdd(buffer.offset, buffer.size);
    if (!end.has_value() || *end > util::kMaxTotalBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": buffer ", id, " at offset ", buffer.offset,
          " ends beyond 2^60 bytes, more than any plan needs"));
    }
    plan.buffers.push_back(buffer);
  }
  FinishPlan(plan);
  if (auto a = doc.find("arena_bytes"); a != doc.end() && !a->is_null()) {
    MG_ASSIGN_OR_RETURN(const int64_t arena, IntField(doc, "arena_bytes", source_name));
    if (arena != plan.arena_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": \"arena_bytes\" is ", arena, " but the plan's buffers end at ",
          plan.arena_bytes));
    }
  }
  return plan;
}

std::string PlanToMiniMallocCsv(const graph::Graph& graph, const Plan& plan) {
  // One row per alias class. Members of a class share a buffer and (merged) lifetime; in a valid
  // plan no other values share both, so (buffer, first step, last step) identifies the class.
  struct Row {
    graph::ValueId first_member;
    int64_t bytes;
    int64_t alignment;  // the largest a member asks for (a view may ask more than its input)
  };
  std::map<std::tuple<int32_t, int, int>, Row> rows;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (plan.buffer_of_value[v] < 0) continue;
    const auto& type = graph.value(v).type;
    const int64_t bytes = type ? graph::ByteSize(*type, "").value_or(0) : 0;
    const auto key = std::make_tuple(plan.buffer_of_value[v], plan.lifetime[v].first_step,
                                     plan.lifetime[v].last_step);
    const int64_t alignment = std::max<int64_t>(plan.alignment, graph.value(v).alignment);
    auto [it, fresh] = rows.emplace(key, Row{v, bytes, alignment});
    if (!fresh) {
      it->second.bytes = std::max(it->second.bytes, bytes);
      it->second.alignment = std::max(it->second.alignment, alignment);
    }
  }
  std::vector<Row> ordered;
  for (const auto& [key, row] : rows) ordered.push_back(row);
  std::sort(ordered.begin(), ordered.end(),
            [](const Row& a, const Row& b) { return a.first_member < b.first_member; });
  // Each row's own bytes and the alignment its offset keeps (the plan's, or a value's own where
  // larger): a trace read back is the same problem at any --alignment (bytes rounded up to the
  // plan's alignment would make it another: 8.50 KiB of values where a net has 4.22 KiB).
  std::string out = "id,lower,upper,size,alignment,offset\n";
  for (const Row& row : ordered) {
    const graph::ValueId v = row.first_member;
    absl::StrAppend(&out, util::CsvCell(graph.value(v).DisplayName()), ",",
                    plan.lifetime[v].first_step, ",", plan.lifetime[v].last_step + 1, ",",
                    row.bytes, ",", row.alignment, ",", plan.offset_of_value[v], "\n");
  }
  return out;
}

}  // namespace memonger

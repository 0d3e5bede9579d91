#include "report/symbolic_plan_json.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "memonger/symbolic/symbolic_check.h"
#include "report/plan_json_frame.h"
#include "report/plan_report.h"
#include "util/checked_math.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

namespace {

using Json = nlohmann::json;

Json BoxToJson(const graph::SymbolBox& box) {
  Json out = Json::array();
  for (const graph::SymbolRange& r : box.ranges) {
    out.push_back({{"name", r.symbol}, {"lo", r.lo}, {"hi", r.hi}});
  }
  return out;
}

Json BindingsToJson(const graph::SymbolBindings& b) {
  Json out = Json::object();
  for (const auto& [symbol, value] : b) out[symbol] = value;
  return out;
}

absl::StatusOr<graph::SymbolBox> BoxFromJson(const Json& j, const std::string& where) {
  if (!j.is_array() || j.size() > graph::kMaxRangeSymbols) {
    return absl::InvalidArgumentError(absl::StrCat(where, " must be a list of at most ",
                                                   graph::kMaxRangeSymbols, " symbols"));
  }
  graph::SymbolBox box;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = absl::StrCat(where, " ", i);
    if (!j[i].is_object()) return absl::InvalidArgumentError(at + ": not an object");
    MG_ASSIGN_OR_RETURN(std::string name, StringField(j[i], "name", at));
    MG_ASSIGN_OR_RETURN(int64_t lo, IntField(j[i], "lo", at));
    MG_ASSIGN_OR_RETURN(int64_t hi, IntField(j[i], "hi", at));
    MG_RETURN_IF_ERROR(graph::ParseDimRange(absl::StrCat(name, "=", lo, "..", hi), box));
  }
  return box;
}

absl::StatusOr<graph::DimExpr> ExprField(const Json& object, const char* field,
                                         const std::string& where, const graph::SymbolBox& box) {
  MG_ASSIGN_OR_RETURN(std::string text, StringField(object, field, where));
  absl::StatusOr<graph::DimExpr> e = graph::ParseDimExpr(text);
  if (!e.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", field, "\": ", e.status().message()));
  }
  for (const std::string& s : e->Symbols()) {
    if (box.Find(s) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", field, "\" names ", s, ", which has no range"));
    }
  }
  return e;
}

absl::StatusOr<std::vector<int32_t>> IndexList(const Json& j, size_t n, const std::string& where) {
  if (!j.is_array() || j.size() > n) {
    return absl::InvalidArgumentError(absl::StrCat(where, " must be a list of item indices"));
  }
  std::vector<int32_t> out;
  out.reserve(j.size());
  for (const Json& x : j) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= static_cast<int64_t>(n)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", util::Quote(x.dump()),
                                                     " is not an item index"));
    }
    out.push_back(x.get<int32_t>());
  }
  return out;
}

}  // namespace

std::string SymbolicPlanToJson(const graph::Graph& graph, const SymbolicPlan& plan) {
  // The frame (options, schedule) as v1 writes it, from the plan bound at its reference.
  absl::StatusOr<Plan> at_reference = plan.Bind(plan.reference);
  Json frame = at_reference.ok() ? Json::parse(PlanToJson(graph, *at_reference)) : Json::object();
  Json j;
  j["schema"] = kSymbolicPlanSchema;
  for (const char* key : {"model", "planner", "order", "execution", "alignment", "plan_static",
                          "views", "in_place", "recycle_inputs", "blob_per_name", "static", "steps"}) {
    if (frame.contains(key)) j[key] = frame[key];
  }
  j["symbols"] = BoxToJson(plan.box);
  j["reference"] = BindingsToJson(plan.reference);
  j["planning_seconds"] = plan.base.planning_seconds;
  j["static_bytes"] = plan.static_bytes.ToString();
  j["trainable_bytes"] = plan.trainable_bytes.ToString();
  Json items = Json::array();
  for (const SymbolicItem& item : plan.items) {
    Json i = {{"value", graph.value(item.root).DisplayName()},
              {"first_step", item.lifetime.first_step},
              {"last_step", item.lifetime.last_step},
              {"alignment", item.alignment},
              {"class_bytes", item.class_bytes.ToString()},
              {"bytes", item.bytes.ToString()}};
    std::string fallback;
    for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
      if (plan.item_of_value[v] >= 0 && plan.items[plan.item_of_value[v]].root == item.root &&
          !plan.fallback[v].empty()) {
        fallback = plan.fallback[v];
        break;
      }
    }
    if (!fallback.empty()) i["fallback"] = fallback;
    items.push_back(std::move(i));
  }
  j["items"] = std::move(items);
  Json pieces = Json::array();
  for (int p = 0; p < static_cast<int>(plan.pieces.size()); ++p) {
    const SymbolicPiece& piece = plan.pieces[p];
    absl::StatusOr<ArenaFormula> formula = plan.Formula(p);
    pieces.push_back({{"box", BoxToJson(piece.box)},
                      {"planned_at", BindingsToJson(piece.planned_at)},
                      {"worst_ratio", piece.worst_ratio},
                      {"worst_at", BindingsToJson(piece.worst_at)},
                      {"mean_ratio", piece.mean_ratio},
                      {"samples", piece.samples},
                      {"arena", formula.ok() ? formula->ToString() : "(unknown)"},
                      {"order", piece.order},
                      {"below", piece.below}});
  }
  j["pieces"] = std::move(pieces);
  return j.dump(1) + "\n";
}

bool IsSymbolicPlanJson(absl::string_view text) {
  return ParsePlanDocument(text, "", kSymbolicPlanSchema, "a symbolic plan").ok();
}

absl::StatusOr<SymbolicPlan> SymbolicPlanFromJson(const graph::Graph& graph,
                                                  const std::string& text,
                                                  const std::string& source_name,
                                                  const graph::SymbolBindings& dims) {
  MG_ASSIGN_OR_RETURN(const Json doc, ParsePlanDocument(text, source_name, kSymbolicPlanSchema,
                                                        "a symbolic plan"));
  SymbolicPlan plan;
  MG_ASSIGN_OR_RETURN(plan.box, BoxFromJson(doc.value("symbols", Json()), source_name + ": symbols"));
  if (plan.box.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": \"symbols\" is empty"));
  }
  if (absl::Status s = plan.box.CheckContains(dims); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", s.message()));
  }
  MG_ASSIGN_OR_RETURN(PlanFrame frame, PlanFrameFromJson(graph, doc, source_name));
  const Liveness& liveness = frame.liveness;
  plan.base = std::move(frame.plan);
  plan.reference = dims;

  // Items: the graph's alias classes, in root-id order, each with its size expression.
  std::vector<graph::ValueId> roots;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (liveness.planned[v] && liveness.alias_root[v] == v) roots.push_back(v);
  }
  const Json items = doc.value("items", Json());
  if (!items.is_array() || items.size() != roots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": \"items\" must list the model's ", roots.size(),
        " alias classes (the plan is for another model or options)"));
  }
  plan.item_of_value.assign(graph.num_values(), -1);
  plan.fallback.assign(graph.num_values(), "");
  for (size_t k = 0; k < roots.size(); ++k) {
    const std::string where = absl::StrCat(source_name, ": item ", k);
    const Json& j = items[k];
    if (!j.is_object()) return absl::InvalidArgumentError(where + ": not an object");
    const graph::ValueId root = roots[k];
    MG_ASSIGN_OR_RETURN(std::string name, StringField(j, "value", where));
    if (name != graph.value(root).DisplayName()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": names '", util::Quote(name), "' where the model's class is '",
          graph.value(root).DisplayName(), "'"));
    }
    SymbolicItem item;
    item.root = root;
    item.device = liveness.device[root];
    item.lifetime = liveness.lifetime[root];
    item.alignment = plan.base.alignment;
    for (graph::ValueId m : liveness.members[root]) {
      item.alignment = std::max(item.alignment, graph.value(m).alignment);
      plan.item_of_value[m] = static_cast<int32_t>(k);
    }
    MG_ASSIGN_OR_RETURN(int64_t alignment, IntField(j, "alignment", where));
    if (alignment != item.alignment) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": alignment ", alignment,
                                                     " where the model needs ", item.alignment));
    }
    MG_ASSIGN_OR_RETURN(item.class_bytes, ExprField(j, "class_bytes", where, plan.box));
    MG_ASSIGN_OR_RETURN(graph::DimExpr chunks, graph::CeilDiv(item.class_bytes, item.alignment));
    MG_ASSIGN_OR_RETURN(item.bytes, graph::Mul(chunks, graph::DimExpr::Constant(item.alignment)));
    const bool bound = j.contains("fallback");
    if (bound) {
      MG_ASSIGN_OR_RETURN(plan.fallback[root], StringField(j, "fallback", where));
    }
    MG_ASSIGN_OR_RETURN(int64_t value, item.class_bytes.Evaluate(dims));
    const int64_t actual = liveness.class_bytes[root];
    if (bound ? value < actual : value != actual) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": '", name, "' has ", actual, " bytes in the model but its ",
          bound ? "bound " : "size ", item.class_bytes.ToString(), " gives ", value,
          " here: the plan is for another model"));
    }
    plan.items.push_back(std::move(item));
  }
  plan.base.buffer_of_value.assign(plan.item_of_value.begin(), plan.item_of_value.end());
  MG_ASSIGN_OR_RETURN(plan.static_bytes, ExprField(doc, "static_bytes", source_name, plan.box));
  MG_ASSIGN_OR_RETURN(int64_t static_bytes, plan.static_bytes.Evaluate(dims));
  if (static_bytes != plan.base.static_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": \"static_bytes\" gives ", static_bytes, " where the model has ",
        plan.base.static_bytes));
  }
  // Plans written before the field: the model's own, at the reference binding.
  if (doc.contains("trainable_bytes")) {
    MG_ASSIGN_OR_RETURN(plan.trainable_bytes,
                        ExprField(doc, "trainable_bytes", source_name, plan.box));
    MG_ASSIGN_OR_RETURN(int64_t trainable_bytes, plan.trainable_bytes.Evaluate(dims));
    if (trainable_bytes != plan.base.trainable_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": \"trainable_bytes\" gives ", trainable_bytes, " where the model has ",
          plan.base.trainable_bytes));
    }
  } else {
    plan.trainable_bytes = graph::DimExpr::Constant(plan.base.trainable_bytes);
  }

  const Json pieces = doc.value("pieces", Json());
  if (!pieces.is_array() || pieces.empty() ||
      pieces.size() > static_cast<size_t>(util::kMaxSymbolicPieces)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_name, ": \"pieces\" must list 1 to ", util::kMaxSymbolicPieces, " pieces"));
  }
  const size_t n = plan.items.size();
  for (size_t p = 0; p < pieces.size(); ++p) {
    const std::string where = absl::StrCat(source_name, ": piece ", p);
    const Json& j = pieces[p];
    if (!j.is_object()) return absl::InvalidArgumentError(where + ": not an object");
    SymbolicPiece piece;
    MG_ASSIGN_OR_RETURN(piece.box, BoxFromJson(j.value("box", Json()), where + ": box"));
    MG_ASSIGN_OR_RETURN(piece.order, IndexList(j.value("order", Json()), n, where + ": order"));
    const Json below = j.value("below", Json());
    if (!below.is_array() || below.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": \"below\" must have one list per item"));
    }
    for (size_t i = 0; i < n; ++i) {
      MG_ASSIGN_OR_RETURN(std::vector<int32_t> list,
                          IndexList(below[i], n, absl::StrCat(where, ": below ", i)));
      piece.below.push_back(std::move(list));
    }
    plan.pieces.push_back(std::move(piece));
  }
  // The proof is the plan's own check; nothing of the file is trusted before it.
  if (absl::Status s = CheckSymbolicPlan(graph, plan); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", s.message()));
  }
  return plan;
}

absl::StatusOr<Plan> BindSymbolicPlanJson(const graph::Graph& graph, const std::string& text,
                                          const std::string& source_name,
                                          const graph::SymbolBindings& dims) {
  MG_ASSIGN_OR_RETURN(SymbolicPlan plan, SymbolicPlanFromJson(graph, text, source_name, dims));
  return plan.Bind(dims);
}

}  // namespace memonger

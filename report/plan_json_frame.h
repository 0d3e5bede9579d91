// What plan documents of both schemas share (memonger.plan/v1 and /v2): typed field reads and
// the frame of a plan (alignment, planner, order, execution, the schedule by op, the liveness
// options), matched to a graph. For report/plan_import.cc and report/symbolic_plan_json.cc.
#ifndef MEMONGER_REPORT_PLAN_JSON_FRAME_H_
#define MEMONGER_REPORT_PLAN_JSON_FRAME_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/plan.h"

namespace memonger {

// InvalidArgument naming `where` and the field when it is missing or of another type.
absl::StatusOr<int64_t> IntField(const nlohmann::json& object, const char* field,
                                 const std::string& where);
absl::StatusOr<std::string> StringField(const nlohmann::json& object, const char* field,
                                        const std::string& where);
bool BoolField(const nlohmann::json& object, const char* field);

// `text` as a JSON object whose "schema" is `schema`. InvalidArgument naming `source_name` for
// nesting beyond util::kMaxNestingDepth, text that is not JSON, or another schema ("not <what>
// (expected "schema": "<schema>")").
absl::StatusOr<nlohmann::json> ParsePlanDocument(absl::string_view text,
                                                 const std::string& source_name,
                                                 absl::string_view schema, absl::string_view what);

struct PlanFrame {
  Plan plan;          // InitPlan'ed from the graph: every value unplaced
  Liveness liveness;  // recomputed from the graph with the document's schedule and options
};

// The frame of the document `doc` (its "schema" is not checked here): "alignment", "planner",
// "order", "execution", "model", "steps" (ops by op_index or unique name), "plan_static",
// "views", "in_place", "recycle_inputs", "blob_per_name", "static". InvalidArgument naming `source_name`.
absl::StatusOr<PlanFrame> PlanFrameFromJson(const graph::Graph& graph, const nlohmann::json& doc,
                                            const std::string& source_name);

}  // namespace memonger

#endif  // MEMONGER_REPORT_PLAN_JSON_FRAME_H_

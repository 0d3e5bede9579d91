// Reading a saved plan back (--plan-in) and writing plans as MiniMalloc CSV (--plan-csv).
//
// PlanFromJson matches a memonger.plan/v1 document to a graph: ops by "op_index" (checked
// against "op") or by unique name, values by name ("x", "x@1"). It keeps the file's schedule,
// alignment, buffers and offsets, and recomputes everything derived (lifetimes, live bytes,
// lower bound, naive bytes) from the graph, so a stale or edited file cannot smuggle in wrong
// lifetimes. The result still has to pass VerifyPlan: this function only checks that the
// document is well formed and belongs to the graph.
#ifndef MEMONGER_REPORT_PLAN_IMPORT_H_
#define MEMONGER_REPORT_PLAN_IMPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/plan.h"

namespace memonger {

// InvalidArgument naming the file and the field or value for malformed documents, values or
// ops the graph does not have, planned values the document does not place, and buffers whose
// members disagree on the offset.
absl::StatusOr<Plan> PlanFromJson(const graph::Graph& graph, const std::string& text,
                                  const std::string& source_name);

// MiniMalloc CSV, one row per placed alias class: id (the class's first value), lower (first
// step), upper (last step + 1, exclusive), size (the class's bytes, unaligned), alignment (the
// plan's, or a member's own where larger), offset.
std::string PlanToMiniMallocCsv(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_REPORT_PLAN_IMPORT_H_

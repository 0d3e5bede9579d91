// Plans for people and programs: the JSON document (schema memonger.plan/v1, DESIGN.md) and the
// text report optimize-net prints.
//
// report/: everything a plan says to people and other tools (this header, plan_import.h,
// plan_html.h, plan_ascii.h, net_rewrite.h, model_summary.h, what_if.h). Above memonger/ and
// workloads/; nothing below includes it.
//
//   MG_ASSIGN_OR_RETURN(Plan plan, PlanMemory(graph, options));
//   std::cout << PlanToText(graph, plan);   // or PlanToJson: memonger.plan/v1
#ifndef MEMONGER_REPORT_PLAN_REPORT_H_
#define MEMONGER_REPORT_PLAN_REPORT_H_

#include <string>

#include "graph/graph.h"
#include "memonger/device_bytes.h"
#include "memonger/plan.h"

namespace memonger {

inline constexpr char kPlanSchema[] = "memonger.plan/v1";

// The memonger.plan/v1 document. Values are named by Value::DisplayName() ("x", "x@1" for a
// later version of x); static values carry "offset", "buffer", "first_step" and "last_step"
// null. Additions to DESIGN.md's field list: "proven_optimal", "plan_static", "views", "ops",
// "buffers" (count), "shared_buffers" (buffers holding more than one alias class), and
// "op_index" in each step (the op's position in the model, for reading the plan back), and the
// device bytes a budget is held against (device_bytes.h): "device_bytes", "trainable_bytes",
// "param_gradient_bytes" (of the arena), "optimizer", "optimizer_state_bytes".
// REQUIRES: `plan` was made for `graph`.
std::string PlanToJson(const graph::Graph& graph, const Plan& plan,
                       Optimizer optimizer = Optimizer::kNone);

// Model, ops, values, naive bytes, lower bound, arena bytes, arena / lower bound, device bytes
// and their parts, planner, planning time, buffers, and the peak step with the largest values
// live there.
std::string PlanToText(const graph::Graph& graph, const Plan& plan,
                       Optimizer optimizer = Optimizer::kNone);

// The bytes of the trainable params' gradients (graph::param_grads), each counted once.
int64_t ParamGradientBytes(const graph::Graph& graph);

// Buffers that hold more than one alias class.
int SharedBufferCount(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_REPORT_PLAN_REPORT_H_

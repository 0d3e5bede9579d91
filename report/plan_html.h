// A picture of memory: one self-contained HTML page (inline SVG and JavaScript, no network)
// showing every placed alias class as a rectangle over steps (x) and addresses (y), coloured by
// role. Hovering shows the values' names, dtype, shape, bytes and lifetime; the peak step and the
// lower bound are marked; the mouse wheel zooms and dragging pans, so large plans stay readable.
//
//   std::ofstream("plan.html") << PlanToHtml(graph, plan);
//
// The page marks itself for tests: <body data-status="ok" data-rects="N"> after it has drawn N
// rectangles (each <rect class="value">), and data-status="error: ..." if drawing failed.
#ifndef MEMONGER_REPORT_PLAN_HTML_H_
#define MEMONGER_REPORT_PLAN_HTML_H_

#include <string>

#include "graph/graph.h"
#include "memonger/plan.h"

namespace memonger {

std::string PlanToHtml(const graph::Graph& graph, const Plan& plan);

// How many rectangles the page draws: one per placed alias class (members of a class share
// their bytes and lifetime, so they are one rectangle with all their names).
int PlanRectangleCount(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_REPORT_PLAN_HTML_H_

// A picture of memory: one self-contained HTML page (inline SVG and JavaScript, no network).
// - The map: every placed alias class as a rectangle over steps (x) and addresses (y), coloured
//   by role; hovering shows the values' names, dtype, shape, bytes and lifetime.
// - The curve below it, on the same steps: live bytes per step, with the lower bound, the arena
//   and the budget drawn across, and any measured curve of another runtime over the same pass
//   (eager PyTorch's allocations, from memonger.torch.compare_eager) on the same byte scale,
//   its time stretched over the steps.
// - The steps' ops: hovering either picture names the step's op; a searchable list of the ops
//   marks the chosen step in both.
// - Several plans of one net (a symbolic plan bound across its range): a slider between them.
// The mouse wheel zooms and dragging pans (both pictures share the steps); double-click resets.
//
//   std::ofstream("plan.html") << PlanToHtml(graph, plan);
//
// The page marks itself for tests: <body data-status="ok" data-rects="N" data-steps="S"
// data-frames="F"> after it has drawn the shown plan's N rectangles (each <rect class="value">)
// and S steps, and data-status="error: ..." if drawing failed.
#ifndef MEMONGER_REPORT_PLAN_HTML_H_
#define MEMONGER_REPORT_PLAN_HTML_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "memonger/plan.h"

namespace memonger {

// Bytes another runtime held over the same pass: (fraction of the pass in [0, 1], bytes held).
struct MeasuredCurve {
  std::string name;  // "eager PyTorch (profiler)"
  std::vector<std::pair<double, int64_t>> points;
};

struct HtmlOptions {
  int64_t budget_bytes = -1;  // drawn across the curve where >= 0
  // What follows "budget " on the line; empty: its bytes. The curve is the arena's: a caller
  // with bytes outside it draws the arena's share of its budget and says so here.
  std::string budget_label;
  std::vector<MeasuredCurve> measured;
};

std::string PlanToHtml(const graph::Graph& graph, const Plan& plan,
                       const HtmlOptions& options = {});

// One plan of a series: the net typed as it was planned, and what the slider shows for it
// ("n=5000").
struct HtmlFrame {
  std::string label;
  const graph::Graph* graph = nullptr;
  const Plan* plan = nullptr;
};

// The plans of `frames` (at least one) on one page, a slider between them; `title` heads it.
std::string PlansToHtml(const std::vector<HtmlFrame>& frames, const std::string& title,
                        const HtmlOptions& options = {});

// How many rectangles the page draws: one per placed alias class (members of a class share
// their bytes and lifetime, so they are one rectangle with all their names).
int PlanRectangleCount(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_REPORT_PLAN_HTML_H_

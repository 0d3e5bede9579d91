#include "report/plan_html.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/bytes.h"

namespace memonger {
namespace {

// One rectangle: the members of one alias class (same buffer, same merged lifetime).
struct Rect {
  int first_step = 0;
  int last_step = 0;
  int64_t offset = 0;
  int64_t bytes = 0;
  graph::Role role = graph::Role::kActivation;
  std::vector<graph::ValueId> members;
};

std::vector<Rect> Rects(const graph::Graph& graph, const Plan& plan) {
  std::map<std::tuple<int32_t, int, int>, Rect> by_key;
  for (graph::ValueId v = 0; v < graph.num_values(); ++v) {
    if (plan.buffer_of_value[v] < 0) continue;
    const Lifetime& l = plan.lifetime[v];
    Rect& r = by_key[std::make_tuple(plan.buffer_of_value[v], l.first_step, l.last_step)];
    const auto& type = graph.value(v).type;
    const int64_t bytes = type ? graph::ByteSize(*type, "").value_or(0) : 0;
    if (r.members.empty()) {
      r.first_step = l.first_step;
      r.last_step = l.last_step;
      r.offset = plan.offset_of_value[v];
      r.role = graph.value(v).role;
    }
    r.bytes = std::max(r.bytes, bytes);
    r.members.push_back(v);
  }
  std::vector<Rect> rects;
  for (auto& [key, r] : by_key) rects.push_back(std::move(r));
  return rects;
}

// Keeps the embedded JSON from ending the <script> element early ("</script>", "<!--"): '<' only
// occurs inside JSON strings, where the escape \u003c means the same character.
std::string ScriptSafe(const std::string& json) {
  return absl::StrReplaceAll(json, {{"<", "\\u003c"}});
}

constexpr char kPage[] = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memonger plan: @TITLE@</title>
<style>
  body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
  h1 { font-size: 16px; margin: 0 0 4px; }
  #summary, #stepinfo { margin-bottom: 6px; color: #444; }
  #stepinfo { font: 12px monospace; min-height: 1.4em; }
  svg { border: 1px solid #bbb; background: #fafafa; cursor: grab; user-select: none;
        display: block; }
  #curve { border-top: none; }
  #tip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #888;
         padding: 4px 6px; font: 12px monospace; white-space: pre; display: none; }
  .legend span { display: inline-block; margin-right: 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
  rect.value { stroke: #333; stroke-width: 0.5; vector-effect: non-scaling-stroke; }
  rect.value:hover { stroke: #000; stroke-width: 2; }
  #frames { margin: 4px 0 8px; display: none; }
  #frames input { width: 400px; vertical-align: middle; }
  #ops { margin-top: 8px; }
  #oplist { max-height: 260px; overflow-y: auto; border: 1px solid #ddd; width: 1000px; }
  #oplist table { border-collapse: collapse; font: 12px monospace; width: 100%; }
  #oplist td { padding: 1px 6px; white-space: nowrap; }
  #oplist tr { cursor: pointer; }
  #oplist tr:hover, #oplist tr.marked { background: #e8e0f5; }
</style>
</head>
<body data-status="loading">
<h1>@TITLE@</h1>
<div id="summary"></div>
<div id="frames"><input id="frame" type="range" min="0" step="1" value="0"> <span id="framelabel"></span></div>
<div class="legend" id="legend"></div>
<svg id="chart" width="1000" height="420" xmlns="http://www.w3.org/2000/svg"></svg>
<svg id="curve" width="1000" height="200" xmlns="http://www.w3.org/2000/svg"></svg>
<div class="legend" id="curvelegend"></div>
<div id="stepinfo"></div>
<div>wheel: zoom &middot; drag: pan &middot; double-click: reset &middot; click a step below to mark it</div>
<div id="ops">find op: <input id="find" type="search" size="40" placeholder="name or type"> <span id="found"></span>
<div id="oplist"><table><tbody id="oprows"></tbody></table></div></div>
<div id="tip"></div>
<script id="plan-data" type="application/json">@DATA@</script>
<script>
"use strict";
(function () {
  window.addEventListener("error", function (e) {
    document.body.dataset.status = "error: " + e.message;
  });
  try {
    const data = JSON.parse(document.getElementById("plan-data").textContent);
    const colors = {input: "#4e79a7", output: "#f28e2b", param: "#9c755f", activation: "#59a14f",
                    gradient: "#e15759", workspace: "#b07aa1", constant: "#bab0ac"};
    const curveColors = ["#d62728", "#9467bd", "#8c564b", "#e377c2"];
    const ns = "http://www.w3.org/2000/svg";
    const chart = document.getElementById("chart"), curve = document.getElementById("curve");
    const W = 1000, H = 420, CH = 200, left = 70, bottom = 30, top = 10, right = 10;
    const tip = document.getElementById("tip");
    function human(b) {
      const u = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0;
      while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
      return (i === 0 ? b.toFixed(0) : b.toFixed(2)) + " " + u[i];
    }
    function el(name, attrs, parent) {
      const e = document.createElementNS(ns, name);
      for (const k in attrs) e.setAttribute(k, attrs[k]);
      if (parent) parent.appendChild(e);
      return e;
    }
    function legendEntry(parent, color, label, dashed) {
      const span = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = dashed ? "transparent" : color;
      if (dashed) i.style.borderTop = "2px dashed " + color;
      span.appendChild(i);
      span.appendChild(document.createTextNode(label));
      parent.appendChild(span);
    }
    for (const role of Object.keys(colors)) {
      legendEntry(document.getElementById("legend"), colors[role], role);
    }
    const curveLegend = document.getElementById("curvelegend");
    legendEntry(curveLegend, "#2ca02c", "live bytes (this plan)");
    legendEntry(curveLegend, "#d62728", "lower bound", true);
    legendEntry(curveLegend, "#1f77b4", "arena", true);
    if (data.budget_bytes >= 0) legendEntry(curveLegend, "#000", "budget " + data.budget_text);
    data.measured.forEach((m, k) => legendEntry(curveLegend, curveColors[(k + 1) % 4],
        m.name + " (peak " + m.peak_text + "; time stretched over the steps)"));

    let frame = null, steps = 1, marked = -1;
    const view = {x0: 0, x1: 1, y0: 0, y1: 1};
    let curveTop = 1;
    const plot = el("g", {}, chart), axes = el("g", {}, chart);
    const curvePlot = el("g", {}, curve);
    const sx = (x) => left + (x - view.x0) / (view.x1 - view.x0) * (W - left - right);
    const wx = (px) => view.x0 + (px - left) / (W - left - right) * (view.x1 - view.x0);
    const sy = (y) => H - bottom - (y - view.y0) / (view.y1 - view.y0) * (H - top - bottom);
    const cy = (y) => CH - bottom - y / curveTop * (CH - top - bottom);
    let rects = [];
    function line(g, x1, y1, x2, y2, color, dash, width) {
      const l = el("line", {x1: x1, y1: y1, x2: x2, y2: y2, stroke: color}, g);
      if (dash) l.setAttribute("stroke-dasharray", dash);
      if (width) l.setAttribute("stroke-width", width);
    }
    function text(g, x, y, s, anchor, color) {
      const t = el("text", {x: x, y: y, "font-size": "11", "text-anchor": anchor || "start"}, g);
      if (color) t.setAttribute("fill", color);
      t.textContent = s;
    }
    function resetView() {
      view.x0 = 0; view.x1 = steps;
      view.y0 = 0; view.y1 = Math.max(1, frame.arena_bytes, frame.lower_bound_bytes) * 1.05;
    }
    // A step function over [x0, x1) as a path, at most one vertical run per pixel column: the
    // largest value in each column (large nets have far more steps than pixels).
    function stepPath(xs, ys, count) {
      const cols = new Map();
      for (let i = 0; i < count; i++) {
        const a = Math.max(left, sx(xs(i))), b = Math.min(W - right, sx(xs(i + 1)));
        if (b < left || a > W - right) continue;
        for (let c = Math.floor(a); c <= Math.floor(Math.max(a, b - 0.001)); c++) {
          const v = ys(i);
          if (!cols.has(c) || cols.get(c) < v) cols.set(c, v);
        }
      }
      const keys = Array.from(cols.keys()).sort((p, q) => p - q);
      let d = "";
      for (const c of keys) {
        const y = cy(cols.get(c));
        d += (d === "" ? "M" + c + " " + y : " L" + c + " " + y) + " L" + (c + 1) + " " + y;
      }
      return d;
    }
    function drawCurve() {
      while (curvePlot.firstChild) curvePlot.removeChild(curvePlot.firstChild);
      line(curvePlot, left, top, left, CH - bottom, "#000");
      line(curvePlot, left, CH - bottom, W - right, CH - bottom, "#000");
      text(curvePlot, left - 4, CH - bottom, "0", "end");
      text(curvePlot, left - 4, top + 10, human(curveTop), "end");
      text(curvePlot, left, CH - bottom + 14, "step " + Math.round(view.x0));
      text(curvePlot, W - right, CH - bottom + 14, "step " + Math.round(view.x1), "end");
      data.measured.forEach((m, k) => {
        const n = m.points.length;
        const d = stepPath((i) => (i < n ? m.points[i][0] : 1) * steps,
                           (i) => m.points[i][1], n);
        if (d) el("path", {d: d, fill: "none", stroke: curveColors[(k + 1) % 4],
                           "stroke-width": 1.5}, curvePlot);
      });
      const d = stepPath((i) => i, (i) => frame.live[i], frame.live.length);
      if (d) el("path", {d: d, fill: "none", stroke: "#2ca02c", "stroke-width": 1.5,
                         class: "live"}, curvePlot);
      // The arena's label on the left, the others' on the right: equal lines stay readable.
      const across = [[frame.lower_bound_bytes, "#d62728", "6 3", "lower bound " +
                       frame.lower_bound_text, W - right - 4, "end"],
                      [frame.arena_bytes, "#1f77b4", "2 2", "arena " + frame.arena_text,
                       left + 4, "start"]];
      if (data.budget_bytes >= 0 && data.budget_bytes <= curveTop) {
        across.push([data.budget_bytes, "#000", null, "budget " + data.budget_text,
                     W - right - 4, "end"]);
      } else if (data.budget_bytes >= 0) {
        text(curvePlot, W - right - 4, top + 10, "budget " + data.budget_text + " (above)",
             "end", "#000");
      }
      for (const [bytes, color, dash, label, x, anchor] of across) {
        line(curvePlot, left, cy(bytes), W - right, cy(bytes), color, dash);
        text(curvePlot, x, cy(bytes) - 3, label, anchor, color);
      }
      if (marked >= 0 && marked < steps) {
        line(curvePlot, sx(marked + 0.5), top, sx(marked + 0.5), CH - bottom, "#7b3fbf", null, 2);
      }
    }
    function draw() {
      for (const [e, r] of rects) {
        const x = sx(r.first), x2 = sx(r.last + 1);
        const y = sy(r.offset + r.size), y2 = sy(r.offset);
        e.setAttribute("x", x);
        e.setAttribute("y", y);
        e.setAttribute("width", Math.max(0.5, x2 - x));
        e.setAttribute("height", Math.max(0.5, y2 - y));
      }
      while (axes.firstChild) axes.removeChild(axes.firstChild);
      line(axes, left, top, left, H - bottom, "#000");
      line(axes, left, H - bottom, W - right, H - bottom, "#000");
      text(axes, left - 4, H - bottom, human(view.y0), "end");
      text(axes, left - 4, top + 10, human(view.y1), "end");
      const lb = sy(frame.lower_bound_bytes);
      if (lb >= top && lb <= H - bottom) {
        line(axes, left, lb, W - right, lb, "#d62728", "6 3");
        text(axes, W - right - 4, lb - 3, "lower bound " + frame.lower_bound_text, "end");
      }
      const arena = sy(frame.arena_bytes);
      if (arena >= top && arena <= H - bottom) {
        line(axes, left, arena, W - right, arena, "#1f77b4", "2 2");
        text(axes, left + 4, arena - 3, "arena " + frame.arena_text);
      }
      const px = sx(frame.peak_step + 0.5);
      if (px >= left && px <= W - right) {
        line(axes, px, top, px, H - bottom, "#ff7f0e", "4 2");
        text(axes, px + 3, top + 10, "peak step " + frame.peak_step);
      }
      if (marked >= 0 && marked < steps) {
        line(axes, sx(marked + 0.5), top, sx(marked + 0.5), H - bottom, "#7b3fbf", null, 2);
      }
      drawCurve();
    }
    function stepText(i) {
      return "step " + i + ": " + frame.op_names[i] + " (" + frame.op_types[i] + "), live " +
             human(frame.live[i]);
    }
    function showStep(ev, svg) {
      const box = svg.getBoundingClientRect();
      const i = Math.floor(wx(ev.clientX - box.left));
      if (i >= 0 && i < steps) document.getElementById("stepinfo").textContent = stepText(i);
    }
    function listOps() {
      const query = document.getElementById("find").value.toLowerCase();
      const rows = document.getElementById("oprows");
      while (rows.firstChild) rows.removeChild(rows.firstChild);
      let found = 0;
      for (let i = 0; i < steps; i++) {
        const name = frame.op_names[i], type = frame.op_types[i];
        if (query && name.toLowerCase().indexOf(query) < 0 &&
            type.toLowerCase().indexOf(query) < 0) continue;
        if (++found > 500) continue;
        const tr = document.createElement("tr");
        if (i === marked) tr.className = "marked";
        for (const cell of [String(i), name, type, human(frame.live[i])]) {
          const td = document.createElement("td");
          td.textContent = cell;
          tr.appendChild(td);
        }
        tr.addEventListener("click", () => {
          marked = i;
          if (i < view.x0 || i + 1 > view.x1) {
            const w = view.x1 - view.x0;
            view.x0 = i + 0.5 - w / 2; view.x1 = i + 0.5 + w / 2;
          }
          document.getElementById("stepinfo").textContent = stepText(i);
          for (const r of rows.children) r.className = "";
          tr.className = "marked";
          draw();
        });
        rows.appendChild(tr);
      }
      document.getElementById("found").textContent =
          found + " of " + steps + " steps" + (found > 500 ? " (first 500 shown)" : "");
      document.body.dataset.listed = String(Math.min(found, 500));
    }
    function showFrame(k) {
      frame = data.frames[k];
      steps = Math.max(1, frame.live.length);
      for (const [e] of rects) plot.removeChild(e);
      rects = [];
      for (const r of frame.rects) {
        const e = el("rect", {class: "value", fill: colors[r.role] || "#999"}, plot);
        e.addEventListener("mousemove", (ev) => {
          tip.style.display = "block";
          tip.style.left = (ev.clientX + 12) + "px";
          tip.style.top = (ev.clientY + 12) + "px";
          tip.textContent = r.names.join(", ") + "\n" + r.type + "  " + r.bytes_text + "\n" +
              "role " + r.role + "\nsteps [" + r.first + ", " + r.last + "]\nbytes [" +
              r.offset + ", " + (r.offset + r.size) + ")";
        });
        e.addEventListener("mouseleave", () => { tip.style.display = "none"; });
        rects.push([e, r]);
      }
      // The curve's scale: this plan and the measured curves, and the budget where it is near
      // them (at most twice as high); a budget far above is named, not drawn.
      let most = Math.max(1, frame.arena_bytes, frame.lower_bound_bytes);
      for (const m of data.measured) for (const p of m.points) most = Math.max(most, p[1]);
      if (data.budget_bytes >= 0 && data.budget_bytes <= 2 * most) {
        most = Math.max(most, data.budget_bytes);
      }
      curveTop = most * 1.05;
      document.getElementById("summary").textContent =
          frame.ops + " ops, " + frame.rects.length + " placed values; arena " +
          frame.arena_text + ", lower bound " + frame.lower_bound_text + ", planner " +
          frame.planner + "; peak at step " + frame.peak_step +
          (frame.label ? "; at " + frame.label : "");
      document.getElementById("framelabel").textContent = frame.label;
      if (marked >= steps) marked = -1;
      resetView();
      draw();
      listOps();
      document.body.dataset.rects = String(rects.length);
      document.body.dataset.steps = String(frame.live.length);
    }
    for (const svg of [chart, curve]) {
      svg.addEventListener("wheel", (ev) => {
        ev.preventDefault();
        const box = svg.getBoundingClientRect();
        const fx = (ev.clientX - box.left - left) / (W - left - right);
        const k = ev.deltaY < 0 ? 0.8 : 1.25;
        const cx = view.x0 + fx * (view.x1 - view.x0);
        view.x0 = cx - (cx - view.x0) * k; view.x1 = cx + (view.x1 - cx) * k;
        if (svg === chart) {
          const fy = 1 - (ev.clientY - box.top - top) / (H - top - bottom);
          const c = view.y0 + fy * (view.y1 - view.y0);
          view.y0 = c - (c - view.y0) * k; view.y1 = c + (view.y1 - c) * k;
        }
        draw();
      }, {passive: false});
      svg.addEventListener("mousemove", (ev) => showStep(ev, svg));
      svg.addEventListener("dblclick", () => { resetView(); draw(); });
    }
    let drag = null;
    chart.addEventListener("mousedown", (ev) => { drag = {x: ev.clientX, y: ev.clientY, y_too: true}; });
    curve.addEventListener("mousedown", (ev) => { drag = {x: ev.clientX, y: ev.clientY, y_too: false}; });
    window.addEventListener("mouseup", () => { drag = null; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const dx = (ev.clientX - drag.x) / (W - left - right) * (view.x1 - view.x0);
      view.x0 -= dx; view.x1 -= dx;
      if (drag.y_too) {
        const dy = (ev.clientY - drag.y) / (H - top - bottom) * (view.y1 - view.y0);
        view.y0 += dy; view.y1 += dy;
      }
      drag = {x: ev.clientX, y: ev.clientY, y_too: drag.y_too};
      draw();
    });
    document.getElementById("find").addEventListener("input", listOps);
    const slider = document.getElementById("frame");
    if (data.frames.length > 1) {
      document.getElementById("frames").style.display = "block";
      slider.max = String(data.frames.length - 1);
      slider.addEventListener("input", () => showFrame(Number(slider.value)));
    }
    document.body.dataset.frames = String(data.frames.length);
    const initial = Number(new URLSearchParams(location.search).get("frame") || 0);
    slider.value = String(Math.min(Math.max(0, initial), data.frames.length - 1));
    showFrame(Number(slider.value));
    document.body.dataset.status = "ok";
  } catch (e) {
    document.body.dataset.status = "error: " + e.message;
    throw e;
  }
})();
</script>
</body>
</html>
)html";

std::string HtmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

}  // namespace

int PlanRectangleCount(const graph::Graph& graph, const Plan& plan) {
  return static_cast<int>(Rects(graph, plan).size());
}

namespace {

nlohmann::json FrameData(const HtmlFrame& f) {
  const graph::Graph& graph = *f.graph;
  const Plan& plan = *f.plan;
  nlohmann::json frame;
  frame["label"] = f.label;
  frame["planner"] = plan.planner;
  frame["ops"] = graph.num_ops();
  frame["arena_bytes"] = plan.arena_bytes;
  frame["arena_text"] = util::FormatBytes(plan.arena_bytes);
  frame["lower_bound_bytes"] = plan.lower_bound_bytes;
  frame["lower_bound_text"] = util::FormatBytes(plan.lower_bound_bytes);
  frame["peak_step"] = plan.peak_step;
  nlohmann::json live = nlohmann::json::array();
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json types = nlohmann::json::array();
  for (const PlanStep& step : plan.steps) {
    live.push_back(step.live_bytes);
    const bool known = step.op >= 0 && step.op < graph.num_ops();
    names.push_back(known ? graph.op(step.op).name : "?");
    types.push_back(known ? graph.op(step.op).type : "?");
  }
  frame["live"] = std::move(live);
  frame["op_names"] = std::move(names);
  frame["op_types"] = std::move(types);
  nlohmann::json rects = nlohmann::json::array();
  for (const Rect& r : Rects(graph, plan)) {
    nlohmann::json members = nlohmann::json::array();
    for (graph::ValueId v : r.members) members.push_back(graph.value(v).DisplayName());
    const auto& type = graph.value(r.members.front()).type;
    rects.push_back({{"names", members},
                     {"role", std::string(graph::RoleName(r.role))},
                     {"type", type ? graph::TensorTypeToString(*type) : "?"},
                     {"bytes_text", util::FormatBytes(r.bytes)},
                     {"first", r.first_step},
                     {"last", r.last_step},
                     {"offset", r.offset},
                     {"size", r.bytes}});
  }
  frame["rects"] = std::move(rects);
  return frame;
}

}  // namespace

std::string PlansToHtml(const std::vector<HtmlFrame>& frames, const std::string& title,
                        const HtmlOptions& options) {
  nlohmann::json data;
  data["budget_bytes"] = options.budget_bytes;
  data["budget_text"] = !options.budget_label.empty() ? options.budget_label
                        : options.budget_bytes >= 0 ? util::FormatBytes(options.budget_bytes)
                                                    : "";
  nlohmann::json measured = nlohmann::json::array();
  for (const MeasuredCurve& m : options.measured) {
    nlohmann::json points = nlohmann::json::array();
    int64_t peak = 0;
    for (const auto& [at, bytes] : m.points) {
      // Outside [0, 1] or not a number: clamped, never drawn off the steps.
      const double x = at >= 0 && at <= 1 ? at : (at > 1 ? 1.0 : 0.0);
      points.push_back({x, bytes});
      peak = std::max(peak, bytes);
    }
    measured.push_back(
        {{"name", m.name}, {"points", std::move(points)}, {"peak_text", util::FormatBytes(peak)}});
  }
  data["measured"] = std::move(measured);
  nlohmann::json series = nlohmann::json::array();
  for (const HtmlFrame& f : frames) series.push_back(FrameData(f));
  data["frames"] = std::move(series);
  return absl::StrReplaceAll(kPage, {{"@TITLE@", HtmlEscape(title)},
                                     {"@DATA@", ScriptSafe(data.dump(-1, ' ', false,
                                         nlohmann::json::error_handler_t::replace))}});
}

std::string PlanToHtml(const graph::Graph& graph, const Plan& plan, const HtmlOptions& options) {
  return PlansToHtml({HtmlFrame{"", &graph, &plan}}, plan.model.empty() ? graph.name() : plan.model,
                     options);
}

}  // namespace memonger

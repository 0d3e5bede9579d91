#include "report/plan_html.h"

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
  #summary { margin-bottom: 8px; color: #444; }
  #chart { border: 1px solid #bbb; background: #fafafa; cursor: grab; user-select: none; }
  #tip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #888;
         padding: 4px 6px; font: 12px monospace; white-space: pre; display: none; }
  .legend span { display: inline-block; margin-right: 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
  rect.value { stroke: #333; stroke-width: 0.5; vector-effect: non-scaling-stroke; }
  rect.value:hover { stroke: #000; stroke-width: 2; }
</style>
</head>
<body data-status="loading">
<h1>@TITLE@</h1>
<div id="summary"></div>
<div class="legend" id="legend"></div>
<svg id="chart" width="1000" height="560" xmlns="http://www.w3.org/2000/svg"></svg>
<div>wheel: zoom &middot; drag: pan &middot; double-click: reset</div>
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
    const svg = document.getElementById("chart");
    const ns = "http://www.w3.org/2000/svg";
    const W = 1000, H = 560, left = 70, bottom = 30, top = 10, right = 10;
    const steps = Math.max(1, data.steps);
    const height = Math.max(1, data.arena_bytes, data.lower_bound_bytes);
    document.getElementById("summary").textContent =
        data.ops + " ops, " + data.rects.length + " placed values; arena " + data.arena_text +
        ", lower bound " + data.lower_bound_text + ", planner " + data.planner +
        "; peak at step " + data.peak_step;
    const legend = document.getElementById("legend");
    for (const role of Object.keys(colors)) {
      const span = document.createElement("span");
      const i = document.createElement("i");
      i.style.background = colors[role];
      span.appendChild(i);
      span.appendChild(document.createTextNode(role));
      legend.appendChild(span);
    }
    // World coordinates: x in steps, y in bytes (0 at the bottom). The view maps a window of
    // the world onto the plot area; zoom and pan change the window.
    const view = {x0: 0, x1: steps, y0: 0, y1: height * 1.05};
    const plot = document.createElementNS(ns, "g");
    const axes = document.createElementNS(ns, "g");
    svg.appendChild(plot);
    svg.appendChild(axes);
    const sx = (x) => left + (x - view.x0) / (view.x1 - view.x0) * (W - left - right);
    const sy = (y) => H - bottom - (y - view.y0) / (view.y1 - view.y0) * (H - top - bottom);
    const rects = [];
    for (const r of data.rects) {
      const e = document.createElementNS(ns, "rect");
      e.setAttribute("class", "value");
      e.setAttribute("fill", colors[r.role] || "#999");
      e.addEventListener("mousemove", (ev) => {
        const tip = document.getElementById("tip");
        tip.style.display = "block";
        tip.style.left = (ev.clientX + 12) + "px";
        tip.style.top = (ev.clientY + 12) + "px";
        tip.textContent = r.names.join(", ") + "\n" + r.type + "  " + r.bytes_text + "\n" +
            "role " + r.role + "\nsteps [" + r.first + ", " + r.last + "]\nbytes [" + r.offset +
            ", " + (r.offset + r.size) + ")";
      });
      e.addEventListener("mouseleave", () => {
        document.getElementById("tip").style.display = "none";
      });
      plot.appendChild(e);
      rects.push([e, r]);
    }
    function line(x1, y1, x2, y2, color, dash) {
      const l = document.createElementNS(ns, "line");
      l.setAttribute("x1", x1); l.setAttribute("y1", y1);
      l.setAttribute("x2", x2); l.setAttribute("y2", y2);
      l.setAttribute("stroke", color);
      if (dash) l.setAttribute("stroke-dasharray", dash);
      axes.appendChild(l);
    }
    function text(x, y, s, anchor) {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", x); t.setAttribute("y", y);
      t.setAttribute("font-size", "11");
      t.setAttribute("text-anchor", anchor || "start");
      t.textContent = s;
      axes.appendChild(t);
    }
    function human(b) {
      const u = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0;
      while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }
      return (i === 0 ? b.toFixed(0) : b.toFixed(2)) + " " + u[i];
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
      line(left, top, left, H - bottom, "#000");
      line(left, H - bottom, W - right, H - bottom, "#000");
      text(left - 4, H - bottom, human(view.y0), "end");
      text(left - 4, top + 10, human(view.y1), "end");
      text(left, H - bottom + 14, "step " + Math.round(view.x0));
      text(W - right, H - bottom + 14, "step " + Math.round(view.x1), "end");
      const lb = sy(data.lower_bound_bytes);
      if (lb >= top && lb <= H - bottom) {
        line(left, lb, W - right, lb, "#d62728", "6 3");
        text(W - right - 4, lb - 3, "lower bound " + data.lower_bound_text, "end");
      }
      const arena = sy(data.arena_bytes);
      if (arena >= top && arena <= H - bottom) {
        line(left, arena, W - right, arena, "#1f77b4", "2 2");
        text(left + 4, arena - 3, "arena " + data.arena_text);
      }
      const px = sx(data.peak_step + 0.5);
      if (px >= left && px <= W - right) {
        line(px, top, px, H - bottom, "#ff7f0e", "4 2");
        text(px + 3, top + 10, "peak step " + data.peak_step);
      }
    }
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const box = svg.getBoundingClientRect();
      const fx = (ev.clientX - box.left - left) / (W - left - right);
      const fy = 1 - (ev.clientY - box.top - top) / (H - top - bottom);
      const k = ev.deltaY < 0 ? 0.8 : 1.25;
      const cx = view.x0 + fx * (view.x1 - view.x0), cy = view.y0 + fy * (view.y1 - view.y0);
      view.x0 = cx - (cx - view.x0) * k; view.x1 = cx + (view.x1 - cx) * k;
      view.y0 = cy - (cy - view.y0) * k; view.y1 = cy + (view.y1 - cy) * k;
      draw();
    }, {passive: false});
    let drag = null;
    svg.addEventListener("mousedown", (ev) => { drag = {x: ev.clientX, y: ev.clientY}; });
    window.addEventListener("mouseup", () => { drag = null; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const dx = (ev.clientX - drag.x) / (W - left - right) * (view.x1 - view.x0);
      const dy = (ev.clientY - drag.y) / (H - top - bottom) * (view.y1 - view.y0);
      view.x0 -= dx; view.x1 -= dx; view.y0 += dy; view.y1 += dy;
      drag = {x: ev.clientX, y: ev.clientY};
      draw();
    });
    svg.addEventListener("dblclick", () => {
      view.x0 = 0; view.x1 = steps; view.y0 = 0; view.y1 = height * 1.05;
      draw();
    });
    draw();
    document.body.dataset.rects = String(rects.length);
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

std::string PlanToHtml(const graph::Graph& graph, const Plan& plan) {
  nlohmann::json data;
  data["planner"] = plan.planner;
  data["ops"] = graph.num_ops();
  data["steps"] = plan.steps.size();
  data["arena_bytes"] = plan.arena_bytes;
  data["arena_text"] = util::FormatBytes(plan.arena_bytes);
  data["lower_bound_bytes"] = plan.lower_bound_bytes;
  data["lower_bound_text"] = util::FormatBytes(plan.lower_bound_bytes);
  data["peak_step"] = plan.peak_step;
  nlohmann::json rects = nlohmann::json::array();
  for (const Rect& r : Rects(graph, plan)) {
    nlohmann::json names = nlohmann::json::array();
    for (graph::ValueId v : r.members) names.push_back(graph.value(v).DisplayName());
    const auto& type = graph.value(r.members.front()).type;
    rects.push_back({{"names", names},
                     {"role", std::string(graph::RoleName(r.role))},
                     {"type", type ? graph::TensorTypeToString(*type) : "?"},
                     {"bytes_text", util::FormatBytes(r.bytes)},
                     {"first", r.first_step},
                     {"last", r.last_step},
                     {"offset", r.offset},
                     {"size", r.bytes}});
  }
  data["rects"] = rects;
  const std::string title = HtmlEscape(plan.model.empty() ? graph.name() : plan.model);
  return absl::StrReplaceAll(kPage, {{"@TITLE@", title},
                                     {"@DATA@", ScriptSafe(data.dump(-1, ' ', false,
                                         nlohmann::json::error_handler_t::replace))}});
}

}  // namespace memonger

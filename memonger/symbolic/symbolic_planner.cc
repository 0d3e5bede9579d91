#include "memonger/symbolic/symbolic_planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/gradient_builder.h"
#include "memonger/liveness.h"
#include "memonger/offsets/offset_planning.h"
#include "memonger/schedule.h"
#include "memonger/symbolic/symbolic_check.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

namespace {

using graph::DimExpr;
using graph::SymbolBindings;
using graph::SymbolBox;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string BindingText(const SymbolBindings& b) {
  std::string out;
  for (const auto& [symbol, value] : b) absl::StrAppend(&out, out.empty() ? "" : ", ", symbol, "=", value);
  return out;
}

// Up to `count` values from lo to hi, spaced geometrically (lo and hi included).
std::vector<int64_t> GeometricValues(int64_t lo, int64_t hi, int count) {
  std::set<int64_t> values{lo, hi};
  const double a = static_cast<double>(std::max<int64_t>(lo, 1));
  const double b = static_cast<double>(std::max<int64_t>(hi, 1));
  for (int i = 1; i + 1 < count; ++i) {
    const double t = static_cast<double>(i) / (count - 1);
    const int64_t v = static_cast<int64_t>(std::llround(a * std::pow(b / a, t)));
    values.insert(std::clamp(v, lo, hi));
  }
  return {values.begin(), values.end()};
}

absl::StatusOr<OffsetStrategy> StrategyFor(PlannerKind planner) {
  switch (planner) {
    case PlannerKind::kGreedyBySize: return OffsetStrategy::kGreedyBySize;
    case PlannerKind::kBestFit: return OffsetStrategy::kBestFit;
    case PlannerKind::kExact: return OffsetStrategy::kExact;
    case PlannerKind::kAuto: return OffsetStrategy::kAuto;
    default:
      return absl::UnimplementedError(absl::StrCat(
          "a plan for a range of bindings needs an offset planner (auto, best-fit, "
          "greedy-by-size or exact); ", PlannerName(planner),
          " decides its buffers from the sizes at one binding"));
  }
}

}  // namespace

absl::Status CheckRangePlanOptions(PlannerKind planner, OrderKind order,
                                   ExecutionModel execution) {
  MG_RETURN_IF_ERROR(StrategyFor(planner).status());
  if (order == OrderKind::kMemoryAware) {
    return absl::UnimplementedError(
        "the memory-aware order depends on sizes; a plan for a range keeps one given order");
  }
  if (execution != ExecutionModel::kSerial) {
    return absl::UnimplementedError("a plan for a range places offsets for a serial executor");
  }
  return absl::OkStatus();
}

namespace {

class Planner {
 public:
  Planner(const graph::Graph& graph, const PlanOptions& options, const SymbolicPlanOptions& sym,
          OffsetStrategy strategy, std::chrono::steady_clock::time_point deadline)
      : graph_(graph), options_(options), sym_(sym), strategy_(strategy), deadline_(deadline) {}

  absl::Status Init(const graph::SymbolicShapes& shapes, const Liveness& liveness,
                    SymbolicPlan& plan);
  absl::StatusOr<SymbolicPiece> PlanPiece(const SymbolicPlan& plan, const SymbolBox& box);

 private:
  absl::StatusOr<SymbolicPiece> OrderAt(const SymbolicPlan& plan, const SymbolBindings& at);
  absl::Status Rate(const SymbolicPlan& plan, SymbolicPiece& piece);
  bool Conflict(const SymbolicPlan& plan, int32_t a, int32_t b) const {
    const SymbolicItem& x = plan.items[a];
    const SymbolicItem& y = plan.items[b];
    return region_[a] != region_[b] || x.lifetime.Overlaps(y.lifetime);
  }

  const graph::Graph& graph_;
  const PlanOptions& options_;
  const SymbolicPlanOptions& sym_;
  OffsetStrategy strategy_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<DeviceOffsetProblem> problems_;   // at the reference binding
  std::vector<std::pair<int, int>> problem_of_item_;  // (problem, index in it)
  std::vector<int> region_;                     // per item: its problem
  std::vector<int32_t> by_first_step_;          // items sorted by first step
};

absl::Status Planner::Init(const graph::SymbolicShapes& shapes, const Liveness& liveness,
                           SymbolicPlan& plan) {
  MG_ASSIGN_OR_RETURN(problems_, OffsetProblemsFor(graph_, liveness, options_.alignment));
  std::vector<std::tuple<graph::ValueId, int, int>> roots;
  for (int p = 0; p < static_cast<int>(problems_.size()); ++p) {
    for (int k = 0; k < static_cast<int>(problems_[p].roots.size()); ++k) {
      roots.push_back({problems_[p].roots[k], p, k});
    }
  }
  if (static_cast<int64_t>(roots.size()) > util::kMaxSymbolicItems) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a plan for a range places at most ", util::kMaxSymbolicItems, " alias classes; this net has ",
        roots.size()));
  }
  std::sort(roots.begin(), roots.end());
  plan.item_of_value.assign(graph_.num_values(), -1);
  std::vector<int> joins(graph_.num_values(), 0);  // in-place pairs per class root
  for (const auto& pair : liveness.in_place_pairs) ++joins[liveness.alias_root[pair.second]];
  for (const auto& [root, p, k] : roots) {
    const OffsetItem& concrete = problems_[p].problem.items[k];
    SymbolicItem item;
    item.root = root;
    item.device = problems_[p].device;
    item.lifetime = liveness.lifetime[root];
    item.alignment = concrete.alignment;
    item.in_place_joins = joins[root];
    for (graph::ValueId m : liveness.members[root]) {
      item.class_bytes = graph::Max(item.class_bytes, shapes.bytes[m]);
      plan.item_of_value[m] = static_cast<int32_t>(plan.items.size());
    }
    MG_ASSIGN_OR_RETURN(DimExpr chunks, graph::CeilDiv(item.class_bytes, item.alignment));
    MG_ASSIGN_OR_RETURN(item.bytes, graph::Mul(chunks, DimExpr::Constant(item.alignment)));
    MG_ASSIGN_OR_RETURN(int64_t at_reference, item.bytes.Evaluate(sym_.reference));
    if (at_reference != concrete.bytes) {
      return absl::InternalError(absl::StrCat(
          "value '", graph_.value(root).DisplayName(), "': its size expression ",
          item.bytes.ToString(), " is ", at_reference, " at the reference binding, not ",
          concrete.bytes));
    }
    problem_of_item_.push_back({p, k});
    region_.push_back(p);
    plan.items.push_back(std::move(item));
  }
  for (graph::ValueId id = 0; id < graph_.num_values(); ++id) {
    if (liveness.planned[id] || !graph::OwnsStaticStorage(graph_.value(id))) continue;
    MG_ASSIGN_OR_RETURN(plan.static_bytes, graph::Add(plan.static_bytes, shapes.bytes[id]));
  }
  for (const graph::ValueId id : graph::TrainableParams(graph_)) {
    MG_ASSIGN_OR_RETURN(plan.trainable_bytes,
                        graph::Add(plan.trainable_bytes, shapes.bytes[id]));
  }
  by_first_step_.resize(plan.items.size());
  for (size_t i = 0; i < plan.items.size(); ++i) by_first_step_[i] = static_cast<int32_t>(i);
  std::sort(by_first_step_.begin(), by_first_step_.end(), [&](int32_t a, int32_t b) {
    return plan.items[a].lifetime.first_step < plan.items[b].lifetime.first_step;
  });
  return absl::OkStatus();
}

absl::StatusOr<SymbolicPiece> Planner::OrderAt(const SymbolicPlan& plan,
                                               const SymbolBindings& at) {
  std::vector<DeviceOffsetProblem> problems = problems_;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const auto [p, k] = problem_of_item_[i];
    MG_ASSIGN_OR_RETURN(problems[p].problem.items[k].bytes, plan.items[i].bytes.Evaluate(at));
  }
  // Each concrete planning gets a share of the time left: as if a piece's candidates and two
  // halves were still to come. Searches that prove their plan optimal stop early and leave
  // their time to the later ones; once the time is out, each placement is the heuristics' own.
  OffsetSolveOptions solve;
  const double left = std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count();
  solve.time_limit_seconds = std::max(0.0, left) / (3.0 * sym_.planning_bindings);
  MG_ASSIGN_OR_RETURN(std::vector<OffsetSolution> solutions,
                      SolveOffsetProblems(problems, strategy_, solve));
  const int32_t n = static_cast<int32_t>(plan.items.size());
  std::vector<std::tuple<int, int64_t, int64_t, graph::ValueId, int32_t>> keys;
  for (int32_t i = 0; i < n; ++i) {
    const auto [p, k] = problem_of_item_[i];
    const int64_t offset = solutions[p].offsets[k];
    keys.push_back({p, offset, offset + problems[p].problem.items[k].bytes, plan.items[i].root, i});
  }
  std::sort(keys.begin(), keys.end());
  SymbolicPiece piece;
  piece.planned_at = at;
  std::vector<int32_t> position(n);
  for (int32_t q = 0; q < n; ++q) {
    piece.order.push_back(std::get<4>(keys[q]));
    position[std::get<4>(keys[q])] = q;
  }
  piece.below.assign(n, {});
  std::vector<int32_t> earlier;
  for (int32_t b : piece.order) {
    // Every earlier item b conflicts with: the same region's items whose lifetimes meet b's,
    // and every item of an earlier region.
    earlier.clear();
    const Lifetime& lb = plan.items[b].lifetime;
    for (int32_t a : by_first_step_) {
      if (plan.items[a].lifetime.first_step > lb.last_step) {
        if (problems_.size() == 1) break;  // no later item meets b's lifetime
        if (region_[a] == region_[b]) continue;
      }
      if (a != b && position[a] < position[b] && Conflict(plan, a, b)) earlier.push_back(a);
    }
    // Keep those not below another of them: a is implied when some later c of the list
    // conflicts with a (then a is below c, by c's own list or a chain).
    std::sort(earlier.begin(), earlier.end(),
              [&](int32_t x, int32_t y) { return position[x] > position[y]; });
    for (size_t i = 0; i < earlier.size(); ++i) {
      bool implied = false;
      for (size_t j = 0; j < i && !implied; ++j) implied = Conflict(plan, earlier[i], earlier[j]);
      if (!implied) piece.below[b].push_back(earlier[i]);
    }
  }
  return piece;
}

absl::Status Planner::Rate(const SymbolicPlan& plan, SymbolicPiece& piece) {
  std::vector<int64_t> scratch;
  piece.worst_ratio = 0;
  double sum = 0;
  const std::vector<SymbolBindings> samples = SampleBindings(piece.box, sym_.samples_per_piece);
  for (const SymbolBindings& at : samples) {
    MG_ASSIGN_OR_RETURN(SymbolicPlan::Extent e, plan.MeasureWith(piece, at, scratch));
    const double ratio =
        e.lower_bound == 0 ? 1.0 : static_cast<double>(e.arena) / static_cast<double>(e.lower_bound);
    sum += ratio;
    if (ratio > piece.worst_ratio) {
      piece.worst_ratio = ratio;
      piece.worst_at = at;
    }
  }
  piece.samples = static_cast<int>(samples.size());
  piece.mean_ratio = samples.empty() ? 1.0 : sum / samples.size();
  return absl::OkStatus();
}

// The point a fraction t of the way from the box's low corner to its high one, geometrically.
SymbolBindings GeometricPoint(const SymbolBox& box, double t) {
  SymbolBindings c;
  for (const graph::SymbolRange& r : box.ranges) {
    const double a = static_cast<double>(std::max<int64_t>(r.lo, 1));
    const double b = static_cast<double>(std::max<int64_t>(r.hi, 1));
    c[r.symbol] = std::clamp<int64_t>(std::llround(a * std::pow(b / a, t)), r.lo, r.hi);
  }
  return c;
}

absl::StatusOr<SymbolicPiece> Planner::PlanPiece(const SymbolicPlan& plan, const SymbolBox& box) {
  std::vector<SymbolBindings> candidates;
  for (int k = 0; k < sym_.planning_bindings; ++k) {
    // The high corner first (the largest sizes matter most), then towards the low corner.
    const double t = sym_.planning_bindings == 1 ? 1.0 : 1.0 - static_cast<double>(k) / (sym_.planning_bindings - 1);
    SymbolBindings at = GeometricPoint(box, t);
    if (std::find(candidates.begin(), candidates.end(), at) == candidates.end()) {
      candidates.push_back(std::move(at));
    }
  }
  std::optional<SymbolicPiece> best;
  for (const SymbolBindings& at : candidates) {
    MG_ASSIGN_OR_RETURN(SymbolicPiece piece, OrderAt(plan, at));
    piece.box = box;
    MG_RETURN_IF_ERROR(Rate(plan, piece));
    if (!best.has_value() ||
        std::tie(piece.worst_ratio, piece.mean_ratio) < std::tie(best->worst_ratio, best->mean_ratio)) {
      best = std::move(piece);
    }
    if (best->worst_ratio <= 1.0) break;  // at the lower bound everywhere: nothing to gain
  }
  return *std::move(best);
}

// Cuts `box` in two at the geometric mean of its widest symbol; false when every range is a
// single value.
bool Split(const SymbolBox& box, SymbolBox& low, SymbolBox& high) {
  int widest = -1;
  double widest_ratio = 1;
  for (int i = 0; i < static_cast<int>(box.ranges.size()); ++i) {
    const graph::SymbolRange& r = box.ranges[i];
    if (r.lo == r.hi) continue;
    const double ratio = static_cast<double>(r.hi) / static_cast<double>(std::max<int64_t>(r.lo, 1));
    if (widest < 0 || ratio > widest_ratio) {
      widest = i;
      widest_ratio = ratio;
    }
  }
  if (widest < 0) return false;
  const graph::SymbolRange& r = box.ranges[widest];
  const double a = static_cast<double>(std::max<int64_t>(r.lo, 1));
  const int64_t mid = std::clamp<int64_t>(
      static_cast<int64_t>(std::floor(std::sqrt(a * static_cast<double>(r.hi)))), r.lo, r.hi - 1);
  low = box;
  high = box;
  low.ranges[widest].hi = mid;
  high.ranges[widest].lo = mid + 1;
  return true;
}

// Step 5 of the header: sizes and classes at concrete bindings. The classes are compared
// without in-place reuse: where the reference's pairs hold over the whole box
// (InPlaceHoldsOverTheBox), a binding may join more pairs of its own (dims that meet there),
// which the plan need not take.
absl::Status CheckAgainstConcrete(const graph::Graph& graph, const graph::SymbolicShapes& shapes,
                                  const Liveness& planned, const SymbolicPlanOptions& sym) {
  LivenessOptions apart = planned.options;
  apart.in_place = false;
  MG_ASSIGN_OR_RETURN(const Liveness reference,
                      ComputeLiveness(graph, planned.schedule, apart));
  std::vector<SymbolBindings> at = sym.box.Corners();
  std::mt19937_64 rng(7);
  for (int i = 0; i < sym.check_bindings; ++i) {
    SymbolBindings b;
    for (const graph::SymbolRange& r : sym.box.ranges) {
      b[r.symbol] = std::uniform_int_distribution<int64_t>(r.lo, r.hi)(rng);
    }
    at.push_back(std::move(b));
  }
  for (const SymbolBindings& b : at) {
    absl::StatusOr<graph::Graph> typed = sym.graph_at(b);
    if (!typed.ok()) {
      return absl::Status(typed.status().code(),
                          absl::StrCat("the net at ", BindingText(b), ": ", typed.status().message()));
    }
    if (typed->num_values() != graph.num_values() || typed->num_ops() != graph.num_ops()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the net at ", BindingText(b), " has other ops or values than at the reference binding (",
          typed->num_ops(), " ops and ", typed->num_values(), " values against ", graph.num_ops(),
          " and ", graph.num_values(), "; an ONNX If or Loop the sizes decide differs: plan each "
          "size with --dim N=V)"));
    }
    for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
      const graph::Value& v = typed->value(id);
      if (!v.type.has_value()) continue;
      MG_ASSIGN_OR_RETURN(int64_t bytes, graph::ByteSize(*v.type, v.DisplayName()));
      MG_ASSIGN_OR_RETURN(int64_t expected, shapes.bytes[id].Evaluate(b));
      const bool bound = !shapes.fallback[id].empty();
      if (bound ? bytes > expected : bytes != expected) {
        return absl::InvalidArgumentError(absl::StrCat(
            "value '", v.DisplayName(), "' has ", bytes, " bytes at ", BindingText(b), ", but its ",
            bound ? "bound" : "size expression", " ", shapes.bytes[id].ToString(), " says ", expected,
            bound ? absl::StrCat(" (", shapes.fallback[id], ")") : ""));
      }
    }
    MG_ASSIGN_OR_RETURN(Liveness liveness, ComputeLiveness(*typed, reference.schedule, apart));
    if (liveness.alias_root != reference.alias_root || liveness.planned != reference.planned) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the alias classes at ", BindingText(b),
          " differ from those at the reference binding (views that depend on sizes?)"));
    }
  }
  return absl::OkStatus();
}

// Whether every value that in-place reuse put in a class (its class differs from the one
// `apart`, the liveness without that reuse, gives it) has exactly its class root's size
// expression, with no bound among them: then the pair is equal at every binding of the box,
// not only at the reference, and the plan's classes hold over the whole range.
bool InPlaceHoldsOverTheBox(const graph::Graph& graph, const Liveness& in_place,
                            const Liveness& apart, const graph::SymbolicShapes& shapes) {
  for (graph::ValueId id = 0; id < graph.num_values(); ++id) {
    const graph::ValueId root = in_place.alias_root[id];
    if (root == apart.alias_root[id]) continue;
    if (!(shapes.bytes[id] == shapes.bytes[root]) || !shapes.fallback[id].empty() ||
        !shapes.fallback[root].empty()) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<SymbolBindings> SampleBindings(const SymbolBox& box, int count) {
  const int k = static_cast<int>(box.ranges.size());
  const int per_symbol =
      k == 0 ? 1 : std::max(2, static_cast<int>(std::lround(std::pow(std::max(count, 1), 1.0 / k))));
  std::vector<SymbolBindings> out{SymbolBindings{}};
  for (const graph::SymbolRange& r : box.ranges) {
    std::vector<SymbolBindings> next;
    for (int64_t v : GeometricValues(r.lo, r.hi, per_symbol)) {
      for (const SymbolBindings& b : out) {
        SymbolBindings c = b;
        c[r.symbol] = v;
        next.push_back(std::move(c));
      }
    }
    out = std::move(next);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<SymbolicPlan> PlanSymbolic(const graph::Graph& graph,
                                          const graph::SymbolicShapes& shapes,
                                          const PlanOptions& options,
                                          const SymbolicPlanOptions& sym) {
  const auto start = std::chrono::steady_clock::now();
  MG_RETURN_IF_ERROR(CheckRangePlanOptions(options.planner, options.order, options.execution));
  MG_ASSIGN_OR_RETURN(OffsetStrategy strategy, StrategyFor(options.planner));
  if (sym.planning_bindings < 1 || sym.planning_bindings > 64) {
    return absl::InvalidArgumentError("planning bindings must lie in [1, 64]");
  }
  if (sym.max_pieces < 1 || sym.max_pieces > util::kMaxSymbolicPieces) {
    return absl::InvalidArgumentError(absl::StrCat("pieces must lie in [1, ",
                                                   util::kMaxSymbolicPieces, "]"));
  }
  if (shapes.bytes.size() != static_cast<size_t>(graph.num_values())) {
    return absl::InvalidArgumentError("symbolic shapes of another net");
  }
  MG_RETURN_IF_ERROR(sym.box.CheckContains(sym.reference));
  MG_ASSIGN_OR_RETURN(Schedule schedule, MakeSchedule(graph, options.order));
  // In-place reuse where each pair is equal over the whole box (size expressions alike);
  // otherwise the plan counts every value apart, which holds at every binding.
  LivenessOptions liveness_options = options.liveness.CallerChosen();
  MG_ASSIGN_OR_RETURN(Liveness liveness, ComputeLiveness(graph, schedule, liveness_options));
  if (liveness_options.in_place) {
    liveness_options.in_place = false;
    MG_ASSIGN_OR_RETURN(Liveness apart, ComputeLiveness(graph, schedule, liveness_options));
    if (InPlaceHoldsOverTheBox(graph, liveness, apart, shapes)) {
      liveness_options.in_place = true;
    } else {
      liveness = std::move(apart);
    }
  }

  SymbolicPlan plan;
  plan.box = sym.box;
  plan.reference = sym.reference;
  plan.fallback = shapes.fallback;
  plan.base.model = options.model_name.empty() ? graph.name() : options.model_name;
  plan.base.planner = std::string(PlannerName(options.planner));
  plan.base.execution = options.execution;
  InitPlan(graph, liveness, options.alignment, plan.base);

  // The time limit bounds the concrete plannings together (see Planner::OrderAt).
  const auto deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(options.time_limit_seconds));
  Planner planner(graph, options, sym, strategy, deadline);
  MG_RETURN_IF_ERROR(planner.Init(shapes, liveness, plan));
  plan.base.buffer_of_value.assign(plan.item_of_value.begin(), plan.item_of_value.end());
  if (sym.graph_at) MG_RETURN_IF_ERROR(CheckAgainstConcrete(graph, shapes, liveness, sym));

  MG_ASSIGN_OR_RETURN(SymbolicPiece first, planner.PlanPiece(plan, sym.box));
  plan.pieces.push_back(std::move(first));
  while (static_cast<int>(plan.pieces.size()) < sym.max_pieces) {
    auto worst = std::max_element(plan.pieces.begin(), plan.pieces.end(),
                                  [](const SymbolicPiece& a, const SymbolicPiece& b) {
                                    return a.worst_ratio < b.worst_ratio;
                                  });
    if (worst->worst_ratio <= sym.target_ratio) break;
    SymbolBox low, high;
    if (!Split(worst->box, low, high)) break;
    MG_ASSIGN_OR_RETURN(SymbolicPiece a, planner.PlanPiece(plan, low));
    MG_ASSIGN_OR_RETURN(SymbolicPiece b, planner.PlanPiece(plan, high));
    *worst = std::move(a);
    plan.pieces.push_back(std::move(b));
  }
  std::sort(plan.pieces.begin(), plan.pieces.end(),
            [](const SymbolicPiece& a, const SymbolicPiece& b) {
              return a.box.Low() < b.box.Low();
            });
  MG_RETURN_IF_ERROR(CheckSymbolicPlan(graph, plan));
  for (int p = 0; p < static_cast<int>(plan.pieces.size()); ++p) {
    MG_ASSIGN_OR_RETURN(ArenaFormula formula, plan.Formula(p));
    plan.pieces[p].formula = std::move(formula);
  }
  plan.base.planning_seconds = SecondsSince(start);
  return plan;
}

}  // namespace memonger

namespace memonger {

absl::StatusOr<RangePlan> PlanRange(
    const std::function<absl::StatusOr<graph::Graph>(const graph::SymbolBindings&)>& graph_at,
    const graph::ShapeBindings& fixed, const graph::SymbolBox& box, const PlanOptions& options,
    bool upper_bound_fallback) {
  RangePlan range;
  const SymbolBindings high = box.High();
  MG_ASSIGN_OR_RETURN(range.reference, graph_at(high));
  graph::SymbolicShapeOptions shape_options;
  shape_options.box = box;
  shape_options.reference = high;
  if (upper_bound_fallback) shape_options.upper_bound = &range.reference;
  shape_options.graph_at = graph_at;
  MG_ASSIGN_OR_RETURN(range.shapes,
                      graph::InferSymbolicShapes(range.reference, fixed, shape_options));
  SymbolicPlanOptions sym;
  sym.box = box;
  sym.reference = high;
  sym.graph_at = graph_at;
  MG_ASSIGN_OR_RETURN(range.plan, PlanSymbolic(range.reference, range.shapes, options, sym));
  return range;
}

}  // namespace memonger

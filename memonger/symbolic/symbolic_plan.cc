#include "memonger/symbolic/symbolic_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/checked_math.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

namespace {

absl::Status Overflow(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("symbolic plan: ", what, " overflows int64"));
}

absl::StatusOr<int64_t> AlignUp(int64_t bytes, int64_t alignment) {
  std::optional<int64_t> aligned = util::CheckedAlignUp(bytes, alignment);
  if (!aligned.has_value()) return Overflow("an aligned size");
  return *aligned;
}

// Offsets of the piece's items by the max-plus rule: size(i) reads item i's evaluated size,
// offset(i) is where its offset goes (and is read back for the items above it). Returns the
// largest end.
template <typename Size, typename Offset>
absl::StatusOr<int64_t> PlaceByPiece(const SymbolicPlan& plan, const SymbolicPiece& piece,
                                     Size size, Offset offset) {
  int64_t extent = 0;
  for (int32_t item : piece.order) {
    int64_t at = 0;
    for (int32_t a : piece.below[item]) at = std::max(at, offset(a) + size(a));
    MG_ASSIGN_OR_RETURN(at, AlignUp(at, plan.items[item].alignment));
    offset(item) = at;
    const std::optional<int64_t> end = util::CheckedAdd(at, size(item));
    if (!end.has_value() || *end > util::kMaxTotalBytes) return Overflow("the arena");
    extent = std::max(extent, *end);
  }
  return extent;
}

}  // namespace

std::string ArenaFormula::ToString(bool pretty) const {
  if (too_long) return "(too long to print)";
  if (polynomials.size() == 1) return polynomials[0].ToString(pretty);
  return absl::StrCat("max(", absl::StrJoin(polynomials, ", ", [&](std::string* out, const graph::DimExpr& p) {
                        out->append(p.ToString(pretty));
                      }), ")");
}

absl::StatusOr<int> SymbolicPlan::PieceFor(const graph::SymbolBindings& dims) const {
  MG_RETURN_IF_ERROR(box.CheckContains(dims));
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (pieces[p].box.Contains(dims)) return static_cast<int>(p);
  }
  return absl::InternalError("symbolic plan: its pieces do not cover its box");
}

absl::StatusOr<SymbolicPlan::Extent> SymbolicPlan::Measure(const graph::SymbolBindings& dims,
                                                           std::vector<int64_t>& scratch) const {
  MG_ASSIGN_OR_RETURN(const int piece, PieceFor(dims));
  return MeasureWith(pieces[piece], dims, scratch);
}

absl::StatusOr<SymbolicPlan::Extent> SymbolicPlan::MeasureWith(
    const SymbolicPiece& piece, const graph::SymbolBindings& dims,
    std::vector<int64_t>& scratch) const {
  const size_t n = items.size();
  const int steps = static_cast<int>(base.steps.size());
  scratch.assign(2 * n + steps + 1, 0);
  int64_t* sizes = scratch.data();
  int64_t* live = scratch.data() + 2 * n;
  int64_t total = 0;  // every class side by side: bounds every partial sum below
  for (size_t i = 0; i < n; ++i) {
    MG_ASSIGN_OR_RETURN(sizes[i], items[i].bytes.Evaluate(dims));
    MG_ASSIGN_OR_RETURN(int64_t class_bytes, items[i].class_bytes.Evaluate(dims));
    MG_ASSIGN_OR_RETURN(class_bytes, AlignUp(class_bytes, base.alignment));
    const std::optional<int64_t> sum = util::CheckedAdd(total, class_bytes);
    if (!sum.has_value() || *sum > util::kMaxTotalBytes) return Overflow("the naive sum");
    total = *sum;
    const Lifetime& l = items[i].lifetime;
    if (l.first_step >= steps) continue;
    live[l.first_step] += class_bytes;
    live[std::min(l.last_step + 1, steps)] -= class_bytes;
  }
  Extent extent;
  int64_t running = 0;
  for (int s = 0; s < steps; ++s) {
    running += live[s];
    extent.lower_bound = std::max(extent.lower_bound, running);
  }
  int64_t* offsets = scratch.data() + n;
  MG_ASSIGN_OR_RETURN(
      int64_t end,
      PlaceByPiece(
          *this, piece, [&](int32_t i) { return sizes[i]; },
          [&](int32_t i) -> int64_t& { return offsets[i]; }));
  MG_ASSIGN_OR_RETURN(extent.arena, AlignUp(end, base.alignment));
  return extent;
}

absl::StatusOr<Plan> SymbolicPlan::Bind(const graph::SymbolBindings& dims) const {
  MG_ASSIGN_OR_RETURN(const int piece, PieceFor(dims));
  Plan plan = base;
  const size_t n = items.size();
  const int steps = static_cast<int>(plan.steps.size());
  // No scratch beyond the result: sizes go into the buffers, the steps' live bytes are summed
  // in place, and each class's unrounded bytes wait in offset_of_value[root] until FinishPlan
  // writes the offsets there.
  plan.buffers.assign(n, PlanBuffer{});
  for (PlanStep& s : plan.steps) s.live_bytes = 0;
  plan.naive_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const SymbolicItem& item = items[i];
    MG_ASSIGN_OR_RETURN(plan.buffers[i].size, item.bytes.Evaluate(dims));
    MG_ASSIGN_OR_RETURN(const int64_t class_bytes, item.class_bytes.Evaluate(dims));
    plan.offset_of_value[item.root] = class_bytes;
    MG_ASSIGN_OR_RETURN(const int64_t aligned, AlignUp(class_bytes, plan.alignment));
    // Naive counts every value apart, in-place pairs too (as InitPlan does).
    const std::optional<int64_t> joined = util::CheckedMul(aligned, item.in_place_joins);
    if (!joined.has_value()) return Overflow("the naive sum");
    const std::optional<int64_t> counted = util::CheckedAdd(aligned, *joined);
    const std::optional<int64_t> naive =
        counted ? util::CheckedAdd(plan.naive_bytes, *counted) : std::nullopt;
    if (!naive.has_value()) return Overflow("the naive sum");
    plan.naive_bytes = *naive;
    plan.buffers[i].device = item.device;
    if (item.lifetime.first_step >= steps) continue;
    plan.steps[item.lifetime.first_step].live_bytes += aligned;
    if (item.lifetime.last_step + 1 < steps) {
      plan.steps[item.lifetime.last_step + 1].live_bytes -= aligned;
    }
  }
  plan.lower_bound_bytes = 0;
  plan.peak_step = 0;
  int64_t running = 0;
  for (int s = 0; s < steps; ++s) {
    running += plan.steps[s].live_bytes;
    plan.steps[s].live_bytes = running;
    if (running > plan.lower_bound_bytes) {
      plan.lower_bound_bytes = running;
      plan.peak_step = s;
    }
  }
  MG_RETURN_IF_ERROR(PlaceByPiece(
                         *this, pieces[piece], [&](int32_t i) { return plan.buffers[i].size; },
                         [&](int32_t i) -> int64_t& { return plan.buffers[i].offset; })
                         .status());
  MG_ASSIGN_OR_RETURN(plan.static_bytes, static_bytes.Evaluate(dims));
  MG_ASSIGN_OR_RETURN(plan.trainable_bytes, trainable_bytes.Evaluate(dims));
  // The largest classes live at the peak step, ranked as InitPlan ranks them.
  constexpr size_t top = 8;  // InitPlan's default
  plan.peak_values.clear();
  for (size_t i = 0; i < n; ++i) {
    const Lifetime& l = items[i].lifetime;
    if (steps > 0 && l.first_step <= plan.peak_step && plan.peak_step <= l.last_step) {
      plan.peak_values.push_back(items[i].root);
    }
  }
  auto larger = [&](graph::ValueId a, graph::ValueId b) {
    const int64_t ba = plan.offset_of_value[a], bb = plan.offset_of_value[b];
    return ba != bb ? ba > bb : a < b;
  };
  if (plan.peak_values.size() > top) {
    std::partial_sort(plan.peak_values.begin(), plan.peak_values.begin() + top,
                      plan.peak_values.end(), larger);
    plan.peak_values.resize(top);
  } else {
    std::sort(plan.peak_values.begin(), plan.peak_values.end(), larger);
  }
  FinishPlan(plan);
  plan.proven_optimal = plan.arena_bytes == plan.lower_bound_bytes;
  return plan;
}

absl::StatusOr<int64_t> SymbolicPlan::MaxArena() const {
  std::vector<int64_t> scratch;
  int64_t arena = 0;
  for (const SymbolicPiece& piece : pieces) {
    MG_ASSIGN_OR_RETURN(Extent e, MeasureWith(piece, piece.box.High(), scratch));
    arena = std::max(arena, e.arena);
  }
  return arena;
}

absl::StatusOr<DeviceBytes> SymbolicPlan::DeviceBytesAt(const graph::SymbolBindings& dims,
                                                        Optimizer optimizer,
                                                        std::vector<int64_t>& scratch) const {
  MG_ASSIGN_OR_RETURN(const Extent extent, Measure(dims, scratch));
  DeviceBytes bytes;
  bytes.arena = extent.arena;
  MG_ASSIGN_OR_RETURN(bytes.static_bytes, static_bytes.Evaluate(dims));
  MG_ASSIGN_OR_RETURN(const int64_t trainable, trainable_bytes.Evaluate(dims));
  bytes.optimizer_state = OptimizerStateBytes(trainable, optimizer);
  return bytes;
}

absl::StatusOr<std::optional<int64_t>> SymbolicPlan::LargestFitting(
    const std::string& symbol, graph::SymbolBindings at, int64_t budget,
    const std::function<absl::StatusOr<int64_t>(const graph::SymbolBindings&)>& bytes) const {
  const graph::SymbolRange* range = box.Find(symbol);
  if (range == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the plan's box has no symbol ", symbol));
  }
  at[symbol] = range->lo;
  MG_RETURN_IF_ERROR(box.CheckContains(at));
  // The pieces the line through `at` crosses, as segments of the symbol's range, in order.
  std::vector<std::pair<int64_t, int64_t>> segments;
  for (const SymbolicPiece& piece : pieces) {
    const graph::SymbolRange* r = piece.box.Find(symbol);
    if (r == nullptr) continue;
    graph::SymbolBindings probe = at;
    probe[symbol] = r->lo;
    if (piece.box.Contains(probe)) segments.push_back({r->lo, r->hi});
  }
  std::sort(segments.begin(), segments.end());
  int64_t fits_up_to = range->lo - 1;  // every value up to here fits
  for (const auto& [lo, hi] : segments) {
    if (lo > fits_up_to + 1) break;  // a gap: the pieces do not cover the line (the checker's)
    auto value_at = [&](int64_t v) {
      at[symbol] = v;
      return bytes(at);
    };
    MG_ASSIGN_OR_RETURN(int64_t at_hi, value_at(hi));
    if (at_hi <= budget) {
      fits_up_to = std::max(fits_up_to, hi);
      continue;
    }
    // Non-decreasing inside the piece: the first value over the budget by bisection.
    int64_t good = std::max(lo, fits_up_to + 1) - 1, bad = hi;
    while (bad - good > 1) {
      const int64_t mid = good + (bad - good) / 2;
      MG_ASSIGN_OR_RETURN(int64_t b, value_at(mid));
      (b <= budget ? good : bad) = mid;
    }
    fits_up_to = good;
    break;
  }
  if (fits_up_to < range->lo) return std::optional<int64_t>();
  return std::optional<int64_t>(fits_up_to);
}

absl::StatusOr<ArenaFormula> SymbolicPlan::Formula(int piece_index) const {
  const SymbolicPiece& piece = pieces.at(piece_index);
  if (piece.formula.has_value()) return *piece.formula;
  ArenaFormula formula;
  // Per item, the polynomials whose max is its end; a polynomial another one dominates over
  // the piece's box is dropped (compared in symbols shifted to start at the box's low end,
  // where coefficient tests are sharp enough for path sums).
  const graph::SymbolBindings low = piece.box.Low();
  struct Candidate {
    graph::DimExpr poly;
    graph::DimExpr shifted;
    graph::RoundingBounds bounds;  // of `shifted`
  };
  auto dominates = [](const Candidate& a, const Candidate& b) {
    return graph::Dominates(a.shifted, b.shifted) ||
           graph::Dominates(a.bounds.lower, b.bounds.upper);
  };
  auto add_pruned = [&](std::vector<Candidate>& set, const Candidate& c) {
    for (const Candidate& q : set) {
      if (dominates(q, c)) return;
    }
    set.erase(std::remove_if(set.begin(), set.end(),
                             [&](const Candidate& q) { return dominates(c, q); }),
              set.end());
    set.push_back(c);
  };
  auto candidate = [&](const graph::DimExpr& p) -> absl::StatusOr<Candidate> {
    Candidate c;
    c.poly = p;
    MG_ASSIGN_OR_RETURN(c.shifted, graph::ShiftSymbols(p, low));
    MG_ASSIGN_OR_RETURN(c.bounds, graph::BoundsWithoutRounding(c.shifted));
    return c;
  };
  std::vector<std::vector<Candidate>> ends(items.size());
  std::vector<Candidate> arena;
  for (int32_t b : piece.order) {
    std::vector<graph::DimExpr> offsets;
    {
      std::vector<Candidate> below;
      for (int32_t a : piece.below[b]) {
        for (const Candidate& e : ends[a]) add_pruned(below, e);
      }
      for (Candidate& c : below) offsets.push_back(std::move(c.poly));
    }
    if (offsets.empty()) offsets.push_back(graph::DimExpr());
    for (graph::DimExpr& o : offsets) {
      if (items[b].alignment > base.alignment) {
        MG_ASSIGN_OR_RETURN(graph::DimExpr chunks, graph::CeilDiv(o, items[b].alignment));
        MG_ASSIGN_OR_RETURN(o, graph::Mul(chunks, graph::DimExpr::Constant(items[b].alignment)));
      }
      MG_ASSIGN_OR_RETURN(graph::DimExpr end, graph::Add(o, items[b].bytes));
      MG_ASSIGN_OR_RETURN(Candidate c, candidate(end));
      add_pruned(ends[b], c);
    }
    if (ends[b].size() > util::kMaxFormulaPolynomials) {
      formula.too_long = true;
      return formula;
    }
    for (const Candidate& e : ends[b]) add_pruned(arena, e);
    if (arena.size() > util::kMaxFormulaPolynomials) {
      formula.too_long = true;
      return formula;
    }
  }
  for (Candidate& c : arena) formula.polynomials.push_back(std::move(c.poly));
  if (formula.polynomials.empty()) formula.polynomials.push_back(graph::DimExpr());
  std::sort(formula.polynomials.begin(), formula.polynomials.end(),
            [](const graph::DimExpr& a, const graph::DimExpr& b) {
              return a.ToString() < b.ToString();
            });
  return formula;
}

}  // namespace memonger

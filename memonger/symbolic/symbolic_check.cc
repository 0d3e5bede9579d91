#include "memonger/symbolic/symbolic_check.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memonger/symbolic/symbolic_planner.h"
#include "util/limits.h"
#include "util/status_macros.h"

namespace memonger {

namespace {

std::string ItemName(const graph::Graph& graph, const SymbolicPlan& plan, int32_t item) {
  const graph::ValueId root = plan.items[item].root;
  if (root < 0 || root >= graph.num_values()) return absl::StrCat("item ", item);
  return absl::StrCat("'", graph.value(root).DisplayName(), "'");
}

bool SameDevice(const SymbolicItem& a, const SymbolicItem& b) {
  return a.device.type == b.device.type && a.device.id == b.device.id;
}

bool Conflict(const SymbolicItem& a, const SymbolicItem& b) {
  return !SameDevice(a, b) || a.lifetime.Overlaps(b.lifetime);
}

bool Inside(const graph::SymbolBox& inner, const graph::SymbolBox& outer) {
  if (inner.ranges.size() != outer.ranges.size()) return false;
  for (size_t i = 0; i < inner.ranges.size(); ++i) {
    const graph::SymbolRange& a = inner.ranges[i];
    const graph::SymbolRange& b = outer.ranges[i];
    if (a.symbol != b.symbol || a.lo < b.lo || a.hi > b.hi || a.lo > a.hi) return false;
  }
  return true;
}

// Where the two items of an unordered pair overlap, if any sample binding shows it.
std::string Witness(const SymbolicPlan& plan, int piece, int32_t a, int32_t b) {
  for (const graph::SymbolBindings& at : SampleBindings(plan.pieces[piece].box, 64)) {
    absl::StatusOr<Plan> bound = plan.Bind(at);
    if (!bound.ok()) continue;
    const PlanBuffer& x = bound->buffers[a];
    const PlanBuffer& y = bound->buffers[b];
    if (x.offset < y.offset + y.size && y.offset < x.offset + x.size && x.size > 0 && y.size > 0) {
      std::string text;
      for (const auto& [symbol, value] : at) absl::StrAppend(&text, text.empty() ? "" : ", ", symbol, "=", value);
      return absl::StrCat("; they overlap at ", text, ": [", x.offset, ", ", x.offset + x.size,
                          ") and [", y.offset, ", ", y.offset + y.size, ")");
    }
  }
  return "; no sample binding shows an overlap, but nothing proves there is none";
}

// Bindings in a box, exactly (unsigned 128-bit); nullopt beyond.
std::optional<unsigned __int128> Volume(const graph::SymbolBox& box) {
  unsigned __int128 volume = 1;
  for (const graph::SymbolRange& r : box.ranges) {
    const unsigned __int128 width = static_cast<unsigned __int128>(r.hi - r.lo) + 1;
    if (volume > (~static_cast<unsigned __int128>(0)) / width) return std::nullopt;
    volume *= width;
  }
  return volume;
}

bool Disjoint(const graph::SymbolBox& a, const graph::SymbolBox& b) {
  for (size_t i = 0; i < a.ranges.size(); ++i) {
    if (a.ranges[i].hi < b.ranges[i].lo || b.ranges[i].hi < a.ranges[i].lo) return true;
  }
  return false;
}

// The pieces lie in the box, do not overlap, and together hold as many bindings as the box:
// they cover it exactly. Where the count does not fit 128 bits, sample bindings stand in.
absl::Status CheckPiecesCoverTheBox(const SymbolicPlan& plan) {
  std::optional<unsigned __int128> total = Volume(plan.box);
  unsigned __int128 sum = 0;
  for (size_t p = 0; p < plan.pieces.size(); ++p) {
    if (!Inside(plan.pieces[p].box, plan.box)) {
      return absl::InvalidArgumentError(absl::StrCat("symbolic plan: piece ", p,
                                                     " is not inside the plan's box"));
    }
    for (size_t q = 0; q < p; ++q) {
      if (!Disjoint(plan.pieces[p].box, plan.pieces[q].box)) {
        return absl::InvalidArgumentError(
            absl::StrCat("symbolic plan: pieces ", q, " and ", p, " overlap"));
      }
    }
    const std::optional<unsigned __int128> volume = Volume(plan.pieces[p].box);
    if (!volume.has_value() || !total.has_value()) {
      total.reset();
      continue;
    }
    sum += *volume;
  }
  if (total.has_value()) {
    if (sum != *total) {
      return absl::InvalidArgumentError("symbolic plan: its pieces leave part of its box uncovered");
    }
    return absl::OkStatus();
  }
  for (const graph::SymbolBindings& at : SampleBindings(plan.box, 256)) {
    bool covered = false;
    for (const SymbolicPiece& p : plan.pieces) covered = covered || p.box.Contains(at);
    if (!covered) {
      return absl::InvalidArgumentError("symbolic plan: its pieces leave part of its box uncovered");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSymbolicPlan(const graph::Graph& graph, const SymbolicPlan& plan) {
  const int32_t n = static_cast<int32_t>(plan.items.size());
  if (n > util::kMaxSymbolicItems) {
    return absl::ResourceExhaustedError(absl::StrCat("symbolic plan: ", n, " items"));
  }
  for (int32_t i = 0; i < n; ++i) {
    if (plan.items[i].bytes.MayBeNegative() || plan.items[i].alignment < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "symbolic plan: item ", ItemName(graph, plan, i), " has a size that may be negative (",
          plan.items[i].bytes.ToString(), ") or no alignment"));
    }
  }
  if (plan.pieces.empty()) return absl::InvalidArgumentError("symbolic plan: no pieces");
  MG_RETURN_IF_ERROR(CheckPiecesCoverTheBox(plan));
  const size_t words = (static_cast<size_t>(n) + 63) / 64;
  std::vector<uint64_t> ancestors(static_cast<size_t>(n) * words);
  std::vector<int32_t> position(n);
  for (int piece = 0; piece < static_cast<int>(plan.pieces.size()); ++piece) {
    const SymbolicPiece& p = plan.pieces[piece];
    if (static_cast<int32_t>(p.order.size()) != n || static_cast<int32_t>(p.below.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbolic plan: piece ", piece, " does not order every item once"));
    }
    std::fill(position.begin(), position.end(), -1);
    for (int32_t q = 0; q < n; ++q) {
      const int32_t item = p.order[q];
      if (item < 0 || item >= n || position[item] >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("symbolic plan: piece ", piece, " does not order every item once"));
      }
      position[item] = q;
    }
    std::fill(ancestors.begin(), ancestors.end(), 0);
    for (int32_t b : p.order) {
      uint64_t* mine = &ancestors[static_cast<size_t>(b) * words];
      for (int32_t a : p.below[b]) {
        if (a < 0 || a >= n || position[a] >= position[b]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "symbolic plan: piece ", piece, ": ", ItemName(graph, plan, b),
              " sits on an item placed after it"));
        }
        const uint64_t* theirs = &ancestors[static_cast<size_t>(a) * words];
        for (size_t w = 0; w < words; ++w) mine[w] |= theirs[w];
        mine[a / 64] |= uint64_t{1} << (a % 64);
      }
    }
    for (int32_t b = 0; b < n; ++b) {
      const uint64_t* mine = &ancestors[static_cast<size_t>(b) * words];
      for (int32_t a = 0; a < n; ++a) {
        if (position[a] >= position[b] || !Conflict(plan.items[a], plan.items[b])) continue;
        if ((mine[a / 64] >> (a % 64)) & 1) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            "symbolic plan: piece ", piece, " (", p.box.ToString(), "): ",
            ItemName(graph, plan, a), " and ", ItemName(graph, plan, b),
            " are live together but no chain of 'below' lists orders them",
            Witness(plan, piece, a, b)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace memonger

// A box of bindings: each symbol of a model ranges over [lo, hi] (`--dim N=256..65536`). The
// symbolic planner plans once for every binding in a box, and may split it into sub-boxes.
//
//   SymbolBox box;
//   MG_RETURN_IF_ERROR(ParseDimRange("N=256..65536", box));
//   box.High();                          // {{"N", 65536}}
#ifndef MEMONGER_GRAPH_SYMBOL_BOX_H_
#define MEMONGER_GRAPH_SYMBOL_BOX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "graph/dim_expr.h"

namespace memonger::graph {

struct SymbolRange {
  std::string symbol;
  int64_t lo = 0;  // inclusive, >= 0
  int64_t hi = 0;  // inclusive, >= lo
};

struct SymbolBox {
  std::vector<SymbolRange> ranges;  // sorted by symbol, each symbol once

  bool empty() const { return ranges.empty(); }
  SymbolBindings Low() const;
  SymbolBindings High() const;
  // Every corner (2^k for k symbols whose range is more than one value), Low() first.
  std::vector<SymbolBindings> Corners() const;
  // True when `bindings` gives every symbol of the box a value inside its range (other
  // symbols are ignored).
  bool Contains(const SymbolBindings& bindings) const;
  // InvalidArgument naming the first symbol of the box that `bindings` lacks or puts outside
  // its range ("N=70000 lies outside the plan's range N=256..65536").
  absl::Status CheckContains(const SymbolBindings& bindings) const;
  const SymbolRange* Find(absl::string_view symbol) const;
  // "N=256..65536, batch=1..64".
  std::string ToString() const;
};

// The most symbols one box may range over: its corners are checked one by one (2^8 = 256).
inline constexpr size_t kMaxRangeSymbols = 8;

// Parses "N=LO..HI" (0 <= LO <= HI, both int64) into `box`. InvalidArgument for a malformed
// text, LO > HI, a symbol that is not a grammar SYMBOL (IsSymbolName), a symbol given twice,
// or more than kMaxRangeSymbols symbols.
absl::Status ParseDimRange(absl::string_view text, SymbolBox& box);

// True when `text` has the form of a range ("N=..", with ".." after the '=').
bool IsDimRange(absl::string_view text);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_SYMBOL_BOX_H_

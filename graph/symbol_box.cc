#include "graph/symbol_box.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "util/limits.h"

namespace memonger::graph {

SymbolBindings SymbolBox::Low() const {
  SymbolBindings out;
  for (const SymbolRange& r : ranges) out[r.symbol] = r.lo;
  return out;
}

SymbolBindings SymbolBox::High() const {
  SymbolBindings out;
  for (const SymbolRange& r : ranges) out[r.symbol] = r.hi;
  return out;
}

std::vector<SymbolBindings> SymbolBox::Corners() const {
  std::vector<SymbolBindings> corners{Low()};
  for (const SymbolRange& r : ranges) {
    if (r.lo == r.hi) continue;
    const size_t n = corners.size();
    for (size_t i = 0; i < n; ++i) {
      SymbolBindings c = corners[i];
      c[r.symbol] = r.hi;
      corners.push_back(std::move(c));
    }
  }
  return corners;
}

bool SymbolBox::Contains(const SymbolBindings& bindings) const { return CheckContains(bindings).ok(); }

absl::Status SymbolBox::CheckContains(const SymbolBindings& bindings) const {
  for (const SymbolRange& r : ranges) {
    auto it = bindings.find(r.symbol);
    if (it == bindings.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no value for ", r.symbol, " (the plan's range is ", ToString(), ")"));
    }
    if (it->second < r.lo || it->second > r.hi) {
      return absl::InvalidArgumentError(absl::StrCat(r.symbol, "=", it->second,
                                                     " lies outside the plan's range ",
                                                     r.symbol, "=", r.lo, "..", r.hi));
    }
  }
  return absl::OkStatus();
}

const SymbolRange* SymbolBox::Find(absl::string_view symbol) const {
  for (const SymbolRange& r : ranges) {
    if (r.symbol == symbol) return &r;
  }
  return nullptr;
}

std::string SymbolBox::ToString() const {
  return absl::StrJoin(ranges, ", ", [](std::string* out, const SymbolRange& r) {
    absl::StrAppend(out, r.symbol, "=", r.lo, "..", r.hi);
  });
}

bool IsDimRange(absl::string_view text) {
  const size_t eq = text.find('=');
  return eq != absl::string_view::npos && text.find("..", eq) != absl::string_view::npos;
}

absl::Status ParseDimRange(absl::string_view text, SymbolBox& box) {
  const size_t eq = text.find('=');
  const size_t dots = eq == absl::string_view::npos ? eq : text.find("..", eq);
  auto malformed = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dim '", util::Quote(text), "': ", why, " (expected SYMBOL=LO..HI)"));
  };
  if (dots == absl::string_view::npos) return malformed("not a range");
  const std::string symbol(absl::StripAsciiWhitespace(text.substr(0, eq)));
  if (!IsSymbolName(symbol)) return malformed("not a symbol name");
  int64_t lo = 0, hi = 0;
  if (!absl::SimpleAtoi(text.substr(eq + 1, dots - eq - 1), &lo) ||
      !absl::SimpleAtoi(text.substr(dots + 2), &hi)) {
    return malformed("the bounds are not integers");
  }
  if (lo < 0 || lo > hi) return malformed("the bounds must satisfy 0 <= LO <= HI");
  if (box.Find(symbol) != nullptr) return malformed("the symbol is given twice");
  if (box.ranges.size() >= kMaxRangeSymbols) {
    return malformed(absl::StrCat("more than ", kMaxRangeSymbols, " symbols have ranges"));
  }
  box.ranges.push_back({symbol, lo, hi});
  std::sort(box.ranges.begin(), box.ranges.end(),
            [](const SymbolRange& a, const SymbolRange& b) { return a.symbol < b.symbol; });
  return absl::OkStatus();
}

}  // namespace memonger::graph

// libFuzzer harness: a size expression (graph/dim_expr.h, the text plan v2 will carry) ->
// ParseDimExpr. What parses must print back to itself, print prettily without failing, and, bound
// at two corners (every symbol 0, then every symbol 7), evaluate without a wrap and without
// decreasing: the monotonicity the symbolic planner's corner bounds rest on.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "fuzz/fuzz_support.h"
#include "graph/dim_expr.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace memonger;
  absl::StatusOr<graph::DimExpr> e = graph::ParseDimExpr(fuzz::Bytes(data, size));
  if (!e.ok()) {
    fuzz::FailOnInternal(e.status(), "ParseDimExpr");
    return 0;
  }
  const std::string text = e->ToString();
  absl::StatusOr<graph::DimExpr> again = graph::ParseDimExpr(text);
  if (!again.ok() || *again != *e) {
    fuzz::Fail("ParseDimExpr(ToString(e)) is not e: " + text, again.status());
  }
  (void)e->ToString(/*pretty=*/true);
  graph::SymbolBindings low, high;
  for (const std::string& symbol : e->Symbols()) {
    low[symbol] = 0;
    high[symbol] = 7;
  }
  absl::StatusOr<int64_t> at_low = e->Evaluate(low);
  absl::StatusOr<int64_t> at_high = e->Evaluate(high);
  if (!at_low.ok()) fuzz::FailOnInternal(at_low.status(), "Evaluate");
  if (!at_high.ok()) fuzz::FailOnInternal(at_high.status(), "Evaluate");
  if (at_low.ok() && at_high.ok() && *at_low > *at_high) {
    fuzz::Fail("a size expression decreases when its symbols grow: " + text);
  }
  return 0;
}

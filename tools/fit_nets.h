// The nets a --fit search plans: the source's net typed at each value of the searched symbol,
// each typed once and kept for the cures that plan it again (bounded by their values in all:
// a million-value net is typed again rather than held many times).
//
// Typing by import costs most of a value's time on an ONNX model (libonnx's shape inference:
// 25 of densenet121's 30 ms). So the first two values are imported, and where a retyper made
// from them (graph::Retyper: the same net but for types, the second's types given from the
// first) exists, every later value is *retyped* instead (a few ms). That the imports agree at two values does not prove they
// agree at a third, so the values an answer rests on are Confirm()ed against an import; where
// one differs, retyping is off and the caller searches again (FindFit does). A workload is
// built at each value (it has no import to save).
//
//   FitNets nets(source);
//   MG_ASSIGN_OR_RETURN(const graph::Graph* g, nets.At(64));
//   ...
//   MG_ASSIGN_OR_RETURN(bool same, nets.Confirm(64));  // false: search again
#ifndef MEMONGER_TOOLS_FIT_NETS_H_
#define MEMONGER_TOOLS_FIT_NETS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "graph/retype.h"
#include "tools/plan_steps.h"

namespace memonger::tools {

class FitNets {
 public:
  // REQUIRES: `source` (and its flags) outlive this.
  explicit FitNets(const NetSource& source);

  // The finished net (MakeGraph's) at `value`: valid until the next call.
  absl::StatusOr<const graph::Graph*> At(int64_t value);

  // True where the net at `value` was imported, or retyped and equal to what an import gives
  // (graph::SamePlanningGraph and graph::SameNetButTypes); the import then replaces it. False:
  // retyping is off from now on and every net is dropped.
  absl::StatusOr<bool> Confirm(int64_t value);

  bool retyping() const { return state_ == State::kRetype; }
  int imports() const { return imports_; }
  int retypes() const { return retypes_; }

 private:
  enum class State { kUnknown, kRetype, kImport };
  absl::StatusOr<graph::Graph> Import(int64_t value);
  void Keep(int64_t value, graph::Graph net);

  const NetSource& source_;
  State state_;
  std::optional<graph::Graph> first_;  // the first import, typed but not finished
  int64_t first_value_ = 0;
  std::optional<graph::Retyper> retyper_;
  std::map<int64_t, graph::Graph> nets_;
  std::set<int64_t> retyped_;  // the values of nets_ that were retyped
  int64_t kept_values_ = 0;
  int imports_ = 0;
  int retypes_ = 0;
};

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_FIT_NETS_H_

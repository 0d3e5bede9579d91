// Control-flow regions: an If whose condition, or a Loop whose trip count or condition, depends
// on tensor values, held in the graph as its branches' or body's ops between marker ops that
// the executor runs (allocator/executor.h). The ONNX importer writes them (graph/onnx/
// control_flow.h); an If or Loop that the shapes decide is inlined or unrolled instead.
//
// An If is five parts in program order, every op of a branch listed between its markers:
//   IfThen(cond)                                   the then-branch's ops follow
//   ... then-branch ...
//   IfElse()                                       the else-branch's ops follow
//   ... else-branch ...
//   IfEnd(cond, then_1..n, else_1..n) -> out_1..n  out_k: a copy of the taken branch's k-th
// The executor skips the branch not taken. Planned as written, both branches' values lie in the
// parent's arena, one branch's intermediates sharing memory with the other's: the arena holds
// the larger branch plus what the then-branch hands IfEnd.
//
// A Loop is three parts:
//   LoopBegin([M], [cond], init_1..n) -> iter, cond_in, in_1..n
//   ... body ...                          reads iter, cond_in, in_k and values from before
//   LoopEnd([M], iter, cond_in, in_1..n, cond_out, out_1..n, outer...) -> final_1..n
// (attributes has_trip_count and has_condition say whether M and cond are given; without M
// the trip count is unbounded, without cond the body's condition is ignored, as ONNX says).
// LoopBegin writes iter = 0, cond_in = cond and copies init into in; the body runs while iter <
// M and the condition holds; at each LoopEnd the executor copies out into in, cond_out into
// cond_in, adds one to iter and runs the body again, else copies out (in, when no iteration
// ran) into final. Every value the body reads from before the Loop is an input of LoopEnd
// (`outer`), as are iter, cond_in and in: all of them are live from LoopBegin to LoopEnd, so a
// plan made from the schedule as written keeps them apart from every body value, and values
// the body makes die within an iteration. That is why a flat plan of one iteration holds every
// iteration: nothing else is live across the jump back.
//
// What a plan of such a graph must keep (CheckRegionSchedule): each region's ops at
// consecutive steps in program order, nothing moved in or out. Orders that move ops (the
// memory-aware order, recomputation) and the gradient builder refuse these graphs.
#ifndef MEMONGER_GRAPH_CONTROL_REGIONS_H_
#define MEMONGER_GRAPH_CONTROL_REGIONS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/graph.h"

namespace memonger::graph {

inline constexpr absl::string_view kControlDomain = "memonger.control";
inline constexpr absl::string_view kIfThen = "IfThen";
inline constexpr absl::string_view kIfElse = "IfElse";
inline constexpr absl::string_view kIfEnd = "IfEnd";
inline constexpr absl::string_view kLoopBegin = "LoopBegin";
inline constexpr absl::string_view kLoopEnd = "LoopEnd";

// Whether `op` is one of the markers above.
bool IsControlMarker(const Op& op);
// Whether any op of `graph` is. O(ops).
bool HasControlRegions(const Graph& graph);

struct ControlRegion {
  enum class Kind { kIf, kLoop } kind = Kind::kIf;
  OpId begin = kNone;   // IfThen or LoopBegin
  OpId middle = kNone;  // IfElse; kNone for a Loop
  OpId end = kNone;     // IfEnd or LoopEnd
  bool has_trip_count = false;  // a Loop's
  bool has_condition = false;   // a Loop's
  int carried = 0;              // a Loop's carried values; an If's outputs
};

// The regions of `graph`, by their markers in program order (a region inside a branch or body
// lies wholly within it), innermost first. InvalidArgument naming the marker for markers
// unmatched or crossed, marker ops of the wrong arity, a condition that is not one bool, a trip
// count that is not one int64, and carried values or branch outputs whose types differ where
// the markers copy one into the other. REQUIRES: every value typed.
absl::StatusOr<std::vector<ControlRegion>> FindControlRegions(const Graph& graph);

// OK when `schedule` runs every region's ops (markers included) at consecutive steps in
// program order; InvalidArgument naming the first op out of place otherwise.
absl::Status CheckRegionSchedule(const Graph& graph, const std::vector<ControlRegion>& regions,
                                 const std::vector<OpId>& schedule);

// Unimplemented, naming the first marker and `what` ("the memory-aware order"), when `graph`
// has control regions: for the passes that would move ops across their bounds.
absl::Status RefuseControlRegions(const Graph& graph, absl::string_view what);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_CONTROL_REGIONS_H_

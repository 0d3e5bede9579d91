// Liveness: for a schedule, the lifetime of every value and the alias classes.
//
// - lifetime [first_step, last_step], both inclusive: from the step of the producing op to the
//   step of the last reader. Graph inputs are live from step 0 to the last step (unless
//   recycle_inputs: to their last reader); graph outputs, declared parameter gradients (read by
//   the optimizer after the net) and static_names to the last step.
//   A value nobody reads lives at its producer's step only.
// - alias class: values that must occupy the same bytes (an in-place output and the value it
//   overwrites; view outputs of ops marked view-capable when views are enabled). Their lifetimes
//   are merged into the class's; the class is placed as one, with the largest member's bytes.
//   With blob_per_name, all versions of a name (on one device) form one class too. With
//   in_place, an op's output 0 joins the class of an input that dies at the op, where the
//   table of graph/in_place.h allows it (see LivenessOptions::in_place).
// - static values (params, constants) are excluded (no lifetime, never placed) unless
//   `plan_static` is set, in which case they live from step 0 to the last step.
//
// Complexity: O(ops + edges) time and memory.
#ifndef MEMONGER_MEMONGER_LIVENESS_H_
#define MEMONGER_MEMONGER_LIVENESS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph.h"
#include "memonger/execution.h"
#include "memonger/schedule.h"

namespace memonger {

struct Lifetime {
  int first_step = 0;  // inclusive
  int last_step = 0;   // inclusive
  bool Overlaps(const Lifetime& o) const {
    return first_step <= o.last_step && o.first_step <= last_step;
  }
};

struct LivenessOptions {
  bool plan_static = false;  // place params and constants too
  // Output 0 of an op marked `view` whose type's schema is view_capable aliases its input 0,
  // when that is safe: both planned, on one device, the output no larger than the input, and
  // neither of them overwritten in place later (an in-place write would change the other).
  // Otherwise the output gets memory of its own, as without views.
  bool views = false;
  // In-place reuse of a dying input, as ONNX Runtime, XLA, TFLite and eager PyTorch do: output
  // 0 of an op joins the alias class of one of its inputs when graph/in_place.h lets the op
  // write over that input slot and
  //   - the input's class is read by nothing after this op's step (it dies here) and holds no
  //     graph output, caller-owned input, param or constant, static name or parameter gradient;
  //   - the output's class starts at this step (it overwrites nothing in place already, and
  //     holds no graph input);
  //   - both are planned, on one device, with equal bytes, class bytes and alignment, and the
  //     same dims and element size (graph::InPlaceTypesMatch);
  //   - no other input or output of the op is in the input's class (a view of it read beside
  //     it, an output named like it).
  // The first such input in slot order is taken. The pair then counts once at that step, in
  // the lower bound as in every plan. Which classes exist depends on the schedule; the
  // memonger baselines (Caffe2 shared blobs by name only), a parallel executor (an input's
  // other readers may still run) and size-blind planning leave it off (PlanMemory).
  bool in_place = false;
  // Graph inputs are live to the last step, as outputs are: the caller owns them (data is fed
  // again, weights are read by the next iteration), so no planner may recycle or overwrite
  // their memory. Caffe2 callers pass them to memonger as static_blobs. When true, an input's
  // memory is free after its last reader, as for any activation.
  bool recycle_inputs = false;
  // More values treated like graph inputs and outputs (live for the whole run): --static.
  std::vector<std::string> static_names;
  // memonger's model, where a blob is a name: every version of a name (on one device) is one
  // alias class, as if each write were in place, where the schedule allows: a version whose
  // write comes before an earlier version's last step starts a class of its own. The memonger baselines plan this way so that
  // their rewritten net keeps one blob per name, as Caffe2's does.
  bool blob_per_name = false;
  // With blob_per_name, for a parallel executor: a version joins the previous versions of its
  // name only when every op touching them happens before the op writing it in every legal
  // execution (HappensBefore); otherwise it starts a class of its own. Our graph has no
  // write-after-write edges, so two writers of one name may be unordered.
  bool names_need_order = false;
  // Every value counts as 1 byte, whatever its type (types may be unknown): the sizes memonger
  // assumes without blob shapes. For the decisions of the size-blind memonger baselines only;
  // such a plan's bytes mean nothing.
  bool size_blind = false;

  // The options a caller chooses (plan_static, views, in_place, recycle_inputs, static_names), with those
  // a planner derives from its planner, executor and types (blob_per_name, names_need_order,
  // size_blind) at their defaults.
  LivenessOptions CallerChosen() const {
    LivenessOptions chosen;
    chosen.plan_static = plan_static;
    chosen.views = views;
    chosen.in_place = in_place;
    chosen.recycle_inputs = recycle_inputs;
    chosen.static_names = static_names;
    return chosen;
  }
};

// Each alias class's members, oldest first, at the index of the class's root (empty at every
// other value's): one flat array of ids, and where each value's list starts in it (a vector
// per value costs a heap block each, which dominates on a million values).
class ClassMembers {
 public:
  ClassMembers() = default;
  // `root_of[id]`: the root of value id's class (kNone: a class of its own is not implied; the
  // value is listed nowhere); `oldest_first`: every value once, in the order members are listed.
  ClassMembers(const std::vector<graph::ValueId>& root_of,
               const std::vector<graph::ValueId>& oldest_first);

  absl::Span<const graph::ValueId> operator[](graph::ValueId id) const {
    if (static_cast<size_t>(id) + 1 >= start_.size()) return {};
    return absl::Span<const graph::ValueId>(ids_.data() + start_[id], start_[id + 1] - start_[id]);
  }
  size_t size() const { return start_.empty() ? 0 : start_.size() - 1; }

 private:
  std::vector<int32_t> start_;  // per value, then one past the last: where its list starts
  std::vector<graph::ValueId> ids_;
};

struct Liveness {
  LivenessOptions options;  // what it was computed with
  Schedule schedule;
  int num_steps = 0;
  // Per value (indexed by ValueId):
  std::vector<bool> planned;          // false for static values (unless plan_static)
  std::vector<int64_t> bytes;         // byte size of the value alone
  // Its producer's device; for graph inputs, the device of the reader listed first in the net
  // (whatever the schedule, so that alias classes do not depend on the order).
  std::vector<graph::Device> device;
  std::vector<graph::ValueId> alias_root;  // the class's representative (its oldest member)
  std::vector<Lifetime> lifetime;     // the class's merged lifetime (meaningful when planned)
  // Per alias class, indexed by the root's ValueId (other entries empty): members, oldest first
  // (by the step of their producer, graph inputs first; ties by id). Unplanned static values
  // are classes of their own.
  ClassMembers members;
  std::vector<int64_t> class_bytes;   // largest member's bytes, at the root's index
  // (input, output) of every pair in-place reuse joined (LivenessOptions::in_place), in step
  // order: one class fewer each, of the class's bytes (a plan's naive bytes count them apart).
  std::vector<std::pair<graph::ValueId, graph::ValueId>> in_place_pairs;
};

// FailedPrecondition naming a value without a type (run InferShapes first); InvalidArgument for
// a schedule that is not a valid order of the graph's ops, and for an in-place write across
// devices.
absl::StatusOr<Liveness> ComputeLiveness(const graph::Graph& graph, const Schedule& schedule,
                                         const LivenessOptions& options = {});
// The same, keeping the schedule's op list instead of a copy (4 bytes an op).
absl::StatusOr<Liveness> ComputeLiveness(const graph::Graph& graph, Schedule&& schedule,
                                         const LivenessOptions& options = {});

// The sum of the class bytes (each aligned up to `alignment`) live at every step.
std::vector<int64_t> LiveBytesPerStep(const Liveness& liveness, int64_t alignment);

// Happens-before among ops in every legal execution (parallel execution model): a reaches b
// through data, control or in-place ordering edges (OpSuccessors). Answers by a depth-first
// search from a that never expands an op placed after b in a topological order; the search of
// the latest source is kept and resumed when a query asks about a later op, so queries grouped
// by source cost O(ops + edges) together. No dense n x n matrix. Not thread-safe (the search
// state is cached).
class HappensBefore {
 public:
  explicit HappensBefore(const graph::Graph& graph);
  // True when a != b and op a must finish before op b starts in every legal execution.
  bool Before(graph::OpId a, graph::OpId b) const;

 private:
  std::vector<std::vector<graph::OpId>> successors_;
  std::vector<int> topo_position_;
  // The search from source_: ops reached carry visit_epoch_ in visit_mark_; those reached at
  // topological positions up to bound_ are expanded, the others wait in deferred_.
  mutable graph::OpId source_ = graph::kNone;
  mutable int bound_ = -1;
  mutable std::vector<graph::OpId> deferred_;
  mutable std::vector<int> visit_mark_;
  mutable int visit_epoch_ = 0;
};

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_LIVENESS_H_

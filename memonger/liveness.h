// Liveness: for a schedule, the lifetime of every value and the alias classes.
//
// - lifetime [first_step, last_step], both inclusive: from the step of the producing op to the
//   step of the last reader. Graph inputs are live from step 0, graph outputs to the last step.
//   A value nobody reads lives at its producer's step only.
// - alias class: values that must occupy the same bytes (an in-place output and the value it
//   overwrites; view outputs of ops marked view-capable when views are enabled). Their lifetimes
//   are merged into the class's; the class is placed as one, with the largest member's bytes.
// - static values (params, constants) are excluded (no lifetime, never placed) unless
//   `plan_static` is set, in which case they live from step 0 to the last step.
//
// Complexity: O(ops + edges) time and memory.
#ifndef MEMONGER_MEMONGER_LIVENESS_H_
#define MEMONGER_MEMONGER_LIVENESS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/schedule.h"

namespace memonger {

enum class ExecutionModel { kSerial, kParallel };
absl::string_view ExecutionName(ExecutionModel execution);  // "serial", "parallel"
absl::StatusOr<ExecutionModel> ParseExecution(absl::string_view name);

struct Lifetime {
  int first_step = 0;  // inclusive
  int last_step = 0;   // inclusive
  bool Overlaps(const Lifetime& o) const {
    return first_step <= o.last_step && o.first_step <= last_step;
  }
};

struct LivenessOptions {
  bool plan_static = false;  // place params and constants too
  bool views = false;        // outputs of view-capable ops alias their input 0
};

struct Liveness {
  Schedule schedule;
  int num_steps = 0;
  // Per value (indexed by ValueId):
  std::vector<bool> planned;          // false for static values (unless plan_static)
  std::vector<int64_t> bytes;         // byte size of the value alone
  std::vector<graph::Device> device;  // its producer's device; for graph inputs, the first reader's
  std::vector<graph::ValueId> alias_root;  // the class's representative (its oldest member)
  std::vector<Lifetime> lifetime;     // the class's merged lifetime (meaningful when planned)
  // Per alias class, indexed by the root's ValueId (other entries empty): members, oldest first.
  std::vector<std::vector<graph::ValueId>> members;
  std::vector<int64_t> class_bytes;   // largest member's bytes, at the root's index
};

// REQUIRES: every value typed (InferShapes done).
absl::StatusOr<Liveness> ComputeLiveness(const graph::Graph& graph, const Schedule& schedule,
                                         const LivenessOptions& options = {});

// The sum of the class bytes (each aligned up to `alignment`) live at every step.
std::vector<int64_t> LiveBytesPerStep(const Liveness& liveness, int64_t alignment);

// Happens-before among ops in every legal execution (parallel execution model): a reaches b
// through data, control or in-place ordering edges. Answers by a search bounded by the
// topological positions, memoized per source; no dense n x n matrix.
class HappensBefore {
 public:
  explicit HappensBefore(const graph::Graph& graph);
  // True when a != b and op a must finish before op b starts in every legal execution.
  bool Before(graph::OpId a, graph::OpId b) const;

 private:
  std::vector<std::vector<graph::OpId>> successors_;
  std::vector<int> topo_position_;
  mutable std::vector<int> visit_mark_;
  mutable int visit_epoch_ = 0;
};

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_LIVENESS_H_

// Plan: where every value lives. A plain struct, produced by every planner, checked by
// VerifyPlan, exported as JSON (schema memonger.plan/v1), HTML and a rewritten net.
//
// Values are grouped into buffers (memonger's "shared blobs"); a buffer is a byte range
// [offset, offset + size) of one arena. Sharing planners (memonger-*, exact-sharing) lay their
// buffers side by side; offset planners (best-fit, exact, ...) give every alias class its own
// buffer at an offset where nothing live at the same time sits.
#ifndef MEMONGER_MEMONGER_PLAN_H_
#define MEMONGER_MEMONGER_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "memonger/liveness.h"
#include "memonger/schedule.h"
#include "util/boxed.h"

namespace memonger {

inline constexpr int64_t kNoOffset = -1;

struct PlanBuffer {
  int64_t offset = 0;  // byte offset in the arena, a multiple of the plan's alignment
  int64_t size = 0;    // bytes: at least every member's bytes
  graph::Device device;
  // The blob name a name-based runtime gives this buffer, as the planner chose it (the memonger
  // baselines name buffers the way Caffe2's memonger does); empty: RewriteNet's own rule. A
  // pointer while empty: the offset planners' million buffers name none.
  util::RareString blob_name;
};

struct PlanStep {
  graph::OpId op = graph::kNone;
  int64_t live_bytes = 0;  // aligned bytes of the values live at this step
};

// How the schedule was searched (`--order memory-aware`): the lower bound of the given order
// beside the plan's own, the portfolio member that found the order, whether no valid order has
// a lower peak, and every member's peak (memory_order.h).
struct OrderSearch {
  int64_t given_lower_bound_bytes = 0;
  std::string method;
  bool proven_optimal = false;
  bool exact_cut_short = false;  // MemoryOrder::exact_cut_short
  double seconds = 0;
  std::vector<std::pair<std::string, int64_t>> tried;
};

// Set when the net was rewritten for recomputation before planning (recompute.h): how, how
// many forward ops rerun, what that costs, and the lower bound without it.
struct RecomputeSummary {
  std::string method;
  int ops = 0;
  int candidates = 0;
  int64_t original_lower_bound_bytes = 0;
  int64_t extra_flops = 0;
  int64_t forward_flops = 0;
  bool proven_optimal = false;
};

// Which runs of steps a CUDA graph can capture (allocator/graphable.h): the sections, inclusive
// step ranges, and the steps between them with the reason each cannot be captured.
struct GraphableSections {
  struct Boundary {
    int step = 0;
    std::string reason;
  };
  std::vector<std::pair<int, int>> sections;  // [first_step, last_step]
  std::vector<Boundary> boundaries;
};

struct Plan {
  std::string model;
  std::string planner;
  OrderKind order = OrderKind::kGiven;
  ExecutionModel execution = ExecutionModel::kSerial;
  int64_t alignment = 256;
  // The liveness options the plan was made with: LivenessOfPlan computes its liveness again
  // with them. size_blind: every value counted as one byte (the plan says which values share a
  // buffer, not how large it is). blob_per_name (the memonger baselines): `lifetime` is each
  // name's, over all its versions; the verifier still checks every version on its own.
  LivenessOptions liveness;

  std::vector<PlanStep> steps;  // steps[step].op is the schedule
  // Per value (indexed by ValueId). Static values (not planned): buffer -1, offset kNoOffset.
  std::vector<int32_t> buffer_of_value;
  std::vector<int64_t> offset_of_value;  // == buffers[buffer_of_value].offset
  std::vector<Lifetime> lifetime;        // as computed by liveness (alias classes merged)
  std::vector<PlanBuffer> buffers;

  int64_t arena_bytes = 0;        // max over buffers of offset + size, aligned
  int64_t lower_bound_bytes = 0;  // max over steps of live_bytes
  int64_t naive_bytes = 0;        // every planned alias class in its own aligned memory
  int64_t static_bytes = 0;       // params and constants not placed in the arena
  // The bytes of the params a training step updates (graph::TrainableParams), in the arena or
  // not: what an optimizer's state is counted from (device_bytes.h). 0 for inference.
  int64_t trainable_bytes = 0;
  double planning_seconds = 0;
  bool proven_optimal = false;    // the planner proved its objective optimal
  // What a user should know about how the plan was made (a time limit that cut a greedy pass
  // short, ...): one sentence each, printed by the CLI as notes.
  std::vector<std::string> notes;

  std::optional<OrderSearch> order_search;  // set for the memory-aware order
  std::optional<RecomputeSummary> recompute;  // set for a net rewritten for recomputation
  std::optional<GraphableSections> graphable;  // set by whoever analysed CUDA capture

  int peak_step = 0;  // the first step with the most live bytes
  // The largest alias classes live at the peak step (their roots), by class bytes descending,
  // then by id.
  std::vector<graph::ValueId> peak_values;
};

// Fills order, alignment, liveness options, steps, lifetime, lower bound, naive bytes, static
// bytes, peak step and peak values of `plan` from a schedule and its liveness, and resets
// buffers and offsets (every value unplaced); the planner then fills buffers and
// buffer_of_value and calls FinishPlan. `top_values` bounds peak_values. With
// `copy_lifetimes` false, plan.lifetime is left empty for the caller to move the liveness's in
// when planning is done (PlanMemory: a copy held through planning would be 8 bytes a value
// more at the peak).
// REQUIRES: the aligned sums fit in int64 (PlanMemory checks the naive sum first).
void InitPlan(const graph::Graph& graph, const Liveness& liveness, int64_t alignment, Plan& plan,
              int top_values = 8, bool copy_lifetimes = true);

// Sets offset_of_value from buffers (kNoOffset for values without a buffer) and arena_bytes
// from the buffers' extent (0 without buffers), aligned up to the plan's alignment.
void FinishPlan(Plan& plan);

// The plan's schedule: its steps' ops in order, under the plan's order kind. Not checked
// (CheckSchedule says whether it is a valid order of a graph).
Schedule ScheduleOfPlan(const Plan& plan);

// Which lifetimes LivenessOfPlan computes: as the plan states them (per name with
// blob_per_name, in-place pairs merged with in_place), or every value with its own, apart from
// the versions of its name and the input it may overwrite (what the verifier and the executor
// check memory against).
enum class PlanLifetimes { kAsPlanned, kPerVersion };

// The liveness of the plan's schedule with the plan's liveness options (Plan::liveness), as
// the planner computed it; names_need_order follows the plan's execution model. Errors of
// ComputeLiveness (an invalid schedule, a value without a type).
absl::StatusOr<Liveness> LivenessOfPlan(const graph::Graph& graph, const Plan& plan,
                                        PlanLifetimes lifetimes = PlanLifetimes::kAsPlanned);

// Sum of buffer sizes (memonger's objective for sharing planners).
int64_t SumOfBufferSizes(const Plan& plan);

// Whether the plan keeps view `op`'s output in its input's memory (plan.liveness.views, liveness merged
// them: the same buffer over the same class lifetime; two values apart never share both): the
// JSON plan names the two aliases, and a rewritten net names them apart.
bool ViewKeptInInputMemory(const graph::Graph& graph, const Plan& plan, const graph::Op& op);

// The input whose bytes output `output` (an index into op.outputs) of `op` takes in the plan
// (in-place reuse of a dying input, plan.liveness.in_place: a slot graph/in_place.h allows,
// the same buffer over one merged lifetime, as liveness merges them; two values apart never
// share both); kNone where none. The JSON plan names the output an alias of that input.
graph::ValueId InPlaceInputTaken(const graph::Graph& graph, const Plan& plan, const graph::Op& op,
                                 int output);

// Per value, what its memory is written over: Graph::InPlaceRoots (the net's own in-place
// writes), joined with the in-place reuse the plan takes (InPlaceInputTaken), in step order.
// Views are not joined (a rewritten net names them apart).
std::vector<graph::ValueId> InPlaceRootsOfPlan(const graph::Graph& graph, const Plan& plan);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_PLAN_H_

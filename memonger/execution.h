// The execution model a plan is made for, and the one refusal of a planner that cannot serve
// a parallel executor.
//
//   serial    ops run one at a time in the schedule's order: two values whose lifetimes (steps
//             of that order) are disjoint may share bytes.
//   parallel  an executor may run any ops whose dependencies are met at once: two values may
//             share bytes only when every op touching one happens before every op touching
//             the other in every legal execution (liveness.h, HappensBefore).
#ifndef MEMONGER_MEMONGER_EXECUTION_H_
#define MEMONGER_MEMONGER_EXECUTION_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace memonger {

enum class ExecutionModel { kSerial, kParallel };
absl::string_view ExecutionName(ExecutionModel execution);  // "serial", "parallel"
absl::StatusOr<ExecutionModel> ParseExecution(absl::string_view name);

// How a planner relies on one serial op order, which decides why it cannot plan for a
// parallel executor and what to use instead.
enum class SerialReliance {
  kOffsets,       // offsets over serial lifetimes (greedy-by-size, best-fit, exact, ...)
  kInterference,  // memonger's optimize_interference: sharing along one serial order
  kFastPass,      // memonger's optimize_inference_fast: one pass over one serial order
};

// InvalidArgument naming `planner`, saying why it cannot plan for a parallel executor and what
// to use instead; OK for the serial model. The one wording PlanMemory, the CLI and the planners
// themselves give.
absl::Status CheckSerialExecution(ExecutionModel execution, absl::string_view planner,
                                  SerialReliance reliance);

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_EXECUTION_H_

#include "memonger/execution.h"

#include "absl/strings/str_cat.h"
#include "util/limits.h"

namespace memonger {

absl::string_view ExecutionName(ExecutionModel execution) {
  switch (execution) {
    case ExecutionModel::kSerial: return "serial";
    case ExecutionModel::kParallel: return "parallel";
  }
  return "serial";
}

absl::StatusOr<ExecutionModel> ParseExecution(absl::string_view name) {
  if (name == "serial") return ExecutionModel::kSerial;
  if (name == "parallel") return ExecutionModel::kParallel;
  return absl::InvalidArgumentError(absl::StrCat("unknown execution model '", util::Quote(name),
                                                 "' (expected serial, parallel)"));
}

absl::Status CheckSerialExecution(ExecutionModel execution, absl::string_view planner,
                                  SerialReliance reliance) {
  if (execution == ExecutionModel::kSerial) return absl::OkStatus();
  switch (reliance) {
    case SerialReliance::kOffsets:
      return absl::InvalidArgumentError(absl::StrCat(
          planner,
          " places offsets over serial lifetimes; for a parallel executor use memonger-dag (auto "
          "does so by itself)"));
    case SerialReliance::kInterference:
      return absl::InvalidArgumentError(absl::StrCat(
          planner,
          " (memonger's optimize_interference) shares along one serial op order and is not safe "
          "for the parallel execution model; use memonger-dag or --execution serial"));
    case SerialReliance::kFastPass:
      return absl::InvalidArgumentError(absl::StrCat(
          planner,
          " (memonger's optimize_inference_fast) is for simple nets run in one serial order; "
          "use memonger-dag for a parallel executor"));
  }
  return absl::OkStatus();
}

}  // namespace memonger

// Whether an ONNX BatchNormalization op normalises with the batch's statistics (training) or
// with its input_mean/input_var (inference). The answer moved between opsets, and the graph
// does not record the opset, so the schema, the CPU kernel and the gradient builder ask this one
// function and cannot disagree:
//
//   opset 14, 15: attribute training_mode (default 0); outputs Y, [running_mean, running_var]
//                 in training mode, Y alone otherwise ("extra outputs are invalid")
//   opset 7, 9:   no mode attribute: training mode has all outputs (Y, mean, var, saved_mean,
//                 saved_var), test mode Y alone, so more than one output means training
//   opset 1, 6:   attribute is_test (default 0: training)
//
//   MG_ASSIGN_OR_RETURN(bool training,
//                       BatchNormalizationTrains(training_mode, is_test, op.outputs.size()));
//
// training_mode wins when both attributes are given (no ONNX opset has both; a net written by
// hand might). The gradient builder gives a training op the two saved outputs of the opset-9
// form (saved_mean, saved_var) even when it has training_mode: our schema accepts up to five
// outputs whatever the attribute (docs/deviations.md).
#ifndef MEMONGER_GRAPH_BATCH_NORMALIZATION_MODE_H_
#define MEMONGER_GRAPH_BATCH_NORMALIZATION_MODE_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"

namespace memonger::graph {

// True for training mode. `training_mode` and `is_test`: the attributes' values when present.
// InvalidArgument (a message without the op's name; callers add it) when inference mode comes
// with more than one output, or when num_outputs is outside [1, 5].
absl::StatusOr<bool> BatchNormalizationTrains(std::optional<int64_t> training_mode,
                                              std::optional<int64_t> is_test, int num_outputs);

}  // namespace memonger::graph

#endif  // MEMONGER_GRAPH_BATCH_NORMALIZATION_MODE_H_

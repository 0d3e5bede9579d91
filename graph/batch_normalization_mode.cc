#include "graph/batch_normalization_mode.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace memonger::graph {

absl::StatusOr<bool> BatchNormalizationTrains(std::optional<int64_t> training_mode,
                                              std::optional<int64_t> is_test, int num_outputs) {
  if (num_outputs < 1 || num_outputs > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("has 1 to 5 outputs (Y, running_mean, running_var, saved_mean, saved_var), "
                     "got ", num_outputs));
  }
  bool training;
  const char* because;
  if (training_mode.has_value()) {
    training = *training_mode != 0;
    because = training ? "training_mode=1" : "training_mode=0";
  } else if (is_test.has_value()) {
    training = *is_test == 0;
    because = training ? "is_test=0" : "is_test=1";
  } else {
    // Opset 7 and 9: only training mode has the outputs after Y.
    return num_outputs > 1;
  }
  if (!training && num_outputs > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "in inference mode (", because, ") it has one output (Y), got ", num_outputs,
        "; running and saved statistics exist only in training mode"));
  }
  return training;
}

}  // namespace memonger::graph

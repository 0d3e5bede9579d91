// BatchNormalizationTrains (graph/batch_normalization_mode.h): the mode of an ONNX
// BatchNormalization across opsets, and the output counts each mode allows.
#include "graph/batch_normalization_mode.h"

#include <optional>
#include <ostream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memonger::graph {
namespace {

using ::testing::HasSubstr;

struct ModeCase {
  const char* name;
  std::optional<int64_t> training_mode;
  std::optional<int64_t> is_test;
  int num_outputs;
  bool training;      // when `error` is empty
  const char* error;  // a substring of the InvalidArgument message, or ""
};

void PrintTo(const ModeCase& c, std::ostream* os) { *os << c.name; }

class BatchNormalizationModeTest : public ::testing::TestWithParam<ModeCase> {};

TEST_P(BatchNormalizationModeTest, DecidesTheModeOrRefuses) {
  const ModeCase& c = GetParam();
  absl::StatusOr<bool> training =
      BatchNormalizationTrains(c.training_mode, c.is_test, c.num_outputs);
  if (std::string(c.error).empty()) {
    ASSERT_TRUE(training.ok()) << training.status();
    EXPECT_EQ(*training, c.training);
  } else {
    ASSERT_FALSE(training.ok());
    EXPECT_EQ(training.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(training.status().message()), HasSubstr(c.error));
  }
}

constexpr std::nullopt_t kAbsent = std::nullopt;

INSTANTIATE_TEST_SUITE_P(
    Opsets, BatchNormalizationModeTest,
    ::testing::Values(
        // Opset 14, 15: training_mode.
        ModeCase{"training_mode_1_y_only", 1, kAbsent, 1, true, ""},
        ModeCase{"training_mode_1_running", 1, kAbsent, 3, true, ""},
        ModeCase{"training_mode_1_saved_added", 1, kAbsent, 5, true, ""},
        ModeCase{"training_mode_0", 0, kAbsent, 1, false, ""},
        ModeCase{"training_mode_0_extra_outputs", 0, kAbsent, 3, false,
                 "in inference mode (training_mode=0) it has one output (Y), got 3"},
        // Opset 7, 9: the outputs decide.
        ModeCase{"no_attribute_y_only", kAbsent, kAbsent, 1, false, ""},
        ModeCase{"no_attribute_five_outputs", kAbsent, kAbsent, 5, true, ""},
        ModeCase{"no_attribute_two_outputs", kAbsent, kAbsent, 2, true, ""},
        // Opset 1, 6: is_test.
        ModeCase{"is_test_0", kAbsent, 0, 5, true, ""},
        ModeCase{"is_test_0_y_only", kAbsent, 0, 1, true, ""},
        ModeCase{"is_test_1", kAbsent, 1, 1, false, ""},
        ModeCase{"is_test_1_extra_outputs", kAbsent, 1, 5, false,
                 "in inference mode (is_test=1) it has one output (Y), got 5"},
        // training_mode wins over is_test.
        ModeCase{"training_mode_over_is_test", 1, 1, 3, true, ""},
        ModeCase{"six_outputs", 1, kAbsent, 6, false, "has 1 to 5 outputs"},
        ModeCase{"no_outputs", kAbsent, kAbsent, 0, false, "has 1 to 5 outputs"}),
    [](const ::testing::TestParamInfo<ModeCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace memonger::graph

// Helpers shared by tests: locating files, building small nets from text, running the CLI.
#ifndef MEMONGER_TESTS_TEST_SUPPORT_H_
#define MEMONGER_TESTS_TEST_SUPPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "graph/graph.h"

namespace memonger::testing {

// A path inside the source tree (env MEMONGER_SOURCE_DIR, else the configured tree).
std::string SourcePath(const std::string& relative);
// A fresh directory for this test's files.
std::string TempDir();
std::string WriteTempFile(const std::string& name, const std::string& contents);

// libonnx-testdata's test_Conv2d as an exporter with a dynamic batch axis writes it: no
// value_info, the first dim of the input and the output a dim_param "batch"; serialized.
// NotFound when libonnx-testdata is not installed.
absl::StatusOr<std::string> Conv2dWithSymbolicBatch();

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// A text NetDef -> Graph (no shape inference).
absl::StatusOr<graph::Graph> GraphFromText(const std::string& pbtxt);

struct CommandResult {
  int exit_code = -1;  // -1 ... when killed by a signal: the signal number is in `signal`
  int signal = 0;
  std::string out;
  std::string err;
};
// The optimize-net binary: env OPTIMIZE_NET, else the built one.
std::string OptimizeNetPath();
// Runs optimize-net (env OPTIMIZE_NET, else the built one) with `args` (quoted by the caller).
CommandResult RunOptimizeNet(const std::string& args);

// The names of a typed suite's instances: each type's static Name().
//   TYPED_TEST_SUITE(OffsetPlannersTest, Planners, testing::NamedTypes);
struct NamedTypes {
  template <typename T>
  static std::string GetName(int) {
    return std::string(T::Name());
  }
};

}  // namespace memonger::testing

#endif  // MEMONGER_TESTS_TEST_SUPPORT_H_

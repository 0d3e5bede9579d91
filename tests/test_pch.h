// The headers most test files include, compiled once for every test binary (tests/CMakeLists.txt,
// target_precompile_headers): gtest, gmock, abseil's status and strings, the graph and the
// planner registry. A third of a test file's compile time went to parsing them again.
#ifndef MEMONGER_TESTS_TEST_PCH_H_
#define MEMONGER_TESTS_TEST_PCH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "memonger/planner.h"

#endif  // MEMONGER_TESTS_TEST_PCH_H_

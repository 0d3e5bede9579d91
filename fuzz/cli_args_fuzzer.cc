// libFuzzer harness: optimize-net's command line. The input is split at NUL bytes into an
// argument vector and handed to tools/'s ParseCommandLine, which parses the flags and runs
// every check that needs no model (numbers, bindings, flag combinations, output paths). A
// usage error (exit 2) or --help/--version (exit 0) is a correct answer; a crash, a sanitizer
// report, an exit code other than 0 or 2, or a usage message that is not one line starting
// "optimize-net: " (CLI11's own parse errors excepted) is a finding.
//
// Planning itself is not run here: the loaders and the planners have harnesses of their own,
// and a fuzzed command line could legally ask for hours of search.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_support.h"
#include "tools/cli_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // command lines are short; keep each run fast
  std::vector<std::string> args = {"optimize-net"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 64) return 0;
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  std::ostringstream err;
  const std::variant<memonger::tools::Flags, int> parsed = memonger::tools::ParseCommandLine(
      static_cast<int>(argv.size()), argv.data(), out, err);
  if (const int* code = std::get_if<int>(&parsed)) {
    if (*code != memonger::tools::kExitOk && *code != memonger::tools::kExitUsage) {
      memonger::fuzz::Fail(absl::StrCat("ParseCommandLine returned exit code ", *code));
    }
    const std::string message = err.str();
    if (*code == memonger::tools::kExitUsage && absl::StartsWith(message, "optimize-net: ") &&
        message.find('\n') + 1 != message.size()) {
      memonger::fuzz::Fail(absl::StrCat("a usage error of more than one line: ", message));
    }
  }
  return 0;
}

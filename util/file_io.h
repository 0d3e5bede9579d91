// Files in and out under the limits of util/limits.h.
//
//   MG_ASSIGN_OR_RETURN(std::string bytes, util::ReadInputFile("model.onnx", limits));
//
//   util::OutputFiles outputs;
//   MG_RETURN_IF_ERROR(outputs.Add("--plan-json", "plan.json"));  // checked before any work
//   ... plan ...
//   outputs.Set("plan.json", json);
//   MG_RETURN_IF_ERROR(outputs.Commit());  // all files appear, or none
//
// Reading: a regular file larger than the limit is refused from its size alone, before a byte is
// read; anything else (a pipe, /dev/zero, /dev/urandom) is read in chunks and refused as soon as it
// passes the limit, so memory never grows past the limit plus one chunk.
//
// Writing: every file is first written beside its destination under a temporary name and renamed
// over it only when every file of the set was written, so a failure leaves no partial or stale
// output behind and an existing file untouched. Renames are atomic one by one; the set as a whole
// is not (a rename that fails after others succeeded is reported, and the renamed files stay).
#ifndef MEMONGER_UTIL_FILE_IO_H_
#define MEMONGER_UTIL_FILE_IO_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "util/limits.h"

namespace memonger::util {

// What a file is expected to hold. A text file with a NUL byte is refused at the chunk that holds
// it (so /dev/zero or a binary file named .csv fails at once, not at the size limit).
enum class FileContent { kBinary, kText };

// The whole file. NotFound (no such file), InvalidArgument (a directory, a loop of symbolic links,
// no permission, larger than limits.max_input_bytes, binary data in a text file), DataLoss (a read
// error); each message starts with the path.
absl::StatusOr<std::string> ReadInputFile(const std::string& path, const InputLimits& limits,
                                          FileContent content = FileContent::kBinary);

// The output files of one run, written together.
class OutputFiles {
 public:
  // Declares a file the run reads (the model, a saved plan), which no output may replace: a plan
  // written over its own model destroys the user's input. `what` names it in errors ("MODEL").
  void AddInput(absl::string_view what, const std::string& path);
  // Declares an output before any work: its directory must exist and be writable, the path must
  // not be a directory, and it must not name the file of an input or of another output (the same
  // file by any path: a link, ./, ..). `flag` names it in errors ("--plan-json p.json: ...").
  absl::Status Add(absl::string_view flag, const std::string& path);
  // The contents of a declared output (a path not declared is a programming error).
  void Set(const std::string& path, std::string contents);
  // Writes every output that has contents: temporary files first, then renames.
  absl::Status Commit();

 private:
  struct Output {
    std::string flag;
    std::string path;
    std::string contents;
    bool has_contents = false;
  };
  std::vector<Output> outputs_;
  std::vector<std::pair<std::string, std::string>> inputs_;  // (what, path)
};

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_FILE_IO_H_

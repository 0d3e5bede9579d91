// The limits on what memonger reads and how long it searches, in one place. Every loader and every
// flag check takes its numbers from here, so that a hostile file meets the same wall wherever it
// enters, and a user who needs more moves that wall once (--max-input-bytes).
//
//   util::InputLimits limits;                    // the defaults below
//   limits.max_input_bytes = 64 << 20;
//   MG_ASSIGN_OR_RETURN(std::string bytes, util::ReadInputFile(path, limits));
//
// Why each default is what it is:
// - input bytes: 2 GiB is protobuf's own ceiling for one message (NetDef and ONNX cannot be larger;
//   bigger ONNX models keep their weights in external data files); a records file of ten million
//   records is under 1 GiB.
// - nesting: NetDefs nest nets in arguments (a loop body, a recurrent step net) a handful of levels
//   deep, JSON plans and records three or four. 64 leaves room for real files and none for a file
//   built to exhaust the stack.
// - ops and values: 2^25 ops and 2^24 values (records: one value per record and up to two step
//   ops); a real model has far fewer, and a net this size already needs tens of GB to plan.
// - alignment: a power of two up to 1 GiB (GPU pages are 2 MiB; nothing asks for more), and all
//   values together at most 2^60 bytes, so that aligned sums of sizes never overflow int64.
// - time limit: finite, positive, at most a week; converted to a monotonic deadline.
// - unrolled nodes: an ONNX Loop with a constant trip count is planned as that many copies of
//   its body (graph/onnx/control_flow.h); 2^18 nodes hold a 50-node body over 4096 steps, and
//   libonnx still types such a model in seconds per folding round.
#ifndef MEMONGER_UTIL_LIMITS_H_
#define MEMONGER_UTIL_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace memonger::util {

inline constexpr int64_t kDefaultMaxInputBytes = (int64_t{2} << 30) - 1;
inline constexpr int kMaxNestingDepth = 64;
inline constexpr int64_t kMaxOps = int64_t{1} << 25;
inline constexpr int64_t kMaxValues = int64_t{1} << 24;
inline constexpr int64_t kMaxAlignment = int64_t{1} << 30;
inline constexpr int64_t kMaxUnrolledNodes = int64_t{1} << 18;
// All the values of one net together (1 EiB): with at most kMaxValues values each aligned to at
// most kMaxAlignment, every sum a plan forms stays below 2^63.
inline constexpr int64_t kMaxTotalBytes = int64_t{1} << 60;
inline constexpr double kMaxTimeLimitSeconds = 7 * 24 * 3600.0;
// A device's type and index (Caffe2's DeviceOption) are held in two bytes each
// (graph::Device): a 4M-op net holds one per op, and its liveness one per value.
inline constexpr int kMaxDeviceField = 32767;
// Threads of a parallel search (each holds its own copy of a planner's index).
inline constexpr int kMaxThreads = 256;
// Symbolic plans (memonger/symbolic/): the most alias classes one may place (its check keeps an
// items x items bit matrix: 20,000 items are 50 MB), the most sub-boxes a range is split into,
// and the most polynomials an arena formula keeps (a max of more is reported as too long).
inline constexpr int64_t kMaxSymbolicItems = 20000;
inline constexpr int kMaxSymbolicPieces = 64;
inline constexpr size_t kMaxFormulaPolynomials = 32;
// The longest value, op or file name quoted in an error message; longer names are cut with "...",
// so that a hostile name cannot make a message of megabytes.
inline constexpr size_t kMaxQuotedChars = 200;
// --caffe2-bugs replays Caffe2's recursive DFS as Caffe2 wrote it: one call frame per op on the
// path. 20,000 frames stay far inside an 8 MiB stack; deeper nets get ResourceExhausted (the
// memonger-dag planner, with an explicit stack, plans them).
inline constexpr int kMaxCaffe2RecursionDepth = 20000;
// The stack the replay recurses on (util::RunWithStack): room for that depth with sanitizer-sized
// frames; reserved, not touched beyond the depth reached.
inline constexpr size_t kCaffe2StackBytes = size_t{512} << 20;

// The limits a loader applies to one input.
struct InputLimits {
  int64_t max_input_bytes = kDefaultMaxInputBytes;
  int max_nesting_depth = kMaxNestingDepth;
};

// An input of `bytes` bytes from `source_name` within limits.max_input_bytes; InvalidArgument
// naming the source and both numbers otherwise.
absl::Status CheckInputSize(int64_t bytes, const InputLimits& limits,
                            absl::string_view source_name);
// Protobuf parses at most 2 GiB - 1 bytes (an int) per message.
absl::Status CheckProtobufSize(int64_t bytes, absl::string_view source_name);

// Alignment: a power of two in [1, kMaxAlignment]. `what` names it in the error ("--alignment",
// "plan.json: alignment").
absl::Status CheckAlignment(int64_t alignment, absl::string_view what);

// A time limit in seconds: finite, > 0 and at most kMaxTimeLimitSeconds. Returns it as a duration
// (a deadline is then absl::Now() + it, compared on a monotonic clock by the caller).
absl::StatusOr<absl::Duration> CheckTimeLimit(double seconds, absl::string_view what);

// A thread count in [1, kMaxThreads]. `what` names it in the error ("--threads").
absl::Status CheckThreads(int64_t threads, absl::string_view what);

// JSON text nested no deeper than `max_depth` arrays and objects (a scan of the brackets outside
// strings, O(bytes)): parsing and printing a JSON value recurse once per level.
absl::Status CheckJsonNesting(absl::string_view text, int max_depth);

// `text` for an error message: itself when short, else its first kMaxQuotedChars characters and
// "... (N characters)". Control characters, and bytes that are not UTF-8, are shown escaped
// (\xHH) so a message stays one line of text.
std::string Quote(absl::string_view text);
// `text` with control characters and bytes that are not UTF-8 escaped (\n, \xHH), whole: for
// a message as printed (its names may come from a file).
std::string EscapeAsText(absl::string_view text);

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_LIMITS_H_

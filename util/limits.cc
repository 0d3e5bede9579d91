#include "util/limits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace memonger::util {

absl::Status CheckInputSize(int64_t bytes, const InputLimits& limits,
                            absl::string_view source_name) {
  if (bytes <= limits.max_input_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Quote(source_name), ": ", bytes, " bytes, more than the input limit of ",
                   limits.max_input_bytes, " (raise it with --max-input-bytes)"));
}

absl::Status CheckProtobufSize(int64_t bytes, absl::string_view source_name) {
  if (bytes <= std::numeric_limits<int>::max()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Quote(source_name), ": ", bytes,
                   " bytes, more than a protobuf message can hold (2 GiB - 1); "
                   "keep large weights in "
                   "external data files"));
}

absl::Status CheckAlignment(int64_t alignment, absl::string_view what) {
  if (alignment < 1 || alignment > kMaxAlignment || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", alignment, " is not a power of two between 1 and 2^30 (1 GiB)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> CheckTimeLimit(double seconds, absl::string_view what) {
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxTimeLimitSeconds) {
    // %g: a short message whatever the number (never the largest double in full).
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %g: give seconds greater than 0 and at most %g (a week)", what, seconds,
                        kMaxTimeLimitSeconds));
  }
  return absl::Seconds(seconds);
}

absl::Status CheckThreads(int64_t threads, absl::string_view what) {
  if (threads < 1 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %d: give a thread count from 1 to %d", what, threads, kMaxThreads));
  }
  return absl::OkStatus();
}

absl::Status CheckJsonNesting(absl::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(
            absl::StrCat("nested more than ", max_depth, " levels deep (at byte ", i, ")"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

std::string Quote(absl::string_view text) {
  std::string out;
  const size_t shown = std::min(text.size(), kMaxQuotedChars);
  out.reserve(shown + 32);
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (shown < text.size()) absl::StrAppend(&out, "... (", text.size(), " characters)");
  return out;
}

}  // namespace memonger::util

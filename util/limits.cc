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

namespace {

// The length of the well-formed UTF-8 sequence starting at text[i] (a byte >= 0x80), or 0:
// no overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629).
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = at(i);
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

std::string EscapeAsText(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const size_t n = Utf8SequenceLength(text, i); n > 0) {
      out.append(text.data() + i, n);  // a valid UTF-8 character: names may be in any script
      i += n - 1;
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);  // not UTF-8: a terminal would garble it
    }
  }
  return out;
}

std::string Quote(absl::string_view text) {
  // Cut at a character boundary: a UTF-8 sequence split by the cut would show as bytes.
  // (A sequence is at most 4 bytes: no further back than 3, whatever bytes the name holds.)
  size_t shown = std::min(text.size(), kMaxQuotedChars);
  for (int back = 0; back < 3 && shown < text.size() && shown > 0 &&
                     (static_cast<unsigned char>(text[shown]) & 0xc0) == 0x80;
       ++back) {
    --shown;
  }
  std::string out = EscapeAsText(text.substr(0, shown));
  if (shown < text.size()) absl::StrAppend(&out, "... (", text.size(), " characters)");
  return out;
}

}  // namespace memonger::util

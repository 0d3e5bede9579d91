// Byte counts for people: formatting ("7.78 GiB") and parsing ("80GiB", "512MiB", "1e9").
#ifndef MEMONGER_UTIL_BYTES_H_
#define MEMONGER_UTIL_BYTES_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace memonger::util {

// "0 B", "512 B", "1.50 KiB", "7.78 GiB" (binary units, three significant digits).
std::string FormatBytes(int64_t bytes);

// Parses a byte count: a non-negative integer or decimal with an optional unit
// B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), case-insensitive,
// spaces allowed before the unit. Exact for plain decimals, rounded down to whole bytes (the
// counts are limits: 1023.6 bytes hold 1023); up to 2^63 - 1. Errors name the text.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text);

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_BYTES_H_

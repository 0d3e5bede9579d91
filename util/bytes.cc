#include "util/bytes.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/limits.h"

namespace memonger::util {

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024 && bytes > -1024) return absl::StrCat(bytes, " B");
  double scaled = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(scaled) >= 1024.0 && unit < 6) {
    scaled /= 1024.0;
    ++unit;
  }
  const int decimals = std::fabs(scaled) >= 100 ? 1 : 2;
  return absl::StrFormat("%.*f %s", decimals, scaled, kUnits[unit]);
}

absl::StatusOr<int64_t> ParseBytes(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t number_end = 0;
  while (number_end < s.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(s[number_end])) || s[number_end] == '.' ||
          s[number_end] == 'e' || s[number_end] == 'E' || s[number_end] == '+')) {
    // 'e' only counts as an exponent when a digit or sign follows.
    if ((s[number_end] == 'e' || s[number_end] == 'E') &&
        (number_end + 1 >= s.size() ||
         !(absl::ascii_isdigit(static_cast<unsigned char>(s[number_end + 1])) ||
           s[number_end + 1] == '+'))) {
      break;
    }
    ++number_end;
  }
  const absl::string_view number = s.substr(0, number_end);
  const std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s.substr(number_end)));
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value) || !std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid byte count '", Quote(text), "': expected e.g. 1048576, 512MiB or 80GiB"));
  }
  double multiplier = 0;
  if (unit.empty() || unit == "b") multiplier = 1;
  else if (unit == "kb" || unit == "k") multiplier = 1e3;
  else if (unit == "mb" || unit == "m") multiplier = 1e6;
  else if (unit == "gb" || unit == "g") multiplier = 1e9;
  else if (unit == "tb" || unit == "t") multiplier = 1e12;
  else if (unit == "kib") multiplier = 1024.0;
  else if (unit == "mib") multiplier = 1024.0 * 1024;
  else if (unit == "gib") multiplier = 1024.0 * 1024 * 1024;
  else if (unit == "tib") multiplier = 1024.0 * 1024 * 1024 * 1024;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid byte count '", Quote(text), "': unknown unit '", Quote(unit),
                     "' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"));
  }
  const double bytes = std::round(value * multiplier);
  if (bytes >= 9.2e18) {
    return absl::InvalidArgumentError(absl::StrCat("byte count '", Quote(text), "' does not fit in 64 bits"));
  }
  return static_cast<int64_t>(bytes);
}

}  // namespace memonger::util

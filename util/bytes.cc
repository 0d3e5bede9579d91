#include "util/bytes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

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
  int64_t multiplier = 0;
  if (unit.empty() || unit == "b") multiplier = 1;
  else if (unit == "kb" || unit == "k") multiplier = 1000;
  else if (unit == "mb" || unit == "m") multiplier = 1000 * 1000;
  else if (unit == "gb" || unit == "g") multiplier = 1000 * 1000 * 1000;
  else if (unit == "tb" || unit == "t") multiplier = int64_t{1000} * 1000 * 1000 * 1000;
  else if (unit == "kib") multiplier = 1024;
  else if (unit == "mib") multiplier = 1024 * 1024;
  else if (unit == "gib") multiplier = 1024 * 1024 * 1024;
  else if (unit == "tib") multiplier = int64_t{1024} * 1024 * 1024 * 1024;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid byte count '", Quote(text), "': unknown unit '", Quote(unit),
                     "' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"));
  }
  const auto too_large = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("byte count '", Quote(text), "' does not fit in 64 bits"));
  };
  // Exactly, in 128 bits (a double rounds 2^63 - 1 up, out of range, 0.3 GB below 300000000
  // and 1e12 to a byte either side): whole.fraction x 10^exponent x unit, rounded down (a
  // budget or a size limit of 1023.6 bytes holds 1023 bytes, not 1024). Fraction digits past
  // the 18th are dropped (below a millionth of a byte per TiB).
  using U128 = unsigned __int128;
  constexpr U128 kMax = static_cast<U128>(std::numeric_limits<int64_t>::max());
  U128 whole = 0;
  U128 fraction = 0;
  U128 scale = 1;
  int exponent = 0;
  enum { kWhole, kFraction, kExponent } part = kWhole;
  for (const char c : number) {
    if (c == '.') {
      part = kFraction;
    } else if (c == 'e' || c == 'E') {
      part = kExponent;
    } else if (c == '+') {
      continue;  // the exponent's sign (SimpleAtod checked the form)
    } else if (part == kWhole) {
      whole = whole * 10 + static_cast<unsigned>(c - '0');
      if (whole > kMax) return too_large();
    } else if (part == kFraction) {
      if (scale < static_cast<U128>(1000000000000000000ULL)) {
        fraction = fraction * 10 + static_cast<unsigned>(c - '0');
        scale *= 10;
      }
    } else {
      exponent = std::min(exponent * 10 + (c - '0'), 1000);
    }
  }
  // whole.fraction = numerator / scale; each power of ten multiplies the numerator. Past
  // kMax x scale the count is too large whatever the unit (at least 1).
  U128 numerator = whole * scale + fraction;
  for (int k = 0; k < exponent; ++k) {
    numerator *= 10;
    if (numerator > kMax * scale) return too_large();
  }
  const U128 unit_bytes = static_cast<U128>(multiplier);
  const U128 bytes = numerator / scale * unit_bytes + numerator % scale * unit_bytes / scale;
  if (bytes > kMax) return too_large();
  return static_cast<int64_t>(bytes);
}

}  // namespace memonger::util

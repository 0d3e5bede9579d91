// Overflow-checked int64 arithmetic for byte and element counts. A shape whose byte size does
// not fit in int64 is an error naming the value, never a wrapped number.
#ifndef MEMONGER_UTIL_CHECKED_MATH_H_
#define MEMONGER_UTIL_CHECKED_MATH_H_

#include <cstdint>
#include <optional>

namespace memonger::util {

inline std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// Rounds `bytes` (>= 0) up to a multiple of `alignment` (> 0); nullopt on overflow.
inline std::optional<int64_t> CheckedAlignUp(int64_t bytes, int64_t alignment) {
  const int64_t remainder = bytes % alignment;
  if (remainder == 0) return bytes;
  return CheckedAdd(bytes, alignment - remainder);
}

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_CHECKED_MATH_H_

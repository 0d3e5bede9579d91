// A deadline `seconds` after `start` on the monotonic clock, the seconds cut to 10^9 (32 years):
// steady_clock counts nanoseconds in 64 bits, so a limit of 10^10 s or infinity would overflow
// into the past, and a search given it would stop at once.
#ifndef MEMONGER_UTIL_DEADLINE_H_
#define MEMONGER_UTIL_DEADLINE_H_

#include <algorithm>
#include <chrono>

namespace memonger::util {

inline constexpr double kMaxDeadlineSeconds = 1e9;

inline std::chrono::steady_clock::time_point DeadlineAfter(
    std::chrono::steady_clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(std::min(seconds, kMaxDeadlineSeconds)));
}

// `share` of the time from `now` to `deadline` (none where it has passed), as a duration of the
// clock: what a step gets of what is left.
inline std::chrono::steady_clock::duration ShareOfTimeLeft(
    std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point deadline,
    double share) {
  if (deadline <= now) return std::chrono::steady_clock::duration::zero();
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>((deadline - now) * share);
}

}  // namespace memonger::util

#endif  // MEMONGER_UTIL_DEADLINE_H_

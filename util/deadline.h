// Time limits on the monotonic clock. A Deadline is a limit as the call that owns it set it: when
// it started and how long it runs. The steps below it get a share of it, measured from the same
// start (Share, EndOfShare), or a share of what is left (ShareOfTimeLeft), as
// memonger/time_shares.h names them, rather than starting a clock of their own.
//
// Every moment is cut to 10^9 s (32 years) after its start: steady_clock counts nanoseconds in
// 64 bits, so a limit of 10^10 s or infinity would overflow into the past, and a search given it
// would stop at once.
#ifndef MEMONGER_UTIL_DEADLINE_H_
#define MEMONGER_UTIL_DEADLINE_H_

#include <algorithm>
#include <chrono>

namespace memonger::util {

inline constexpr double kMaxDeadlineSeconds = 1e9;

// The moment `seconds` after `start`.
inline std::chrono::steady_clock::time_point DeadlineAfter(
    std::chrono::steady_clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(std::min(seconds, kMaxDeadlineSeconds)));
}

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `limit_seconds` from `start`; a negative or NaN limit is the caller's to refuse (its
  // moments then lie at or before the start).
  Deadline(Clock::time_point start, double limit_seconds)
      : start_(start), limit_seconds_(limit_seconds) {}

  Clock::time_point start() const { return start_; }
  double limit_seconds() const { return limit_seconds_; }
  // When the whole limit ends.
  Clock::time_point end() const { return DeadlineAfter(start_, limit_seconds_); }
  // When `share` of the limit ends (a share above 1: past the limit).
  Clock::time_point EndOfShare(double share) const {
    return DeadlineAfter(start_, limit_seconds_ * share);
  }
  // `share` of this limit, from the same start.
  Deadline Share(double share) const { return Deadline(start_, limit_seconds_ * share); }
  // The seconds since the start at `now`, and those of the limit not yet spent (0 once it has
  // passed).
  double SecondsSpent(Clock::time_point now = Clock::now()) const {
    return std::chrono::duration<double>(now - start_).count();
  }
  double SecondsLeft(Clock::time_point now = Clock::now()) const {
    return std::max(0.0, limit_seconds_ - SecondsSpent(now));
  }

 private:
  Clock::time_point start_;
  double limit_seconds_;
};

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

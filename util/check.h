// MG_CHECK: internal invariants only. User input never reaches a check: it gets a Status.
#ifndef MEMONGER_UTIL_CHECK_H_
#define MEMONGER_UTIL_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace memonger::util::internal {
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition) {
  std::fprintf(stderr, "%s:%d: internal invariant failed: %s\n", file, line, condition);
  std::abort();
}
}  // namespace memonger::util::internal

#define MG_CHECK(condition)                                                      \
  do {                                                                           \
    if (!(condition)) {                                                          \
      ::memonger::util::internal::CheckFailed(__FILE__, __LINE__, #condition);   \
    }                                                                            \
  } while (false)

#endif  // MEMONGER_UTIL_CHECK_H_

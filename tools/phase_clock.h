// The CLI's --timings: wall time of each phase of one run (load, plan, verify, outputs, report),
// printed to stderr at the end so that a whole-run benchmark can say where its seconds go.
#ifndef MEMONGER_TOOLS_PHASE_CLOCK_H_
#define MEMONGER_TOOLS_PHASE_CLOCK_H_

#include <chrono>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace memonger::tools {

class PhaseClock {
 public:
  // Ends the phase running since the last Mark (or construction) and names it.
  void Mark(std::string phase) {
    const Clock::time_point now = Clock::now();
    phases_.emplace_back(std::move(phase), std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

  // One line: "timings: load 1.234 s, plan 0.567 s, ..., total 2.000 s".
  void Print(std::ostream& out) const {
    std::string line = "optimize-net: timings:";
    double total = 0;
    for (const auto& [phase, seconds] : phases_) {
      absl::StrAppendFormat(&line, " %s %.3f s,", phase, seconds);
      total += seconds;
    }
    absl::StrAppendFormat(&line, " total %.3f s\n", total);
    out << line;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_ = Clock::now();
  std::vector<std::pair<std::string, double>> phases_;
};

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_PHASE_CLOCK_H_

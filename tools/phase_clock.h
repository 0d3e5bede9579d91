// The CLI's --timings: wall time of each phase of one run (load, plan, verify, outputs, report)
// and the process's peak resident memory when it ended (Linux's VmHWM; omitted elsewhere),
// printed to stderr at the end so that a whole-run benchmark can say where its seconds and
// bytes go.
#ifndef MEMONGER_TOOLS_PHASE_CLOCK_H_
#define MEMONGER_TOOLS_PHASE_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <fstream>
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
    phases_.push_back({std::move(phase), std::chrono::duration<double>(now - last_).count(),
                       PeakResidentKiB()});
    last_ = now;
  }

  // One line: "timings: load 1.234 s (peak 512 MiB), plan 0.567 s (peak 640 MiB), ...,
  // total 2.000 s".
  void Print(std::ostream& out) const {
    std::string line = "optimize-net: timings:";
    double total = 0;
    for (const Phase& phase : phases_) {
      absl::StrAppendFormat(&line, " %s %.3f s", phase.name, phase.seconds);
      if (phase.peak_kib > 0) absl::StrAppendFormat(&line, " (peak %d MiB)", phase.peak_kib / 1024);
      line += ",";
      total += phase.seconds;
    }
    absl::StrAppendFormat(&line, " total %.3f s\n", total);
    out << line;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Phase {
    std::string name;
    double seconds = 0;
    int64_t peak_kib = 0;  // 0: unknown
  };

  // The high-water mark of resident memory so far, from /proc/self/status; 0 where there is none.
  static int64_t PeakResidentKiB() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
      if (key == "VmHWM:") {
        int64_t kib = 0;
        status >> kib;
        return kib;
      }
      status.ignore(1 << 16, '\n');
    }
    return 0;
  }

  Clock::time_point last_ = Clock::now();
  std::vector<Phase> phases_;
};

}  // namespace memonger::tools

#endif  // MEMONGER_TOOLS_PHASE_CLOCK_H_

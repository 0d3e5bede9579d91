#include "memonger/offsets/offset_problem.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/checked_math.h"

namespace memonger {
namespace {

int64_t SaturatingAdd(int64_t a, int64_t b) {
  const auto sum = util::CheckedAdd(a, b);
  if (sum) return *sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

std::string Describe(const OffsetProblem& problem, const std::vector<int64_t>& offsets,
                     size_t i) {
  const OffsetItem& item = problem.items[i];
  return absl::StrCat("item ", i, " (bytes [", offsets[i], ", ", offsets[i] + item.bytes,
                      "), steps [", item.first_step, ", ", item.last_step, "])");
}

}  // namespace

int64_t Duration(const OffsetProblem& problem, const OffsetItem& item) {
  if (problem.step_times.empty()) return int64_t{item.last_step} - item.first_step + 1;
  return problem.step_times[item.last_step] - problem.step_times[item.first_step] + 1;
}

int64_t OffsetLowerBound(const OffsetProblem& problem) {
  const size_t n = problem.items.size();
  bool dense = problem.num_steps >= 0 &&
               static_cast<int64_t>(problem.num_steps) <= 4 * static_cast<int64_t>(n) + 64;
  for (const OffsetItem& item : problem.items) {
    if (!dense) break;
    dense = item.first_step >= 0 && item.first_step <= item.last_step &&
            item.last_step < problem.num_steps;
  }
  int64_t best = 0;
  if (dense) {  // a difference array over the steps: O(n + steps)
    std::vector<int64_t> delta(static_cast<size_t>(problem.num_steps) + 1, 0);
    for (const OffsetItem& item : problem.items) {
      delta[item.first_step] = SaturatingAdd(delta[item.first_step], item.bytes);
      delta[item.last_step + 1] = SaturatingAdd(delta[item.last_step + 1], -item.bytes);
    }
    int64_t live = 0;
    for (int step = 0; step < problem.num_steps; ++step) {
      live = SaturatingAdd(live, delta[step]);
      best = std::max(best, live);
    }
    return best;
  }
  // Sparse or unusual steps: sorted events, O(n log n); ends (at last_step + 1) before starts.
  std::vector<std::pair<int64_t, int64_t>> events;  // (time, +bytes or -bytes)
  events.reserve(2 * n);
  for (const OffsetItem& item : problem.items) {
    events.emplace_back(item.first_step, item.bytes);
    events.emplace_back(static_cast<int64_t>(item.last_step) + 1, -item.bytes);
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  for (size_t e = 0; e < events.size(); ++e) {
    live = SaturatingAdd(live, events[e].second);
    if (e + 1 == events.size() || events[e + 1].first != events[e].first) {
      best = std::max(best, live);
    }
  }
  return best;
}

absl::Status CheckOffsetSolution(const OffsetProblem& problem,
                                 const std::vector<int64_t>& offsets) {
  const size_t n = problem.items.size();
  if (offsets.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the solution has ", offsets.size(), " offsets for ", n, " items"));
  }
  for (size_t i = 0; i < n; ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.first_step > item.last_step) {
      return absl::InvalidArgumentError(absl::StrCat("item ", i, " has lifetime [",
                                                     item.first_step, ", ", item.last_step,
                                                     "] with first > last"));
    }
    if (item.bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("item ", i, " has negative bytes ", item.bytes));
    }
    if (offsets[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("item ", i, " has negative offset ", offsets[i]));
    }
    if (item.alignment < 1 || offsets[i] % item.alignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat("item ", i, ": offset ", offsets[i],
                                                     " is not a multiple of its alignment ",
                                                     item.alignment));
    }
    if (!util::CheckedAdd(offsets[i], item.bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("item ", i, ": offset ", offsets[i], " + bytes overflows int64"));
    }
  }

  // Sweep over time in first_step order. `active` holds the items live at the current step,
  // keyed by offset; it stays pairwise disjoint in bytes (the first overlap is reported), so a
  // new item can only overlap the active item with the highest offset below its end.
  std::vector<size_t> by_first(n);
  std::iota(by_first.begin(), by_first.end(), 0);
  std::sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) {
    const int fa = problem.items[a].first_step;
    const int fb = problem.items[b].first_step;
    return fa != fb ? fa < fb : a < b;
  });
  using Ending = std::pair<int, size_t>;  // (last_step, item)
  std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> endings;
  std::set<std::pair<int64_t, size_t>> active;  // (offset, item)
  for (size_t i : by_first) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0) continue;  // occupies no byte
    while (!endings.empty() && endings.top().first < item.first_step) {
      const size_t done = endings.top().second;
      endings.pop();
      active.erase({offsets[done], done});
    }
    const int64_t end = offsets[i] + item.bytes;
    auto above = active.lower_bound({end, 0});
    if (above != active.begin()) {
      const size_t below = std::prev(above)->second;
      if (offsets[below] + problem.items[below].bytes > offsets[i]) {
        const size_t a = std::min(below, i);
        const size_t b = std::max(below, i);
        return absl::InvalidArgumentError(absl::StrCat(
            Describe(problem, offsets, a), " and ", Describe(problem, offsets, b),
            " overlap in bytes while both are live at step ", item.first_step));
      }
    }
    active.emplace(offsets[i], i);
    endings.emplace(item.last_step, i);
  }
  return absl::OkStatus();
}

}  // namespace memonger

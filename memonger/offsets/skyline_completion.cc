#include "memonger/offsets/skyline_completion.h"

#include <algorithm>
#include <optional>
#include <queue>
#include <utility>

#include "util/check.h"
#include "util/checked_math.h"

namespace memonger {
namespace {

// Range maximum and range assignment over the steps. Assignments only ever raise a range to a
// value at least its maximum, so a pending assignment on a node is the node's whole maximum.
class Skyline {
 public:
  explicit Skyline(const std::vector<int64_t>& tops) : size_(1) {
    while (size_ < static_cast<int>(tops.size())) size_ *= 2;
    max_.assign(2 * static_cast<size_t>(size_), 0);
    pending_.assign(2 * static_cast<size_t>(size_), -1);
    std::copy(tops.begin(), tops.end(), max_.begin() + size_);
    for (int node = size_ - 1; node >= 1; --node) {
      max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
    }
  }

  int64_t Max(int first, int last) { return Max(1, 0, size_ - 1, first, last); }
  void Assign(int first, int last, int64_t value) { Assign(1, 0, size_ - 1, first, last, value); }

 private:
  void Push(int node) {
    if (pending_[node] < 0) return;
    for (int child : {2 * node, 2 * node + 1}) {
      max_[child] = pending_[node];
      pending_[child] = pending_[node];
    }
    pending_[node] = -1;
  }
  int64_t Max(int node, int lo, int hi, int first, int last) {
    if (last < lo || hi < first) return 0;
    if (first <= lo && hi <= last) return max_[node];
    Push(node);
    const int mid = lo + (hi - lo) / 2;
    return std::max(Max(2 * node, lo, mid, first, last), Max(2 * node + 1, mid + 1, hi, first, last));
  }
  void Assign(int node, int lo, int hi, int first, int last, int64_t value) {
    if (last < lo || hi < first) return;
    if (first <= lo && hi <= last) {
      max_[node] = value;
      pending_[node] = value;
      return;
    }
    Push(node);
    const int mid = lo + (hi - lo) / 2;
    Assign(2 * node, lo, mid, first, last, value);
    Assign(2 * node + 1, mid + 1, hi, first, last, value);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]);
  }

  int size_;
  std::vector<int64_t> max_;
  std::vector<int64_t> pending_;  // -1: none
};

}  // namespace

int64_t CompleteOnSkyline(const OffsetProblem& problem, absl::Span<const int> placed,
                          absl::Span<const int> not_placed, std::vector<int64_t>& offsets) {
  MG_CHECK(offsets.size() == problem.items.size());
  const int steps = problem.num_steps;
  // The placed items by first step (a counting sort), then a sweep: at each step the highest
  // top among the items live there, the ended ones dropped from the heap lazily.
  std::vector<int> starts_at(static_cast<size_t>(steps) + 1, 0);
  for (int i : placed) {
    if (problem.items[i].bytes > 0) ++starts_at[problem.items[i].first_step + 1];
  }
  for (int s = 0; s < steps; ++s) starts_at[s + 1] += starts_at[s];
  std::vector<int> by_start(static_cast<size_t>(starts_at[steps]));
  {
    std::vector<int> next(starts_at.begin(), starts_at.end() - 1);
    for (int i : placed) {
      if (problem.items[i].bytes > 0) by_start[next[problem.items[i].first_step]++] = i;
    }
  }
  int64_t height = 0;
  std::vector<int64_t> tops(steps, 0);
  std::priority_queue<std::pair<int64_t, int>> live;  // (top, last step)
  for (int s = 0; s < steps; ++s) {
    for (int k = starts_at[s]; k < starts_at[s + 1]; ++k) {
      const OffsetItem& item = problem.items[by_start[k]];
      live.emplace(offsets[by_start[k]] + item.bytes, item.last_step);
    }
    while (!live.empty() && live.top().second < s) live.pop();
    tops[s] = live.empty() ? 0 : live.top().first;
    height = std::max(height, tops[s]);
  }
  Skyline skyline(tops);
  for (int i : not_placed) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0) {
      offsets[i] = 0;
      continue;
    }
    const std::optional<int64_t> at =
        util::CheckedAlignUp(skyline.Max(item.first_step, item.last_step), item.alignment);
    const std::optional<int64_t> top =
        at.has_value() ? util::CheckedAdd(*at, item.bytes) : std::nullopt;
    // A top is at most the padded bytes of a chain of distinct items, each resting on the one
    // below, whose sum ValidateOffsetProblem bounds below 2^63.
    MG_CHECK(top.has_value());
    offsets[i] = *at;
    skyline.Assign(item.first_step, item.last_step, *top);
    height = std::max(height, *top);
  }
  return height;
}

}  // namespace memonger

#include "memonger/offsets/lane_stacking.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <queue>
#include <utility>

#include "util/check.h"
#include "util/checked_math.h"

namespace memonger {
namespace {

// Each item of `items` one above the other from `base`: the fallback where lanes would overflow.
int64_t StackOneByOne(const OffsetProblem& problem, absl::Span<const int> items, int64_t base,
                      std::vector<int64_t>& offsets) {
  int64_t top = base;  // every item's top is at most this
  for (int i : items) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0) {
      offsets[i] = 0;
      continue;
    }
    const std::optional<int64_t> at = util::CheckedAlignUp(top, item.alignment);
    MG_CHECK(at.has_value());  // REQUIRES: the padded sum fits
    offsets[i] = *at;
    top = *at + item.bytes;
  }
  return top;
}

int SizeClass(int64_t bytes) { return 63 - __builtin_clzll(static_cast<uint64_t>(bytes)); }

}  // namespace

int64_t StackInLanes(const OffsetProblem& problem, absl::Span<const int> items, int64_t base,
                     std::vector<int64_t>& offsets) {
  MG_CHECK(base >= 0 && offsets.size() == problem.items.size());
  std::vector<std::vector<int>> classes(64);
  for (int i : items) {
    const OffsetItem& item = problem.items[i];
    if (item.bytes == 0) {
      offsets[i] = 0;
    } else {
      classes[SizeClass(item.bytes)].push_back(i);
    }
  }
  // Lane of each item, and per class its lane count, lane height and alignment.
  std::vector<int> lane_of(problem.items.size(), -1);
  struct ClassLanes {
    int lanes = 0;
    int64_t height = 0;
    int64_t alignment = 1;
    bool one_by_one = false;  // stacked one above the other instead of in lanes
  };
  std::vector<ClassLanes> layout(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<int>& members = classes[c];
    if (members.empty()) continue;
    std::sort(members.begin(), members.end(), [&](int a, int b) {
      const OffsetItem& x = problem.items[a];
      const OffsetItem& y = problem.items[b];
      return x.first_step != y.first_step ? x.first_step < y.first_step : a < b;
    });
    using Busy = std::pair<int, int>;  // (last step, lane)
    std::priority_queue<Busy, std::vector<Busy>, std::greater<Busy>> busy;
    std::priority_queue<int, std::vector<int>, std::greater<int>> free_lanes;
    ClassLanes& lanes = layout[c];
    for (int i : members) {
      const OffsetItem& item = problem.items[i];
      while (!busy.empty() && busy.top().first < item.first_step) {
        free_lanes.push(busy.top().second);
        busy.pop();
      }
      int lane;
      if (free_lanes.empty()) {
        lane = lanes.lanes++;
      } else {
        lane = free_lanes.top();
        free_lanes.pop();
      }
      lane_of[i] = lane;
      busy.emplace(item.last_step, lane);
      lanes.height = std::max(lanes.height, item.bytes);
      lanes.alignment = std::max(lanes.alignment, item.alignment);
    }
  }
  // Every lane height and class start a multiple of the class's largest alignment: each
  // member's offset is then a multiple of its own (alignments are powers of two).
  // A class whose lanes would take more than its members one above the other (lanes as tall as
  // the largest member, each holding a smaller one: 3 lanes of 2,688 bytes for items of 2,508,
  // 2,688 and 2,256) is stacked that way instead, so that the whole stack never passes the
  // padded sum of its items: no completion is worse than no sharing at all.
  std::vector<int64_t> class_base(classes.size(), 0);
  int64_t top = base;
  for (size_t c = classes.size(); c-- > 0;) {
    ClassLanes& lanes = layout[c];
    if (lanes.lanes == 0) continue;
    const std::optional<int64_t> start = util::CheckedAlignUp(top, lanes.alignment);
    const std::optional<int64_t> height =
        util::CheckedAlignUp(lanes.height, lanes.alignment);
    std::optional<int64_t> size =
        height.has_value() ? util::CheckedMul(*height, lanes.lanes) : std::nullopt;
    // One above the other, each member rounded up to its own alignment: in descending
    // alignment (alignments are powers of two) every member then starts aligned, and the stack
    // takes exactly the sum of the members' padded bytes.
    std::optional<int64_t> stacked = 0;
    for (int i : classes[c]) {
      const OffsetItem& item = problem.items[i];
      const std::optional<int64_t> padded = util::CheckedAlignUp(item.bytes, item.alignment);
      stacked = stacked.has_value() && padded.has_value() ? util::CheckedAdd(*stacked, *padded)
                                                          : std::nullopt;
    }
    if (stacked.has_value() && (!size.has_value() || *stacked < *size)) {
      lanes.one_by_one = true;
      size = stacked;
      std::stable_sort(classes[c].begin(), classes[c].end(), [&](int a, int b) {
        return problem.items[a].alignment > problem.items[b].alignment;
      });
    }
    const std::optional<int64_t> end =
        start.has_value() && size.has_value() ? util::CheckedAdd(*start, *size) : std::nullopt;
    if (!end.has_value()) return StackOneByOne(problem, items, base, offsets);
    class_base[c] = *start;
    lanes.height = *height;
    top = *end;
  }
  // The height is the highest item's top (a lane is as tall as its largest item, rounded up).
  int64_t height = base;
  for (size_t c = 0; c < classes.size(); ++c) {
    int64_t next = class_base[c];  // for a class stacked one by one
    for (int i : classes[c]) {
      if (layout[c].one_by_one) {
        const OffsetItem& item = problem.items[i];
        offsets[i] = next;
        next += *util::CheckedAlignUp(item.bytes, item.alignment);  // summed above
      } else {
        offsets[i] = class_base[c] + lane_of[i] * layout[c].height;
      }
      height = std::max(height, offsets[i] + problem.items[i].bytes);
    }
  }
  return height;
}

}  // namespace memonger

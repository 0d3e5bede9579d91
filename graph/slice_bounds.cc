#include "graph/slice_bounds.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace memonger::graph {

absl::StatusOr<SliceBounds> NormalizeSlice(const std::vector<int64_t>& dims,
                                           const std::vector<int64_t>& starts,
                                           const std::vector<int64_t>& ends,
                                           std::vector<int64_t> axes,
                                           std::vector<int64_t> steps) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return absl::InvalidArgumentError("starts, ends, axes and steps must have one length");
  }
  SliceBounds b{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), dims};
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("axis ", a, " is outside rank ", rank));
    }
    if (a < 0) a += rank;
    if (seen[a]) return absl::InvalidArgumentError("an axis is sliced twice");
    seen[a] = true;
    const int64_t dim = dims[a];
    const int64_t st = steps[i];
    if (st == 0) return absl::InvalidArgumentError("a step is 0");
    // Clamped before adding dim, so that INT64_MIN and INT64_MAX never overflow.
    auto from_end = [dim](int64_t v) {
      v = std::clamp<int64_t>(v, -dim - 1, dim + 1);
      return v < 0 ? v + dim : v;
    };
    int64_t s = from_end(starts[i]);
    int64_t e = from_end(ends[i]);
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      b.count[a] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      b.count[a] = s > e ? (s - e - st - 1) / -st : 0;
    }
    b.first[a] = s;
    b.step[a] = st;
  }
  return b;
}

}  // namespace memonger::graph

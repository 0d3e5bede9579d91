#include "memonger/interval_index.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "util/check.h"
#include "util/checked_math.h"

namespace memonger {
namespace {

// REQUIRES: alignment is a power of two and the result fits (ValidateOffsetProblem bounds every
// offset a planner computes by the stacked worst case).
int64_t AlignUp(int64_t x, int64_t alignment) { return (x + alignment - 1) & ~(alignment - 1); }

// Adds `r` to a sorted list of disjoint, non-touching ranges, merging what it meets or touches.
void AddRange(std::vector<ByteRange>& list, ByteRange r) {
  if (list.empty() || list.back().end < r.begin) {  // the common case: on top
    list.push_back(r);
    return;
  }
  auto first = std::lower_bound(list.begin(), list.end(), r.begin,
                                [](const ByteRange& x, int64_t v) { return x.end < v; });
  auto last = first;
  while (last != list.end() && last->begin <= r.end) {
    r.begin = std::min(r.begin, last->begin);
    r.end = std::max(r.end, last->end);
    ++last;
  }
  if (first == last) {
    list.insert(first, r);
  } else {
    *first = r;
    list.erase(first + 1, last);
  }
}

}  // namespace

absl::Status ValidateOffsetProblem(const OffsetProblem& problem) {
  if (problem.num_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset problem: num_steps ", problem.num_steps, " is negative"));
  }
  int64_t worst = 0;
  for (size_t i = 0; i < problem.items.size(); ++i) {
    const OffsetItem& item = problem.items[i];
    if (item.first_step < 0 || item.last_step < item.first_step ||
        item.last_step >= problem.num_steps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "offset problem: item ", i, " has lifetime [", item.first_step, ", ", item.last_step,
          "], not inside [0, ", problem.num_steps, ") with first <= last"));
    }
    if (item.bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("offset problem: item ", i, " has negative bytes ", item.bytes));
    }
    if (item.alignment < 1 || (item.alignment & (item.alignment - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "offset problem: item ", i, " has alignment ", item.alignment,
          ", not a power of two >= 1"));
    }
    const auto padded = util::CheckedAdd(item.bytes, item.alignment - 1);
    const auto sum = padded ? util::CheckedAdd(worst, *padded) : std::nullopt;
    if (!sum) {
      return absl::InvalidArgumentError(
          "offset problem: the items stacked need more than 2^63 bytes");
    }
    worst = *sum;
  }
  return absl::OkStatus();
}

IntervalIndex::IntervalIndex(const OffsetProblem& problem) {
  // Elementary segments: between consecutive distinct boundaries first_step and last_step + 1.
  std::vector<int64_t> bounds;
  bounds.reserve(2 * problem.items.size());
  for (const OffsetItem& item : problem.items) {
    bounds.push_back(item.first_step);
    bounds.push_back(static_cast<int64_t>(item.last_step) + 1);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  num_segments_ = bounds.empty() ? 0 : static_cast<int>(bounds.size()) - 1;
  auto index_of = [&](int64_t step) {
    return static_cast<int>(std::lower_bound(bounds.begin(), bounds.end(), step) - bounds.begin());
  };
  first_segment_.resize(problem.items.size());
  last_segment_.resize(problem.items.size());
  for (size_t i = 0; i < problem.items.size(); ++i) {
    first_segment_[i] = index_of(problem.items[i].first_step);
    last_segment_[i] = index_of(static_cast<int64_t>(problem.items[i].last_step) + 1) - 1;
    MG_CHECK(first_segment_[i] <= last_segment_[i]);
  }
  int leaves = 1;
  while (leaves < num_segments_) leaves *= 2;
  nodes_.resize(2 * static_cast<size_t>(leaves));
}

void IntervalIndex::Clear() {
  for (int node : touched_) {
    nodes_[node].cover.clear();
    nodes_[node].below.clear();
    nodes_[node].touched = false;
  }
  touched_.clear();
}

void IntervalIndex::Insert(int item, int64_t offset, int64_t bytes) {
  MG_CHECK(item >= 0 && item < static_cast<int>(first_segment_.size()));
  if (bytes <= 0) return;
  InsertAt(1, 0, num_segments_ - 1, first_segment_[item], last_segment_[item],
           ByteRange{offset, offset + bytes});
}

void IntervalIndex::InsertAt(int node, int lo, int hi, int first, int last, ByteRange range) {
  Node& n = nodes_[node];
  if (!n.touched) {
    n.touched = true;
    touched_.push_back(node);
  }
  AddRange(n.below, range);
  if (first <= lo && hi <= last) {
    AddRange(n.cover, range);
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  if (first <= mid) InsertAt(2 * node, lo, mid, first, last, range);
  if (last > mid) InsertAt(2 * node + 1, mid + 1, hi, first, last, range);
}

void IntervalIndex::OccupiedDuring(int item, std::vector<ByteRange>& out) const {
  MG_CHECK(item >= 0 && item < static_cast<int>(first_segment_.size()));
  out.clear();
  CollectAt(1, 0, num_segments_ - 1, first_segment_[item], last_segment_[item], out);
  if (out.size() < 2) return;
  std::sort(out.begin(), out.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  size_t kept = 0;
  for (const ByteRange& r : out) {
    if (kept > 0 && r.begin <= out[kept - 1].end) {
      out[kept - 1].end = std::max(out[kept - 1].end, r.end);
    } else {
      out[kept++] = r;
    }
  }
  out.resize(kept);
}

void IntervalIndex::CollectAt(int node, int lo, int hi, int first, int last,
                              std::vector<ByteRange>& out) const {
  const Node& n = nodes_[node];
  if (!n.touched) return;  // nothing below this node either
  if (first <= lo && hi <= last) {
    out.insert(out.end(), n.below.begin(), n.below.end());
    return;
  }
  out.insert(out.end(), n.cover.begin(), n.cover.end());
  const int mid = lo + (hi - lo) / 2;
  if (first <= mid) CollectAt(2 * node, lo, mid, first, last, out);
  if (last > mid) CollectAt(2 * node + 1, mid + 1, hi, first, last, out);
}

const char* FitRuleName(FitRule rule) {
  switch (rule) {
    case FitRule::kBestFit: return "best-fit";
    case FitRule::kLowestOffset: return "lowest-offset";
  }
  return "best-fit";
}

int64_t ChooseOffset(const std::vector<ByteRange>& occupied, int64_t bytes, int64_t alignment,
                     FitRule rule) {
  int64_t gap_begin = 0;
  int64_t best = -1;
  int64_t best_size = std::numeric_limits<int64_t>::max();
  for (const ByteRange& r : occupied) {
    const int64_t offset = AlignUp(gap_begin, alignment);
    if (offset + bytes <= r.begin) {
      if (rule == FitRule::kLowestOffset) return offset;
      const int64_t size = r.begin - gap_begin;
      if (size < best_size) {
        best_size = size;
        best = offset;
        if (size == bytes) return best;  // no smaller gap can fit; later ones are higher
      }
    }
    gap_begin = r.end;
  }
  return best >= 0 ? best : AlignUp(gap_begin, alignment);
}

GreedyPlacer::GreedyPlacer(const OffsetProblem& problem) : problem_(problem), index_(problem) {}

OffsetSolution GreedyPlacer::Place(const std::vector<int>& order, FitRule rule) {
  return PlaceFrom(order, rule, 0, {});
}

OffsetSolution GreedyPlacer::PlaceFrom(const std::vector<int>& order, FitRule rule, int keep,
                                       std::vector<int64_t> offsets) {
  const int n = static_cast<int>(problem_.items.size());
  MG_CHECK(static_cast<int>(order.size()) == n);
  MG_CHECK(keep >= 0 && keep <= n);
  MG_CHECK(keep == 0 || static_cast<int>(offsets.size()) == n);
  offsets.resize(n, 0);
  index_.Clear();
  seen_.assign(n, false);
  OffsetSolution solution;
  for (int k = 0; k < n; ++k) {
    const int i = order[k];
    MG_CHECK(i >= 0 && i < n && !seen_[i]);  // a permutation
    seen_[i] = true;
    const OffsetItem& item = problem_.items[i];
    if (k >= keep) {
      if (item.bytes == 0) {
        offsets[i] = 0;
        continue;
      }
      index_.OccupiedDuring(i, scratch_);
      offsets[i] = ChooseOffset(scratch_, item.bytes, item.alignment, rule);
    }
    index_.Insert(i, offsets[i], item.bytes);
    solution.height = std::max(solution.height, offsets[i] + item.bytes);
  }
  solution.offsets = std::move(offsets);
  return solution;
}

}  // namespace memonger

#include "memonger/offsets/interval_index.h"

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
  if (!problem.step_times.empty()) {
    if (problem.step_times.size() != static_cast<size_t>(problem.num_steps)) {
      return absl::InvalidArgumentError(
          absl::StrCat("offset problem: ", problem.step_times.size(), " step times for ",
                       problem.num_steps, " steps"));
    }
    for (int s = 1; s < problem.num_steps; ++s) {
      if (problem.step_times[s] <= problem.step_times[s - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("offset problem: step times are not increasing at step ", s, " (",
                         problem.step_times[s - 1], ", then ", problem.step_times[s], ")"));
      }
    }
    if (problem.num_steps > 0 &&
        (problem.step_times.front() < -(int64_t{1} << 62) ||
         problem.step_times.back() > (int64_t{1} << 62))) {
      return absl::InvalidArgumentError("offset problem: step times beyond +-2^62");
    }
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

IntervalIndex::IntervalIndex(const OffsetProblem& problem, int path_depth) {
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
  tree_depth_ = 0;
  while (leaves < num_segments_) {
    leaves *= 2;
    ++tree_depth_;
  }
  path_depth_ = std::min(tree_depth_, path_depth);
  nodes_.resize(2 * static_cast<size_t>(leaves));
}

void IntervalIndex::Clear() {
  for (int node : touched_) {
    nodes_[node].cover.clear();
    nodes_[node].below.clear();
    nodes_[node].path.clear();
    nodes_[node].touched = false;
  }
  touched_.clear();
}

void IntervalIndex::Add(int node, std::vector<ByteRange> Node::*list, ByteRange range) {
  Node& n = nodes_[node];
  if (!n.touched) {
    n.touched = true;
    touched_.push_back(node);
  }
  AddRange(n.*list, range);
}

void IntervalIndex::Insert(int item, int64_t offset, int64_t bytes) {
  MG_CHECK(item >= 0 && item < static_cast<int>(first_segment_.size()));
  if (bytes <= 0) return;
  InsertAt(1, 0, num_segments_ - 1, 0, first_segment_[item], last_segment_[item],
           ByteRange{offset, offset + bytes});
}

void IntervalIndex::InsertAt(int node, int lo, int hi, int depth, int first, int last,
                             ByteRange range) {
  Add(node, &Node::below, range);
  if (first <= lo && hi <= last) {  // a canonical node of the item
    Add(node, &Node::cover, range);
    // Every node of the subtree down to path_depth_ has this node on its root path.
    for (int d = depth, from = node, count = 1; d <= path_depth_; ++d, from *= 2, count *= 2) {
      for (int y = from; y < from + count; ++y) Add(y, &Node::path, range);
    }
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  if (first <= mid) InsertAt(2 * node, lo, mid, depth + 1, first, last, range);
  if (last > mid) InsertAt(2 * node + 1, mid + 1, hi, depth + 1, first, last, range);
}

void IntervalIndex::OccupiedDuring(int item, std::vector<ByteRange>& out) const {
  MG_CHECK(item >= 0 && item < static_cast<int>(first_segment_.size()));
  spans_.clear();
  total_ranges_ = 0;
  CollectAt(1, 0, num_segments_ - 1, 0, first_segment_[item], last_segment_[item]);
  out.clear();
  if (spans_.empty()) return;
  if (spans_.size() == 1) {
    out.assign(spans_[0].first, spans_[0].second);
    return;
  }
  // Every list read is sorted and merged. Merge them two at a time, the two shortest first
  // (Huffman's order, with two queues: the lists by length, then the merged runs in the order
  // made), so that long lists are copied least often; ranges that meet or touch unite.
  std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
    return a.second - a.first < b.second - b.first;
  });
  size_t pool_used = 0;  // pool_'s size is its capacity; [0, pool_used) holds merged runs
  merged_runs_.clear();
  size_t next_list = 0;
  size_t next_run = 0;
  auto take_shortest = [&]() -> Span {
    const bool have_list = next_list < spans_.size();
    const bool have_run = next_run < merged_runs_.size();
    if (have_run) {
      const auto [begin, end] = merged_runs_[next_run];
      if (!have_list || end - begin <= static_cast<size_t>(spans_[next_list].second -
                                                           spans_[next_list].first)) {
        ++next_run;
        return Span{pool_.data() + begin, pool_.data() + end};
      }
    }
    return spans_[next_list++];
  };
  for (size_t left = spans_.size(); left > 1; --left) {
    // Room first (no merge writes more than total_ranges_), so that the pool does not move while
    // runs in it are read and appended to.
    if (pool_used + total_ranges_ > pool_.size()) {
      pool_.resize(std::max(pool_used + total_ranges_, 2 * pool_.size()));
    }
    const Span a = take_shortest();
    const Span b = take_shortest();
    const size_t begin = pool_used;
    pool_used += MergeRuns(a.first, a.second, b.first, b.second, pool_.data() + begin);
    merged_runs_.emplace_back(begin, pool_used);
  }
  const Span last = take_shortest();
  out.assign(last.first, last.second);
}

size_t IntervalIndex::MergeRuns(const ByteRange* a, const ByteRange* a_end, const ByteRange* b,
                                const ByteRange* b_end, ByteRange* out) {
  ByteRange* w = out;
  ByteRange current = (b == b_end || (a != a_end && a->begin <= b->begin)) ? *a++ : *b++;
  while (a != a_end && b != b_end) {
    const ByteRange& next = a->begin <= b->begin ? *a++ : *b++;
    if (next.begin <= current.end) {
      current.end = std::max(current.end, next.end);
    } else {
      *w++ = current;
      current = next;
    }
  }
  // One run is left; it is merged already, so after the ranges that meet `current` it copies.
  const ByteRange* rest = a != a_end ? a : b;
  const ByteRange* rest_end = a != a_end ? a_end : b_end;
  while (rest != rest_end && rest->begin <= current.end) {
    current.end = std::max(current.end, rest->end);
    ++rest;
  }
  *w++ = current;
  w = std::copy(rest, rest_end, w);
  return static_cast<size_t>(w - out);
}

void IntervalIndex::Read(const std::vector<ByteRange>& list) const {
  if (list.empty()) return;
  spans_.emplace_back(list.data(), list.data() + list.size());
  total_ranges_ += list.size();
}

void IntervalIndex::CollectAt(int node, int lo, int hi, int depth, int first, int last) const {
  const Node& n = nodes_[node];
  if (first <= lo && hi <= last) {  // a canonical node of the query: its whole subtree counts
    Read(n.below);
    return;
  }
  // A partial node: the items covering it meet the query. Down to path_depth_ they are read
  // once, from the path list of the deepest partial node; below, from each node's cover.
  if (depth > path_depth_) {
    if (n.below.empty()) return;  // nothing stored in this subtree
    Read(n.cover);
  }
  const int mid = lo + (hi - lo) / 2;
  bool deeper_partial = false;
  if (first <= mid) {
    deeper_partial = deeper_partial || !(first <= lo && mid <= last);
    CollectAt(2 * node, lo, mid, depth + 1, first, last);
  }
  if (last > mid) {
    deeper_partial = deeper_partial || !(first <= mid + 1 && hi <= last);
    CollectAt(2 * node + 1, mid + 1, hi, depth + 1, first, last);
  }
  if (depth <= path_depth_ && (depth == path_depth_ || !deeper_partial)) Read(n.path);
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
  std::optional<OffsetSolution> solution = PlaceFrom(order, rule, 0, {});
  MG_CHECK(solution.has_value());  // no limit
  return *std::move(solution);
}

std::optional<OffsetSolution> GreedyPlacer::PlaceFrom(
    const std::vector<int>& order, FitRule rule, int keep, std::vector<int64_t> offsets,
    int64_t limit, std::optional<std::chrono::steady_clock::time_point> deadline) {
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
    if (deadline.has_value() && k % kDeadlineStride == 0 &&
        std::chrono::steady_clock::now() >= *deadline) {
      return std::nullopt;
    }
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
    if (solution.height > limit) return std::nullopt;
  }
  solution.offsets = std::move(offsets);
  return solution;
}

}  // namespace memonger

#include "memonger/offsets/interval_index.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "memonger/offsets/lane_stacking.h"
#include "memonger/offsets/skyline_completion.h"
#include "util/check.h"
#include "util/checked_math.h"

namespace memonger {
namespace {

// REQUIRES: alignment is a power of two and the result fits (ValidateOffsetProblem bounds every
// offset a planner computes by the stacked worst case).
int64_t AlignUp(int64_t x, int64_t alignment) { return (x + alignment - 1) & ~(alignment - 1); }

// Adds `r` to a sorted list of disjoint, non-touching ranges, merging what it meets or touches;
// returns how many bytes the list covers more.
int64_t AddRange(std::vector<ByteRange>& list, ByteRange r) {
  if (list.empty() || list.back().end < r.begin) {  // the common case: on top
    list.push_back(r);
    return r.end - r.begin;
  }
  auto first = std::lower_bound(list.begin(), list.end(), r.begin,
                                [](const ByteRange& x, int64_t v) { return x.end < v; });
  auto last = first;
  int64_t covered_before = 0;
  while (last != list.end() && last->begin <= r.end) {
    covered_before += last->end - last->begin;
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
  return r.end - r.begin - covered_before;
}


// A query whose lists hold at most this many ranges in all merges them.
constexpr size_t kFewRanges = 64;

// Writes the union of two sorted lists of disjoint ranges to `out` (room for both), uniting
// ranges that meet or touch; returns how many it wrote.
size_t UniteSorted(const ByteRange* a, const ByteRange* a_end, const ByteRange* b,
                   const ByteRange* b_end, ByteRange* out) {
  ByteRange* w = out;
  while (a != a_end || b != b_end) {
    const ByteRange& next = b == b_end || (a != a_end && a->begin <= b->begin) ? *a++ : *b++;
    if (w != out && next.begin <= w[-1].end) {
      w[-1].end = std::max(w[-1].end, next.end);
    } else {
      *w++ = next;
    }
  }
  return static_cast<size_t>(w - out);
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
    if (item.bytes % item.alignment != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("offset problem: item ", i, " has ", item.bytes,
                       " bytes, not a multiple of its alignment ", item.alignment));
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

IntervalIndex::IntervalIndex(const OffsetProblem& problem, int path_depth, int bucket_entries) {
  MG_CHECK(bucket_entries >= 1);
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
  // Buckets: runs of consecutive segments, cut greedily from the left so that each holds at
  // most `bucket_entries` entries (items starting after its first segment or ending before its
  // last) and `bucket_entries` segments. A boundary where many items start or end becomes a
  // bucket edge, so that no query scans a long entry list: a one-segment bucket has no entries.
  std::vector<int> starts(num_segments_, 0);
  std::vector<int> ends(num_segments_, 0);
  for (size_t i = 0; i < problem.items.size(); ++i) {
    ++starts[first_segment_[i]];
    ++ends[last_segment_[i]];
  }
  bucket_of_segment_.resize(num_segments_);
  bucket_first_segment_.clear();
  for (int s = 0; s < num_segments_;) {
    const int bucket = static_cast<int>(bucket_first_segment_.size());
    bucket_first_segment_.push_back(s);
    bucket_of_segment_[s] = bucket;
    int64_t entries = 0;
    int end = s + 1;
    while (end < num_segments_ && end - s < bucket_entries) {
      // Taking segment `end` in makes the starts at it and the ends at end - 1 interior.
      const int64_t more = int64_t{starts[end]} + ends[end - 1];
      if (entries + more > bucket_entries) break;
      entries += more;
      bucket_of_segment_[end++] = bucket;
    }
    s = end;
  }
  num_buckets_ = std::max(1, static_cast<int>(bucket_first_segment_.size()));
  bucket_first_segment_.push_back(num_segments_);  // the end of the last bucket
  int leaves = 1;
  tree_depth_ = 0;
  while (leaves < num_buckets_) {
    leaves *= 2;
    ++tree_depth_;
  }
  path_depth_ = std::min(tree_depth_, path_depth);
  first_leaf_ = leaves;
  nodes_.resize(2 * static_cast<size_t>(leaves));
  entries_.resize(num_buckets_);
}

void IntervalIndex::Clear() {
  for (int node : touched_) {
    for (RangeList* list : {&nodes_[node].cover, &nodes_[node].below, &nodes_[node].path}) {
      list->ranges.clear();
      list->covered = 0;
    }
    nodes_[node].touched = false;
    if (node >= first_leaf_) entries_[node - first_leaf_].clear();
  }
  touched_.clear();
}

void IntervalIndex::Add(int node, RangeList Node::*list, ByteRange range) {
  Node& n = nodes_[node];
  if (!n.touched) {
    n.touched = true;
    touched_.push_back(node);
  }
  RangeList& l = n.*list;
  l.covered += AddRange(l.ranges, range);
}

IntervalIndex::BucketSpan IntervalIndex::SpanOf(int item) const {
  MG_CHECK(item >= 0 && item < static_cast<int>(first_segment_.size()));
  BucketSpan span;
  span.first_segment = first_segment_[item];
  span.last_segment = last_segment_[item];
  span.first_bucket = bucket_of_segment_[span.first_segment];
  span.last_bucket = bucket_of_segment_[span.last_segment];
  // A bucket is covered whole when the lifetime starts at or before its first segment and ends
  // at or after its last.
  span.full_first = span.first_segment == bucket_first_segment_[span.first_bucket]
                        ? span.first_bucket
                        : span.first_bucket + 1;
  span.full_last = span.last_segment + 1 == bucket_first_segment_[span.last_bucket + 1]
                       ? span.last_bucket
                       : span.last_bucket - 1;
  return span;
}

void IntervalIndex::Insert(int item, int64_t offset, int64_t bytes) {
  const BucketSpan span = SpanOf(item);
  if (bytes <= 0) return;
  InsertAt(1, 0, first_leaf_ - 1, 0, span, ByteRange{offset, offset + bytes});
}

void IntervalIndex::InsertAt(int node, int lo, int hi, int depth, const BucketSpan& span,
                             ByteRange range) {
  Add(node, &Node::below, range);
  if (span.full_first <= lo && hi <= span.full_last) {  // a canonical node of the item
    Add(node, &Node::cover, range);
    // Every node of the subtree down to path_depth_ has this node on its root path.
    for (int d = depth, from = node, count = 1; d <= path_depth_; ++d, from *= 2, count *= 2) {
      for (int y = from; y < from + count; ++y) Add(y, &Node::path, range);
    }
    return;
  }
  if (lo == hi) {  // a bucket the item covers in part
    // Kept sorted by offset, so that a query's filtered entries come out sorted.
    std::vector<Entry>& entries = entries_[lo];
    const auto at = std::upper_bound(
        entries.begin(), entries.end(), range.begin,
        [](int64_t begin, const Entry& e) { return begin < e.range.begin; });
    entries.insert(at, Entry{span.first_segment, span.last_segment, range});
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  if (span.first_bucket <= mid) InsertAt(2 * node, lo, mid, depth + 1, span, range);
  if (span.last_bucket > mid) InsertAt(2 * node + 1, mid + 1, hi, depth + 1, span, range);
}

void IntervalIndex::OccupiedDuring(int item, std::vector<ByteRange>& out, int64_t min_gap) const {
  min_gap = std::max<int64_t>(min_gap, 1);  // an empty or inverted hole is no hole
  const BucketSpan span = SpanOf(item);
  spans_.clear();
  entry_ranges_.clear();
  entry_runs_.clear();
  CollectAt(1, 0, first_leaf_ - 1, 0, span);
  // Each partially covered bucket gave one run of its entries met, sorted by offset (the
  // bucket keeps them so): united where they meet, each run is one more list.
  for (auto [begin, end] : entry_runs_) {
    size_t w = begin;
    int64_t covered = 0;
    for (size_t r = begin + 1; r < end; ++r) {
      if (entry_ranges_[r].begin <= entry_ranges_[w].end) {
        entry_ranges_[w].end = std::max(entry_ranges_[w].end, entry_ranges_[r].end);
      } else {
        covered += entry_ranges_[w].end - entry_ranges_[w].begin;
        entry_ranges_[++w] = entry_ranges_[r];
      }
    }
    covered += entry_ranges_[w].end - entry_ranges_[w].begin;
    spans_.push_back({entry_ranges_.data() + begin, entry_ranges_.data() + w + 1, covered});
  }
  out.clear();
  if (spans_.empty()) return;
  if (spans_.size() == 1) {
    out.assign(spans_[0].first, spans_[0].second);
    return;
  }
  // A few ranges (the common case: on a million-value graph a query reads ~5 lists of ~3): the
  // lists merged into the union one after another, cheaper than cutting holes list by list.
  size_t total = 0;
  for (const Span& list : spans_) total += static_cast<size_t>(list.second - list.first);
  if (total <= kFewRanges) {
    out.assign(spans_[0].first, spans_[0].second);
    for (size_t k = 1; k < spans_.size(); ++k) {
      gaps_.resize(out.size() + static_cast<size_t>(spans_[k].second - spans_[k].first));
      gaps_.resize(UniteSorted(out.data(), out.data() + out.size(), spans_[k].first,
                               spans_[k].second, gaps_.data()));
      out.swap(gaps_);
    }
    return;
  }
  // The holes of the union are the ranges free in every list: start from the holes of the list
  // that covers the most bytes (those of at least min_gap bytes, and the unbounded top) and cut
  // them by each other list in turn, in order of the bytes they cover, dropping pieces under
  // min_gap. A list costs a galloping search per hole plus its ranges that fall inside the
  // holes, not its length. Long-lived items read lists that are each fragmented at their own
  // time scale but whose union has few holes: on 60,000 items living 1,000-30,000 steps a query
  // read 6,662 ranges in 15 lists for a union of 65, and merging the lists two at a time took
  // 80% of a greedy pass. Each hole kept is a whole hole of the union (the intersection of the
  // holes, one per list, that contain it).
  std::sort(spans_.begin(), spans_.end(), [](const Span& a, const Span& b) {
    return a.covered != b.covered ? a.covered > b.covered
                                  : a.second - a.first < b.second - b.first;
  });
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  gaps_.clear();
  int64_t from = 0;
  for (const ByteRange* r = spans_[0].first; r != spans_[0].second; ++r) {
    if (r->begin - from >= min_gap) gaps_.push_back({from, r->begin});
    from = r->end;
  }
  gaps_.push_back({from, kUnbounded});
  for (size_t k = 1; k < spans_.size(); ++k) {
    const ByteRange* p = spans_[k].first;
    const ByteRange* const end = spans_[k].second;
    cut_gaps_.clear();
    for (const ByteRange& gap : gaps_) {
      // Skip to the list's first range that ends after the hole begins (ends rise along a list):
      // steps doubling from p, then a binary search in the last step.
      const auto before = [&](const ByteRange& r) { return r.end <= gap.begin; };
      std::ptrdiff_t step = 1;
      while (step <= end - p && before(p[step - 1])) step *= 2;
      p = std::partition_point(p + step / 2, p + std::min<std::ptrdiff_t>(step, end - p), before);
      int64_t piece = gap.begin;
      for (; p != end && p->begin < gap.end; ++p) {
        if (p->begin - piece >= min_gap) cut_gaps_.push_back({piece, p->begin});
        piece = p->end;
        if (piece >= gap.end) break;  // it may reach into the next hole too: keep it
      }
      if (piece < gap.end && gap.end - piece >= min_gap) cut_gaps_.push_back({piece, gap.end});
    }
    gaps_.swap(cut_gaps_);
  }
  // The union with every hole under min_gap filled: the ranges between the holes kept (the last
  // hole is the unbounded top).
  from = 0;
  for (const ByteRange& gap : gaps_) {
    if (gap.begin > from) out.push_back({from, gap.begin});
    from = gap.end;
  }
}

void IntervalIndex::Read(const RangeList& list) const {
  if (list.ranges.empty()) return;
  spans_.push_back({list.ranges.data(), list.ranges.data() + list.ranges.size(), list.covered});
}

void IntervalIndex::CollectAt(int node, int lo, int hi, int depth,
                              const BucketSpan& span) const {
  const Node& n = nodes_[node];
  if (span.full_first <= lo && hi <= span.full_last) {  // a canonical node of the query
    Read(n.below);  // its whole subtree counts
    return;
  }
  // A partial node: the items covering it meet the query. Down to path_depth_ they are read
  // once, from the path list of the deepest partial node; below, from each node's cover.
  if (depth > path_depth_) {
    if (n.below.ranges.empty()) return;  // nothing stored in this subtree
    Read(n.cover);
  }
  if (lo == hi) {  // a bucket the query covers in part: its entries whose segments meet it
    const size_t begin = entry_ranges_.size();
    for (const Entry& e : entries_[lo]) {
      if (e.first <= span.last_segment && span.first_segment <= e.last) {
        entry_ranges_.push_back(e.range);
      }
    }
    if (entry_ranges_.size() > begin) entry_runs_.emplace_back(begin, entry_ranges_.size());
    if (depth <= path_depth_) Read(n.path);
    return;
  }
  const int mid = lo + (hi - lo) / 2;
  bool deeper_partial = false;
  if (span.first_bucket <= mid) {
    deeper_partial = deeper_partial || !(span.full_first <= lo && mid <= span.full_last);
    CollectAt(2 * node, lo, mid, depth + 1, span);
  }
  if (span.last_bucket > mid) {
    deeper_partial = deeper_partial || !(span.full_first <= mid + 1 && hi <= span.full_last);
    CollectAt(2 * node + 1, mid + 1, hi, depth + 1, span);
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

void CompleteCutPass(const OffsetProblem& problem, const std::vector<int>& order, int keep,
                     int placed, OffsetSolution& solution) {
  // Quick completions, the lowest kept: on the skyline of the placed items (the rest fill the
  // space above its low parts: good where lifetimes are short, or most items were placed), in
  // lanes by size class above everything (good where many long-lived items are left: the
  // skyline of items stacked one on another rises fast), and every item in lanes (below). On a random graph of a million values
  // cut early, lanes end at 2.8 x the lower bound and the skyline at 6.9 x; cut late, 2.0 x and
  // 1.7 x; on a million-record trace of short lifetimes the skyline wins. Each is tried only
  // where it can win (the skyline once a quarter is placed, lanes until three quarters are):
  // the skyline costs O(n log n) over every item, a second or so on a million.
  const absl::Span<const int> done(order.data(), placed);
  const absl::Span<const int> rest(order.data() + placed, order.size() - placed);
  const size_t n = order.size();
  const bool try_skyline = 4 * static_cast<size_t>(placed) >= n;
  const bool try_lanes = 4 * static_cast<size_t>(placed) < 3 * n;
  std::vector<int64_t> in_lanes;
  int64_t lanes_height = std::numeric_limits<int64_t>::max();
  if (try_lanes) {
    in_lanes = solution.offsets;
    lanes_height = StackInLanes(problem, rest, solution.height, in_lanes);
  }
  // Every item in lanes from 0, the greedy part given up: where the pass placed the items first
  // in its order (the busiest or largest) nearly as high as the bound, the rest above them
  // doubled the arena. On 100,000 items living up to 50,000 steps, a pass cut at a tenth ended
  // at 2.09 x the bound this way, and at 1.27 x with every item in lanes: more time gave a worse
  // plan than a tiny limit. Lanes cost O(n log n) without an index, a small part of the skyline's
  // cost. Only where every item may move: a split pass's piece completes its own items around
  // crossing items placed before (kept).
  if (keep == 0 && n == problem.items.size()) {
    std::vector<int64_t> all_in_lanes(problem.items.size(), 0);
    const int64_t all_height = StackInLanes(problem, order, 0, all_in_lanes);
    if (all_height < lanes_height) {
      lanes_height = all_height;
      in_lanes = std::move(all_in_lanes);
    }
  }
  if (try_skyline) {
    solution.height = CompleteOnSkyline(problem, done, rest, solution.offsets);
  }
  if (!try_skyline || lanes_height < solution.height) {
    solution.height = lanes_height;
    solution.offsets = std::move(in_lanes);
  }
}

double CutPassSecondsShort(std::chrono::steady_clock::time_point run_start, int placed_greedily,
                           size_t n) {
  if (placed_greedily == 0) return std::numeric_limits<double>::infinity();
  const double greedy_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  return greedy_seconds * (static_cast<double>(n) - placed_greedily) / placed_greedily;
}

GreedyPlacer::GreedyPlacer(const OffsetProblem& problem)
    : problem_(problem),
      index_([&] {
        const auto built_from = std::chrono::steady_clock::now();
        IntervalIndex index(problem);
        build_time_ = std::chrono::steady_clock::now() - built_from;
        return index;
      }()) {}

OffsetSolution GreedyPlacer::Place(const std::vector<int>& order, FitRule rule) {
  std::optional<OffsetSolution> solution = PlaceFrom(order, rule, 0, {});
  MG_CHECK(solution.has_value());  // no limit
  return *std::move(solution);
}

GreedyPlacer::Stop GreedyPlacer::PlaceItems(
    const std::vector<int>& order, FitRule rule, int keep, std::vector<int64_t>& offsets,
    int64_t limit, std::optional<std::chrono::steady_clock::time_point> deadline,
    int64_t& height, int& placed, std::optional<std::chrono::steady_clock::time_point> finish_by,
    bool keep_whole) {
  // When the greedy placements began (after the kept prefix, whose puts-back cost far less):
  // the rate of a pass on course is measured from there.
  auto greedy_started = std::chrono::steady_clock::now();
  const int n = static_cast<int>(problem_.items.size());
  MG_CHECK(static_cast<int>(order.size()) == n);
  MG_CHECK(keep >= 0 && keep <= n);
  MG_CHECK(keep == 0 || static_cast<int>(offsets.size()) == n);
  offsets.resize(n, 0);
  index_.Clear();
  seen_.assign(n, false);
  height = 0;
  for (placed = 0; placed < n; ++placed) {
    const int i = order[placed];
    MG_CHECK(i >= 0 && i < n && !seen_[i]);  // a permutation
    seen_[i] = true;
    const OffsetItem& item = problem_.items[i];
    if (placed == keep && keep > 0) greedy_started = std::chrono::steady_clock::now();
    // With keep_whole the kept prefix is put back whole (PlaceUntil: a cut there would leave
    // kept items to be placed anew); otherwise the clock is read there too (PlaceFrom gives up
    // whole, wherever it stops).
    const bool read_clock = keep_whole ? placed >= keep && (placed - keep) % kDeadlineStride == 0
                                       : placed % kDeadlineStride == 0;
    if (deadline.has_value() && read_clock) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= *deadline) {
        // On course to end by finish_by at the greedy rate so far? Then go on, until then at
        // most. (No greedy placement yet: no rate, not on course.)
        const int greedy = placed - keep;
        const auto rest = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            (now - greedy_started) * (static_cast<double>(n - placed) / std::max(greedy, 1)));
        const bool on_course = finish_by.has_value() && greedy > 0 && *finish_by > *deadline &&
                               now + rest <= *finish_by;
        if (!on_course) return Stop::kDeadline;
        deadline = finish_by;
        finish_by.reset();
      }
    }
    if (placed >= keep) {
      if (item.bytes == 0) {
        offsets[i] = 0;
        continue;
      }
      index_.OccupiedDuring(i, scratch_, item.bytes);
      offsets[i] = ChooseOffset(scratch_, item.bytes, item.alignment, rule);
    }
    index_.Insert(i, offsets[i], item.bytes);
    height = std::max(height, offsets[i] + item.bytes);
    if (height > limit) return Stop::kOverLimit;
  }
  return Stop::kDone;
}

std::optional<OffsetSolution> GreedyPlacer::PlaceFrom(
    const std::vector<int>& order, FitRule rule, int keep, std::vector<int64_t> offsets,
    int64_t limit, std::optional<std::chrono::steady_clock::time_point> deadline) {
  OffsetSolution solution;
  int placed = 0;
  if (PlaceItems(order, rule, keep, offsets, limit, deadline, solution.height, placed) !=
      Stop::kDone) {
    return std::nullopt;
  }
  solution.offsets = std::move(offsets);
  return solution;
}

OffsetSolution GreedyPlacer::PlaceUntil(
    const std::vector<int>& order, FitRule rule, std::chrono::steady_clock::time_point deadline,
    std::optional<std::chrono::steady_clock::time_point> finish_by, int* placed_greedily,
    int keep, std::vector<int64_t> offsets) {
  const auto cut_by = deadline - kCompletionPerBuild * build_time_;
  OffsetSolution solution;
  solution.offsets = std::move(offsets);
  int placed = 0;
  const Stop stop = PlaceItems(order, rule, keep, solution.offsets,
                               std::numeric_limits<int64_t>::max(), cut_by, solution.height,
                               placed, std::max(cut_by, finish_by.value_or(cut_by)),
                               /*keep_whole=*/true);
  MG_CHECK(stop != Stop::kOverLimit);  // no limit
  if (placed_greedily != nullptr) *placed_greedily = placed;
  // The item at `placed` was not placed (the clock is read before an item is).
  if (stop == Stop::kDeadline) CompleteCutPass(problem_, order, keep, placed, solution);
  return solution;
}

}  // namespace memonger

// The shared machinery of the greedy offset planners (greedy-by-size, best-fit, local search):
// an index of placed items by lifetime that answers "which byte ranges are taken while this
// item lives", and the greedy loop that places items one by one in a given order.
//
//   GreedyPlacer placer(problem);                 // REQUIRES: ValidateOffsetProblem(problem).ok()
//   OffsetSolution s = placer.Place(order, FitRule::kBestFit);
//
// IntervalIndex: a segment tree over time. Steps are first compressed to the elementary
// segments between distinct lifetime boundaries (at most 2n of them, however sparse the steps),
// so a problem with steps up to 10^6 costs no more than a dense one. The tree's leaves are
// buckets: runs of consecutive segments, cut so that each has at most kDefaultBucketEntries
// entries (below) and segments; a boundary where many items start or end becomes a bucket edge
// (a one-segment bucket has no entries). Each node keeps sets of byte ranges, each merged into
// sorted, disjoint, non-touching ranges [begin, end):
//   cover: the union of the items whose lifetime covers the node's buckets but not its
//          parent's (the node is one of the item's canonical nodes);
//   below: the union of the items with a canonical node or an entry (below) in the subtree;
//   path:  (nodes at depth <= 6 only) the union of `cover` over the node and its ancestors.
// An item that starts or ends inside a bucket (covers it only in part) is an entry of that
// bucket instead: its segments and byte range, unmerged but kept sorted by offset, at most two
// buckets per item (so a query's filtered entries are sorted runs, united in one pass).
// An item intersects a query lifetime exactly when one of its canonical nodes and one of the
// query's lie on one root path, or it is an entry of a bucket where the query covers part and
// their segments meet. So a query reads `below` at its own canonical nodes, the `cover` of the
// partial nodes above them (at most two root paths): from `path` at the deepest partial node
// of each path down to depth 6, and node by node below; and filters the entries of the (at
// most two) buckets it covers in part. The union of the lists read is the answer, and its
// holes are the free byte ranges: a few ranges in all are merged list after list; more are
// found hole by hole, starting from the holes of the list covering the most bytes and cutting
// them by each other list in turn (a galloping search per hole), where holes smaller than the
// item being placed are dropped. Each list keeps the bytes it covers, for that order.
//
//   bucket ->  |-------- node [0, 7] --------|    query q = [2, 5]: canonical nodes [2, 3] and
//              |-- [0, 3] --||-- [4, 7] --|       [4, 5] (read `below`); partial nodes [0, 7],
//              |[0,1]||[2,3]||[4,5]||[6,7]|       [0, 3], [4, 7] (read `cover`, via `path`)
//
// Because touching ranges merge, a list holds one range per hole in the memory it describes, not
// one per item. Why buckets: a greedy pass is bound by memory latency, not by arithmetic (on a
// million-value graph a list read holds ~3 ranges and a query's union ~10), and the deepest
// levels of a binary tree over a million segments are where every node read misses the cache;
// a bucket replaces the last levels with one short array scanned in order, and the tree shrinks
// about a hundredfold (one greedy placement of the 651,663 items of a million-value graph:
// 1.83 s with one segment per leaf, 0.97 s with buckets; BENCHMARKS.md, "Scale").
//
// Complexity, with s segments, b = kDefaultBucketEntries and k the items meeting a query: insert
// O(log s) nodes (O(log(s / b)) when boundaries are spread out), each a binary search plus a
// vector splice, plus up to 2^6 path lists for an item with a canonical node near the root,
// plus O(1) per bucket entry; query as many nodes, the entries of at most two buckets (O(b)),
// plus uniting the r ranges read in l lists: O(r) where they are few; else O(r0 + l x h log r +
// w), with r0 the most covering list's ranges, h the holes kept and w the ranges met inside
// them; on 60,000 items living 1,000-30,000 steps a query reads 6,662 ranges for a union of 65. Items are never removed: Clear() resets the index between runs in
// time proportional to the nodes touched. Not thread-safe: a query uses scratch buffers of the
// index.
#ifndef MEMONGER_MEMONGER_OFFSETS_INTERVAL_INDEX_H_
#define MEMONGER_MEMONGER_OFFSETS_INTERVAL_INDEX_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "memonger/offsets/offset_problem.h"

namespace memonger {

// InvalidArgument naming the first bad item: steps outside [0, num_steps) or last < first,
// negative bytes, an alignment that is not a power of two >= 1, bytes that are not a multiple of
// the alignment (OffsetItem: already rounded up; the exact search relies on it), or a problem
// whose stacked worst case (sum of bytes + alignment - 1) does not fit in int64. Every planner
// of this family calls it first; its planners and checkers need no other precondition.
absl::Status ValidateOffsetProblem(const OffsetProblem& problem);

// A byte range [begin, end).
struct ByteRange {
  int64_t begin = 0;
  int64_t end = 0;
};

class IntervalIndex {
 public:
  // REQUIRES: ValidateOffsetProblem(problem).ok(). Keeps no reference to `problem`.
  // `bucket_entries` >= 1: at most this many segments and entries per bucket (tests use small
  // ones to exercise every case).
  explicit IntervalIndex(const OffsetProblem& problem, int path_depth = kDefaultPathDepth,
                         int bucket_entries = kDefaultBucketEntries);
  static constexpr int kDefaultPathDepth = 6;  // measured best of 0, 4, 6, 8 on Y_1
  static constexpr int kDefaultBucketEntries = 256;  // see BENCHMARKS.md (scale)

  // Forgets every inserted item.
  void Clear();

  // Records that `item` occupies [offset, offset + bytes) during its lifetime. Zero-byte items
  // occupy nothing and are ignored. REQUIRES: 0 <= item < problem.items.size().
  void Insert(int item, int64_t offset, int64_t bytes);

  // The union of the byte ranges of the inserted items whose lifetime intersects `item`'s, as
  // sorted, disjoint, non-touching ranges, except that holes of fewer than `min_gap` bytes
  // (between the ranges, or below the lowest) may be filled, taken as occupied: a caller placing
  // an item of b bytes passes b, as no smaller hole can hold it, and the query then skips the
  // ranges inside such holes. The top (the end of the highest range) is exact. A min_gap below
  // 1 counts as 1. `out` is overwritten.
  void OccupiedDuring(int item, std::vector<ByteRange>& out, int64_t min_gap = 1) const;

 private:
  // Sorted, disjoint, non-touching ranges, and how many bytes they cover (which orders a
  // query's lists: OccupiedDuring).
  struct RangeList {
    std::vector<ByteRange> ranges;
    int64_t covered = 0;
  };
  struct Node {
    RangeList cover;
    RangeList below;
    RangeList path;       // depth <= path_depth_ only
    bool touched = false;  // some list is not empty
  };
  // An item covering part of a bucket (a leaf): its segments and bytes.
  struct Entry {
    int first;
    int last;
    ByteRange range;
  };
  // The buckets an item or a query spans ([first_bucket, last_bucket]) and those it covers
  // whole ([full_first, full_last], empty when full_first > full_last).
  struct BucketSpan {
    int first_segment, last_segment;
    int first_bucket, last_bucket;
    int full_first, full_last;
  };
  BucketSpan SpanOf(int item) const;
  void Add(int node, RangeList Node::*list, ByteRange range);
  void InsertAt(int node, int lo, int hi, int depth, const BucketSpan& span, ByteRange range);
  void CollectAt(int node, int lo, int hi, int depth, const BucketSpan& span) const;
  void Read(const RangeList& list) const;

  int num_segments_ = 0;
  int num_buckets_ = 0;
  std::vector<int> bucket_of_segment_;
  std::vector<int> bucket_first_segment_;  // per bucket, then the number of segments
  int tree_depth_ = 0;  // leaves at this depth; the root at 0
  int path_depth_ = 0;
  std::vector<int> first_segment_;  // per item, inclusive
  std::vector<int> last_segment_;   // per item, inclusive
  std::vector<Node> nodes_;         // heap order, root 1; leaf b is node leaves + b
  std::vector<std::vector<Entry>> entries_;  // per bucket
  int first_leaf_ = 1;
  std::vector<int> touched_;        // nodes with a non-empty list, for Clear()
  // Scratch of OccupiedDuring (so a const query allocates nothing; not thread-safe): the lists
  // read, and the holes of their union found so far and after the next list (where the lists
  // are few, gaps_ is the merge's buffer instead).
  struct Span {
    const ByteRange* first;
    const ByteRange* second;
    int64_t covered;
  };
  mutable std::vector<Span> spans_;
  mutable std::vector<ByteRange> gaps_;
  mutable std::vector<ByteRange> cut_gaps_;
  mutable std::vector<ByteRange> entry_ranges_;  // the entries met, a run per bucket
  mutable std::vector<std::pair<size_t, size_t>> entry_runs_;  // [begin, end) in entry_ranges_
};

// How the greedy loop chooses among the byte gaps free during an item's whole lifetime.
enum class FitRule {
  kBestFit,     // the smallest gap that fits (ties: the lowest offset), else the top
  kLowestOffset,  // the lowest aligned offset that fits (first fit), possibly the top
};
const char* FitRuleName(FitRule rule);  // "best-fit", "lowest-offset"

// The offset for an item of `bytes` and `alignment` among `occupied` (sorted, disjoint ranges
// taken during its lifetime), by `rule`. Gaps are [0, first begin), between ranges, and the
// unbounded top above the last range; an offset is the gap's start aligned up.
int64_t ChooseOffset(const std::vector<ByteRange>& occupied, int64_t bytes, int64_t alignment,
                     FitRule rule);

// Places items greedily: each item, in the given order, at ChooseOffset among the items placed
// before it. Zero-byte items get offset 0. Reusable across orders (one index, cleared per run).
// Completes a pass cut after order[0, placed) (`solution` holds their offsets and height), of
// which order[0, keep) were placed by someone else and must stay: the rest of `order` get a
// quick placement, the lowest of CompleteOnSkyline, StackInLanes above the placed items and
// (where keep is 0 and `order` holds every item) StackInLanes of every item from 0, each tried
// where it can win. O(n log n). The placed items stay where they are, except where every item
// goes in lanes.
void CompleteCutPass(const OffsetProblem& problem, const std::vector<int>& order, int keep,
                     int placed, OffsetSolution& solution);

// How much longer a pass that began at `run_start` and was cut now needed to place all `n`
// items, at its rate so far (OffsetSolution::cut_pass_seconds_short: a floor, since later items
// meet more placed ones); infinity where the greedy rule placed none (no rate: unknown).
double CutPassSecondsShort(std::chrono::steady_clock::time_point run_start, int placed_greedily,
                           size_t n);

class GreedyPlacer {
 public:
  // REQUIRES: ValidateOffsetProblem(problem).ok(). Keeps a reference to `problem`.
  explicit GreedyPlacer(const OffsetProblem& problem);

  // REQUIRES: `order` is a permutation of the item indices.
  OffsetSolution Place(const std::vector<int>& order, FitRule rule);

  // As Place, but the items order[0, keep) are put back at `offsets` (a solution for an order
  // with the same prefix) instead of being placed again: for local search, which changes an
  // order from some position on. `offsets` entries of later items are overwritten. Gives up,
  // returning nullopt, as soon as the height exceeds `limit`: heights only grow as items are
  // added, so such a placement could not end at or below it (the portfolio and local search only
  // want placements that beat or match the best so far). Gives up too once `deadline` has passed
  // (the clock is read every kDeadlineStride items after the kept ones): a pass over a million
  // items takes seconds, and a search that already has a plan must not start one it cannot stop.
  std::optional<OffsetSolution> PlaceFrom(
      const std::vector<int>& order, FitRule rule, int keep, std::vector<int64_t> offsets,
      int64_t limit = std::numeric_limits<int64_t>::max(),
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  static constexpr int kDeadlineStride = 1024;

  // As Place, but a complete placement at about `deadline` however large the problem: the pass
  // stops placing kCompletionPerBuild times its index's build time before the deadline (about
  // what the completion then takes: the lanes and the skyline are each O(n log n) over the
  // items, as the index is, the skyline's segment tree a few cache misses an item; on a
  // 1.1M-item graph, index 0.16 s, completion 0.45 s), and the items not placed yet get a quick
  // placement (CompleteCutPass). Unless, when it stops, the pass is on course (at its rate so
  // far) to end by `finish_by`: it then goes on, and is cut at `finish_by` if it does not.
  // `placed_greedily`, when given, receives how many items of `order` the greedy rule placed or
  // put back (all of them unless the pass was cut). As in PlaceFrom, order[0, keep) are put
  // back at `offsets`; they are never cut, and stay where they are.
  static constexpr int kCompletionPerBuild = 3;
  OffsetSolution PlaceUntil(const std::vector<int>& order, FitRule rule,
                            std::chrono::steady_clock::time_point deadline,
                            std::optional<std::chrono::steady_clock::time_point> finish_by,
                            int* placed_greedily = nullptr, int keep = 0,
                            std::vector<int64_t> offsets = {});

 private:
  enum class Stop { kDone, kOverLimit, kDeadline };
  // Places order[keep, ...) after putting order[0, keep) back at `offsets`; `height` and
  // `placed` say how far it got.
  // With `finish_by` (no earlier than `deadline`), a pass on course to end by then is not
  // stopped at `deadline`.
  // With `keep_whole`, the deadline is not read while the kept prefix is put back.
  Stop PlaceItems(const std::vector<int>& order, FitRule rule, int keep,
                  std::vector<int64_t>& offsets, int64_t limit,
                  std::optional<std::chrono::steady_clock::time_point> deadline, int64_t& height,
                  int& placed,
                  std::optional<std::chrono::steady_clock::time_point> finish_by = std::nullopt,
                  bool keep_whole = false);

  const OffsetProblem& problem_;
  IntervalIndex index_;
  std::chrono::steady_clock::duration build_time_{};  // how long index_ took to build
  std::vector<ByteRange> scratch_;
  std::vector<bool> seen_;
};

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_OFFSETS_INTERVAL_INDEX_H_

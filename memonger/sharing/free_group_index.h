// Which groups of intervals are free over a range: first fit's question (exact_sharing.cc),
// "the lowest-numbered group none of whose intervals meets [lo, hi)", in about
// O(answer / 64 x log blocks) instead of one test per group.
//
//   FreeGroupIndex index(num_segments);
//   int g = index.FirstFree(lo, hi, [&](int g, bool sure) { return sure || NoOverlap(g); });
//   if (g < 0) g = index.AddGroup();
//   index.Add(g, lo, hi);
//
// Time is cut into blocks of 64 segments, under a segment tree (leaf b: block b). An interval
// is recorded as `cover` bits at the canonical nodes of the blocks it covers whole (O(log
// blocks) nodes however long it is) and `partial` bits at the leaves of the (at most two) blocks
// it covers in part; `any` bits mark every node under which the group has something. For a
// query, a group is ruled out where it has something under a canonical node of the blocks the
// range covers whole (`any`), or covers, at an ancestor of those nodes or of an end block's
// leaf, blocks the range meets (`cover`): its interval meets the range. The groups not ruled
// out are offered in ascending order to the caller's test, each marked sure (no interval of the
// group meets the range: the caller need only check what the index does not know, such as extra
// conflicts) or in doubt (a `partial` bit at an end block: the caller checks its intervals);
// the first accepted is the answer. So the answer is exactly the linear scan's, and only groups
// with an interval ending inside the range's end blocks are tested in full.
//
// Complexity: Add O(log blocks) bit sets; FirstFree O((answer / 64 + 1) x log blocks + the
// groups in doubt below the answer). Memory: bitsets of up to groups / 64 words at up to four
// per tree leaf; the index gives up once they pass kMaxFreeGroupIndexBytes (usable() turns
// false, the memory is freed, and the caller tries the groups one by one): it can pass the cap
// by one Add's bits, O(log blocks) bitsets.
// Deterministic. Not thread-safe.
#ifndef MEMONGER_MEMONGER_SHARING_FREE_GROUP_INDEX_H_
#define MEMONGER_MEMONGER_SHARING_FREE_GROUP_INDEX_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"

namespace memonger {

inline constexpr int64_t kMaxFreeGroupIndexBytes = int64_t{512} << 20;

class FreeGroupIndex {
 public:
  // Segments [0, num_segments). REQUIRES: num_segments >= 0, max_bytes >= 0.
  explicit FreeGroupIndex(int num_segments, int64_t max_bytes = kMaxFreeGroupIndexBytes);

  // False once the bitsets have passed `max_bytes` (checked after each Add and AddGroup): no
  // query may be asked then, and the index holds nothing.
  bool usable() const { return usable_; }
  int num_groups() const { return num_groups_; }

  // A new group, numbered num_groups() before the call.
  int AddGroup();
  // Group g holds an interval over segments [lo, hi). REQUIRES: g < num_groups(),
  // 0 <= lo < hi <= num_segments.
  void Add(int g, int lo, int hi);

  // The lowest group accepted by `accept(g, sure)` among those the index cannot rule out for
  // [lo, hi) (see the header), or -1. `work` grows by the words and tests spent.
  // REQUIRES: usable(), 0 <= lo < hi <= num_segments.
  int FirstFree(int lo, int hi, absl::FunctionRef<bool(int, bool)> accept, int64_t& work);

 private:
  static constexpr int kBlockBits = 6;
  using Bits = std::vector<uint64_t>;

  void SetBit(Bits& bits, int g);
  // Turns usable() false, freeing the bitsets, where they have passed max_bytes_.
  void CheckSize();
  void Mark(int node, int g);
  // The canonical nodes of blocks [from, to] (none where from > to).
  void Cover(int from, int to, std::vector<int>& out) const;
  static uint64_t Word(const Bits& bits, size_t w) { return w < bits.size() ? bits[w] : 0; }
  int BlockStart(int b) const { return b << kBlockBits; }
  int BlockEnd(int b) const;

  int num_segments_ = 0;
  int num_blocks_ = 0;
  int leaves_ = 1;  // tree leaves: a power of two >= num_blocks_
  int num_groups_ = 0;
  bool usable_ = true;
  int64_t max_bytes_ = 0;
  int64_t words_ = 0;  // held by the bitsets
  std::vector<Bits> partial_;  // per block
  std::vector<Bits> cover_;    // heap-ordered tree: leaf b at leaves_ + b
  std::vector<Bits> any_;      // the same tree
  // Scratch of Add and FirstFree.
  std::vector<int> scratch_;
  std::vector<int> any_nodes_;
  std::vector<int> cover_nodes_;
};

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_FREE_GROUP_INDEX_H_

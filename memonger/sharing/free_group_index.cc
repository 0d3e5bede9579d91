#include "memonger/sharing/free_group_index.h"

#include <algorithm>

#include "util/check.h"

namespace memonger {

FreeGroupIndex::FreeGroupIndex(int num_segments, int64_t max_bytes)
    : num_segments_(num_segments), max_bytes_(max_bytes) {
  MG_CHECK(num_segments >= 0 && max_bytes >= 0);
  num_blocks_ = std::max(1, (num_segments + (1 << kBlockBits) - 1) >> kBlockBits);
  while (leaves_ < num_blocks_) leaves_ *= 2;
  partial_.resize(num_blocks_);
  cover_.resize(2 * static_cast<size_t>(leaves_));
  any_.resize(2 * static_cast<size_t>(leaves_));
}

int FreeGroupIndex::BlockEnd(int b) const {
  return std::min(num_segments_, (b + 1) << kBlockBits);
}

void FreeGroupIndex::SetBit(Bits& bits, int g) {
  const size_t w = static_cast<size_t>(g) >> 6;
  if (w >= bits.size()) {
    words_ += static_cast<int64_t>(w + 1 - bits.size());
    bits.resize(w + 1, 0);
  }
  bits[w] |= uint64_t{1} << (g & 63);
}

void FreeGroupIndex::CheckSize() {
  // A bitset grows to the highest group set in it: where they pass the cap between them, the
  // index gives up.
  if (usable_ && words_ * 8 > max_bytes_) {
    usable_ = false;
    std::vector<Bits>().swap(cover_);
    std::vector<Bits>().swap(partial_);
    std::vector<Bits>().swap(any_);
  }
}

int FreeGroupIndex::AddGroup() {
  CheckSize();
  return num_groups_++;
}

void FreeGroupIndex::Mark(int node, int g) {
  // The node and its ancestors hold g in `any`; an ancestor holding g already has all above it
  // holding g.
  const size_t w = static_cast<size_t>(g) >> 6;
  const uint64_t bit = uint64_t{1} << (g & 63);
  for (size_t n = static_cast<size_t>(node); n >= 1; n /= 2) {
    if ((Word(any_[n], w) & bit) != 0) break;
    SetBit(any_[n], g);
  }
}

void FreeGroupIndex::Cover(int from, int to, std::vector<int>& out) const {
  out.clear();
  if (from > to) return;
  size_t l = static_cast<size_t>(leaves_) + from;
  size_t r = static_cast<size_t>(leaves_) + to + 1;
  for (; l < r; l /= 2, r /= 2) {
    if (l & 1) out.push_back(static_cast<int>(l++));
    if (r & 1) out.push_back(static_cast<int>(--r));
  }
}

void FreeGroupIndex::Add(int g, int lo, int hi) {
  MG_CHECK(g >= 0 && g < num_groups_ && 0 <= lo && lo < hi && hi <= num_segments_);
  if (!usable_) return;
  const int first = lo >> kBlockBits;
  const int last = (hi - 1) >> kBlockBits;
  const bool first_whole = lo <= BlockStart(first) && hi >= BlockEnd(first);
  const bool last_whole = lo <= BlockStart(last) && hi >= BlockEnd(last);
  // The blocks covered whole, at their canonical nodes (`cover`, O(log blocks) of them however
  // long the interval); the ends covered in part, at their leaves (`partial`).
  Cover(first_whole ? first : first + 1, last_whole ? last : last - 1, scratch_);
  for (const int node : scratch_) {
    SetBit(cover_[node], g);
    Mark(node, g);
  }
  if (!first_whole) {
    SetBit(partial_[first], g);
    Mark(leaves_ + first, g);
  }
  if (!last_whole && last != first) {
    SetBit(partial_[last], g);
    Mark(leaves_ + last, g);
  }
  CheckSize();
}

int FreeGroupIndex::FirstFree(int lo, int hi, absl::FunctionRef<bool(int, bool)> accept,
                              int64_t& work) {
  MG_CHECK(usable_ && 0 <= lo && lo < hi && hi <= num_segments_);
  ++work;
  const int first = lo >> kBlockBits;
  const int last = (hi - 1) >> kBlockBits;
  const bool first_whole = lo <= BlockStart(first) && hi >= BlockEnd(first);
  const bool last_whole = lo <= BlockStart(last) && hi >= BlockEnd(last);
  int ends[2];
  int num_ends = 0;
  if (!first_whole) ends[num_ends++] = first;
  if (!last_whole && last != first) ends[num_ends++] = last;
  // Ruled out: a group present anywhere under the canonical nodes of the blocks covered whole
  // (`any`), or covering, at some ancestor of them or of an end block's leaf, blocks the range
  // meets (`cover`). In doubt: a group with an interval ending inside an end block.
  Cover(first_whole ? first : first + 1, last_whole ? last : last - 1, any_nodes_);
  cover_nodes_.clear();
  for (const int node : any_nodes_) {
    for (int a = node / 2; a >= 1; a /= 2) cover_nodes_.push_back(a);
  }
  for (int e = 0; e < num_ends; ++e) {
    for (int a = leaves_ + ends[e]; a >= 1; a /= 2) cover_nodes_.push_back(a);
  }
  std::sort(cover_nodes_.begin(), cover_nodes_.end());
  cover_nodes_.erase(std::unique(cover_nodes_.begin(), cover_nodes_.end()), cover_nodes_.end());
  const size_t words = (static_cast<size_t>(num_groups_) + 63) / 64;
  for (size_t w = 0; w < words; ++w) {
    uint64_t busy = 0;
    for (const int node : any_nodes_) busy |= Word(any_[node], w);
    for (const int node : cover_nodes_) busy |= Word(cover_[node], w);
    uint64_t doubt = 0;
    for (int e = 0; e < num_ends; ++e) doubt |= Word(partial_[ends[e]], w);
    work += 1 + static_cast<int64_t>(any_nodes_.size() + cover_nodes_.size()) + num_ends;
    uint64_t free = ~busy;
    if (w + 1 == words && num_groups_ % 64 != 0) free &= (uint64_t{1} << (num_groups_ % 64)) - 1;
    while (free != 0) {
      const int bit = __builtin_ctzll(free);
      free &= free - 1;
      const int g = static_cast<int>(w * 64) + bit;
      ++work;
      if (accept(g, ((doubt >> bit) & 1) == 0)) return g;
    }
  }
  return -1;
}

}  // namespace memonger

// Persistent sets of small integers (memonger's tokens), for memonger-dag: every op of a
// traversal holds a set, and every buffer the union of the sets of the ops that touched it.
//
//   TokenSets sets(max_tokens);
//   TokenSets::Set a = sets.Insert(TokenSets::kEmpty, 3);  // {3}
//   TokenSets::Set b = sets.Union(a, sets.Insert(a, 70));  // {3, 70}; `a` is still {3}
//   sets.LargestMissing(b, a);                             // 70: b is not a subset of a
//
// Why: as bitsets (one per buffer, as long as the largest token) memonger-dag took memory
// quadratic in the graph: on a 300,000-op random inference net 3.3 GB, and 39,000 tokens made
// a full set 4.9 KB while most buffers' sets differ from their producer's in a few tokens.
//
// Representation: a set is a handle to the root of a trie over token numbers: 64 tokens per
// leaf (a 64-bit word) and kFanout children per inner node, at a fixed depth chosen for
// `max_tokens`; an empty subtree is the handle 0. Sets are immutable: Insert and Union copy
// the nodes on the paths they change and share every other node with their arguments, and
// return an argument itself where the result equals it (a set already holding the token; a
// union with a subset built from it). So a set made from another by a few changes costs a few
// nodes, and comparing two sets made from one another skips every node they share.
//
// Complexity, with d = the depth (log_8 of max_tokens / 64; 4 for a million tokens): Insert
// and Contains O(d); Union, LargestMissing and Refresh O(d x the subtrees whose handles differ:
// equal sets built apart are walked in full), O(1) for equal handles. Memory: nodes are never
// freed (the arena lives as long as the planner): O(d) per change. Deterministic. Not
// thread-safe.
#ifndef MEMONGER_MEMONGER_SHARING_TOKEN_SETS_H_
#define MEMONGER_MEMONGER_SHARING_TOKEN_SETS_H_

#include <array>
#include <cstdint>
#include <vector>

namespace memonger {

class TokenSets {
 public:
  using Set = int32_t;
  static constexpr Set kEmpty = 0;

  // Tokens in [0, max_tokens). REQUIRES: 1 <= max_tokens <= 2^31 - 1.
  explicit TokenSets(int64_t max_tokens);

  // `s` with `token` added. REQUIRES: 0 <= token < max_tokens.
  Set Insert(Set s, int token);
  // a u b.
  Set Union(Set a, Set b);
  bool Contains(Set s, int token) const;
  // The largest token of `a` not in `b`, or -1 when a is a subset of b.
  int LargestMissing(Set a, Set b) const;

  // Dense copies, for many membership tests against one set (a bit test each instead of a walk
  // down the trie): `words` (dense_words() of them) holds set `from` as a bitset, token t at
  // bit t % 64 of word t / 64; afterwards it holds `to`. Costs O(d x the leaves where the two
  // differ): where a traversal asks about sets made from one another, a few words each time.
  int64_t dense_words() const { return int64_t{1} << (kFanoutBits * levels_); }
  void Refresh(Set from, Set to, std::vector<uint64_t>& words) const;

  // Bytes of the nodes made so far.
  int64_t bytes() const;

 private:
  static constexpr int kFanoutBits = 3;
  static constexpr int kFanout = 1 << kFanoutBits;
  using Inner = std::array<Set, kFanout>;

  // `level` counts inner levels from the root (0); level levels_ is a leaf.
  Set InsertAt(Set node, int level, int64_t word, uint64_t bit);
  Set UnionAt(Set a, Set b, int level);
  int LargestMissingAt(Set a, Set b, int level, int64_t word_base) const;
  void RefreshAt(Set from, Set to, int level, int64_t word_base,
                 std::vector<uint64_t>& words) const;
  int Digit(int64_t word, int level) const {
    return static_cast<int>(word >> (kFanoutBits * (levels_ - 1 - level))) & (kFanout - 1);
  }
  Set NewLeaf(uint64_t bits);
  Set NewInner(const Inner& children);

  int64_t max_tokens_ = 0;
  int levels_ = 0;             // inner levels above the leaves
  std::vector<Inner> inner_;   // [0]: the empty subtree, never read
  std::vector<uint64_t> leaf_; // [0]: the empty leaf, never read
};

}  // namespace memonger

#endif  // MEMONGER_MEMONGER_SHARING_TOKEN_SETS_H_

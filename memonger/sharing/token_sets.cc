#include "memonger/sharing/token_sets.h"

#include <limits>

#include "util/check.h"

namespace memonger {

TokenSets::TokenSets(int64_t max_tokens) : max_tokens_(max_tokens) {
  MG_CHECK(max_tokens >= 1 && max_tokens <= std::numeric_limits<int32_t>::max());
  const int64_t words = (max_tokens + 63) / 64;
  while ((int64_t{1} << (kFanoutBits * levels_)) < words) ++levels_;
  inner_.push_back(Inner{});
  leaf_.push_back(0);
}

TokenSets::Set TokenSets::NewLeaf(uint64_t bits) {
  MG_CHECK(leaf_.size() < static_cast<size_t>(std::numeric_limits<Set>::max()));
  leaf_.push_back(bits);
  return static_cast<Set>(leaf_.size() - 1);
}

TokenSets::Set TokenSets::NewInner(const Inner& children) {
  MG_CHECK(inner_.size() < static_cast<size_t>(std::numeric_limits<Set>::max()));
  inner_.push_back(children);
  return static_cast<Set>(inner_.size() - 1);
}

TokenSets::Set TokenSets::Insert(Set s, int token) {
  MG_CHECK(token >= 0 && token < max_tokens_);
  return InsertAt(s, 0, token >> 6, uint64_t{1} << (token & 63));
}

TokenSets::Set TokenSets::InsertAt(Set node, int level, int64_t word, uint64_t bit) {
  if (level == levels_) {
    const uint64_t old = node == kEmpty ? 0 : leaf_[node];
    return (old & bit) != 0 ? node : NewLeaf(old | bit);
  }
  const int d = Digit(word, level);
  const Set child = node == kEmpty ? kEmpty : inner_[node][d];
  const Set changed = InsertAt(child, level + 1, word, bit);
  if (changed == child) return node;
  Inner copy = node == kEmpty ? Inner{} : inner_[node];  // a copy: NewInner may reallocate
  copy[d] = changed;
  return NewInner(copy);
}

TokenSets::Set TokenSets::Union(Set a, Set b) { return UnionAt(a, b, 0); }

TokenSets::Set TokenSets::UnionAt(Set a, Set b, int level) {
  if (a == b || b == kEmpty) return a;
  if (a == kEmpty) return b;
  if (level == levels_) {
    const uint64_t bits = leaf_[a] | leaf_[b];
    if (bits == leaf_[a]) return a;
    if (bits == leaf_[b]) return b;
    return NewLeaf(bits);
  }
  const Inner x = inner_[a];  // copies: the recursion may reallocate inner_
  const Inner y = inner_[b];
  Inner result;
  bool is_a = true;
  bool is_b = true;
  for (int k = 0; k < kFanout; ++k) {
    result[k] = UnionAt(x[k], y[k], level + 1);
    is_a = is_a && result[k] == x[k];
    is_b = is_b && result[k] == y[k];
  }
  if (is_a) return a;
  if (is_b) return b;
  return NewInner(result);
}

bool TokenSets::Contains(Set s, int token) const {
  if (token < 0 || token >= max_tokens_) return false;
  const int64_t word = token >> 6;
  for (int level = 0; level < levels_ && s != kEmpty; ++level) s = inner_[s][Digit(word, level)];
  return s != kEmpty && (leaf_[s] >> (token & 63) & 1) != 0;
}

int TokenSets::LargestMissing(Set a, Set b) const { return LargestMissingAt(a, b, 0, 0); }

int TokenSets::LargestMissingAt(Set a, Set b, int level, int64_t word_base) const {
  if (a == kEmpty || a == b) return -1;
  if (level == levels_) {
    const uint64_t missing = leaf_[a] & ~(b == kEmpty ? 0 : leaf_[b]);
    if (missing == 0) return -1;
    return static_cast<int>(word_base * 64 + 63 - __builtin_clzll(missing));
  }
  for (int k = kFanout - 1; k >= 0; --k) {
    const int found = LargestMissingAt(inner_[a][k], b == kEmpty ? kEmpty : inner_[b][k],
                                       level + 1, word_base * kFanout + k);
    if (found >= 0) return found;
  }
  return -1;
}

void TokenSets::Refresh(Set from, Set to, std::vector<uint64_t>& words) const {
  MG_CHECK(static_cast<int64_t>(words.size()) == dense_words());
  RefreshAt(from, to, 0, 0, words);
}

void TokenSets::RefreshAt(Set from, Set to, int level, int64_t word_base,
                          std::vector<uint64_t>& words) const {
  if (from == to) return;
  if (level == levels_) {
    words[word_base] = to == kEmpty ? 0 : leaf_[to];
    return;
  }
  for (int k = 0; k < kFanout; ++k) {
    RefreshAt(from == kEmpty ? kEmpty : inner_[from][k], to == kEmpty ? kEmpty : inner_[to][k],
              level + 1, word_base * kFanout + k, words);
  }
}

int64_t TokenSets::bytes() const {
  return static_cast<int64_t>(inner_.size() * sizeof(Inner) + leaf_.size() * sizeof(uint64_t));
}

}  // namespace memonger

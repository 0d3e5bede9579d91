#include "memonger/sharing/token_sets.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "util/splitmix64.h"

namespace memonger {
namespace {

using Model = std::set<int>;

int LargestMissingIn(const Model& a, const Model& b) {
  for (auto it = a.rbegin(); it != a.rend(); ++it) {
    if (b.count(*it) == 0) return *it;
  }
  return -1;
}

TEST(TokenSetsTest, SmallSets) {
  TokenSets sets(200);
  const TokenSets::Set a = sets.Insert(TokenSets::kEmpty, 3);
  const TokenSets::Set b = sets.Insert(a, 70);
  EXPECT_TRUE(sets.Contains(b, 3));
  EXPECT_TRUE(sets.Contains(b, 70));
  EXPECT_FALSE(sets.Contains(a, 70));  // a is unchanged
  EXPECT_FALSE(sets.Contains(b, 199));
  EXPECT_FALSE(sets.Contains(b, -1));
  EXPECT_FALSE(sets.Contains(b, 200));
  EXPECT_EQ(sets.LargestMissing(b, a), 70);
  EXPECT_EQ(sets.LargestMissing(a, b), -1);
  EXPECT_EQ(sets.LargestMissing(TokenSets::kEmpty, a), -1);
  EXPECT_EQ(sets.LargestMissing(a, TokenSets::kEmpty), 3);
  // What is already there comes back as it was: no node is made.
  EXPECT_EQ(sets.Insert(b, 70), b);
  EXPECT_EQ(sets.Union(a, b), b);
  EXPECT_EQ(sets.Union(b, a), b);
  EXPECT_EQ(sets.Union(b, TokenSets::kEmpty), b);
  EXPECT_EQ(sets.Union(TokenSets::kEmpty, b), b);
}

TEST(TokenSetsTest, AsManyTokensAsAskedFor) {
  for (const int64_t max_tokens : {1, 63, 64, 65, 512, 513, 4097, 100000}) {
    SCOPED_TRACE(max_tokens);
    TokenSets sets(max_tokens);
    const int last = static_cast<int>(max_tokens - 1);
    const TokenSets::Set s = sets.Insert(sets.Insert(TokenSets::kEmpty, 0), last);
    EXPECT_TRUE(sets.Contains(s, 0));
    EXPECT_TRUE(sets.Contains(s, last));
    EXPECT_EQ(sets.LargestMissing(s, TokenSets::kEmpty), last);
    std::vector<uint64_t> dense(static_cast<size_t>(sets.dense_words()), 0);
    ASSERT_GE(sets.dense_words() * 64, max_tokens);
    sets.Refresh(TokenSets::kEmpty, s, dense);
    EXPECT_EQ(dense[0] & 1, 1u);
    EXPECT_EQ(dense[static_cast<size_t>(last) / 64] >> (last % 64) & 1, 1u);
  }
}

// Random sets built as memonger-dag builds them (inserts into sets made before, unions of
// them), checked against std::set at every step: membership, the largest missing token both
// ways, and a dense copy refreshed from one set to the next.
TEST(TokenSetsTest, AgreeWithStdSet) {
  for (const int64_t max_tokens : {40, 300, 5000}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE(testing::Message() << "max_tokens " << max_tokens << " seed " << seed);
      util::SplitMix64 rng(seed);
      TokenSets sets(max_tokens);
      std::vector<TokenSets::Set> handles = {TokenSets::kEmpty};
      std::vector<Model> models = {Model{}};
      std::vector<uint64_t> dense(static_cast<size_t>(sets.dense_words()), 0);
      TokenSets::Set dense_of = TokenSets::kEmpty;
      for (int step = 0; step < 2000; ++step) {
        const size_t x = rng.Below(handles.size());
        const size_t y = rng.Below(handles.size());
        if (rng.Percent(50)) {
          // Mostly tokens near the newest, as a traversal mints them.
          const int token = static_cast<int>(rng.Percent(70) ? max_tokens - 1 - rng.Below(
                                                                  std::min<int64_t>(max_tokens, 16))
                                                             : rng.Below(max_tokens));
          handles.push_back(sets.Insert(handles[x], token));
          Model m = models[x];
          m.insert(token);
          models.push_back(m);
        } else {
          handles.push_back(sets.Union(handles[x], handles[y]));
          Model m = models[x];
          m.insert(models[y].begin(), models[y].end());
          models.push_back(m);
        }
        const TokenSets::Set s = handles.back();
        const Model& m = models.back();
        for (int probe = 0; probe < 8; ++probe) {
          const int token = static_cast<int>(rng.Below(max_tokens));
          ASSERT_EQ(sets.Contains(s, token), m.count(token) == 1) << token;
        }
        const size_t z = rng.Below(handles.size());
        ASSERT_EQ(sets.LargestMissing(s, handles[z]), LargestMissingIn(m, models[z]));
        ASSERT_EQ(sets.LargestMissing(handles[z], s), LargestMissingIn(models[z], m));
        sets.Refresh(dense_of, s, dense);
        dense_of = s;
        for (int t = 0; t < max_tokens; ++t) {
          ASSERT_EQ(dense[static_cast<size_t>(t) / 64] >> (t % 64) & 1, m.count(t)) << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace memonger

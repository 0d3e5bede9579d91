#include "graph/name_index.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "util/splitmix64.h"

namespace memonger::graph {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

TEST(NameIndexTest, VersionsOfEachNameOldestFirst) {
  std::vector<Value> values(5);
  const char* names[] = {"x", "y", "x", "a_name_too_long_for_the_inline_buffer", "x"};
  for (int i = 0; i < 5; ++i) values[i].name = names[i];
  NameIndex index(values.data(), values.size());
  EXPECT_EQ(index.Add(0), 0);
  EXPECT_EQ(index.Add(1), 0);
  EXPECT_EQ(index.Add(2), 1);
  EXPECT_EQ(index.Add(3), 0);
  EXPECT_EQ(index.Add(4), 2);
  EXPECT_THAT(index.Versions("x"), ElementsAre(0, 2, 4));
  EXPECT_THAT(index.Versions("y"), ElementsAre(1));
  EXPECT_THAT(index.Versions("a_name_too_long_for_the_inline_buffer"), ElementsAre(3));
  EXPECT_THAT(index.Versions("z"), IsEmpty());
  EXPECT_THAT(index.Versions(""), IsEmpty());
}

// Against a map from names to versions, on many names (the set grows and rehashes past the
// room it was made with), some written many times.
TEST(NameIndexTest, MatchesAMapOfNames) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SCOPED_TRACE(seed);
    util::SplitMix64 rng(seed);
    const int n = 20000;
    std::vector<Value> values(n);
    std::map<std::string, std::vector<int32_t>> expected;
    NameIndex index(values.data(), /*capacity=*/16);
    for (int32_t id = 0; id < n; ++id) {
      // Few distinct names early on, so that some have many versions.
      const uint64_t distinct = 1 + rng.Below(id < 1000 ? 50 : 100000);
      values[id].name =
          absl::StrCat(seed % 2 == 0 ? "v" : "a_long_prefix_for_a_heap_name_", distinct);
      std::vector<int32_t>& versions = expected[values[id].name];
      EXPECT_EQ(index.Add(id), static_cast<int32_t>(versions.size()));
      versions.push_back(id);
    }
    for (const auto& [name, versions] : expected) {
      EXPECT_THAT(index.Versions(name), ElementsAreArray(versions)) << name;
    }
    EXPECT_THAT(index.Versions("v"), IsEmpty());
    EXPECT_THAT(index.Versions("missing"), IsEmpty());
  }
}

}  // namespace
}  // namespace memonger::graph

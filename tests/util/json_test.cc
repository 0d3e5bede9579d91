#include "util/json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memonger::util {
namespace {

using ::testing::HasSubstr;

TEST(ParseJsonTest, ReadsDocuments) {
  absl::StatusOr<nlohmann::json> doc =
      ParseJson(R"({"a": 1, "b": [{"a": 2}, {"a": 3}], "c": {"a": {"a": 4}}})", 8);
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)["c"]["a"]["a"], 4);  // one key in many objects is no repetition
}

TEST(ParseJsonTest, RefusesAKeyGivenTwiceInOneObject) {
  for (const std::string text :
       {R"({"bytes": 7, "bytes": 9000})", R"({"r": [{"x": 1, "y": 2, "x": 3}]})",
        R"({"a": {"k": 1}, "b": {"k": 2, "k": 2}})"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<nlohmann::json> doc = ParseJson(text, 8);
    ASSERT_FALSE(doc.ok());
    EXPECT_THAT(std::string(doc.status().message()), HasSubstr("appears twice in one object"));
  }
  // Strings that are values, or hold quotes and colons, are no keys.
  EXPECT_TRUE(ParseJson(R"({"a\":b": "a\":b", "c": ["a", "a"], "d": "x:"})", 8).ok());
  EXPECT_FALSE(ParseJson(R"({"a\"b": 1, "a\"b": 2})", 8).ok());
  // Past the short list: the set takes over.
  std::string many = "{";
  for (int k = 0; k < 40; ++k) many += "\"k" + std::to_string(k) + "\": 0, ";
  EXPECT_TRUE(ParseJson(many + "\"end\": 1}", 8).ok());
  absl::StatusOr<nlohmann::json> late = ParseJson(many + "\"k3\": 1}", 8);
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("\"k3\""));
}

TEST(ParseJsonTest, RefusesWhatIsNotJsonOrTooDeep) {
  EXPECT_THAT(std::string(ParseJson("{records: [}", 8).status().message()),
              HasSubstr("not valid JSON"));
  EXPECT_FALSE(ParseJson("[[[[[[[[[[1]]]]]]]]]]", 4).ok());
}

}  // namespace
}  // namespace memonger::util
